"""Spark ML feature pipelines: ``fit`` and ``transform`` calls as operations, and vector
slot lineage.

While a block is tracked, ``Transformer.transform`` and ``Estimator.fit`` (pyspark.ml) are
wrapped like DataFrame methods:

- ``model.transform(df)`` is one operation (``<Stage>.transform``, category
  ``ml_transform``).  Its record-level provenance comes from the output's plan like any
  DataFrame call: usually a projection with UDFs (identity tensor), a filter when the
  stage skips invalid rows (mask); what the rewrite cannot trace is opaque.  The stage is
  kept on the operation (``Operation.model``): with it the transform is localized and can
  be replayed.  ``SQLTransformer`` runs a SQL statement, which goes through the SQL
  capture (:mod:`tensprov_lab.capture.hops._sql`).
- ``estimator.fit(df)`` is a *contextual* operation (``<Estimator>.fit``, category
  ``ml_fit``) whose output is a dataset of role ``"model"`` holding one record, the fitted
  model, which is kept on the operation.  Its tensor says that record depends on every
  input record (one row of ones, SystemL's "all" mapping: a model is a global aggregate of
  what it was fitted on); its attribute map says which input columns the estimator read.
- ``Pipeline.fit`` and ``PipelineModel.transform`` are *transparent*: they only call their
  stages' ``fit`` and ``transform``, which are recorded one by one (each once: calls made
  inside a recorded call are never recorded).

Every ``transform`` also records its *slots* (``Operation.slots``): for each output column
it makes, per vector slot (a scalar column has one), the input column the slot is
computed from and what it holds -- VectorAssembler slots from its input columns (vector
inputs expanded to their sizes, read from the ``ml_attr`` metadata), one-hot slots from a
category value (labels from StringIndexer's metadata; ``dropLast`` respected), scaler slots
from the same slot of their input vector, and so on.  When an input column is itself a
vector, the entries that read it are its slots in order: the k-th entry naming column
``c`` reads ``c``'s slot k.  :func:`follow_slot` walks these back to a raw input column.
"""

from __future__ import annotations

import json
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from tensprov_lab.capture.hops._sql import FinishingNode, record_plan
from tensprov_lab.capture.rules.aggregate import every_record

if TYPE_CHECKING:
    from tensprov_lab.capture.plan._nodes import Capturing as Tracker
    from tensprov_lab.capture.plan._nodes import Node
    from tensprov_lab.store import Store

__all__ = ["Hop", "capture_fit", "follow_slot", "record_call", "slots_of", "targets"]

Slots = dict[str, list[tuple[int, str, str]]]

#: estimator parameters naming the input columns a fit reads
_FIT_COLUMNS = ("inputCol", "inputCols", "featuresCol", "labelCol", "weightCol")


def targets() -> list[tuple[type, list[str], Callable[[str, Any], bool]]]:
    """The pyspark.ml methods wrapped during a block (none when pyspark.ml is missing)."""
    try:
        from pyspark.ml.base import Estimator, Transformer
        from pyspark.ml.pipeline import Pipeline, PipelineModel
    except Exception:  # pyspark.ml needs numpy; without it there is nothing to watch
        return []

    def container(name: str, obj: Any) -> bool:
        return isinstance(obj, (Pipeline, PipelineModel))

    return [(Transformer, ["transform"], container), (Estimator, ["fit"], container)]


def record_call(
    tracker: Tracker, method: str, stage: Any, args: tuple, kwargs: dict, out: Any
) -> None:
    """Record ``out = stage.transform(df)`` or ``out = estimator.fit(df)``."""
    from pyspark.ml.base import Estimator, Transformer
    from pyspark.sql import DataFrame

    dataset = args[0] if args else kwargs.get("dataset")
    params = args[1] if len(args) > 1 else kwargs.get("params")
    if not isinstance(dataset, DataFrame):
        return
    if method == "transform" and isinstance(stage, Transformer) and isinstance(out, DataFrame):
        _record_transform(tracker, stage, dataset, params, out)
    elif method == "fit" and isinstance(stage, Estimator):
        _record_fit(tracker, stage, dataset, params, out)


