"""Capture's large reads over Spark Connect, in large Arrow batches.

Over gRPC every Arrow batch is a message of its own: a 5M-record source read takes 500
in Spark's default batches of 10,000 records, 5 in batches of a million (1.27 s -> 1.13 s:
see :mod:`tensprov_lab.capture.spark._batches`, which also says why a plan that runs Python
code keeps the session's batches).  The client tells that from the plan's messages when
it can (:func:`python_code`); a plan it cannot read whole (a table by name, a SQL query,
a function it does not know) is asked of the server, whose physical plan says (an
explain: 0.15-0.2 s for a source's first read, so not asked of every plan).  A source's
keys are read in pieces of scan positions (:func:`read_pieces`, see
:mod:`tensprov_lab.capture.plan._pieces`).
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from tensprov_lab.capture.plan import _proto as P
from tensprov_lab.capture.plan._keys import POSITION_MASK
from tensprov_lab.capture.plan._pieces import positions_per_piece, read_in_pieces, read_whole
from tensprov_lab.capture.spark._batches import large_batches
from tensprov_lab.capture.spark._versions import to_arrow

__all__ = ["python_code", "read_all", "read_arrow", "read_pieces", "runs_python"]

#: relations whose own work is Spark's (their expressions and inputs are looked at too)
_SPARK_RELATIONS = {
    "read", "project", "filter", "join", "set_op", "sort", "limit", "aggregate",
    "local_relation", "sample", "offset", "deduplicate", "range", "subquery_alias",
    "repartition", "to_df", "with_columns_renamed", "drop", "tail", "with_columns", "hint",
    "unpivot", "to_schema", "repartition_by_expression", "collect_metrics",
    "cached_local_relation", "chunked_cached_local_relation", "as_of_join", "fill_na",
    "drop_na", "replace", "sample_by", "with_relations",
}  # fmt: skip
#: relations that run Python code (mapInPandas, applyInPandas, Python UDTFs and data
#: sources, ...)
_PYTHON_RELATIONS = {
    "map_partitions", "group_map", "co_group_map", "apply_in_pandas_with_state",
    "common_inline_user_defined_table_function", "common_inline_user_defined_data_source",
}  # fmt: skip
#: expressions whose own work is Spark's
_SPARK_EXPRESSIONS = {
    "literal", "unresolved_attribute", "unresolved_function", "unresolved_star", "alias",
    "cast", "unresolved_regex", "sort_order", "lambda_function", "window",
    "unresolved_extract_value", "update_fields", "unresolved_named_lambda_variable",
    "named_argument_expression", "subquery_expression", "common_inline_user_defined_function",
}  # fmt: skip
#: file formats Spark reads itself (a Python data source has a name of its own)
_SPARK_FORMATS = {"parquet", "csv", "json", "orc", "text", "avro", "binaryfile", "xml", ""}
#: what the client's Column operators call (pyspark.sql.connect.column)
_OPERATORS = {
    "==", "!=", "<", "<=", ">", ">=", "<=>", "+", "-", "*", "/", "%", "^", "&", "|", "~",
    "!", "and", "or", "not", "negative", "power", "contains", "startswith", "endswith",
    "like", "ilike", "rlike", "isnan", "isnull", "isnotnull", "in", "substr",
}  # fmt: skip

#: physical plan nodes that run Python code: ArrowEvalPython, BatchEvalPython(UDTF),
#: MapInPandas, (Python)MapInArrow, FlatMap(Co)GroupsIn{Pandas,Arrow}, AggregateInPandas,
#: WindowInPandas / ArrowWindowPython, Python data sources
_PYTHON_NODES = ("Python", "Pandas", "InArrow")


def runs_python(df: Any) -> bool:
    """Whether ``df``'s physical plan runs Python code (True when it cannot be told).

    A word of a file path may say so too: then the read only keeps the session's
    batches, which is never wrong.
    """
    try:
        text = df._explain_string(mode="simple")
    except Exception:  # noqa: BLE001 - another Spark build, a plan Spark refuses
        return True
    return any(marker in text for marker in _PYTHON_NODES)


#: a call in a SQL string: a name (quoted or not) and an opening parenthesis
_SQL_CALL = re.compile(r"(`[^`]*`|[A-Za-z_][A-Za-z0-9_.]*)\s*\(")
_SQL_QUERY = re.compile(r"\bselect\b", re.IGNORECASE)
#: keywords written like calls in a SQL expression
_SQL_KEYWORDS = {"in", "cast", "try_cast", "and", "or", "not"}


def _spark_sql(text: str, builtin: frozenset[str]) -> bool:
    """Whether SQL expression ``text`` calls only Spark's functions (a subquery, or any
    other name before a parenthesis, even inside a string literal, says no)."""
    if _SQL_QUERY.search(text):
        return False
    return all(
        name.strip("`").lower() in builtin or name.lower() in _SQL_KEYWORDS
        for name in _SQL_CALL.findall(text)
    )


@functools.cache
def _builtin_names() -> frozenset[str]:
    """Functions the client calls by a name of Spark's own (pyspark's function names;
    one it calls otherwise is asked of the server)."""
    from pyspark.sql import functions as F

    return frozenset(n.lower() for n in dir(F) if not n.startswith("_")) | _OPERATORS


def python_code(rel: Any) -> bool | None:
    """Whether relation ``rel`` runs Python code: True (a Python UDF, mapInPandas, ...),
    False (every relation, expression and function is Spark's), None (the client cannot
    tell: a table by name, a SQL query, a function of another name, also in a SQL
    expression string).

    A Python UDF registered under the name of one of Spark's functions would be taken for
    Spark's; a read in other batches then changes its results only if they depend on
    how records are batched, which Spark leaves open anyway.

    >>> from pyspark.sql.connect import proto
    >>> ids = proto.Relation(range=proto.Range(end=10))
    >>> python_code(P.select(ids, [P.fn("+", P.col("id"), P.literal(1))]))
    False
    >>> python_code(P.select(ids, [P.fn("my_udf", P.col("id"))])) is None
    True
    >>> sql = proto.Expression(expression_string=proto.Expression.ExpressionString(
    ...     expression="abs(id) > 2 AND id IN (1, 2)"))
    >>> python_code(P.select(ids, [sql]))
    False
    >>> sql.expression_string.expression = "my_udf(id) > 2"
    >>> python_code(P.select(ids, [sql])) is None
    True
    """
    from pyspark.sql.connect import proto

    builtin = _builtin_names()
    unknown = False
    for m in P.messages(rel):
        if isinstance(m, proto.Relation):
            rel_kind = m.WhichOneof("rel_type")
            if rel_kind in _PYTHON_RELATIONS:
                return True
            unknown |= rel_kind not in _SPARK_RELATIONS
        elif isinstance(m, proto.Expression):
            expr_kind = m.WhichOneof("expr_type")
            if expr_kind == "common_inline_user_defined_function":
                if m.common_inline_user_defined_function.WhichOneof("function") == "python_udf":
                    return True
            elif expr_kind == "unresolved_function":
                unknown |= m.unresolved_function.function_name.lower() not in builtin
            elif expr_kind == "expression_string":
                unknown |= not _spark_sql(m.expression_string.expression, builtin)
            else:
                unknown |= expr_kind not in _SPARK_EXPRESSIONS
        elif isinstance(m, proto.Read):
            if m.WhichOneof("read_type") != "data_source":
                unknown = True
            else:
                unknown |= m.data_source.format.lower() not in _SPARK_FORMATS
    return None if unknown else False


def read_arrow(spark: Any, rel: Any) -> Any:
    """The records of relation ``rel`` as an Arrow table, in batches of a million
    records unless its plan runs Python code.

    Examples
    --------
    >>> table = read_arrow(spark, P.relation(df))  # doctest: +SKIP
    """
    df = P.dataframe(spark, rel)
    python = python_code(rel)
    if python or (python is None and runs_python(df)):
        return to_arrow(df)
    with large_batches(spark):
        return to_arrow(df)


def _whole(spark: Any, rel: Any) -> Any:
    return to_arrow(P.dataframe(spark, rel))


def read_all(spark: Any, rel: Any, batches: bool = True) -> Any:
    """The records of relation ``rel`` as an Arrow table: :func:`read_arrow` (in the
    session's Arrow batches unless ``batches``), or when the server refuses that many
    records at once (``spark.driver.maxResultSize``), in pieces of scan positions of
    the result, cached for the purpose (so it is computed once more, not per piece).

    Examples
    --------
    >>> table = read_all(spark, P.relation(df))  # doctest: +SKIP
    """
    first = _large if batches else _whole
    return read_whole(P.dataframe(spark, rel), to_arrow, spark, first=lambda _: first(spark, rel))


#: :func:`read_arrow` as defined here, for operations' reads (the tests that count the
#: sources' reads replace the module's ``read_arrow``)
_large = read_arrow


def read_pieces(
    spark: Any,
    rel: Any,
    key: str,
    select: Callable[[Any], Any],
    row_bytes: int,
    partition: str | None = None,
    stop: threading.Event | None = None,
) -> Any:
    """The records of ``select(rel)`` as an Arrow table, in scan order, read in ranges
    of scan positions within every partition (:func:`~._pieces.read_in_pieces`, of
    :func:`~._pieces.positions_per_piece` for records of ``row_bytes``).  ``rel``: a
    relation keyed by scan position (``monotonically_increasing_id``) in its column
    ``key``; ``partition``: the column of the result that holds each record's partition
    (None: the result holds ``key``); ``stop``: once set, no more pieces are asked for.

    Examples
    --------
    >>> read_pieces(spark, keyed, "__tp_s", lambda r: r, 16)  # doctest: +SKIP
    """
    within = P.fn("&", P.col(key), P.literal(POSITION_MASK))

    def read(lo: int, hi: int) -> Any:
        cond = P.fn("<", within, P.literal(hi))
        if lo:
            cond = P.fn("and", P.fn(">=", within, P.literal(lo)), cond)
        return read_arrow(spark, select(P.where(rel, cond)))

    def partitions(table: Any) -> np.ndarray:
        if partition is None:
            return np.asarray(table.column(key).to_numpy(), dtype=np.int64) >> 33
        return np.asarray(table.column(partition).to_numpy())

    return read_in_pieces(read, partitions, positions_per_piece(spark, row_bytes), stop)
