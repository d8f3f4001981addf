"""``orderBy`` / ``sort`` (a global sort) and ``sortWithinPartitions``.

Record rule: a global sort permutes its input; its ties are broken by the input's keys
so the numbering never depends on partitioning, and when the input's keys are not in
its canonical order (it was sorted before) the ties are re-ordered by canonical index
from the runs of equal sort values read back (:meth:`Sort.tensors`).  A sort within
partitions changes nothing in our numbering.  Attribute rule: the sort columns influence
every output column.  Replay: a sort distributes over union.  Over Spark Connect: a
global ``sort`` relation sorts by the keys after the user's order when they increase
with the input's canonical order, else (records Spark gives in canonical order) by a
number given to them as they come.

Examples
--------
>>> from tensprov_lab.capture.rules import rule_for
>>> rule_for("Sort").keeps_records, rule_for("Sort").same_output
(True, True)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tensprov_lab.capture.plan import _proto as P
from tensprov_lab.capture.plan._connect import Keyed
from tensprov_lab.capture.plan._exprs import Lin
from tensprov_lab.capture.plan._keyed import Rewrite, Unsupported, key_name
from tensprov_lab.capture.plan._keys import arrow_keys
from tensprov_lab.capture.plan._pieces import read_whole
from tensprov_lab.capture.rules._base import Captured, Keying, Mapping, Rule, attrs, single
from tensprov_lab.capture.rules._classic import PlanNode, Reading, Rewriting, Walked, Walking

__all__ = ["Sort"]


class Sort(Rule):
    nodes = ("Sort",)
    relations = ("sort",)
    drops_vanish = True
    methods = ("orderBy", "sort", "sortWithinPartitions")
    keeps_records = True
    same_output = True

    def annotate(self, rw: Rewriting, node: Any, kids: list[Any], results: list[Walked]) -> Walked:
        child, blocks = single(results)
        if not bool(getattr(node, "global")()):
            # sortWithinPartitions: our numbering ignores partitions, so nothing changes
            return node.withNewChildren(rw.jvm.seq([child])), blocks
        from pyspark.sql import functions as F

        names = [str(a.name()) for a in attrs(blocks)]
        # break ties by input order so the numbering does not depend on partitioning
        tie = rw.jvm.to_df(child).orderBy(*[F.col(n).asc_nulls_first() for n in names])
        extra = rw.jvm.lst(tie._jdf.queryExecution().analyzed().order())
        user = rw.jvm.lst(node.order())
        rw.info.sort = True
        new = rw.jvm.copy(node, order=rw.jvm.seq([*user, *extra]), child=child)
        rw.info.sort_node = new
        rw.info.sort_exprs = [o.child() for o in user]
        rw.info.sort_total = any(_unique(rw.jvm, o.child(), node.child()) for o in user)
        return new, blocks

    def tensors(self, reader: Reading, rw: Rewrite, occ: list[Any]) -> Captured | None:
        # a sort of key-ordered records: Spark's tie-break by keys is the canonical one,
        # and the generic rule reads the keys in the order Spark returns them
        if not rw.sort or rw.group is not None or all(n.key_ordered for n in occ):
            return None
        reader._index_deferred(occ)
        raw, runs = _sorted_keys(reader, rw)
        return reader._functional(rw, occ, raw, runs)

    def attributes(self, w: Walking, n: PlanNode) -> dict[int, Lin]:
        w.influence(n.env, n.d.get("order"))
        return {}

    # -- over Spark Connect --------------------------------------------------------------
    def keyed(self, a: Keying, rel: Any) -> Keyed:
        """Ties in the sort order come in input order (DESIGN.md §3), which the keys give
        when they increase with it; over records sorted before, the input's records
        come back in their order, so ids given to them there do."""
        new, (kid,) = a.kids(rel)
        if not new.sort.is_global:
            return Keyed(new, list(kid.keys), dict(kid.ids), kid.monotone)
        if kid.monotone:
            new.sort.order.extend(P.sort_order(P.col(k)) for k in kid.keys)
            return Keyed(new, list(kid.keys), dict(kid.ids), monotone=False, returned=True)
        if not kid.returned:
            raise Unsupported(
                "a sort of records whose order is neither their keys' nor Spark's (a "
                "join, union or grouping of sorted records)"
            )
        at = f"{P.KEY_PREFIX}q{P.plan_id(rel)}"
        numbered = P.wrap("project", kid.rel, expressions=[
            P.star(), P.alias(P.fn("monotonically_increasing_id"), at)
        ])  # fmt: skip
        new.sort.input.CopyFrom(numbered)
        new.sort.order.append(P.sort_order(P.col(at)))
        out = P.wrap("drop", new, column_names=[at])
        return Keyed(out, list(kid.keys), dict(kid.ids), monotone=False, returned=True)

    def maps(self, m: Mapping, rel: Any) -> None:
        if len(m.in_cols) != 1:
            return m.everything()
        m.identity()
        m.influence(*rel.sort.order)


def _sorted_keys(reader: Reading, rw: Rewrite) -> tuple[np.ndarray, np.ndarray]:
    """Keys of a global sort's output in sorted order, and the run of equal sort
    values each record belongs to.

    Spark breaks ties by raw keys, which is the canonical order of the input only when
    the input was not itself sorted; the runs let the caller re-order ties by canonical
    index instead.
    """
    if rw.sort_node is None:
        raise Unsupported(
            "a sort of an already sorted input, inside a call that also does other "
            "steps: its ties cannot be ordered exactly"
        )
    jvm = reader.jvm
    names = [str(a.name()) for a in rw.keys]
    ties = [key_name("t") for _ in rw.sort_exprs]
    exprs = [*rw.keys, *(jvm.alias(e, n) for e, n in zip(rw.sort_exprs, ties))]
    table = read_whole(jvm.to_df(jvm.project(exprs, rw.sort_node)), jvm.to_arrow, jvm.spark)
    raw = arrow_keys(table.select(names), names)
    same = np.ones(max(table.num_rows - 1, 0), dtype=bool)
    for n in ties:
        same &= _equal_to_previous(table.column(n))
    runs = np.concatenate([[0], np.cumsum(~same)]) if table.num_rows else np.zeros(0, np.int64)
    return raw, runs.astype(np.int64)


def _equal_to_previous(col: Any) -> np.ndarray:
    """For rows ``1..m-1`` of an Arrow column: equal to the row before under Spark's
    sort semantics (nulls equal each other, NaN equals NaN)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if len(col) < 2:
        return np.zeros(0, dtype=bool)
    t = col.type
    if pa.types.is_nested(t) or pa.types.is_dictionary(t):
        raise Unsupported(f"ties of a sort on a {t} value cannot be compared exactly")
    a, b = col.slice(1), col.slice(0, len(col) - 1)
    eq = pc.fill_null(pc.equal(a, b), False)
    both_null = pc.and_(pc.is_null(a), pc.is_null(b))
    out = pc.or_(eq, both_null)
    if pa.types.is_floating(t):
        both_nan = pc.fill_null(pc.and_(pc.is_nan(a), pc.is_nan(b)), False)
        out = pc.or_(out, both_nan)
    return np.asarray(out.to_numpy(zero_copy_only=False), dtype=bool)


