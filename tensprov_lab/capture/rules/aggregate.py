"""``groupBy(...).agg(...)``, global aggregates, ``rollup``, ``cube`` and ``pivot``.

Record rule: one output record per group, numbered by its smallest member (then by
grouping set); the tensor lists every member (why-provenance).  The rewrite keeps a
representative key per group in the user's aggregate and notes, in a
:class:`~.._keyed.Group`, the plan that lists every member next to its grouping values;
:meth:`Aggregate.tensors` reads it back (a fused capture reads the grouping columns in
its one scan instead, see :mod:`.._fused`).  Attribute rule: the aggregate's arguments
contribute, the grouping columns influence.  Replay: an aggregate distributes over union
of its groups' members (an edit that moves a record between groups is caught by the
what-if itself).

``groupBy(g).pivot(p, values).agg(f(x))`` is two aggregates in one plan (by ``g`` and
``p``, then by ``g`` with ``pivotfirst``): each output record comes from every record of
its group ``g``, and the cells of the column of pivot value ``v`` from the group's
records with ``p = v`` only (:class:`~tensprov_lab.store.ColumnsTensor`).

Over Spark Connect, the ``aggregate`` relation (a grouping, grouping sets, a pivot) gains
its group's smallest member's keys (with the set's ``grouping_id()``); a pivot's, from a
plain grouping of the same records joined on the grouping values.  The members are read
by :mod:`tensprov_lab.capture.connect._groups`.

Examples
--------
>>> import numpy as np
>>> from tensprov_lab.capture.rules.aggregate import number_groups
>>> number_groups(np.array([3, 0, 1, 2]), np.array([0, 1, 1, 0]), 2)[1]  # member -> row
array([1, 0, 0, 1])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tensprov_lab.capture.plan import _connect as cx
from tensprov_lab.capture.plan import _proto as P
from tensprov_lab.capture.plan._connect import Keyed
from tensprov_lab.capture.plan._exprs import Expr, Lin, exprs, ids
from tensprov_lab.capture.plan._keyed import Block, Group, Pivot, Rewrite, Unsupported, key_name
from tensprov_lab.capture.plan._keys import (
    GroupSetKeyIndex,
    KeyIndex,
    MappedKeyIndex,
    arrow_keys,
    row_dtype,
)
from tensprov_lab.capture.plan._pieces import read_whole
from tensprov_lab.capture.rules._base import Captured, Keying, Mapping, Rule, attrs, single
from tensprov_lab.capture.rules._classic import PlanNode, Reading, Rewriting, Walked, Walking
from tensprov_lab.store import AllTensor, tensor_from_groups, tensor_from_pairs

__all__ = ["Aggregate", "Grouping", "every_record", "group_plan", "groups", "number_groups"]

JObject = Any
#: nodes a grouping step may have beside row-keeping ones in the same operation
_GROUPING = {"Aggregate", "Deduplicate", "Distinct", "Expand", "Intersect", "Except"}
#: nodes that may sit under a grouping step in one operation: its members are read over
#: them (a filter there, as Spark puts under a session window, only picks the members)
_UNDER_GROUPING = {"Filter"}
#: grouping value types pandas compares exactly as Spark does
_EXACT = {"integer", "long", "short", "byte", "string", "boolean", "date"}


class Grouping(Rule):
    """A grouping step (aggregate, dedup): its tensors list every member of each group,
    read back from the group's flat plan (:func:`group_tensors`)."""

    def tensors(self, reader: Reading, rw: Rewrite, occ: list[Any]) -> Captured | None:
        if rw.group is None:
            return None
        reader._index_deferred(occ)
        return group_tensors(reader, rw, occ)