def _effective(stage: Any, params: Any) -> Any:
    """The stage as the call used it (``transform(df, params)`` runs on a copy)."""
    return stage.copy(params) if isinstance(params, dict) and params else stage


def describe_stage(stage: Any) -> str:
    """``StringIndexer(inputCol='cat', outputCol='cat_idx')``: the explicitly set params."""
    parts = []
    for p in stage.params:
        if stage.isSet(p):
            text = repr(stage.getOrDefault(p))
            parts.append(f"{p.name}={text if len(text) <= 60 else text[:57] + '...'}")
    return f"{type(stage).__name__}({', '.join(parts)})"


def _record_transform(tracker: Tracker, stage: Any, dataset: Any, params: Any, out: Any) -> None:
    from pyspark.ml.feature import SQLTransformer

    eff = _effective(stage, params)
    method = f"{type(stage).__name__}.transform"
    expression = f"{describe_stage(eff)}.transform"
    if isinstance(stage, SQLTransformer):
        finish = _finish_transform(tracker, eff, {}, relational=True)
        record_plan(
            tracker, out, method=method, suffix=f"  [{expression}]", finish=finish,
            inputs=[dataset],
        )  # fmt: skip
        return
    in_node = tracker.register(dataset)
    plan = tracker.jvm.plan(out)
    ident = tracker.jvm.plan_ident(plan)
    if ident in tracker.nodes:  # the stage returned a DataFrame capture already knows
        return
    try:
        slots = slots_of(eff, dataset, out)
    except Exception as exc:  # slots are extra: keep the operation without them
        tracker._note(f"{expression}: vector slots not captured ({exc})")
        slots = {}
    node = FinishingNode(
        df=out, plan=plan, ident=ident, tracker=tracker,
        finish=_finish_transform(tracker, eff, slots),
    )  # fmt: skip
    tracker.add_pending(method, [in_node], node, expression)


def _finish_transform(
    tracker: Tracker, stage: Any, slots: Slots, relational: bool = False
) -> Callable[[Node], None]:
    def finish(node: Node) -> None:
        assert node.ds_id is not None
        op = tracker.store.producer(node.ds_id)
        if op is None:
            raise RuntimeError("its operation is not in the store")
        if not op.opaque and not relational:
            op.category = "ml_transform"
        if op.nondeterministic and type(stage).__module__.startswith("pyspark.ml."):
            # Spark ML marks some of its UDFs non-deterministic (StringIndexerModel,
            # VectorAssembler ...) only to keep the optimizer from moving or repeating
            # them: given the kept model, each output record is a function of its input
            # record.  The stage's own projection is all the rewrite saw between input and
            # output, so the flag (and its warning, not shown yet) is that artifact.
            op.nondeterministic = False
            op.warnings[:] = [w for w in op.warnings if "is not deterministic" not in w]
        op.model = stage
        columns = set(tracker.store.datasets[op.output].columns)
        op.slots = {c: s for c, s in slots.items() if c in columns}

    return finish


def _record_fit(tracker: Tracker, est: Any, dataset: Any, params: Any, model: Any) -> None:
    eff = est if not isinstance(params, dict) or not params else est.copy(params)
    in_node = tracker.register(dataset)
    # the model as a dataset of one record made from every input record, like a global
    # aggregate; it has no plan (its tensor needs only the input's size)
    first = model[0] if isinstance(model, (list, tuple)) and model else model
    label = getattr(first, "uid", None) or type(est).__name__
    if isinstance(model, (list, tuple)):
        label = f"{label} (+{len(model) - 1} more)"
    node = FinishingNode(
        df=None, plan=None, ident=tracker.planless_ident(), name=label, tracker=tracker,
        finish=_finish_fit(tracker, eff, model), every_record=True,
    )  # fmt: skip
    tracker.add_pending(f"{type(est).__name__}.fit", [in_node], node, f"{describe_stage(eff)}.fit")


