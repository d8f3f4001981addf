"""``explode`` / ``posexplode`` (and ``explode_outer``, ``inline`` where traced).

Record rule: one output record per element, numbered by (input row, position); the
element's position travels as a key column (``explode`` is rewritten into
``posexplode`` with the position under a name of ours), so exploded records are unique
and stable whatever the partitioning.  Attribute rule: the array's columns contribute to
the generated columns and, when the array is stored (not built from columns), decide
how many records exist.

Examples
--------
>>> from tensprov_lab.capture.rules import rule_for
>>> rule_for("Generate").keeps_records
False
"""

from __future__ import annotations

from typing import Any

from tensprov_lab.capture.plan._exprs import Lin, exprs, ids
from tensprov_lab.capture.plan._keyed import Block, Unsupported, key_name
from tensprov_lab.capture.rules._base import PlanNode, Rewriting, Rule, Walked, Walking, single

__all__ = ["Generate"]


class Generate(Rule):
    nodes = ("Generate",)
    drops_vanish = True

    def annotate(self, rw: Rewriting, node: Any, kids: list[Any], results: list[Walked]) -> Walked:
        child, blocks = single(results)
        jvm = rw.jvm
        gen = node.generator()
        kind = jvm.cls(gen)
        outputs = jvm.lst(node.generatorOutput())
        if kind == "PosExplode":
            # the user's position column, under a name of ours
            new = jvm.copy(node, child=child)
            alias = jvm.alias(outputs[0], key_name("p"))
            new = jvm.project([*jvm.output(new), alias], new)
            pos = alias.toAttribute()
        elif kind == "Explode":
            # the element's position makes exploded records unique and stable, unlike
            # any id computed after a shuffle
            expr = jvm._expr
            types = jvm.jvm.org.apache.spark.sql.types
            pos = expr.AttributeReference(
                key_name("p"),
                getattr(getattr(types, "IntegerType$"), "MODULE$"),
                True,
                types.Metadata.empty(),
                expr.NamedExpression.newExprId(),
                jvm.seq([]),
            )
            new = jvm.copy(
                node,
                generator=expr.PosExplode(gen.child()),
                generatorOutput=jvm.seq([pos, *outputs]),
                child=child,
            )
        else:
            raise Unsupported(f"generator {kind} is not traced record by record")
        return new, [*blocks, Block("genpos", -1, [pos], 1)]

    def attributes(self, w: Walking, n: PlanNode) -> dict[int, Lin]:
        gen = exprs(n.d["generator"])
        lin = w.lin(n.env, gen[0].refs()) if gen else Lin()
        # a stored array decides how many records exist (none when it is empty); an
        # array built from columns, explode(array(a, b)), always gives its size
        if gen and not all(k.cls in ("CreateArray", "CreateMap") for k in gen[0].kids):
            w.row |= lin.all()
        return {i: lin for i in ids(n.d["generatorOutput"])}