class Aggregate(Grouping):
    nodes = ("Aggregate",)
    relations = ("aggregate",)

    def annotate(self, rw: Rewriting, node: Any, kids: list[Any], results: list[Walked]) -> Walked:
        jvm = rw.jvm
        child, blocks = single(results)
        block = input_block(blocks, "an aggregate")
        if rw.info.group is not None:
            return _pivot(rw, node, kids[0], child, blocks)
        agg, reps, list_alias, members = group_plan(rw, child, blocks)
        members_plan = jvm.copy(node, aggregateExpressions=jvm.seq([list_alias]), child=child)
        grouping = jvm.lst(node.groupingExpressions())
        # rollup/cube: one input record is in several groups, one per grouping set
        gid = [
            g
            for g in grouping
            if jvm.cls(g) == "AttributeReference" and str(g.name()) == "spark_grouping_id"
        ]
        new = jvm.copy(
            node,
            aggregateExpressions=jvm.seq([*jvm.lst(node.aggregateExpressions()), *reps, *gid]),
            child=child,
        )
        flat, gcols, kcols = flat_plan(rw, grouping, child, blocks)
        if gid and flat is None:
            raise Unsupported("grouping sets over values pandas cannot compare exactly")
        rw.info.group = Group(
            "aggregate", members_plan, members, block.pos, flat, gcols, kcols,
            gid_col=gcols[grouping.index(gid[0])] if gid else None,
        )  # fmt: skip
        # not contextual: every member of a group is in the tensor, so replaying the
        # aggregate on a group's members recomputes its record (paper §III-E)
        out = [Block("input", block.pos, [r.toAttribute() for r in reps], block.width)]
        if gid:
            out.append(Block("gid", -1, gid, 1))
        return new, out

    def output_ids(self, d: dict[str, Any], kid_ids: list[list[int]]) -> list[int] | None:
        return ids(d["aggregateExpressions"])

    def attributes(self, w: Walking, n: PlanNode) -> dict[int, Lin]:
        w.influence(n.env, n.d["groupingExpressions"])
        named = w.named(n.env, exprs(n.d["aggregateExpressions"]))
        # a global aggregate keeps its record when every member goes: left to replay
        w.decomposition = (
            {
                i: _decomposed(w, e)
                for e in exprs(n.d["aggregateExpressions"])
                if (i := e.named_id()) is not None
            }
            if exprs(n.d["groupingExpressions"])
            else None
        )
        for e in exprs(n.d["aggregateExpressions"]):
            ident = e.named_id()
            for pf in e.find("PivotFirst"):
                # a pivot's cell: the value column flows in, the pivot column decides
                # which cell (the column of which pivot value) it goes to
                values, pivot = w.lin(n.env, pf.kids[1].refs()), w.lin(n.env, pf.kids[0].refs())
                if ident is not None:
                    named[ident] = Lin(values.contrib, values.infl | pivot.all())
        return named

    #: aggregate functions a what-if updates from the changed members' values alone

    # -- over Spark Connect --------------------------------------------------------------
    def keyed(self, a: Keying, rel: Any) -> Keyed:
        sets = cx.grouping_sets(rel)
        agg = rel.aggregate
        new, (kid,) = a.kids(rel)
        pid = P.plan_id(rel)
        if cx.pivot_of(rel) is not None:
            return _keyed_pivot(rel, new, kid)
        if not len(agg.grouping_expressions) and not sets:
            # one record: nothing tells records apart, none is needed
            return Keyed(new, [], {}, True)
        rep = f"{P.KEY_PREFIX}r{pid}"
        new.aggregate.aggregate_expressions.append(cx.smallest_member(kid.keys, rep))
        keys = [f"{P.KEY_PREFIX}g{pid}_{j}" for j in range(len(kid.keys))]
        if sets:  # the smallest member is in one group per grouping set
            keys.append(f"{P.KEY_PREFIX}s{pid}")
            new.aggregate.aggregate_expressions.append(P.alias(P.fn("grouping_id"), keys[-1]))
        fields = cx.member_fields(kid.keys, rep, keys)
        out = P.wrap("with_columns", new, aliases=[f.alias for f in fields])
        out = P.wrap("drop", out, column_names=[rep])
        return Keyed(out, keys, {}, kid.monotone)

    def maps(self, m: Mapping, rel: Any) -> None:
        inner, n_out = rel.aggregate, len(m.out_cols)
        groups = list(inner.grouping_expressions)
        aggs = list(inner.aggregate_expressions)
        if len(m.in_cols) != 1:
            m.everything()
        elif inner.HasField("pivot"):
            # the grouping columns, then a column per pivot value and aggregate: its
            # value from the aggregate's arguments, the pivot column deciding which records
            spread = n_out - len(groups)
            if not aggs or spread < 0 or spread % len(aggs):
                return m.everything()
            for o, e in enumerate(groups):
                m.contribute(o, e)
            for o in range(len(groups), n_out):
                m.contribute(o, aggs[(o - len(groups)) % len(aggs)])
            m.influence(*groups, inner.pivot.col)
        elif len(groups) + len(aggs) != n_out:
            m.everything()
        else:
            for o, e in enumerate(groups + aggs):
                m.contribute(o, e)
            m.influence(*groups)