def _finish_fit(tracker: Tracker, est: Any, model: Any) -> Callable[[Node], None]:
    def finish(node: Node) -> None:
        assert node.ds_id is not None
        store = tracker.store
        op = store.producer(node.ds_id)
        if op is None:
            raise RuntimeError("its operation is not in the store")
        ds = store.datasets[node.ds_id]
        first = model[0] if isinstance(model, (list, tuple)) and model else model
        ds.role = "model"
        ds.columns, ds.dtypes = ["model"], [type(first).__name__]
        if not op.opaque:
            op.category = "ml_fit"
        # an output (the model) depends on records outside its own: every input record
        op.contextual = True
        op.model = model
        in_cols = store.datasets[op.inputs[0]].columns
        read = _fit_columns(est, in_cols)
        contributing = np.zeros((1, len(in_cols)), dtype=bool)
        contributing[0, [in_cols.index(c) for c in read]] = True
        op.contributing = [contributing]
        op.influencing = [np.zeros_like(contributing)]
        # the estimator's column params name what it reads; without any, we cannot say
        op.attributes_exact = bool(read)

    return finish


def _fit_columns(est: Any, columns: list[str]) -> list[str]:
    read: list[str] = []
    for name in _FIT_COLUMNS:
        if not est.hasParam(name) or not est.isDefined(name):
            continue
        value = est.getOrDefault(name)
        for c in value if isinstance(value, (list, tuple)) else [value]:
            if c in columns and c not in read:
                read.append(c)
    return read


# -- slots --------------------------------------------------------------------------------
def _pairs(stage: Any) -> list[tuple[str, str]]:
    """(input column, output column) pairs of a one-to-one stage."""
    for many, one in (("inputCols", "outputCols"), ("inputCol", "outputCol")):
        if stage.hasParam(many) and stage.isDefined(many) and stage.hasParam(one):
            got = stage.getOrDefault(many)
            out = stage.getOrDefault(one)
            return list(zip(got, out)) if isinstance(got, list) else [(got, out)]
    return []


#: schemas (or fields read one by one) of the DataFrames ML stages read (see _field)
_FIELDS: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()


def _field(df: Any, col: str) -> Any:
    """``df.schema[col]``, without pyspark's one-answer schema read when it has not made
    it yet: the schema of an ML pipeline's output is long (every vector's slot
    metadata), and py4j takes ~40 ms more for any answer above 8 KB."""
    if getattr(df, "_schema", None) is not None:
        return df.schema[col]
    try:
        fields = _FIELDS.setdefault(df, {})
    except TypeError:  # not weakly referenceable: read the schema
        return df.schema[col]
    if col not in fields:
        from pyspark.sql.types import StructField, StructType

        from tensprov_lab.capture.spark._jvm import schema_json

        try:
            text = schema_json(df)
            if text is not None:
                for f in StructType.fromJson(json.loads(text)).fields:
                    fields.setdefault(f.name, f)  # the first of equal names, as pyspark
            else:
                text = str(df._jdf.schema().apply(col).json())
                fields[col] = StructField.fromJson(json.loads(text))
        except Exception:  # noqa: BLE001 - pyspark's own reading says what is wrong
            return df.schema[col]
    return fields[col] if col in fields else df.schema[col]


def _ml_attr(df: Any, col: str) -> dict[str, Any]:
    return dict(_field(df, col).metadata.get("ml_attr", {}))


def _is_vector(df: Any, col: str) -> bool:
    return str(_field(df, col).dataType.simpleString()) == "vector"


