"""Conditions as SQL text compiled for reads from files (``capture/sources/_direct_sql.py``):
typed as Spark types them, evaluated with SQL's three-valued logic, and anything outside
the subset refused (the read then goes through Spark).  Whether the records kept are
Spark's is checked against Spark in ``tests/test_connect_direct.py``."""

from __future__ import annotations

import pyarrow as pa
import pytest

from tensprov_lab.capture.sources._direct import evaluate
from tensprov_lab.capture.sources._direct_files import Unreadable
from tensprov_lab.capture.sources._direct_sql import parse_condition

COLUMNS = {
    "amount": ("amount", "double"),
    "qty": ("Qty", "int"),
    "small": ("small", "tinyint"),
    "ratio": ("ratio", "float"),
    "region": ("region", "string"),
    "flag": ("flag", "boolean"),
}
TABLE = pa.table({
    "amount": pa.array([10.0, 25.5, None, 40.0]),
    "Qty": pa.array([1, None, 3, 2**31 - 1], pa.int32()),
    "small": pa.array([-3, 0, 5, 127], pa.int8()),
    "ratio": pa.array([0.25, 0.5, 0.75, 1.0], pa.float32()),
    "region": pa.array(["EU", None, "US", "é"]),
    "flag": pa.array([True, False, None, True]),
})  # fmt: skip


def _kept(text: str) -> list[bool | None]:
    value = evaluate(parse_condition(text, COLUMNS), TABLE)
    if isinstance(value, pa.Scalar):
        value = pa.repeat(value, TABLE.num_rows)
    return value.to_pylist()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("amount > 20", [False, True, None, True]),
        ("amount >= 25.5 AND region = 'US'", [False, None, None, False]),
        ("NOT (amount > 20) OR flag", [True, False, None, True]),
        ("qty IS NULL", [False, True, False, False]),
        ("QTY = 2147483647", [False, None, False, True]),
        ("qty = 2147483648", [False, None, False, False]),  # the column widened to bigint
        ("small BETWEEN -3 AND 5", [True, True, True, False]),
        ("small > 300", [False, False, False, False]),  # tinyint widened to int
        ("ratio < 0.5D", [True, False, False, False]),  # float widened to double
        ("region IN ('EU', 'é', NULL)", [True, None, None, True]),
        ("region NOT IN ('EU')", [False, None, True, True]),
        ("`amount` <> 10", [False, True, None, True]),
        ("amount = 1e1", [True, False, None, False]),
        ("flag = TRUE", [True, False, None, True]),
    ],
)
def test_conditions_evaluate_as_spark_does(text: str, expected: list[bool | None]) -> None:
    assert _kept(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "amount + 1 > 2",  # arithmetic
        "upper(region) = 'EU'",  # a function
        "region = 3",  # a string compared with a number
        "qty > 2.5",  # an int compared with a decimal literal
        "amount <=> 3",  # null-safe equality
        "region LIKE 'E%'",
        "unknown > 1",  # a column not read from the files
        "amount",  # not a condition
        "amount > 1 AND",
        "region = 'it''s'",
    ],
)
def test_others_are_refused(text: str) -> None:
    with pytest.raises(Unreadable):
        parse_condition(text, COLUMNS)


def test_a_value_parses_where_a_value_is_asked() -> None:
    assert parse_condition("Amount", COLUMNS, condition=False) == ("col", "amount", "double")
    assert parse_condition("-5", COLUMNS, condition=False) == ("lit", -5, "int")
