"""Spark Connect plans as the client holds them: protobuf relations and expressions.

A Connect DataFrame is a tree of ``spark.connect.Relation`` messages built on the
client; the server analyzes it only when a job or a schema is asked for.  Capture over
Connect reads and rewrites that tree (:mod:`._rewrite`).  Every relation carries a
``plan_id``; a column taken from a DataFrame (``df["x"]``, ``df.x``) names it, so a
rewrite that wraps a relation moves its ``plan_id`` to the wrapper and the user's
expressions still find their columns.

Examples
--------
>>> e = col("amount")
>>> e.unresolved_attribute.unparsed_identifier
'amount'
>>> references(fn("sum", col("a"), alias(col("b"), "c")))
([('a', None), ('b', None)], True)
>>> references(fn("count", star()))
([], True)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

__all__ = [
    "AGGREGATES", "GENERATORS", "KEY_PREFIX", "alias", "calls", "children", "col",
    "dataframe", "fn", "fresh_id", "kind", "messages", "nondeterministic", "null_long",
    "references",
    "relation", "select", "star", "where", "with_id",
]  # fmt: skip

#: prefix of the columns capture adds to a plan (record keys, a union's side)
KEY_PREFIX = "__tp_"

#: relation fields that hold child relations, in the order of the relation's inputs
_CHILD_FIELDS = ("input", "left", "right", "left_input", "right_input")

#: functions whose result changes from one run of a plan to the next
_NONDETERMINISTIC = {
    "rand", "randn", "random", "uuid", "shuffle", "monotonically_increasing_id",
    "spark_partition_id", "input_file_name", "input_file_block_start",
    "input_file_block_length", "current_timestamp", "now", "current_date", "localtimestamp",
    "curdate", "current_time", "randstr", "uniform", "try_reflect", "reflect",
}  # fmt: skip


def _pb() -> Any:
    from pyspark.sql.connect import proto

    return proto


def fresh_id() -> int:
    """A plan id no other relation of this client has."""
    from pyspark.sql.connect.plan import LogicalPlan

    return LogicalPlan._fresh_plan_id()


def relation(df: Any) -> Any:
    """The ``Relation`` message of a Connect DataFrame (a copy: rewriting it changes
    nothing of the user's)."""
    return df._plan.plan(df._session.client)


def dataframe(spark: Any, rel: Any) -> Any:
    """A Connect DataFrame of the relation ``rel``."""
    from pyspark.sql.connect.dataframe import DataFrame
    from pyspark.sql.connect.plan import LogicalPlan

    class _Rel(LogicalPlan):
        def __init__(self, message: Any) -> None:
            super().__init__(None)
            self._message = message

        def plan(self, session: Any) -> Any:
            return self._message

    return DataFrame(_Rel(rel), spark)


def kind(rel: Any) -> str:
    """The kind of a relation (``"filter"``, ``"join"``, ...)."""
    return str(rel.WhichOneof("rel_type"))


def body(rel: Any) -> Any:
    """The message of a relation's kind (``rel.filter`` for a filter)."""
    return getattr(rel, kind(rel))


def children(rel: Any) -> list[Any]:
    """The child relations of ``rel``, in input order."""
    inner = body(rel)
    names = {f.name for f, _ in inner.ListFields()}
    return [getattr(inner, name) for name in _CHILD_FIELDS if name in names]


def plan_id(rel: Any) -> int | None:
    return int(rel.common.plan_id) if rel.HasField("common") and rel.common.HasField(
        "plan_id"
    ) else None  # fmt: skip


def with_id(rel: Any, ident: int | None) -> Any:
    """``rel`` with the plan id ``ident`` (None: a fresh one)."""
    rel.common.plan_id = fresh_id() if ident is None else ident
    return rel


def wrap(kind_: str, child: Any, **fields: Any) -> Any:
    """A new relation of ``kind_`` over ``child`` that takes the child's plan id (the
    child gets a fresh one), so columns the user took from the child still resolve."""
    proto = _pb()
    ident = plan_id(child)
    child = proto.Relation().__class__.FromString(child.SerializeToString())
    with_id(child, None)
    rel = proto.Relation()
    inner = getattr(rel, kind_)
    inner.input.CopyFrom(child)
    for name, value in fields.items():
        target = getattr(inner, name)
        if isinstance(value, list):
            for v in value:
                if isinstance(v, str):
                    target.append(v)
                else:
                    target.add().CopyFrom(v)
        else:
            setattr(inner, name, value)
    return with_id(rel, ident)


# -- expressions ---------------------------------------------------------------------------


def select(child: Any, expressions: list[Any]) -> Any:
    """A projection of ``expressions`` over ``child`` with a fresh plan id of its own
    (unlike :func:`wrap`, ``child`` keeps its id, so expressions that name its plan
    still resolve)."""
    out = _pb().Relation()
    out.project.input.CopyFrom(child)
    out.project.expressions.extend(expressions)
    return with_id(out, None)


def where(child: Any, condition: Any) -> Any:
    """The records of ``child`` for which ``condition`` holds, with a fresh plan id of
    its own (``child`` keeps its id, as with :func:`select`)."""
    out = _pb().Relation()
    out.filter.input.CopyFrom(child)
    out.filter.condition.CopyFrom(condition)
    return with_id(out, None)


def col(name: str, plan: int | None = None) -> Any:
    """A column reference by (unquoted) name, of the relation ``plan`` if given."""
    e = _pb().Expression()
    e.unresolved_attribute.unparsed_identifier = f"`{name}`" if "." in name else name
    if plan is not None:
        e.unresolved_attribute.plan_id = plan
    return e


def star() -> Any:
    e = _pb().Expression()
    e.unresolved_star.SetInParent()
    return e


def alias(expr: Any, name: str) -> Any:
    e = _pb().Expression()
    e.alias.expr.CopyFrom(expr)
    e.alias.name.append(name)
    return e


def fn(name: str, *args: Any) -> Any:
    e = _pb().Expression()
    e.unresolved_function.function_name = name
    for a in args:
        e.unresolved_function.arguments.add().CopyFrom(a)
    return e


def literal(value: int | str | bool) -> Any:
    e = _pb().Expression()
    if isinstance(value, bool):
        e.literal.boolean = value
    elif isinstance(value, int):
        e.literal.long = value
    else:
        e.literal.string = value
    return e


def cast(expr: Any, type_str: str) -> Any:
    """``CAST(expr AS type_str)``."""
    e = _pb().Expression()
    e.cast.expr.CopyFrom(expr)
    e.cast.type_str = type_str
    return e


def null_long() -> Any:
    """A null of type bigint (the key of a record that is not there)."""
    e = _pb().Expression()
    e.cast.expr.literal.null.SetInParent()
    e.cast.expr.literal.null.null.SetInParent()
    e.cast.type_str = "bigint"
    return e


def sort_order(expr: Any) -> Any:
    """Ascending, nulls first (Spark's default)."""
    proto = _pb()
    s = proto.Expression.SortOrder()
    s.child.CopyFrom(expr)
    s.direction = proto.Expression.SortOrder.SORT_DIRECTION_ASCENDING
    s.null_ordering = proto.Expression.SortOrder.SORT_NULLS_FIRST
    return s


def _repeated(field: Any) -> bool:
    # protobuf 5.26+ has ``is_repeated``; ``label`` is gone from newer releases
    flag = getattr(field, "is_repeated", None)
    return bool(flag) if flag is not None else field.label == field.LABEL_REPEATED


def messages(msg: Any) -> Iterator[Any]:
    """``msg`` and every message below it (expressions inside expressions), in the
    order they are written."""
    stack = [msg]
    while stack:
        m = stack.pop()
        yield m
        below: list[Any] = []
        for field, value in m.ListFields():
            if field.message_type is None:
                continue
            if _repeated(field):
                if field.message_type.GetOptions().map_entry:
                    below.extend(v for v in value.values() if hasattr(v, "ListFields"))
                else:
                    below.extend(value)
            else:
                below.append(value)
        stack.extend(reversed(below))


def references(*exprs: Any) -> tuple[list[tuple[str, int | None]], bool]:
    """The columns ``exprs`` read (name, plan id or None), and whether that list is
    exact: a SQL string (``"amount > 50"``), a regex or a star the client cannot
    expand make it False (the expression may read any column)."""
    proto = _pb()
    found: list[tuple[str, int | None]] = []
    exact = True
    for e in exprs:
        found_exprs = [m for m in messages(e) if isinstance(m, proto.Expression)]
        # count(*) counts records: its star reads no column
        counted = {
            id(a)
            for m in found_exprs
            if m.WhichOneof("expr_type") == "unresolved_function"
            and m.unresolved_function.function_name.lower() == "count"
            for a in m.unresolved_function.arguments
            if a.WhichOneof("expr_type") == "unresolved_star"
        }
        for m in found_exprs:
            if id(m) in counted:
                continue
            which = m.WhichOneof("expr_type")
            if which == "unresolved_attribute":
                ua = m.unresolved_attribute
                name = _first_part(ua.unparsed_identifier)
                found.append((name, int(ua.plan_id) if ua.HasField("plan_id") else None))
            elif which in ("expression_string", "unresolved_regex", "unresolved_star"):
                exact = False
            elif which in ("subquery_expression", "extension"):
                exact = False
    return found, exact


def _first_part(identifier: str) -> str:
    """The column an identifier names (``a.b`` a field of ``a``; backquotes kept
    together)."""
    if identifier.startswith("`"):
        end = identifier.find("`", 1)
        while end != -1 and identifier[end + 1 : end + 2] == "`":
            end = identifier.find("`", end + 2)
        return identifier[1:end].replace("``", "`") if end != -1 else identifier
    return identifier.split(".", 1)[0]


def nondeterministic(msg: Any) -> bool:
    """Whether an expression (or a relation's expressions) calls a function whose result
    differs between runs, or a Python UDF (which may)."""
    proto = _pb()
    for m in messages(msg):
        if isinstance(m, proto.Expression):
            which = m.WhichOneof("expr_type")
            if which == "unresolved_function":
                if m.unresolved_function.function_name.lower() in _NONDETERMINISTIC:
                    return True
            elif which == "common_inline_user_defined_function":
                if not m.common_inline_user_defined_function.deterministic:
                    return True
            elif which == "expression_string":
                text = m.expression_string.expression.lower()
                if any(f"{name}(" in text for name in _NONDETERMINISTIC):
                    return True
    return False


def own_expressions(rel: Any) -> list[Any]:
    """The expressions of a relation itself (not of its children)."""
    proto = _pb()
    out: list[Any] = []
    inner = body(rel)
    for field, value in inner.ListFields():
        if field.name in _CHILD_FIELDS or field.message_type is None:
            continue
        items = value if _repeated(field) else [value]
        for item in items:
            out.extend(m for m in messages(item) if isinstance(m, proto.Expression))
    return out


def top_expressions(rel: Any) -> list[Any]:
    """The outermost expressions of a relation itself (inside its aliases and sort
    orders, not inside other expressions, not of its children)."""
    proto = _pb()
    out: list[Any] = []
    inner = body(rel)
    stack: list[Any] = []
    for field, value in inner.ListFields():
        if field.name in _CHILD_FIELDS or field.message_type is None:
            continue
        stack.extend(value if _repeated(field) else [value])
    while stack:
        m = stack.pop()
        if isinstance(m, proto.Expression):
            out.append(m)
            continue
        if isinstance(m, proto.Relation):
            continue
        for field, value in m.ListFields():
            if field.message_type is not None:
                stack.extend(value if _repeated(field) else [value])
    return out


#: functions that make several records of one (a select with one of them is an explode)
GENERATORS = {"explode", "explode_outer", "posexplode", "posexplode_outer", "inline",
               "inline_outer", "stack", "json_tuple", "variant_explode",
               "variant_explode_outer"}  # fmt: skip


#: aggregate functions: a select of one outside a window makes one record of all
AGGREGATES = {
    "sum", "count", "avg", "mean", "min", "max", "first", "last", "first_value",
    "last_value", "collect_list", "collect_set", "array_agg", "stddev", "stddev_samp",
    "stddev_pop", "std", "variance", "var_samp", "var_pop", "skewness", "kurtosis", "corr",
    "covar_samp", "covar_pop", "approx_count_distinct", "count_distinct", "count_if",
    "countdistinct", "sum_distinct", "sumdistinct", "percentile", "percentile_approx",
    "approx_percentile", "median", "mode", "any_value", "bool_and", "bool_or", "every",
    "some", "any", "max_by", "min_by", "product", "bit_and", "bit_or", "bit_xor",
    "histogram_numeric", "regr_count", "regr_avgx", "regr_avgy", "regr_slope",
    "regr_intercept", "regr_r2", "regr_sxx", "regr_sxy", "regr_syy", "listagg",
    "string_agg", "hll_sketch_agg", "hll_union_agg", "try_sum", "try_avg", "grouping",
    "grouping_id",
}  # fmt: skip


def calls(*exprs: Any) -> tuple[set[str], bool]:
    """The functions ``exprs`` call outside window expressions (lower case), and whether
    the client can read them all (a SQL string, a Python UDF, a regex or a subquery may
    call anything).

    >>> calls(fn("sum", col("x")))
    ({'sum'}, True)
    """
    proto = _pb()
    names: set[str] = set()
    readable = True
    stack = list(exprs)
    while stack:
        e = stack.pop()
        if isinstance(e, proto.Expression):
            which = e.WhichOneof("expr_type")
            if which in ("expression_string", "common_inline_user_defined_function",
                         "unresolved_regex", "subquery_expression", "extension"):  # fmt: skip
                readable = False
            if which == "window":
                continue  # an aggregate over a window keeps the records
            if which == "unresolved_function":
                names.add(e.unresolved_function.function_name.lower())
        for field, value in e.ListFields():
            if field.message_type is not None and not field.message_type.GetOptions().map_entry:
                stack.extend(value if _repeated(field) else [value])
    return names, readable
