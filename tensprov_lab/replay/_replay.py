"""Replays on a classic session: JVM plans over the provenance-related records only.

Every captured dataset has an *annotated plan*: the user's plan, rewritten so that hidden
key columns travel with each record, built on the annotated plans of its inputs (the
very same JVM objects).  To recompute some records of an intermediate dataset we take
that plan and swap the annotated plans at its *frontier* -- sources, opaque outputs and
materialized datasets -- for small ones:

- a source (or an opaque output, which is keyed like a source) becomes ``Filter(key IN
  (...))`` over itself, keeping just the records the backward lineage names;
- a materialized dataset (the input of a contextual operation such as a window, or the
  output of a non-deterministic one) is left whole: Spark serves it from its cache, and
  the replay stops there, so a window still sees its whole partition.

Only the records the query needs are read and pushed through the user's own
expressions; the key columns then name each replayed record's canonical row.  A replay of
a few records from cached sources through projections, filters, joins, sorts and unions runs in
the driver without a Spark job (:func:`_local`, ``TensProvReplay.java``); any other runs
as a Spark job.

What-if (:mod:`._what_if`) replays the same way on an edited frontier
(:meth:`Classic.changed_source`).  Spark Connect has an engine of its own
(:mod:`._connect`); where a replay starts is shared (:mod:`._frontier`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from tensprov_lab.capture.plan._keys import KeyError_, arrow_keys, keys_sql
from tensprov_lab.capture.plan._nodes import persisted
from tensprov_lab.capture.spark._versions import (
    arrow_schema,
    ctrl_c_kept,
    from_arrow,
    from_pandas,
    to_arrow,
)
from tensprov_lab.replay import _frontier as fr
from tensprov_lab.replay._frontier import Inputs, _cached, rows_of
from tensprov_lab.store._sets import unique

if TYPE_CHECKING:
    import pandas as pd

    from tensprov_lab.capture.plan._nodes import Capturing as Tracker
    from tensprov_lab.capture.plan._nodes import Node

__all__ = ["Classic", "replay_records"]

JObject = Any


def _substitute(
    tracker: Tracker, plan: JObject, repl: dict[int, JObject], few: bool = False
) -> JObject:
    """``plan`` with the subtrees whose identity is in ``repl`` swapped (no descent
    below a swapped subtree).

    ``few``: the swapped subtrees hold a few records.  Each is then read as one
    partition and the inner joins above them pair their sides in place, so the whole
    replay is one Spark stage of one task: a shuffle's stages cost more than the join
    of a few records.
    """
    jvm = tracker.jvm
    if few:
        repl = {k: jvm.single_partition(v) for k, v in repl.items()}
    memo: dict[int, JObject] = {}

    def go(node: JObject) -> JObject:
        ident = jvm.ident(node)
        if ident in repl:
            return repl[ident]
        if ident in memo:
            return memo[ident]
        kids = jvm.children(node)
        new = [go(k) for k in kids]
        inner = jvm.inner_join(node) if few else None
        if all(a is b for a, b in zip(kids, new)):
            out = node
        elif inner is not None:
            out = jvm.replicated(inner, *new)
        else:
            out = node.withNewChildren(jvm.seq(new))
        memo[ident] = out
        return out

    return go(plan)


def _node(tracker: Tracker, ds_id: int) -> Node:
    node = tracker.by_ds.get(ds_id)
    if node is None or node.ann is None or node.ki is None:
        raise ValueError(f"{tracker.store.datasets[ds_id].label} has no readable records")
    return node


def _keyed_filter(
    tracker: Tracker, ds_id: int, rows: np.ndarray, exclude: np.ndarray | None = None
) -> JObject:
    """The annotated plan of a keyed source restricted to ``rows``, or, when ``rows`` are
    a large part of it, the whole source without ``exclude``: callers pick their records
    by key, and a filter listing millions of keys costs more than reading the rest."""
    node = _node(tracker, ds_id)
    assert node.ann is not None and node.ki is not None and node.n is not None
    source = tracker.source_plan(node)
    key = node.ann.key_names()[0]
    if len(rows) >= max(fr.IN_LIST, node.n * fr.WHOLE):
        if exclude is None or not len(exclude):
            return source
        rows, keep = np.asarray(exclude, dtype=np.int64), False
    else:
        keep = True
    values = node.ki.values(np.asarray(rows, dtype=np.int64))  # type: ignore[attr-defined]
    if len(values) <= fr.IN_LIST:
        # built directly: no DataFrame of its own
        attr = node.ann.keys[0]
        if keep and len(values) and tracker.jvm.is_long(attr):
            return tracker.jvm.keys_filter(attr, values.tolist(), source)
        text = keys_sql(key, values)
        return tracker.jvm.filter_sql(text if keep else f"NOT ({text})", source)
    # a long IN list makes a huge plan: join with the keys instead (a small local table,
    # sent as Arrow)
    import pyarrow as pa
    from pyspark.sql import functions as F

    df = tracker.jvm.to_df(source)
    want = from_arrow(tracker.spark, pa.table({"__tp_want": values}))
    how = "left_semi" if keep else "left_anti"
    kept = df.join(F.broadcast(want), df[key] == want["__tp_want"], how)
    return kept._jdf.queryExecution().analyzed()


def _keyed_df(tracker: Tracker, ds_id: int, rows: np.ndarray) -> tuple[Any, str, Any]:
    """(annotated DataFrame of a keyed source restricted to ``rows``, key column, key
    index)."""
    node = _node(tracker, ds_id)
    assert node.ann is not None
    df = tracker.jvm.to_df(_keyed_filter(tracker, ds_id, rows))
    return df, node.ann.key_names()[0], node.ki


#: most frontier records a replay reads in the replay session (see _REPLAY_CONF)
_SMALL_REPLAY = 10_000
#: most frontier records a replay reads as one task, its inner joins pairing every
#: record of one side with every record of the other (see _substitute)
_FEW = 1000


def _analyzed(df: Any) -> JObject:
    return df._jdf.queryExecution().analyzed()


def _read(
    tracker: Tracker, ds_id: int, plan: JObject, small: bool = False
) -> tuple[pd.DataFrame, np.ndarray]:
    """Records of a (replayed) annotated plan of ``ds_id`` and their canonical rows;
    ``-1`` for a record the capture did not see (it appears only after a what-if).
    ``small``: the plan reads only a few records (run it in the replay session)."""
    table = to_arrow(tracker.jvm.to_df(plan, tracker.replay_spark if small else None))
    return _records(_node(tracker, ds_id), table)


def _records(node: Node, table: Any) -> tuple[pd.DataFrame, np.ndarray]:
    """The user's columns of an Arrow table of annotated records, and their canonical
    rows (see _read)."""
    assert node.ann is not None and node.ki is not None
    names = node.ann.key_names()
    raw = arrow_keys(table, names)
    try:
        idx = node.ki.lookup(raw)
    except KeyError_:
        idx = np.array([_lookup_one(node, r) for r in raw], dtype=np.int64)
    n_user = table.num_columns - len(names)
    return table.select(list(range(n_user))).to_pandas(), idx


def _lookup_one(node: Node, raw: np.ndarray) -> int:
    assert node.ki is not None
    try:
        return int(node.ki.lookup(raw.reshape(1, -1))[0])
    except KeyError_:
        return -1


def _restricted(
    tracker: Tracker,
    ds_id: int,
    rows: np.ndarray,
    edit: Callable[[int, np.ndarray], JObject] | None = None,
    inputs: Inputs | None = None,
) -> tuple[JObject, bool]:
    """Annotated plan of ``ds_id`` whose frontier holds only what ``rows`` need, and
    whether it reads only those records (nothing whole); ``edit(source, rows)`` builds a
    source's plan instead of the plain key filter.  ``inputs``: :func:`_inputs` of the
    same arguments, when the caller has them already."""
    node = _node(tracker, ds_id)
    assert node.ann is not None
    if inputs is None:
        inputs = fr.inputs(tracker, ds_id, rows, stop_at_cached=edit is None)
    front, back, whole = inputs
    if front == [ds_id]:
        return node.ann.plan, False
    repl: dict[int, JObject] = {}
    # the replay session interprets rows one by one: right for a few records, slower
    # than compiled code for many (a what-if reaching big groups replays their members)
    total = sum(len(back.get(d, ())) for d in front)
    small = total <= _SMALL_REPLAY
    for d in front:
        fnode = _node(tracker, d)
        assert fnode.ann is not None
        ident = tracker.jvm.ident(fnode.ann.plan)
        keep = back.get(d, np.zeros(0, dtype=np.int64))
        if edit is not None:
            repl[ident] = edit(d, keep)
        elif _cached(tracker, d) or d in whole:
            # a contextual operation needs every record of its input (served from
            # Spark's cache when the input is materialized)
            repl[ident] = fnode.ann.plan
            small = False
        else:
            repl[ident] = _keyed_filter(tracker, d, keep)
    # an in-place join compares every pair of its sides' records: for a few only.  Not
    # for a what-if: its frontier also holds the edited records, which can be many
    few = small and total <= _FEW and edit is None
    return _substitute(tracker, node.ann.plan, repl, few=few), small


#: most record pairs a join of a replay run in the driver compares (see _local)
_PAIRS = 250_000


def _local(
    tracker: Tracker, ds_id: int, rows: np.ndarray, inputs: Inputs | None = None
) -> tuple[pd.DataFrame, np.ndarray] | None:
    """Records of ``rows`` of ``ds_id`` replayed in the driver without a Spark job, or
    None when this replay needs Spark (see TensProvReplay.java).

    It applies when every dataset the replay starts from is a keyed source (or opaque
    output) that an earlier recomputation cached and whose cache this JVM holds, when
    those hold at most ``_FEW`` of the wanted records, and when the operations in
    between are projections, filters, joins, sorts and unions.  A Spark job costs ~40 ms of
    scheduling on two cores, more than the rest of such a replay.
    """
    import base64

    import pyarrow as pa

    replayer = tracker.jvm.replayer
    if replayer is None:
        return None
    front, back, whole = fr.inputs(tracker, ds_id, rows) if inputs is None else inputs
    if front == [ds_id]:
        return None
    node = _node(tracker, ds_id)
    assert node.ann is not None
    session = tracker.replay_spark._jsparkSession
    repl: dict[int, JObject] = {}
    total = 0
    for d in front:
        fnode = _node(tracker, d)
        assert fnode.ann is not None and fnode.ki is not None
        if _cached(tracker, d) or d in whole or persisted(fnode.cached) is None:
            return None
        if len(fnode.ann.keys) != 1:
            return None
        keep = back.get(d, np.zeros(0, dtype=np.int64))
        values = np.sort(fnode.ki.values(np.asarray(keep, dtype=np.int64)))  # type: ignore[attr-defined]
        total += len(values)
        if total > _FEW or values.dtype.kind not in "iu":
            return None
        relation = replayer.cachedRecords(
            session, fnode.ann.plan, fnode.ann.keys[0], values.astype(">i8").tobytes()
        )
        if relation is None:
            return None
        repl[tracker.jvm.ident(fnode.ann.plan)] = relation
    helper = tracker.jvm.helper
    if node.arrow_schema is None:
        import json

        from pyspark.sql.types import StructType

        conf = tracker.replay_spark.conf
        large = conf.get("spark.sql.execution.arrow.useLargeVarTypes", "false") == "true"
        text = tracker.jvm._whole(helper, str(replayer.schemaJson(session, node.ann.plan, helper)))
        node.arrow_large = large
        node.arrow_schema = arrow_schema(StructType.fromJson(json.loads(text)), large)
    plan = _substitute(tracker, node.ann.plan, repl)
    reply = replayer.run(session, plan, _PAIRS, node.arrow_large, helper)
    if reply is None:
        return None
    data = base64.b64decode(tracker.jvm._whole(helper, str(reply)))
    table = pa.ipc.open_stream(data).read_all().cast(node.arrow_schema)
    return _records(node, table)


def replay_records(tracker: Tracker, ds_id: int, rows: np.ndarray) -> pd.DataFrame:
    """Recompute ``rows`` of ``ds_id`` from their provenance-related records only (a
    small materialized dataset is read instead)."""
    rows = unique(np.asarray(rows, dtype=np.int64))
    node = _node(tracker, ds_id)
    if _cached(tracker, ds_id) and (node.n or 0) <= fr.KEEP_WHOLE:
        # a small materialized dataset (a pipeline's aggregated output): read in full
        # once and kept, as a Spark job over its cache costs a task per partition
        if node.records is None:
            assert node.ann is not None
            node.records = _read(tracker, ds_id, node.ann.plan)
        pdf, idx = node.records
        return rows_of(pdf.copy(), idx, rows, recomputed=False)
    inputs = fr.inputs(tracker, ds_id, rows)
    found = _local(tracker, ds_id, rows, inputs)
    if found is None:
        plan, small = _restricted(tracker, ds_id, rows, inputs=inputs)
        found = _read(tracker, ds_id, plan, small)
    return rows_of(*found, rows)


class Classic:
    """The replay engine of a classic session (what :mod:`._what_if` asks of one)."""

    def __init__(self, tracker: Tracker) -> None:
        self.tracker = tracker

    def records(self, ds_id: int, rows: np.ndarray) -> pd.DataFrame:
        """Records ``rows`` of ``ds_id`` recomputed (:func:`replay_records`)."""
        return replay_records(self.tracker, ds_id, rows)

    def replayed(
        self, ds_id: int, rows: np.ndarray, edit: Callable[[int, np.ndarray], JObject]
    ) -> tuple[pd.DataFrame, np.ndarray]:
        """Records of ``ds_id`` replayed from the frontier ``edit(source, rows)`` builds
        (their canonical rows; -1 for a record the capture did not see)."""
        return _read(self.tracker, ds_id, *_restricted(self.tracker, ds_id, rows, edit=edit))

    def changed_source(
        self, src: int, rows: np.ndarray, exclude: np.ndarray, touched: np.ndarray,
        edits: dict[int, dict[str, Any]],
    ) -> JObject:  # fmt: skip
        """The plan of source ``src`` with records ``rows`` as they are (``exclude``:
        the records not to read when reading it whole) and records ``touched`` edited
        as ``edits`` (row -> column -> value) say."""
        tracker = self.tracker
        # the edited records come from a small local relation, the others from Spark
        base = _keyed_filter(tracker, src, rows, exclude)
        if not len(touched):
            return base
        df, key, ki = _keyed_df(tracker, src, touched)
        plan = _analyzed(df)
        with ctrl_c_kept():  # (a Ctrl-C stays one, not the cancelled job's error)
            pdf = df.toPandas()
        for row, new in edits.items():
            kv = int(ki.values(np.array([row], np.int64))[0])
            for col, val in new.items():
                pdf.loc[pdf[key] == kv, col] = val
        local = from_pandas(tracker.spark, pdf, df.schema)
        jvm = tracker.jvm
        lplan = _analyzed(local)
        # its columns take the source's expression ids, so the plans above read it
        # unchanged
        out = [
            jvm.alias(a, str(o.name()), like=o) for a, o in zip(jvm.output(lplan), jvm.output(plan))
        ]
        return jvm.union([base, jvm.project(out, lplan)])
