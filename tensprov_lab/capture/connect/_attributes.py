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
>>> from tensprov_lab.capture.connect import _proto as P
>>> m = Maps([["a", "b"]], ["a", "c"], [7])
>>> m.identity()
>>> m.contribute(1, P.fn("+", P.col("a"), P.col("b")))
>>> m.contributing[0].astype(int).tolist()
[[1, 0], [1, 1]]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tensprov_lab.capture.connect import _proto as P
from tensprov_lab.capture.connect._windows import split, windows_in

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
    (their plan ids ``ids``): contributing, influencing, and whether they are exact."""
    m = Maps(in_cols, out_cols, ids)
    kind = P.kind(rel)
    inner = P.body(rel)
    n_out = len(out_cols)
    if len(in_cols) == 1 and kind in ("filter", "subquery_alias", "hint", "repartition",
                                      "repartition_by_expression", "drop", "drop_na",
                                      "fill_na", "replace", "sort", "deduplicate"):  # fmt: skip
        m.identity()
        if kind == "filter":
            m.influence(inner.condition)
        elif kind == "sort":
            m.influence(*inner.order)
        elif kind == "drop_na":
            cols = list(inner.cols) or in_cols[0]
            m.influence(*[P.col(c) for c in cols])
        elif kind == "deduplicate":
            cols = list(inner.column_names) if len(inner.column_names) else in_cols[0]
            m.influence(*[P.col(c) for c in cols])
    elif kind == "project" and len(in_cols) == 1:
        o = 0
        for e in inner.expressions:
            if e.WhichOneof("expr_type") == "unresolved_star":
                width = len(in_cols[0])
                if e.unresolved_star.HasField("unparsed_target") or o + width > n_out:
                    m.everything()
                    break
                m.positional(0, range(o, o + width))
                o += width
            elif o < n_out:
                m.make(o, e)
                o += 1
        if o != n_out:
            m.everything()
    elif kind == "with_columns" and len(in_cols) == 1:
        made = {a.name[0].lower(): a for a in inner.aliases if len(a.name) == 1}
        for o, c in enumerate(out_cols):
            if c.lower() in made:
                m.make(o, made[c.lower()].expr)
            else:
                m.identity(outs=[o])
    elif kind == "with_columns_renamed" and len(in_cols) == 1:
        renamed = {v.lower(): k for k, v in inner.rename_columns_map.items()}
        renamed.update({r.new_col_name.lower(): r.col_name for r in inner.renames})
        for o, c in enumerate(out_cols):
            was = renamed.get(c.lower(), c)
            for j, ic in enumerate(in_cols[0]):
                if ic.lower() == was.lower():
                    m.contributing[0][o, j] = True
                    break
    elif kind == "to_df" and len(in_cols) == 1 and len(in_cols[0]) == n_out:
        m.positional(0, range(n_out))
    elif kind == "join" and len(in_cols) == 2:
        _join(m, inner)
    elif kind == "join" and len(in_cols) == 1:  # a semi or anti join's right side is known
        m.everything()
    elif kind == "set_op" and all(
        P.plan_id(r) in ids for r in (inner.left_input, inner.right_input)
    ):
        # a union of a DataFrame with itself has one input for both sides
        for side in {ids.index(P.plan_id(r)) for r in (inner.left_input, inner.right_input)}:  # type: ignore[arg-type]
            if inner.by_name:
                m.identity(side)
            elif len(in_cols[side]) == n_out:
                m.positional(side, range(n_out))
            else:
                m.everything()
    elif kind == "aggregate" and len(in_cols) == 1 and inner.HasField("pivot"):
        # the grouping columns, then a column per pivot value and aggregate: its value
        # from the aggregate's arguments, the pivot column deciding which records
        groups = list(inner.grouping_expressions)
        aggs = list(inner.aggregate_expressions)
        spread = n_out - len(groups)
        if not aggs or spread < 0 or spread % len(aggs):
            m.everything()
        else:
            for o, e in enumerate(groups):
                m.contribute(o, e)
            for o in range(len(groups), n_out):
                m.contribute(o, aggs[(o - len(groups)) % len(aggs)])
            m.influence(*groups, inner.pivot.col)
    elif kind == "aggregate" and len(in_cols) == 1:
        groups = list(inner.grouping_expressions)
        aggs = list(inner.aggregate_expressions)
        if len(groups) + len(aggs) != n_out:
            m.everything()
        else:
            for o, e in enumerate(groups + aggs):
                m.contribute(o, e)
            m.influence(*groups)
    else:
        m.everything()
    return m.contributing, m.influencing, m.exact


def _join(m: Maps, join: Any) -> None:
    from pyspark.sql.connect import proto

    left, right = m.in_cols
    using = list(join.using_columns)
    kinds = proto.Join.JoinType
    semi = join.join_type in (kinds.JOIN_TYPE_LEFT_SEMI, kinds.JOIN_TYPE_LEFT_ANTI)
    low = {u.lower() for u in using}
    # a USING join puts the using columns first, then each side's others (a semi or
    # anti join: the left's only)
    layout: list[tuple[int, int] | None] = [
        (0, j) for j, c in enumerate(left) if c.lower() not in low
    ]
    if not semi:
        layout += [(1, j) for j, c in enumerate(right) if c.lower() not in low]
    head = []
    for u in using:
        found = [(s, j) for s, cols in enumerate(m.in_cols[:1] if semi else m.in_cols)
                 for j, c in enumerate(cols) if c.lower() == u.lower()]  # fmt: skip
        head.append(found)
    if head:
        if len(head) + len(layout) != len(m.out_cols):
            m.everything()
            return
        # a using column is the left key (inner, left), the right one (right outer) or
        # the left one where there is one, else the right (full outer): both
        takes = {kinds.JOIN_TYPE_RIGHT_OUTER: {1}, kinds.JOIN_TYPE_FULL_OUTER: {0, 1}}
        sides = takes.get(join.join_type, {0})
        for o, found in enumerate(head):
            for s, j in found:
                if s in sides:
                    m.contributing[s][o, j] = True
        blank: list[tuple[int, int] | None] = [None] * len(head)
        layout = blank + layout
    if len(layout) != len(m.out_cols):
        m.everything()
        return
    for o, at in enumerate(layout):
        if at is not None:
            m.contributing[at[0]][o, at[1]] = True
    if join.HasField("join_condition"):
        m.influence(join.join_condition)
    if using:
        m.influence(*[P.col(u) for u in using])


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
