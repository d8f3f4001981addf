"""``explode`` / ``posexplode`` (and ``explode_outer``, ``inline`` where traced).

Record rule: one output record per element, numbered by (input row, position); the
element's position travels as a key column (``explode`` is rewritten into
``posexplode`` with the position under a name of ours), so exploded records are unique
and stable whatever the partitioning.  Attribute rule: the array's columns contribute to
the generated columns and, when the array is stored (not built from columns), decide
how many records exist.  Over Spark Connect an explode is a function in a ``project``
relation (:mod:`.project`): :func:`position` turns it into ``posexplode`` the same way,
and :func:`their_position` keys the records of the user's own ``posexplode`` by its
position.

Examples
--------
>>> from tensprov_lab.capture.rules import rule_for
>>> rule_for("Generate").keeps_records
False
"""

from __future__ import annotations

from typing import Any

from tensprov_lab.capture.plan import _proto as P
from tensprov_lab.capture.plan._connect import Keyed
from tensprov_lab.capture.plan._exprs import Lin, exprs, ids
from tensprov_lab.capture.plan._keyed import Block, Unsupported, key_name
from tensprov_lab.capture.rules._base import Keying, Rule, single
from tensprov_lab.capture.rules._classic import PlanNode, Rewriting, Walked, Walking

__all__ = ["Generate", "position", "their_position"]

#: explodes of one column, and the same with each record's position
_EXPLODES = {"explode": "posexplode", "explode_outer": "posexplode_outer"}
#: generators that give each record's position in its input's array
_POSITIONS = {"posexplode", "posexplode_outer"}


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


# -- over Spark Connect ------------------------------------------------------------------
def _call(e: Any) -> Any:
    return e.alias.expr if e.WhichOneof("expr_type") == "alias" else e


def their_position(a: Keying, rel: Any, kid: Keyed, exprs: Any) -> str | None:
    """The column of the select ``rel``'s one ``posexplode`` that holds each record's
    position (None: no such generator, or its column is not one of a name)."""
    found = [
        e for e in exprs
        if _call(e).WhichOneof("expr_type") == "unresolved_function"
        and _call(e).unresolved_function.function_name.lower() in _POSITIONS
    ]  # fmt: skip
    if len(found) != 1:
        return None
    (e,) = found
    if e.WhichOneof("expr_type") == "alias":
        if len(e.alias.name) != 2:
            return None
        name = e.alias.name[0]
    else:
        name = "pos"  # Spark's name for it
    out = [c.lower() for c in a.columns(rel)]
    if out.count(name.lower()) != 1 or name.lower() in [c.lower() for c in a.columns(kid.rel)]:
        return None
    return name


def position(a: Keying, rel: Any, kid: Keyed, exprs: Any) -> str | None:
    """Turn the select ``rel``'s ``explode`` of an array (in its rewritten ``exprs``)
    into ``posexplode`` (the same records and columns, plus their position, a key of its
    own), so that records generated from one input record are told apart; the
    position's column name (None: no such explode)."""
    found = [
        (i, e) for i, e in enumerate(exprs)
        if _call(e).WhichOneof("expr_type") == "unresolved_function"
        and _call(e).unresolved_function.function_name.lower() in _EXPLODES
    ]  # fmt: skip
    if len(found) != 1:
        return None
    at, e = found[0]
    if e.WhichOneof("expr_type") == "alias":
        if len(e.alias.name) != 1:
            return None
        fn, name = e.alias.expr, e.alias.name[0]
    else:
        # unnamed: Spark calls an array's elements "col" (a map gives "key", "value":
        # left as it is)
        out = [c.lower() for c in a.columns(rel)]
        if out.count("col") != 1 or "col" in [c.lower() for c in a.columns(kid.rel)]:
            return None
        fn, name = e, "col"
    key = f"{P.KEY_PREFIX}p{P.plan_id(rel)}"
    made = P.fn(_EXPLODES[fn.unresolved_function.function_name.lower()],
                *fn.unresolved_function.arguments)  # fmt: skip
    named = P.alias(made, key)
    named.alias.name.append(name)
    exprs[at].CopyFrom(named)
    return key
