"""The client's evaluation of Connect plans (tensprov_lab.replay._client_eval), without
a JVM: Spark's semantics on small tables (the comparison with the server itself is
tests/test_client_replay.py)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from tensprov_lab.capture.plan import _proto as P
from tensprov_lab.replay._client_eval import Unsupported, evaluate

proto = pytest.importorskip("pyspark.sql.connect.proto")


def _source(key: str) -> Any:
    """A relation standing for a source keyed as a replay's frontier."""
    rel = proto.Relation()
    rel.project.expressions.extend([P.star(), P.alias(P.fn("monotonically_increasing_id"), key)])
    return rel


def _select(child: Any, *exprs: Any) -> Any:
    rel = proto.Relation()
    rel.project.input.CopyFrom(child)
    rel.project.expressions.extend(exprs)
    return rel


def _run(rel: Any, **tables: pa.Table) -> dict[str, list[Any]]:
    return evaluate(rel, tables).to_pydict()


T = pa.table({
    "x": pa.array([5, -5, None, 7], pa.int64()),
    "s": pa.array(["a", None, "b", "a"]),
    "__tp_k1": pa.array([0, 1, 2, 3], pa.int64()),
})  # fmt: skip


def test_in_is_three_valued_and_remainder_takes_the_dividends_sign() -> None:
    rel = _select(
        _source("__tp_k1"),
        P.alias(P.fn("in", P.col("s"), P.literal("a"), _null()), "i"),
        P.alias(P.fn("%", P.col("x"), P.literal(3)), "m"),
    )
    got = _run(rel, __tp_k1=T)
    assert got["i"] == [True, None, None, True]  # no match but a null listed: null
    assert got["m"] == [2, -2, None, 1]  # Java's remainder, not Python's


def test_overflow_and_division_by_zero_are_left_to_spark() -> None:
    big = pa.table({"x": pa.array([2**62], pa.int64()), "__tp_k1": pa.array([0], pa.int64())})
    for expr in (
        P.fn("*", P.col("x"), P.literal(4)),
        P.fn("/", P.col("x"), P.literal(0)),
        P.fn("%", P.col("x"), P.literal(0)),
    ):
        with pytest.raises(Unsupported):
            _run(_select(_source("__tp_k1"), P.alias(expr, "y")), __tp_k1=big)


def test_a_left_join_keeps_its_unmatched_and_null_keyed_records() -> None:
    right = pa.table({
        "x": pa.array([5, None], pa.int64()),
        "w": pa.array([50, 60], pa.int64()),
        "__tp_k2": pa.array([0, 1], pa.int64()),
    })  # fmt: skip
    rel = proto.Relation()
    rel.join.left.CopyFrom(_source("__tp_k1"))
    rel.join.right.CopyFrom(_source("__tp_k2"))
    rel.join.join_type = proto.Join.JoinType.JOIN_TYPE_LEFT_OUTER
    rel.join.using_columns.append("x")
    got = _run(rel, __tp_k1=T, __tp_k2=right)
    rows = sorted(zip(got["__tp_k1"], got["w"], got["__tp_k2"]), key=lambda r: r[0])
    # a null key matches nothing, not even the other side's null
    assert rows == [(0, 50, 0), (1, None, None), (2, None, None), (3, None, None)]
    assert list(got) == ["x", "s", "__tp_k1", "w", "__tp_k2"]  # USING columns first


def _null() -> Any:
    e = proto.Expression()
    e.literal.null.CopyFrom(proto.DataType(null=proto.DataType.NULL()))
    return e


def test_a_long_divided_is_rounded_to_a_double_as_java_rounds() -> None:
    big = pa.table({"x": pa.array([2**62 + 1], pa.int64()), "__tp_k1": pa.array([0], pa.int64())})
    rel = _select(_source("__tp_k1"), P.alias(P.fn("/", P.col("x"), P.literal(2)), "y"))
    assert _run(rel, __tp_k1=big)["y"] == [float(2**62 + 1) / 2.0]