_DECOMPOSABLE = {"Sum": "sum", "Count": "count", "Average": "avg", "Min": "min", "Max": "max"}


def _decomposed(w: Walking, e: Expr) -> tuple[str, int | None] | None:
    """An output column of an aggregate as ``(kind, input column)`` (see
    ``Operation.decomposition``), or None when it is not a grouping column or one
    plain ``sum``/``count``/``avg``/``min``/``max`` of an input column."""
    if e.cls == "AttributeReference":
        col = w.input_column(int(e.fields["exprId"]["id"]))
        return None if col is None else ("key", col)
    if e.cls != "Alias" or len(e.kids) != 1 or e.kids[0].cls != "AggregateExpression":
        return None
    agg = e.kids[0]
    # one child: no FILTER clause
    if agg.fields.get("isDistinct") or len(agg.kids) != 1:
        return None
    fn = agg.kids[0]
    kind = _DECOMPOSABLE.get(fn.cls)
    if kind is None or len(fn.kids) != 1:
        return None
    (arg,) = fn.kids
    if kind == "count" and arg.cls == "Literal" and arg.fields.get("value") is not None:
        return ("count", None)
    if arg.cls != "AttributeReference":
        return None
    col = w.input_column(int(arg.fields["exprId"]["id"]))
    return None if col is None else (kind, col)


def _pivot(rw: Rewriting, node: Any, inner: Any, child: Any, blocks: list[Block]) -> Walked:
    """The second grouping step of a pivot: regroup the first step's members by the
    outer grouping columns, and note which pivot value each member has."""
    jvm = rw.jvm
    g = rw.info.group
    firsts = []
    for e in jvm.lst(node.aggregateExpressions()):
        if jvm.cls(e) == "Alias" and jvm.cls(e.child()) == "AggregateExpression":
            fn = e.child().aggregateFunction()
            if jvm.cls(fn) == "PivotFirst":
                firsts.append((int(e.exprId().id()), fn))
    pivot_shaped = (
        firsts and jvm.cls(inner) == "Aggregate" and g is not None and g.kind == "aggregate"
        and g.flat_plan is not None and g.gid_col is None and rw.info.pivot is None
    )  # fmt: skip
    if not pivot_shaped:
        raise Unsupported("two grouping steps in one operation")
    assert g is not None
    inner_ids = _grouping_outputs(jvm, inner)

    def inner_col(expr: Any) -> str:
        if jvm.cls(expr) != "AttributeReference" or int(expr.exprId().id()) not in inner_ids:
            raise Unsupported("a pivot over values its first grouping step does not group by")
        return g.group_cols[inner_ids[int(expr.exprId().id())]]

    outer = [inner_col(x) for x in jvm.lst(node.groupingExpressions())]
    fn = firsts[0][1]
    value_col = inner_col(fn.pivotColumn())
    rw.info.pivot = Pivot(value_col, _pivot_values(fn), {i for i, _ in firsts})
    rw.info.group = Group(
        "aggregate", g.members_plan, g.members, g.pos, g.flat_plan, outer, g.key_cols
    )
    # the representative key of an outer group: the smallest of its inner groups'
    _, reps, _, _ = group_plan(rw, child, blocks)
    new = jvm.copy(
        node, aggregateExpressions=jvm.seq([*jvm.lst(node.aggregateExpressions()), *reps]),
        child=child,
    )  # fmt: skip
    return new, [Block("input", blocks[0].pos, [r.toAttribute() for r in reps], blocks[0].width)]


def _grouping_outputs(jvm: Any, agg: Any) -> dict[int, int]:
    """The output columns of an aggregate that are its grouping values (exprId -> the
    value's position): a grouping column passed through, or a computed one under its
    alias, as ``groupBy(F.col("k") + 1)`` and ``crosstab`` (values cast to strings) are."""
    grouping = jvm.lst(agg.groupingExpressions())
    out = {
        int(g.exprId().id()): i
        for i, g in enumerate(grouping)
        if jvm.cls(g) == "AttributeReference"
    }
    for e in jvm.lst(agg.aggregateExpressions()):
        if jvm.cls(e) != "Alias":
            continue
        child = e.child()
        for i, g in enumerate(grouping):
            if child.semanticEquals(g):
                out.setdefault(int(e.exprId().id()), i)
                break
    return out


