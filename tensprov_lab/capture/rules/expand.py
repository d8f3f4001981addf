"""``Expand``: the node under ``rollup``, ``cube`` and ``unpivot`` / ``melt``.

Record rule: each input record is repeated once per projection; the keys are appended
to every projection, so each copy carries its input record's keys (an aggregate above
numbers the grouping sets, see :mod:`.aggregate`).  An unpivot's copies also carry their
projection's number, so its output records are numbered by (input record, position of
the unpivoted column), the order Spark emits them in (as an explode's).  Attribute
rule: an output column's values come from what any projection puts in it.  Over Spark
Connect, a rollup or cube is an ``aggregate`` relation (:mod:`.aggregate`); ``unpivot``
/ ``melt`` is not traced there yet.

Examples
--------
>>> from tensprov_lab.capture.rules import rule_for
>>> rule_for("Expand").nodes
('Expand',)
"""

from __future__ import annotations

from typing import Any

from tensprov_lab.capture.plan._exprs import Lin, exprs
from tensprov_lab.capture.plan._keyed import Block, key_name
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
        output = jvm.lst(node.output())
        projections = [[*jvm.lst(p), *keys] for p in jvm.lst(node.projections())]
        if any(str(a.name()) == "spark_grouping_id" for a in output):
            pos: list[Any] = []  # (a rollup's or cube's grouping sets: the aggregate's)
        else:  # an unpivot: which column a copy holds tells the copies apart
            e = jvm._expr
            types = jvm.jvm.org.apache.spark.sql.types
            int_ = getattr(getattr(types, "IntegerType$"), "MODULE$")
            pos = [
                e.AttributeReference(
                    key_name("p"), int_, False, types.Metadata.empty(),
                    e.NamedExpression.newExprId(), jvm.seq([]),
                )
            ]  # fmt: skip
            projections = [[*p, e.Literal.create(i, int_)] for i, p in enumerate(projections)]
        new = jvm.copy(
            node,
            projections=jvm.seq([jvm.seq(p) for p in projections]),
            output=jvm.seq([*output, *keys, *pos]),
            child=child,
        )
        return new, [*blocks, *([Block("genpos", -1, pos, 1)] if pos else [])]

    def attributes(self, w: Walking, n: PlanNode) -> dict[int, Lin]:
        if n.d.get("projections") is None:
            # Spark writes no JSON for some projections (an unpivot's casts): the new
            # columns are then a superset, flagged not exact
            return {}
        cols: list[set[int]] = [set() for _ in n.out_ids]
        for proj in n.d["projections"]:
            for j, e in enumerate(exprs(proj)):
                if j < len(cols):
                    cols[j] |= e.refs()
        return {a: w.lin(n.env, cols[j]) for j, a in enumerate(n.out_ids)}
