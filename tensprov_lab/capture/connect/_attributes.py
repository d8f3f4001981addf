"""Attribute maps of an operation over Spark Connect, from the client's plan.

The client holds expressions unresolved: a column is referred to by name (and, when
taken from a DataFrame, by that DataFrame's plan id).  Each relation kind says which
output column its expressions make; the columns they name contribute to it (or, for
conditions, keys and sort orders, influence every output column).  An expression the
client cannot read (a SQL string such as ``"amount > 50"``, a regex, ``t.*``) may name
any column: its map marks every input column and ``exact`` is False (a superset, as
the classic capture does for a plan step it does not understand).

Examples
--------
>>> from tensprov_lab.capture.plan import _proto as P
>>> m = Maps([["a", "b"]], ["a", "c"], [7])
>>> m.identity()
>>> m.contribute(1, P.fn("+", P.col("a"), P.col("b")))
>>> m.contributing[0].astype(int).tolist()
[[1, 0], [1, 1]]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tensprov_lab.capture.connect._windows import split, windows_in
from tensprov_lab.capture.plan import _proto as P
from tensprov_lab.capture.rules import connect_rule_for

__all__ = ["Maps", "attribute_maps", "decomposition"]


class Maps:
    """Contributing and influencing maps (output × input columns) being filled in."""

    def __init__(self, in_cols: list[list[str]], out_cols: list[str], ids: list[int]) -> None:
        self.in_cols, self.out_cols, self.ids = in_cols, out_cols, ids
        self.contributing = [np.zeros((len(out_cols), len(c)), dtype=bool) for c in in_cols]
        self.influencing = [np.zeros((len(out_cols), len(c)), dtype=bool) for c in in_cols]
        self.exact = True

    def _resolve(self, name: str, plan: int | None) -> list[tuple[int, int]]:
        """(input, column) pairs a reference may mean: by plan id when it has one of an
        input, else by name (case-insensitive, as Spark resolves by default)."""
        sides = [self.ids.index(plan)] if plan in self.ids else range(len(self.in_cols))
        found = [
            (s, j)
            for s in sides
            for j, c in enumerate(self.in_cols[s])
            if c.lower() == name.lower()
        ]  # fmt: skip
        return found

    def _mark(self, target: list[np.ndarray], rows: Any, exprs: list[Any]) -> None:
        refs, exact = P.references(*exprs)
        if not exact:
            self.exact = False
            for t in target:
                t[rows, :] = True
        for name, plan in refs:
            for s, j in self._resolve(name, plan):
                target[s][rows, j] = True

    def contribute(self, out: int, *exprs: Any) -> None:
        self._mark(self.contributing, out, list(exprs))

    def influence(self, *exprs: Any) -> None:
        self._mark(self.influencing, slice(None), list(exprs))

    def make(self, out: int, expr: Any) -> None:
        """Output column ``out`` made by ``expr``: a window function's arguments
        contribute, its partition and order (and a ranking function's arguments)
        influence that column alone, the rest of the expression contributes."""
        if not windows_in(expr):
            self.contribute(out, expr)
            return
        rest, args, specs = split(expr)
        self.contribute(out, rest, *args)
        self._mark(self.influencing, out, specs)

    def identity(self, side: int = 0, outs: list[int] | None = None) -> None:
        """Output columns that are the input column of the same name."""
        for o in range(len(self.out_cols)) if outs is None else outs:
            for j, c in enumerate(self.in_cols[side]):
                if c.lower() == self.out_cols[o].lower():
                    self.contributing[side][o, j] = True
                    break

    def positional(self, side: int, outs: range, start: int = 0) -> None:
        for k, o in enumerate(outs):
            self.contributing[side][o, start + k] = True

    def everything(self) -> None:
        self.exact = False
        for c in self.contributing:
            c[:] = True


def attribute_maps(
    rel: Any, in_cols: list[list[str]], out_cols: list[str], ids: list[int]
) -> tuple[list[np.ndarray], list[np.ndarray], bool]:
    """The attribute maps of the relation ``rel`` over inputs with columns ``in_cols``
    (their plan ids ``ids``): contributing, influencing, and whether they are exact.
    Its kind's rule fills them in (:meth:`Rule.maps
    <tensprov_lab.capture.rules.Rule.maps>`); a kind without one maps every input
    column to every output column, not exact."""
    m = Maps(in_cols, out_cols, ids)
    rule = connect_rule_for(P.kind(rel))
    if rule is None:
        m.everything()
    else:
        rule.maps(m, rel)
    return m.contributing, m.influencing, m.exact


#: aggregate functions a what-if updates from the changed members' values alone
#: (tensprov_lab.replay._incremental), by their Connect names
_DECOMPOSABLE = {"sum": "sum", "count": "count", "avg": "avg", "mean": "avg", "min": "min",
                 "max": "max"}  # fmt: skip


def decomposition(
    rel: Any, in_cols: list[str], out_cols: list[str]
) -> list[tuple[str, int | None] | None] | None:
    """A group-by's output columns as what-if updates them (``Operation.decomposition``):
    ``("key", i)`` for a grouping column, ``(kind, i)`` for a plain ``sum``, ``count``,
    ``avg``, ``min`` or ``max`` of input column ``i``, ``("count", None)`` for
    ``count(*)``, None for anything else; None when ``rel`` is no such aggregate.

    >>> from pyspark.sql.connect import proto
    >>> agg = proto.Relation()
    >>> agg.aggregate.group_type = proto.Aggregate.GroupType.GROUP_TYPE_GROUPBY
    >>> agg.aggregate.grouping_expressions.add().CopyFrom(P.col("g"))
    >>> agg.aggregate.aggregate_expressions.add().CopyFrom(P.alias(P.fn("sum", P.col("x")), "s"))
    >>> agg.aggregate.aggregate_expressions.add().CopyFrom(P.fn("count", P.star()))
    >>> decomposition(agg, ["x", "g"], ["g", "s", "count(1)"])
    [('key', 1), ('sum', 0), ('count', None)]
    """
    from pyspark.sql.connect import proto

    if P.kind(rel) != "aggregate":
        return None
    agg = rel.aggregate
    if agg.group_type != proto.Aggregate.GroupType.GROUP_TYPE_GROUPBY:
        return None
    if not len(agg.grouping_expressions):
        return None  # a global aggregate keeps its record when every member goes
    low = [c.lower() for c in in_cols]

    def column(e: Any) -> int | None:
        if e.WhichOneof("expr_type") != "unresolved_attribute":
            return None
        name = e.unresolved_attribute.unparsed_identifier.lower()
        return low.index(name) if low.count(name) == 1 else None

    out: list[tuple[str, int | None] | None] = []
    for g in agg.grouping_expressions:
        i = column(g)
        out.append(None if i is None else ("key", i))
    for e in agg.aggregate_expressions:
        fn = e.alias.expr if e.WhichOneof("expr_type") == "alias" else e
        if fn.WhichOneof("expr_type") != "unresolved_function":
            out.append(None)
            continue
        f = fn.unresolved_function
        kind = _DECOMPOSABLE.get(f.function_name.lower())
        if kind is None or f.is_distinct or len(f.arguments) != 1:
            out.append(None)
            continue
        (arg,) = f.arguments
        which = arg.WhichOneof("expr_type")
        star = which == "unresolved_star" or (
            which == "unresolved_attribute" and arg.unresolved_attribute.unparsed_identifier == "*"
        )
        if kind == "count" and (
            star or (which == "literal" and arg.literal.WhichOneof("literal_type") != "null")
        ):
            out.append(("count", None))
            continue
        i = column(arg)
        out.append(None if i is None else (kind, i))
    return out if len(out) == len(out_cols) else None