def _pivot_values(fn: Any) -> list[Any]:
    """A pivot's values as Arrow gives them back for its column's type (integers,
    strings, booleans, dates: the types a pivot's members are read with)."""
    import datetime

    type_name = str(fn.pivotColumn().dataType().typeName())
    values = fn.pivotColumnValues()
    out: list[Any] = []
    for j in range(int(values.size())):
        v = values.apply(j)
        if v is None or isinstance(v, (bool, int)):
            if type_name == "date" and isinstance(v, int):
                v = datetime.date(1970, 1, 1) + datetime.timedelta(days=v)
            out.append(v)
        else:  # a UTF8String
            out.append(str(v.toString()))
    return out


def pivot_columns(jvm: Any, plan: Any, pivot: Pivot) -> dict[int, int]:
    """Output column -> pivot value index, read from the projections at the root of a
    pivot's plan (``array[i] AS value``, and what is made of one such column alone, as
    ``crosstab``'s ``coalesce(value, 0)``); empty when the root is not a projection."""
    if jvm.cls(plan) != "Project":
        return {}
    return {c: v for c, v in enumerate(_pivot_items(jvm, plan, pivot)) if v is not None}


def _pivot_items(jvm: Any, plan: Any, pivot: Pivot) -> list[int | None]:
    """The pivot value each column of a projection stands for (None: not one value's)."""
    below: dict[int, int] = {}
    child = plan.child()
    if jvm.cls(child) == "Project":
        for e, v in zip(jvm.lst(child.projectList()), _pivot_items(jvm, child, pivot)):
            if v is not None:
                below[int(e.exprId().id())] = v
    out: list[int | None] = []
    for e in jvm.lst(plan.projectList()):
        item = e.child() if jvm.cls(e) == "Alias" else e
        out.append(_pivot_item(jvm, item, pivot, below))
    return out


def _pivot_item(jvm: Any, item: Any, pivot: Pivot, below: dict[int, int]) -> int | None:
    if jvm.cls(item) == "GetArrayItem":
        arr, ordinal = item.child(), item.ordinal()
        if (
            jvm.cls(arr) == "AttributeReference" and jvm.cls(ordinal) == "Literal"
            and int(arr.exprId().id()) in pivot.array_ids
        ):  # fmt: skip
            return int(ordinal.value())
        return None
    refs = {int(a.exprId().id()) for a in jvm.lst(item.references().toSeq())}
    if len(refs) == 1 and (ref := refs.pop()) in below:
        return below[ref]
    return None


def input_block(blocks: list[Block], what: str) -> Block:
    """The one input's key block under a grouping step."""
    inputs = [b for b in blocks if b.kind == "input"]
    if len(inputs) != 1 or len(blocks) != 1:
        raise Unsupported(f"{what} over more than one input is not traced yet")
    return inputs[0]


def group_plan(rw: Rewriting, child: JObject, blocks: list[Block], plan: bool = False) -> Any:
    """A representative member per group (flat key columns, nullable: a global aggregate
    over no rows has none) and the list of every member; with ``plan``, also an
    analysed aggregate of them over ``child`` (else None in its place)."""
    if not plan:
        try:
            return _group_exprs(rw, blocks)
        except Exception:  # noqa: BLE001 - another Spark build: the analyzer makes them
            pass
    return _analyzed_group_plan(rw, child, blocks)


def _group_exprs(rw: Rewriting, blocks: list[Block]) -> Any:
    """:func:`group_plan`'s expressions made directly, resolved already: the smallest
    key (``min``, or ``min_by`` of a struct of the keys), the list of the keys' structs.
    About 20 py4j calls, where analysing a DataFrame over the child took about 100 and
    the analyzer's pass over the whole annotated plan (0.07 s at the engine bench)."""
    jvm = rw.jvm
    e = jvm.jvm.org.apache.spark.sql.catalyst.expressions
    keys = attrs(blocks)
    string = jvm.jvm.org.apache.spark.sql.types.DataTypes.StringType
    fields: list[JObject] = []
    for k in keys:
        # a name is a Catalyst string literal (Literal.create converts it), as the
        # analyzer checks again when a later operation's plan is analysed
        fields += [e.Literal.create(str(k.name()), string), k]
    order = e.CreateNamedStruct(jvm.seq(fields))
    agg = e.aggregate
    reps = [
        jvm.alias(
            (agg.Min(k) if len(keys) == 1 else agg.MinBy(k, order)).toAggregateExpression(),
            key_name("g"),
        )
        for k in keys
    ]
    members = key_name("m")
    list_alias = jvm.alias(agg.CollectList(order).toAggregateExpression(), members)
    return None, reps, list_alias, members