#: nodes that keep each record of their child at most once (so a value unique among
#: the child's records stays unique)
_ONCE = {
    "Project", "Filter", "Sort", "GlobalLimit", "LocalLimit", "SubqueryAlias", "Window",
    "Repartition", "RepartitionByExpression", "ResolvedHint", "Offset",
}  # fmt: skip


def _unique(jvm: Any, expr: Any, plan: Any) -> bool:
    """Whether sort key ``expr`` over ``plan`` holds a value no two records share: a
    ``monotonically_increasing_id()`` made below through nodes that never repeat a
    record (pandas-on-Spark's ``__natural_order__``, which its ``sort_values`` sorts
    by last), so that the sort has no ties to break."""
    if jvm.cls(expr) == "MonotonicallyIncreasingID":
        return True
    if jvm.cls(expr) != "AttributeReference":
        return False
    target = int(expr.exprId().id())
    for _ in range(256):
        kind = jvm.cls(plan)
        if kind not in _ONCE:
            return False
        if kind == "Project":
            for e in jvm.lst(plan.projectList()):
                if jvm.cls(e) == "Alias" and int(e.exprId().id()) == target:
                    made = e.child()
                    if jvm.cls(made) == "MonotonicallyIncreasingID":
                        return True
                    if jvm.cls(made) != "AttributeReference":
                        return False
                    target = int(made.exprId().id())  # a rename: follow it down
        plan = plan.child()
    return False
