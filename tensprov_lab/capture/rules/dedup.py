"""``distinct`` and ``dropDuplicates(subset)``.

Record rule: a grouping step (see :mod:`.aggregate`): one output record per group of
equal values, numbered by its smallest member, the tensor listing every member.
``dropDuplicates`` on a subset keeps an arbitrary record of each group (the tracker flags
it non-deterministic).  Attribute rule: the dedup keys (every column for ``distinct``)
influence every output column.  Over Spark Connect, ``distinct`` and ``dropDuplicates``
are one ``deduplicate`` relation, rewritten as Spark runs it (an aggregate: the subset's
columns are the groups, every other column the first value met) with its smallest
member's keys.

Examples
--------
>>> from tensprov_lab.capture.rules import rule_for
>>> rule_for("Distinct") is rule_for("Deduplicate")
False
>>> rule_for("Distinct").same_output
True
"""

from __future__ import annotations

from typing import Any

from tensprov_lab.capture.plan import _connect as cx
from tensprov_lab.capture.plan import _proto as P
from tensprov_lab.capture.plan._connect import Keyed
from tensprov_lab.capture.plan._exprs import Lin
from tensprov_lab.capture.plan._keyed import Group, Unsupported
from tensprov_lab.capture.rules._base import Keying, Mapping, single
from tensprov_lab.capture.rules._classic import PlanNode, Rewriting, Walked, Walking
from tensprov_lab.capture.rules.aggregate import Grouping, flat_plan, group_plan, input_block

__all__ = ["Deduplicate", "Distinct"]


class _Dedup(Grouping):
    same_output = True

    def keys(self, rw: Rewriting, node: Any, kids: list[Any]) -> list[Any]:
        raise NotImplementedError

    def annotate(self, rw: Rewriting, node: Any, kids: list[Any], results: list[Walked]) -> Walked:
        jvm = rw.jvm
        child, blocks = single(results)
        keys = self.keys(rw, node, kids)
        block = input_block(blocks, "dropDuplicates")
        if rw.info.group is not None:
            raise Unsupported("two grouping steps in one operation")
        agg, reps, list_alias, members = group_plan(rw, child, blocks, plan=True)
        members_plan = jvm.copy(
            agg, groupingExpressions=jvm.seq(keys), aggregateExpressions=jvm.seq([list_alias])
        )
        flat, gcols, kcols = flat_plan(rw, keys, child, blocks)
        rw.info.group = Group("dedup", members_plan, members, block.pos, flat, gcols, kcols)
        # a template Deduplicate node (its constructor differs across Spark versions)
        template = jvm.to_df(child).dropDuplicates()._jdf.queryExecution().analyzed()
        return jvm.copy(template, keys=jvm.seq(keys), child=child), blocks


class Deduplicate(_Dedup):
    nodes = ("Deduplicate",)
    relations = ("deduplicate",)
    methods = ("dropDuplicates", "drop_duplicates")

    def keys(self, rw: Rewriting, node: Any, kids: list[Any]) -> list[Any]:
        return rw.jvm.lst(node.keys())  # type: ignore[no-any-return]

    def attributes(self, w: Walking, n: PlanNode) -> dict[int, Lin]:
        w.influence(n.env, n.d.get("keys"))
        return {}

    # -- over Spark Connect --------------------------------------------------------------
    def keyed(self, a: Keying, rel: Any) -> Keyed:
        if rel.deduplicate.within_watermark:
            raise Unsupported("dropDuplicatesWithinWatermark")
        kid = a.annotate(P.children(rel)[0])
        d = rel.deduplicate
        user = a.user_columns(kid.rel)
        subset = list(d.column_names) if len(d.column_names) and not d.all_columns_as_keys \
            else user  # fmt: skip
        low = {c.lower() for c in subset}
        pid = P.plan_id(rel)
        rep = f"{P.KEY_PREFIX}r{pid}"
        aggs = [P.alias(P.fn("first", P.col(c)), c) for c in user if c.lower() not in low]
        aggs.append(cx.smallest_member(kid.keys, rep))
        group = cx.pb_aggregate(kid.rel, [P.col(c) for c in subset], aggs)
        keys = [f"{P.KEY_PREFIX}g{pid}_{j}" for j in range(len(kid.keys))]
        exprs = [P.col(c) for c in user] + cx.member_fields(kid.keys, rep, keys)
        out = P.wrap("project", group, expressions=exprs)
        return Keyed(P.with_id(out, pid), keys, {}, kid.monotone)

    def maps(self, m: Mapping, rel: Any) -> None:
        if len(m.in_cols) != 1:
            return m.everything()
        m.identity()
        d = rel.deduplicate
        cols = list(d.column_names) if len(d.column_names) else m.in_cols[0]
        m.influence(*[P.col(c) for c in cols])


class Distinct(_Dedup):
    nodes = ("Distinct",)
    methods = ("distinct",)

    def keys(self, rw: Rewriting, node: Any, kids: list[Any]) -> list[Any]:
        return rw.jvm.output(kids[0])  # type: ignore[no-any-return]

    def attributes(self, w: Walking, n: PlanNode) -> dict[int, Lin]:
        for a in n.kid_ids[0] if n.kid_ids else []:
            w.row |= n.env[a].all() if a in n.env else set()
        return {}