def _analyzed_group_plan(rw: Rewriting, child: JObject, blocks: list[Block]) -> Any:
    from pyspark.sql import functions as F

    names = [str(a.name()) for a in attrs(blocks)]
    members = key_name("m")
    order = F.struct(*names)
    reps = [
        (F.min(F.col(n)) if len(names) == 1 else F.min_by(F.col(n), order)).alias(key_name("g"))
        for n in names
    ]
    dummy = rw.jvm.to_df(child).agg(*reps, F.collect_list(order).alias(members))
    agg = dummy._jdf.queryExecution().analyzed()
    items = rw.jvm.lst(agg.aggregateExpressions())
    return agg, items[:-1], items[-1], members


def flat_plan(rw: Rewriting, grouping: list[JObject], child: JObject, blocks: list[Block]) -> Any:
    """Members next to their grouping values, if pandas groups those like Spark."""
    if any(str(g.dataType().typeName()) not in _EXACT for g in grouping):
        return None, [], []
    names = [key_name("v") for _ in grouping]
    items = [rw.jvm.alias(g, n) for g, n in zip(grouping, names)]
    keys = attrs(blocks)
    return rw.jvm.project([*items, *keys], child), names, [str(k.name()) for k in keys]


def group_tensors(reader: Reading, rw: Rewrite, occ: list[Any]) -> Captured:
    """The tensor of a grouping step (aggregate or dedup) from its members read back."""
    import pyarrow as pa
    import pyarrow.compute as pc

    g = rw.group
    assert g is not None
    # (nodes are listed children first: those after the last grouping step are above it)
    last = max((i for i, n in enumerate(rw.nodes) if n in _GROUPING), default=-1)
    extra = [
        n
        for i, (n, r) in enumerate(zip(rw.nodes, rw.rules))
        if not r.keeps_records and n not in _GROUPING and (i > last or n not in _UNDER_GROUPING)
    ]
    node = occ[g.pos]
    assert node.ki is not None and node.n is not None
    if extra == ["Generate"] and _every_record_then_rows(rw):
        return _exploded_whole(reader, rw, node)
    if extra:
        raise Unsupported(f"{sorted(set(extra))} after a grouping step")
    if _takes_every_record(rw):
        # one group of every input record (a global aggregate straight over its input):
        # nothing to read back from Spark
        return every_record(node)
    jvm = reader.jvm
    if g.flat_plan is not None:
        table = read_whole(jvm.to_df(g.flat_plan), jvm.to_arrow, jvm.spark)
        raw = arrow_keys(table, g.key_cols)
        if g.group_cols:
            parent, n_groups = _group_ids(table, g.group_cols)
        else:  # a global aggregate: one group, even over no rows
            parent, n_groups = np.zeros(len(raw), dtype=np.int64), 1
    else:
        table = read_whole(jvm.to_df(g.members_plan).select(g.members), jvm.to_arrow, jvm.spark)
        col = table.column(g.members).combine_chunks()
        n_groups = len(col)
        flat = pc.list_flatten(col)
        parent = np.asarray(
            pc.list_parent_indices(col).to_numpy(zero_copy_only=False), dtype=np.int64
        )
        raw = arrow_keys(pa.table({"k": flat}), ["k"])
    member = node.ki.lookup(raw)
    gid = arrow_keys(table, [g.gid_col])[:, 0] if g.gid_col is not None else None
    if rw.pivot is not None:
        return _pivot_tensors(reader, rw, node, table, member, parent, n_groups)
    return groups(node, member, parent, n_groups, gid)


