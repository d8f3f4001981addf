"""``Expand``: the node under ``rollup``, ``cube`` and ``unpivot`` / ``melt``.

Record rule: each input record is repeated once per projection; the keys are appended
to every projection, so each copy carries its input record's keys (an aggregate above
numbers the grouping sets, see :mod:`.aggregate`).  Attribute rule: an output column's
values come from what any projection puts in it.  Over Spark Connect, a rollup or cube
is an ``aggregate`` relation (:mod:`.aggregate`); ``unpivot`` / ``melt`` is not traced
there yet.

Examples
--------
>>> from tensprov_lab.capture.rules import rule_for
>>> rule_for("Expand").nodes
('Expand',)
"""

from __future__ import annotations

from typing import Any

from tensprov_lab.capture.plan._exprs import Lin, exprs
from tensprov_lab.capture.rules._base import Rule, attrs, single
from tensprov_lab.capture.rules._classic import PlanNode, Rewriting, Walked, Walking

__all__ = ["Expand"]


class Expand(Rule):
    nodes = ("Expand",)
    connect_opaque = {"unpivot": "an unpivot (melt)"}
    methods = ("melt", "unpivot")

    def annotate(self, rw: Rewriting, node: Any, kids: list[Any], results: list[Walked]) -> Walked:
        jvm = rw.jvm
        child, blocks = single(results)
        keys = attrs(blocks)
        projections = [jvm.seq([*jvm.lst(p), *keys]) for p in jvm.lst(node.projections())]
        new = jvm.copy(
            node,
            projections=jvm.seq(projections),
            output=jvm.seq([*jvm.lst(node.output()), *keys]),
            child=child,
        )
        return new, blocks

    def attributes(self, w: Walking, n: PlanNode) -> dict[int, Lin]:
        cols: list[set[int]] = [set() for _ in n.out_ids]
        for proj in n.d["projections"]:
            for j, e in enumerate(exprs(proj)):
                if j < len(cols):
                    cols[j] |= e.refs()
        return {a: w.lin(n.env, cols[j]) for j, a in enumerate(n.out_ids)}
