"""The relations of one operation of a Connect plan, and what they say: its relation
kinds, its expressions, whether it may change its input's records, its category, where
a source comes from (shared by the Connect tracker and its rules)."""

from __future__ import annotations

from typing import Any

from tensprov_lab.capture.plan import _proto as P
from tensprov_lab.capture.plan._connect import Unsupported
from tensprov_lab.capture.rules import column_category
from tensprov_lab.capture.spark._versions import to_arrow

__all__ = [
    "SAME_RECORDS",
    "category_of",
    "check_limit",
    "chain",
    "drops_vanish",
    "generates",
    "origin",
    "own_expressions",
    "relations",
]


def relations(rel: Any, inputs: set[int]) -> list[Any]:
    """The relations of one operation: from ``rel`` down to its inputs (excluded)."""
    found: list[Any] = []
    stack = [rel]
    while stack:
        r = stack.pop()
        if P.plan_id(r) in inputs:
            continue
        found.append(r)
        stack.extend(P.children(r))
    return found


def chain(rel: Any, inputs: set[int]) -> set[str]:
    """The kinds of the relations of one operation."""
    return {P.kind(r) for r in relations(rel, inputs)}


def own_expressions(rel: Any, inputs: set[int]) -> list[Any]:
    """Every expression of one operation's relations."""
    return [e for r in relations(rel, inputs) for e in P.own_expressions(r)]


#: relation kinds that keep their input's records one for one, in order
SAME_RECORDS = {"project", "with_columns", "with_columns_renamed", "drop", "to_df",
                 "subquery_alias", "hint", "repartition", "repartition_by_expression",
                 "fill_na", "replace"}  # fmt: skip


#: relation kinds through which dropping input records only drops the records made
#: from them (what-if then needs no replay of the rest: the classic rules'
#: ``drops_vanish``); a join only when inner, a union only of all records
_DROPS_VANISH = SAME_RECORDS | {"filter", "drop_na", "sort", "join", "set_op"}


def drops_vanish(rel: Any, inputs: set[int]) -> bool:
    """Whether dropping input records of the operation ``rel`` only drops the records
    made from them: no grouping, limit, sample, outer or anti join, set difference or
    window function, and expressions the client reads (a SQL string elsewhere than in
    a condition may hold a window).

    >>> from pyspark.sql.connect import proto
    >>> rel = proto.Relation()
    >>> rel.filter.input.CopyFrom(P.with_id(proto.Relation(range=proto.Range(end=3)), 7))
    >>> rel.filter.condition.CopyFrom(P.col("x"))
    >>> top = proto.Relation()
    >>> top.limit.input.CopyFrom(rel)
    >>> drops_vanish(rel, {7}), drops_vanish(top, {7})
    (True, False)
    """
    from pyspark.sql.connect import proto

    for r in relations(rel, inputs):
        kind = P.kind(r)
        if kind not in _DROPS_VANISH:
            return False
        if kind == "join" and r.join.join_type not in (
            proto.Join.JoinType.JOIN_TYPE_INNER,
            proto.Join.JoinType.JOIN_TYPE_CROSS,
        ):
            return False
        if kind == "set_op" and not (
            r.set_op.set_op_type == proto.SetOperation.SetOpType.SET_OP_TYPE_UNION
            and r.set_op.is_all
        ):
            return False
        if kind in ("filter", "drop_na"):
            continue  # (a condition holds no window or aggregate function: Spark refuses)
        for e in P.own_expressions(r):
            if e.WhichOneof("expr_type") == "window":
                return False
        names, readable = P.calls(*P.top_expressions(r))
        if not readable or names & P.AGGREGATES:
            return False
    return True


def generates(rel: Any, p: Any) -> bool:
    """Whether the operation may not keep its input's records one for one: it calls a
    generator (an explode), an aggregate function outside a window, a Python UDF, or
    holds what the client cannot read (a SQL string may do any of these)."""
    inputs = {n.ident for n in p.inputs}
    names, readable = P.calls(*[e for r in relations(rel, inputs) for e in P.top_expressions(r)])
    return not readable or bool(names & (P.GENERATORS | P.AGGREGATES))


def origin(rel: Any) -> str:
    leaf = rel
    while P.children(leaf):
        leaf = P.children(leaf)[0]
    kind = P.kind(leaf)
    if kind == "read":
        read = leaf.read
        if read.HasField("data_source"):
            paths = ", ".join(read.data_source.paths)
            return f"{read.data_source.format or 'file'} {paths}".strip()
        return f"table {read.named_table.unparsed_identifier}"
    return kind.replace("_", " ")


def category_of(kinds: set[str], rel: Any, n_in: int, n_out: int, in_cols: list[str],
              out_cols: list[str]) -> str:  # fmt: skip
    """The operation's category (the paper's seven, plus sort, explode), as the classic
    capture names it."""
    if "set_op" in kinds:
        return "append"
    if "join" in kinds:
        return "join"
    if P.kind(rel) == "sort" and rel.sort.is_global:
        return "sort"
    if kinds & {"filter", "drop_na", "limit", "offset", "sample"}:
        return "horizontal_reduction"
    if n_out != n_in:
        return "explode"
    if kinds <= {"subquery_alias", "hint", "repartition", "repartition_by_expression", "sort",
                 "with_watermark"}:  # fmt: skip
        return "trivial"
    return column_category(len(in_cols), in_cols, out_cols)


def check_limit(spark: Any, rel: Any, annotator: Any) -> None:
    """Refuse a limit of sorted records when a tie in the sort straddles it: Spark
    then keeps whichever of the tied records it meets first, so the records it keeps
    could be others than the ones the rewrite (ties in input order) keeps.

    Raises
    ------
    Unsupported
        For such a tie, or a sort value Arrow does not compare as Spark orders
        (NaN).
    """
    k = int(rel.limit.limit)
    sort = rel.limit.input
    kid = annotator.annotate(sort)
    top = P.wrap("limit", kid.rel, limit=k + 1)
    P.with_id(top, None)
    names = [f"{P.KEY_PREFIX}sv{i}" for i in range(len(sort.sort.order))]
    read = P.wrap("project", top, expressions=[
        P.alias(o.child, n) for o, n in zip(sort.sort.order, names)
    ])  # fmt: skip
    P.with_id(read, None)
    rows = to_arrow(P.dataframe(spark, read)).to_pylist()
    if len(rows) <= k or k == 0:
        return
    last, after = rows[k - 1], rows[k]

    def same(a: Any, b: Any) -> bool:
        nan = isinstance(a, float) and isinstance(b, float) and a != a and b != b
        return bool(a == b or nan)

    if all(same(last[n], after[n]) for n in names):
        raise Unsupported(
            "a limit that cuts through records tied in the sort order: which of them "
            "Spark keeps cannot be traced exactly (sort by more columns to break ties)"
        )