def _pivot_tensors(
    reader: Reading,
    rw: Rewrite,
    node: Any,
    table: Any,
    member: np.ndarray,
    parent: np.ndarray,
    n_groups: int,
) -> Captured:
    """A pivot: each group from all its members; each pivot column from the members
    with its pivot value."""
    import pandas as pd

    from tensprov_lab.store import ColumnsTensor

    assert rw.pivot is not None
    n, whole_tensors, ki = groups(node, member, parent, n_groups)
    _, out_rows = number_groups(member, parent, n_groups)
    values = table.column(rw.pivot.value_col).to_pandas()
    which = pd.Index(rw.pivot.values).get_indexer(values)
    parts = []
    for v in range(len(rw.pivot.values)):
        picked = which == v
        parts.append(tensor_from_pairs(out_rows[picked], member[picked], n_groups, node.n))
    columns = pivot_columns(reader.jvm, rw.plan, rw.pivot)
    if not columns:
        reader._note("pivot: its columns could not be told apart; each takes its whole group")
    return n, [ColumnsTensor(whole_tensors[0], parts, columns)], ki


def number_groups(
    member: np.ndarray, parent: np.ndarray, n_groups: int, gid: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Each group's output row (groups by smallest member, then grouping-set id:
    DESIGN.md §3) and each member's."""
    first = np.full(n_groups, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first, parent, member)
    group_gid = np.zeros(n_groups, dtype=np.int64)
    if gid is not None:
        group_gid[parent] = gid
    order = np.lexsort((group_gid, first))
    rank = np.empty(n_groups, dtype=np.int64)
    rank[order] = np.arange(n_groups)
    return rank, rank[parent]


def groups(
    node: Any,
    member: np.ndarray,
    parent: np.ndarray,
    n_groups: int,
    gid: np.ndarray | None = None,
    ordered: bool = False,
) -> Captured:
    """The tensor and key index of a grouping of ``node``'s records: ``member[i]`` is in
    group ``parent[i]`` (of grouping set ``gid[i]``); ``ordered``: groups are numbered
    by smallest member already."""
    assert node.ki is not None and node.n is not None
    if ordered:
        rank, out_rows = np.arange(n_groups), parent
    else:
        rank, out_rows = number_groups(member, parent, n_groups, gid)
    empty = np.flatnonzero(np.bincount(parent, minlength=n_groups) == 0)
    null_row = int(rank[empty[0]]) if len(empty) else None
    tensor = tensor_from_pairs(out_rows, member, n_groups, node.n)
    ki: KeyIndex
    if gid is not None:
        ki = GroupSetKeyIndex(node.ki, member, gid, out_rows, n_groups)
    else:
        in_to_out = np.full(node.n, -1, dtype=row_dtype(n_groups))
        in_to_out[member] = out_rows
        ki = MappedKeyIndex(node.ki, in_to_out, n_groups, null_row)
    return n_groups, [tensor], ki


def partition_groups(node: Any, parent: np.ndarray, n_groups: int) -> Captured:
    """The tensor and key index of a grouping in which every record of ``node`` is a
    member of group ``parent[i]``, groups numbered by smallest member already (a fused
    read's grouping, see ``Fusion.groups``): :func:`groups` with every record a member,
    without a member array or the pairs of a CSR built from them."""
    assert node.ki is not None and node.n is not None
    if len(parent) != node.n:
        raise ValueError(f"{len(parent)} group numbers for {node.n} records")
    tensor = tensor_from_groups(parent, n_groups)
    # numbered by smallest member: no group is empty, so no row has a null key
    return n_groups, [tensor], MappedKeyIndex(node.ki, parent, n_groups)


def every_record(node: Any) -> Captured:
    """One output record made from every record of ``node``: its size, tensor and keys."""
    assert node.ki is not None and node.n is not None
    everything = np.zeros(node.n, dtype=row_dtype(1))
    tensor = tensor_from_groups(everything, 1)
    return 1, [tensor], MappedKeyIndex(node.ki, everything, 1, 0 if not node.n else None)


def _group_ids(table: Any, columns: list[str]) -> tuple[np.ndarray, int]:
    """Group number of every row, grouping equal values (and nulls) like Spark does for
    integral, string, boolean and date columns."""
    import pandas as pd

    from tensprov_lab.capture.plan._equijoin import value_codes

    code, _ = value_codes([table.column(name) for name in columns])
    # hash-based: no sort of every member
    parent, uniq = pd.factorize(code)
    return parent.astype(np.int64), len(uniq)