def vector_size(df: Any, col: str) -> int | None:
    """Size of a vector column from its ML attribute metadata (None when unknown)."""
    meta = _ml_attr(df, col)
    if "num_attrs" in meta:
        return int(meta["num_attrs"])
    attrs = meta.get("attrs")
    if attrs:
        return sum(len(v) for v in attrs.values())
    return None


def _slot_names(df: Any, col: str) -> dict[int, str]:
    attrs = _ml_attr(df, col).get("attrs", {})
    return {int(a["idx"]): str(a["name"]) for group in attrs.values() for a in group if "name" in a}


def _labels(df: Any, col: str) -> list[str] | None:
    meta = _ml_attr(df, col)
    vals = meta.get("vals") if meta.get("type") == "nominal" else None
    return [str(v) for v in vals] if vals else None


def _elementwise(col: str, size: int, what: Callable[[int], str]) -> list[tuple[int, str, str]]:
    return [(0, col, what(i)) for i in range(size)]


def _string_indexer(stage: Any, df: Any, out: Any) -> Slots:
    order = stage.getOrDefault("stringOrderType")
    labels = stage.labelsArray
    slots: Slots = {}
    for k, (i, o) in enumerate(_pairs(stage)):
        shown = ", ".join(f"{j} = {v!r}" for j, v in enumerate(labels[k][:5]))
        more = ", ..." if len(labels[k]) > 5 else ""
        slots[o] = [(0, i, f"index of the {i} value ({order}: {shown}{more})")]
    return slots


def _one_hot(stage: Any, df: Any, out: Any) -> Slots:
    sizes = list(stage.categorySizes)
    drop = bool(stage.getDropLast())
    keep = stage.getHandleInvalid() == "keep"
    slots: Slots = {}
    for (i, o), n in zip(_pairs(stage), sizes):
        labels = _labels(df, i)
        # "keep" adds a last category for unseen values; dropLast drops the last one
        width = n + (1 if keep else 0) - (1 if drop else 0)
        entries = []
        for j in range(width):
            if j < n:
                label = f" ({labels[j]!r})" if labels and j < len(labels) else ""
                entries.append((0, i, f"{i} = {j}{label}"))
            else:
                entries.append((0, i, f"{i} not seen when fitting (handleInvalid='keep')"))
        slots[o] = entries
    return slots


def _vector_assembler(stage: Any, df: Any, out: Any) -> Slots:
    o = stage.getOutputCol()
    cols = list(stage.getInputCols())
    sizes: dict[str, int | None] = {
        c: (vector_size(df, c) if _is_vector(df, c) else 1) for c in cols
    }
    unknown = [c for c, s in sizes.items() if s is None]
    if unknown:
        total = vector_size(out, o)
        if total is None or len(unknown) > 1:
            raise ValueError(f"the size of vector column(s) {unknown} is not in their metadata")
        sizes[unknown[0]] = total - sum(s for s in sizes.values() if s is not None)
    entries: list[tuple[int, str, str]] = []
    for c in cols:
        if not _is_vector(df, c):
            entries.append((0, c, c))
            continue
        names = _slot_names(df, c)
        for j in range(sizes[c] or 0):
            name = f" ({names[j]})" if j in names else ""
            entries.append((0, c, f"{c}[{j}]{name}"))
    return {o: entries}


def _standard_scaler(stage: Any, df: Any, out: Any) -> Slots:
    i, o = stage.getInputCol(), stage.getOutputCol()
    ops = (" - fitted mean" if stage.getWithMean() else "") + (
        " / fitted std" if stage.getWithStd() else ""
    )
    return {o: _elementwise(i, len(stage.std), lambda j: f"{i}[{j}]{ops}")}


def _min_max(stage: Any, df: Any, out: Any) -> Slots:
    i, o = stage.getInputCol(), stage.getOutputCol()
    lo, hi = stage.getMin(), stage.getMax()
    return {
        o: _elementwise(
            i,
            len(stage.originalMin),
            lambda j: f"{i}[{j}] rescaled from its fitted range to [{lo}, {hi}]",
        )
    }