def _every_record_then_rows(rw: Rewrite) -> bool:
    """Whether the operation is one global aggregate over every record of its one input
    exploded into rows (``describe``, ``summary``: a row per statistic)."""
    g = rw.group
    if g is None or g.kind != "aggregate" or g.group_cols or g.gid_col is not None:
        return False
    if g.flat_plan is None or len(rw.occurrences) != 1 or rw.pivot is not None:
        return False
    steps = [n for n, r in zip(rw.nodes, rw.rules) if not r.keeps_records]
    return steps == ["Aggregate", "Generate"] and [b.kind for b in rw.blocks] == [
        "input", "genpos",
    ]  # fmt: skip


def _exploded_whole(reader: Reading, rw: Rewrite, node: Any) -> Captured:
    """The rows of a global aggregate exploded (one small read of their keys): each
    made from every input record, numbered by position, keyed by the aggregate's
    record and the position."""
    from tensprov_lab.capture.plan._keys import ComposedKeyIndex, RangeKeyIndex

    names = [str(a.name()) for a in rw.keys]
    raw = reader._collect_keys(rw.plan, names)
    width = rw.blocks[0].width
    pos = raw[:, width]
    m = len(raw)
    if m and sorted(pos.tolist()) != list(range(m)):
        raise Unsupported("an explode after an aggregate with other than one row a position")
    _, _, whole = every_record(node)
    blocks = [(whole, 0), (RangeKeyIndex(m), width)]
    radix = ComposedKeyIndex.radix(blocks, 1)
    codes = ComposedKeyIndex.encode(
        [np.zeros(m, np.int64), np.ones(m, np.int64), np.arange(m, dtype=np.int64) + 1], radix
    )
    return m, [AllTensor(m, node.n)], ComposedKeyIndex(blocks, None, 1, codes, rw.width)


def _takes_every_record(rw: Rewrite) -> bool:
    """Whether the operation is one global aggregate over every record of its one input:
    no grouping keys or grouping sets, and only row-preserving steps around it."""
    g = rw.group
    if g is None or g.kind != "aggregate" or g.group_cols or g.gid_col is not None:
        return False
    # flat_plan is None when grouping values cannot be compared exactly: then there are some
    if g.flat_plan is None or len(rw.occurrences) != 1:
        return False
    steps = [n for n, r in zip(rw.nodes, rw.rules) if not r.keeps_records]
    return steps == ["Aggregate"]


def _keyed_pivot(rel: Any, new: Any, kid: Keyed) -> Keyed:
    """A Connect pivot: one record per group of its grouping columns, keyed by the
    group's smallest member, read from a plain grouping of the same records joined to
    the pivot's records on the grouping values (null-safe)."""
    from pyspark.sql.connect import proto

    names = cx.plain_names(rel.aggregate.grouping_expressions)
    if not names:
        raise Unsupported("a pivot grouped by computed values")
    pid = P.plan_id(rel)
    rep = f"{P.KEY_PREFIX}r{pid}"
    keys = [f"{P.KEY_PREFIX}g{pid}_{j}" for j in range(len(kid.keys))]
    same = [f"{P.KEY_PREFIX}pg{pid}_{i}" for i in range(len(names))]
    grouped = cx.pb_aggregate(
        kid.rel, [P.col(n) for n in names], [cx.smallest_member(kid.keys, rep)]
    )
    right = P.wrap("project", grouped, expressions=[
        *[P.alias(P.col(n), g) for n, g in zip(names, same)], *cx.member_fields(kid.keys, rep, keys)
    ])  # fmt: skip
    P.with_id(right, None)
    P.with_id(new, None)
    join = proto.Relation()
    join.join.left.CopyFrom(new)
    join.join.right.CopyFrom(right)
    join.join.join_type = proto.Join.JoinType.JOIN_TYPE_INNER
    cond = [P.fn("<=>", P.col(n), P.col(g)) for n, g in zip(names, same)]
    while len(cond) > 1:
        cond = [P.fn("and", cond[0], cond[1]), *cond[2:]]
    join.join.join_condition.CopyFrom(cond[0])
    P.with_id(join, None)
    out = P.wrap("drop", join, column_names=same)
    return Keyed(P.with_id(out, pid), keys, {}, kid.monotone)