def _max_abs(stage: Any, df: Any, out: Any) -> Slots:
    i, o = stage.getInputCol(), stage.getOutputCol()
    return {o: _elementwise(i, len(stage.maxAbs), lambda j: f"{i}[{j}] / fitted max |{i}[{j}]|")}


def _imputer(stage: Any, df: Any, out: Any) -> Slots:
    strategy = stage.getStrategy()
    missing = stage.getMissingValue()
    return {
        o: [(0, i, f"{i}, missing values (null or {missing}) replaced by the fitted {strategy}")]
        for i, o in _pairs(stage)
    }


def _bucketizer(stage: Any, df: Any, out: Any) -> Slots:
    pairs = _pairs(stage)
    if stage.isSet("inputCols"):
        splits = list(stage.getSplitsArray())
    else:
        splits = [stage.getSplits()] * len(pairs)
    return {o: [(0, i, f"bucket of {i} (splits {list(s)})")] for (i, o), s in zip(pairs, splits)}


def _binarizer(stage: Any, df: Any, out: Any) -> Slots:
    pairs = _pairs(stage)
    if stage.isSet("inputCols"):
        thresholds = list(stage.getThresholds())
    else:
        thresholds = [stage.getThreshold()] * len(pairs)
    slots: Slots = {}
    for (i, o), t in zip(pairs, thresholds):
        if _is_vector(df, i):
            size = vector_size(df, i)
            if size is None:
                continue
            slots[o] = [(0, i, f"{i}[{j}] > {t}") for j in range(size)]
        else:
            slots[o] = [(0, i, f"{i} > {t}")]
    return slots


_RULES: dict[str, Callable[[Any, Any, Any], Slots]] = {
    "StringIndexerModel": _string_indexer,
    "OneHotEncoderModel": _one_hot,
    "VectorAssembler": _vector_assembler,
    "StandardScalerModel": _standard_scaler,
    "MinMaxScalerModel": _min_max,
    "MaxAbsScalerModel": _max_abs,
    "ImputerModel": _imputer,
    "Bucketizer": _bucketizer,
    "Binarizer": _binarizer,
}


def slots_of(stage: Any, dataset: Any, out: Any) -> Slots:
    """The slots of the columns ``stage.transform(dataset)`` made (``{}`` for a stage
    without a rule).

    Examples
    --------
    >>> va = VectorAssembler(inputCols=["x", "y"], outputCol="v")  # doctest: +SKIP
    >>> slots_of(va, df, va.transform(df))  # doctest: +SKIP
    {'v': [(0, 'x', 'x'), (0, 'y', 'y')]}
    """
    for cls in type(stage).__mro__:
        rule = _RULES.get(cls.__name__)
        if rule is not None:
            return rule(stage, dataset, out)
    return {}


# -- following slots back -----------------------------------------------------------------
@dataclass
class Hop:
    """One step of a slot's lineage: ``column`` (its ``slot``, None for a scalar) of
    dataset ``dataset``, made by ``operation`` (the method; "" at the last step) from the
    next step; ``detail`` says what the slot holds ("" where a column is passed on)."""

    dataset: int
    column: str
    slot: int | None
    operation: str = ""
    detail: str = ""


def _vector_column(store: Store, ds_id: int, column: str) -> bool:
    ds = store.datasets[ds_id]
    return column in ds.columns and ds.dtypes[ds.columns.index(column)] == "vector"


def follow_slot(store: Store, ds_id: int, column: str, slot: int | None) -> list[Hop]:
    """The steps from a slot of ``column`` back to the raw input column it comes from.

    Through ML stages the recorded slots are followed; through any other operation a
    column is followed when exactly one input column contributes to it (a select, filter,
    join or rename passes it on; a vector keeps its slots).  The walk stops at a source,
    an opaque operation, or a column computed from several input columns.

    Examples
    --------
    >>> from tensprov_lab.store import IdentityTensor, Store
    >>> s = Store()
    >>> a = s.add_dataset("a", columns=["x"], dtypes=["double"], n_rows=2, role="source")
    >>> b = s.add_dataset("b", columns=["x", "v"], dtypes=["double", "vector"], n_rows=2)
    >>> op = s.add_operation("VectorAssembler.transform", "ml_transform", [a.id], b.id,
    ...                      [IdentityTensor(2)], slots={"v": [(0, "x", "x")]})
    >>> [(h.dataset, h.column, h.slot) for h in follow_slot(s, b.id, "v", 0)]
    [(1, 'v', 0), (0, 'x', None)]
    """
    hops = [Hop(ds_id, column, slot)]
    while True:
        op = store.producer(ds_id)
        if op is None:
            return hops
        if column in op.slots:
            entries = op.slots[column]
            if slot is None:
                if len(entries) != 1:
                    raise ValueError(
                        f"{column} of {store.datasets[ds_id].label} is a vector of "
                        f"{len(entries)} slots: give slot="
                    )
                slot = 0
            if not 0 <= slot < len(entries):
                raise IndexError(
                    f"{column} of {store.datasets[ds_id].label} has slots 0..{len(entries) - 1}"
                )
            pos, in_col, detail = entries[slot]
            in_ds = op.inputs[pos]
            rank = sum(1 for e in entries[:slot] if e[0] == pos and e[1] == in_col)
            in_slot = rank if _vector_column(store, in_ds, in_col) else None
            hops[-1].operation, hops[-1].detail = op.method, detail
        else:
            found = _single_contributor(store, op, column)
            if found is None:
                return hops
            in_ds, in_col = found
            in_slot = slot
            hops[-1].operation = op.method
        ds_id, column, slot = in_ds, in_col, in_slot
        hops.append(Hop(ds_id, column, slot))


def _single_contributor(store: Store, op: Any, column: str) -> tuple[int, str] | None:
    if op.contributing is None:
        return None
    out_cols = store.datasets[op.output].columns
    if column not in out_cols:
        return None
    o = out_cols.index(column)
    found = [
        (op.inputs[k], store.datasets[op.inputs[k]].columns[int(c)])
        for k, m in enumerate(op.contributing)
        if m.shape[0] == len(out_cols)
        for c in np.flatnonzero(m[o])
    ]
    found = list(dict.fromkeys(found))
    return found[0] if len(found) == 1 else None


def capture_fit(tracker: Any, p: Any, run: Any, t0: float) -> None:
    """Record an operation whose one output record is made from every input record
    (an ML fit): its tensor needs only the input's size, so no plan is rewritten and
    no Spark job runs.  The fit's ``finish`` (:func:`_finish_fit`) adds the category and
    column maps."""
    (node,) = p.inputs
    tracker._index_deferred([node])
    readable = node.ann is not None and node.ki is not None and node.n is not None
    ds = tracker.store.add_dataset(p.out.name, columns=["model"], dtypes=[""], n_rows=1, run=run.id)
    tensors, ki, why = None, None, None
    if readable:
        _, tensors, ki = every_record(node)
    else:
        why = (
            f"{p.expression}: record-level provenance not captured (an input has no "
            "record-level provenance); kept as an opaque operation"
        )
    notes = [why] if why else []
    op = tracker._add_operation(
        ds.id, p.method, "aggregate" if readable else "opaque", [node.ds_id], tensors,
        expression=p.expression, contextual=True, opaque=not readable, warnings=notes,
        seconds=time.perf_counter() - t0, run=run.id,
    )  # fmt: skip
    # no annotated plan: nothing reads the model as a dataset, and it is not cached
    # (the operation keeps the model itself)
    p.out.ki, p.out.n, p.out.ds_id = ki, 1, ds.id
    tracker._recorded(run, p.out, op.id, notes)
