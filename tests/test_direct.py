"""Reading a Parquet source's columns straight from its files (capture/sources/_direct.py).

The oracle is Spark itself: every column and every condition read from the files must
equal, record for record and null for null, what Spark's own read of the same source
gives; where the two could differ (a split file, a partition directory, a NaN, a file
changed since Spark listed it) the reader must step aside.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import tempfile
from decimal import Decimal, localcontext
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tensprov_lab.capture.sources._direct import Unreadable, compile_expr, direct_read, evaluate
from tensprov_lab.capture.spark._versions import spark_version, to_arrow
from tests._examples import spark_examples

# -- evaluation alone (no JVM) ---------------------------------------------------------

TABLE = pa.table(
    {
        "a": pa.array([1, 2, None, 4], pa.int64()),
        "b": pa.array([True, None, False, None]),
        "s": pa.array(["x", None, "é", "y"]),
    }
)


def test_three_valued_logic_as_spark() -> None:
    a_gt_1 = ("cmp", "greater", ("col", "a", "bigint"), ("lit", 1, "bigint"))
    b = ("col", "b", "boolean")
    assert evaluate(a_gt_1, TABLE).to_pylist() == [False, True, None, True]
    # Kleene: false AND null is false, true OR null is true
    assert evaluate(("and_kleene", a_gt_1, b), TABLE).to_pylist() == [False, None, False, None]
    assert evaluate(("or_kleene", a_gt_1, b), TABLE).to_pylist() == [True, True, None, True]
    assert evaluate(("not", b), TABLE).to_pylist() == [False, None, True, None]
    assert evaluate(("isnull", b), TABLE).to_pylist() == [False, True, False, True]
    assert evaluate(("isnotnull", ("col", "a", "bigint")), TABLE).to_pylist() == [
        True,
        True,
        False,
        True,
    ]


def test_in_with_a_null_item_is_null_where_nothing_matches() -> None:
    s = ("col", "s", "string")
    assert evaluate(("in", s, ("x", "y"), "string"), TABLE).to_pylist() == [
        True,
        None,
        False,
        True,
    ]
    assert evaluate(("in", s, ("x", None), "string"), TABLE).to_pylist() == [
        True,
        None,
        None,
        None,
    ]


def test_a_float_column_with_nan_is_left_to_spark() -> None:
    table = pa.table({"x": pa.array([1.0, math.nan])})
    node = ("cmp", "greater", ("col", "x", "double"), ("lit", 0.5, "double"))
    with pytest.raises(Unreadable, match="NaN"):
        evaluate(node, table)


# -- against Spark ----------------------------------------------------------------------

SCHEMA = "k bigint, i int, x double, s string, b boolean"
COLUMNS = {"k": "bigint", "i": "int", "x": "double", "s": "string", "b": "boolean"}
VALUES = {
    "k": st.one_of(st.none(), st.integers(-3, 3), st.sampled_from([2**40, -(2**62)])),
    "i": st.one_of(st.none(), st.integers(-3, 3)),
    "x": st.one_of(st.none(), st.sampled_from([0.0, -0.0, 1.5, -2.25, 3.0, math.inf])),
    "s": st.one_of(
        st.none(), st.sampled_from(["", "a", "b", "ab", "é", "Z", "😀", "a\nb", "a%_\\b"])
    ),
    "b": st.one_of(st.none(), st.booleans()),
}
rows = st.lists(st.tuples(*(VALUES[c] for c in COLUMNS)), max_size=12)
#: the pieces of a LIKE pattern Spark takes (an escape before %, _ or itself)
LIKE_PARTS = ["a", "b", "%", "_", "\n", "\\%", "\\_", "\\\\", "é"]


def _conditions(
    F: Any,  # noqa: N803 - pyspark's functions, as usually named
    columns: dict[str, str] = COLUMNS,
    values: dict[str, Any] = VALUES,
) -> Any:
    COLUMNS, VALUES = columns, values  # noqa: N806 - the module's, or others of the same kind
    col = st.sampled_from(list(COLUMNS))

    def comparison(draw: Any) -> Any:
        c = draw(col)
        op = draw(st.sampled_from(["==", "!=", "<", "<=", ">", ">="]))
        if draw(st.booleans()):
            other = F.col(draw(st.sampled_from([n for n, t in COLUMNS.items() if t == COLUMNS[c]])))
        else:
            value = draw(VALUES[c].filter(lambda v: v is not None))
            # an int literal against a bigint or double column: Spark casts the literal
            if COLUMNS[c] in ("bigint", "double") and draw(st.booleans()):
                value = int(value) if not math.isinf(value) else 1
            other = F.lit(value)
        left = F.col(c)
        return {
            "==": left == other,
            "!=": left != other,
            "<": left < other,
            "<=": left <= other,
            ">": left > other,
            ">=": left >= other,
        }[op]

    def leaf(draw: Any) -> Any:
        kind = draw(st.sampled_from(["cmp", "cmp", "null", "notnull", "in", "bool", "between"]))
        if kind == "cmp":
            return comparison(draw)
        c = draw(col)
        if kind == "between":
            low, high = (draw(VALUES[c].filter(lambda v: v is not None)) for _ in range(2))
            return F.col(c).between(low, high)
        if kind == "null":
            return F.col(c).isNull()
        if kind == "notnull":
            return F.col(c).isNotNull()
        if kind == "bool" and "b" in COLUMNS:
            return F.col("b")
        if kind == "bool":
            return F.col(c).isNull()
        items = draw(st.lists(VALUES[c], min_size=1, max_size=3))
        return F.col(c).isin(*items)

    @st.composite
    def condition(draw: Any, depth: int = 0) -> Any:
        if depth >= 2 or draw(st.booleans()):
            return leaf(draw)
        kind = draw(st.sampled_from(["and", "or", "not"]))
        a = draw(condition(depth + 1))
        if kind == "not":
            return ~a
        b = draw(condition(depth + 1))
        return (a & b) if kind == "and" else (a | b)

    return condition()


def _write(spark: Any, data: list[tuple], files: int, schema: str = SCHEMA) -> str:
    folder = tempfile.mkdtemp(prefix="tensprov-direct-")
    path = os.path.join(folder, "t")
    df = spark.createDataFrame(data, schema)
    df.repartition(files).write.parquet(path)
    return path


def _read_both(spark: Any, path: str, exprs: dict[str, Any]) -> tuple[Any, Any]:
    """What Spark's read of ``exprs`` over the source gives, and the direct reader."""
    from tensprov_lab.capture.spark._jvm import Jvm

    jvm = Jvm(spark)
    source = spark.read.parquet(path)
    df = source.select(*[e.alias(n) for n, e in exprs.items()])
    expected = to_arrow(df)
    projected = df._jdf.queryExecution().analyzed()
    jexprs = {str(e.name()): e.child() for e in jvm.lst(projected.projectList())}
    reader = direct_read(jvm, source._jdf.queryExecution().analyzed(), jexprs)
    return expected, reader


@pytest.mark.spark
@spark_examples("TENSPROV_DIRECT_EXAMPLES", 40)
@given(data=rows, files=st.integers(1, 3), draw=st.data())
def test_columns_and_conditions_read_from_files_equal_sparks(
    spark: Any, data: list[tuple], files: int, draw: Any
) -> None:
    from pyspark.sql import functions as F

    conditions = draw.draw(st.lists(_conditions(F), min_size=1, max_size=3))
    path = _write(spark, data, files)
    exprs = {c: F.col(c) for c in COLUMNS} | {f"f{n}": c for n, c in enumerate(conditions)}
    # a substring at constant bounds (a grouping value, e.g. TPC-H Q22's country code)
    start, count = draw.draw(st.integers(1, 4)), draw.draw(st.integers(0, 3))
    exprs["sub"] = F.substring("s", start, count)
    # LIKE: % and _ (across a line break too), escapes of %, _ and the escape itself
    pattern = "".join(draw.draw(st.lists(st.sampled_from(LIKE_PARTS), max_size=4)))
    exprs["like"] = F.col("s").like(pattern)
    expected, reader = _read_both(spark, path, exprs)
    assert reader is not None
    try:
        got = reader()
    except Unreadable:
        # only a NaN would stop it, and these values have none
        raise AssertionError("the direct read stepped aside on values it reads") from None
    # the same records in the same order (the columns), and every condition the same,
    # nulls included
    assert got.num_rows == expected.num_rows == len(data)
    for name in exprs:
        assert got.column(name).to_pylist() == expected.column(name).to_pylist(), name
        assert got.column(name).type == expected.column(name).type, name


#: a few distinct strings, nulls among them, repeated over thousands of records: files
#: hold them in small dictionaries, which the reader evaluates once a string
FEW_STRINGS = st.one_of(st.none(), st.sampled_from(["", "AIR", "AIR REG", "é", "a%_\\b", "MAIL"]))


@pytest.mark.spark
@spark_examples("TENSPROV_DIRECT_EXAMPLES", 15)
@given(
    data=st.lists(st.tuples(VALUES["k"], FEW_STRINGS, FEW_STRINGS), min_size=1, max_size=8).filter(
        lambda rows: any(s is not None for _, s, _ in rows)  # (an all-null column has none)
    ),
    files=st.integers(1, 2),
    draw=st.data(),
)
def test_strings_read_as_dictionaries_equal_sparks(
    spark: Any, data: list[tuple], files: int, draw: Any
) -> None:
    """String columns of a few distinct values (TPC-H's ship modes and brands) are read
    as dictionaries, conditions on them evaluated once a distinct string and gathered:
    every column and condition as Spark reads it, a condition of two columns too."""
    from pyspark.sql import functions as F

    from tensprov_lab.capture.sources._direct_files import read_parquet_files

    columns = {"k": "bigint", "s": "string", "t": "string"}
    values = {"k": VALUES["k"], "s": FEW_STRINGS, "t": FEW_STRINGS}
    conditions = draw.draw(st.lists(_conditions(F, columns, values), min_size=1, max_size=3))
    many = data * (3000 // len(data) + 1)
    path = _write(spark, many, files, "k bigint, s string, t string")
    exprs = {c: F.col(c) for c in columns} | {f"f{n}": c for n, c in enumerate(conditions)}
    pattern = "".join(draw.draw(st.lists(st.sampled_from(LIKE_PARTS + ["AIR"]), max_size=3)))
    exprs["like"] = F.col("s").like(pattern)
    exprs["sub"] = F.substring("t", 1, 2)
    exprs["mixed"] = (F.col("s") == F.col("t")) | F.col("s").isNull()
    expected, reader = _read_both(spark, path, exprs)
    assert reader is not None
    wanted = (("s", pa.string()), ("t", pa.string()))
    coded = read_parquet_files(reader.files(), wanted, dictionaries=True)
    assert pa.types.is_dictionary(coded.column("s").type)  # (the path under test)
    got = reader()
    assert got.num_rows == expected.num_rows == len(many)
    for name in exprs:
        assert got.column(name).to_pylist() == expected.column(name).to_pylist(), name
        assert got.column(name).type == expected.column(name).type, name


#: dates (from the Gregorian calendar's first day on) and decimals, two columns of each
TYPED_SCHEMA = "k bigint, d date, e date, m decimal(15,2), n decimal(15,2)"
TYPED = {"k": "bigint", "d": "date", "e": "date", "m": "decimal(15,2)", "n": "decimal(15,2)"}
_DAYS = [dt.date(1970, 1, 1), dt.date(1582, 10, 15), dt.date(1998, 12, 1), dt.date(2024, 2, 29)]
_AMOUNTS = ["0.00", "-2.25", "1.50", "9999999999999.99", "-0.01", "24"]
TYPED_VALUES = {
    "k": VALUES["k"],
    "d": st.one_of(st.none(), st.sampled_from(_DAYS)),
    "e": st.one_of(st.none(), st.sampled_from(_DAYS)),
    "m": st.one_of(st.none(), st.sampled_from([Decimal(a) for a in _AMOUNTS])),
    "n": st.one_of(st.none(), st.sampled_from([Decimal(a) for a in _AMOUNTS])),
}


@pytest.mark.spark
@spark_examples("TENSPROV_DIRECT_EXAMPLES", 25)
@given(
    data=st.lists(st.tuples(*(TYPED_VALUES[c] for c in TYPED)), max_size=12),
    files=st.integers(1, 2),
    draw=st.data(),
)
def test_dates_and_decimals_read_from_files_equal_sparks(
    spark: Any, data: list[tuple], files: int, draw: Any
) -> None:
    """Date and decimal columns, and comparisons of them with each other and with
    constants (``IN`` lists too): read from the files as Spark reads them."""
    from pyspark.sql import functions as F

    conditions = draw.draw(st.lists(_conditions(F, TYPED, TYPED_VALUES), min_size=1, max_size=3))
    path = _write(spark, data, files, TYPED_SCHEMA)
    exprs = {c: F.col(c) for c in TYPED} | {f"f{n}": c for n, c in enumerate(conditions)}
    # a date's year (a grouping value, e.g. TPC-H Q7's), also as EXTRACT(YEAR FROM d)
    exprs["year"] = F.year("d")
    exprs["extracted"] = F.expr("extract(YEAR FROM e)")
    expected, reader = _read_both(spark, path, exprs)
    assert reader is not None
    got = reader()
    assert got.num_rows == expected.num_rows == len(data)
    for name in exprs:
        assert got.column(name).to_pylist() == expected.column(name).to_pylist(), name
        assert got.column(name).type == expected.column(name).type, name


def _digits(n: int) -> tuple[int, int]:
    return -(10**n) + 1, 10**n - 1


_BIGINT = (-(2**63), 2**63 - 1)

#: + - * of decimals and integers, and an oracle of each over Python's exact numbers
#: (its type's bounds: a value past them is Spark's own to compute)
_ARITH = {
    "mul": ("m * n", lambda r: _times(r["m"], r["n"]), _digits(27)),
    "revenue": ("m * (1 - n)", lambda r: _times(r["m"], _minus(1, r["n"])), _digits(28)),
    "sub": ("m - n", lambda r: _minus(r["m"], r["n"]), _digits(14)),
    "twice": ("k + k", lambda r: None if r["k"] is None else 2 * r["k"], _BIGINT),
    "thrice": ("k * 3", lambda r: None if r["k"] is None else 3 * r["k"], _BIGINT),
    "minus": ("k - 1", lambda r: None if r["k"] is None else r["k"] - 1, _BIGINT),
}


def _times(a: Any, b: Any) -> Any:
    with localcontext(prec=80):  # (exact: the default context keeps 28 digits)
        return None if a is None or b is None else a * b


def _minus(a: Any, b: Any) -> Any:
    with localcontext(prec=80):
        return None if a is None or b is None else a - b


@pytest.mark.spark
@spark_examples("TENSPROV_DIRECT_EXAMPLES", 25)
@given(
    data=st.lists(st.tuples(*(TYPED_VALUES[c] for c in TYPED)), max_size=12),
    threshold=st.sampled_from([Decimal("0"), Decimal("5.5"), Decimal("-1")]),
)
@example(  # a bigint past its type (k * 3): Spark's to compute
    data=[(-(2**62), None, None, Decimal("9999999999999.99"), Decimal("-2.25"))],
    threshold=Decimal("0"),
)
@example(  # the widest decimals, nulls and bigints that fit
    data=[
        (2**40, None, None, Decimal("9999999999999.99"), Decimal("9999999999999.99")),
        (None, None, None, None, Decimal("1.50")),
        (2, None, None, Decimal("-0.01"), Decimal("24")),
    ],
    threshold=Decimal("5.5"),
)
def test_arithmetic_read_from_files_equals_sparks_or_is_left_to_it(
    spark: Any, data: list[tuple], threshold: Decimal
) -> None:
    """``+``, ``-`` and ``*`` of decimals and integers (TPC-H's ``l_extendedprice * (1 -
    l_discount)``), and a comparison of one: read from the files exactly as Spark
    computes them; where a value would pass its type (a bigint overflow: Spark's
    wrap, or its error under ANSI) the read steps aside, and nowhere else."""
    from pyspark.sql import functions as F

    path = _write(spark, data, 1, TYPED_SCHEMA)
    exprs = {name: F.expr(text) for name, (text, _, _) in _ARITH.items()}
    exprs["cond"] = F.expr("m * (1 - n)") > F.lit(threshold)
    from tensprov_lab.capture.spark._jvm import Jvm

    source = spark.read.parquet(path)
    df = source.select(*[e.alias(n) for n, e in exprs.items()])
    projected = df._jdf.queryExecution().analyzed()
    jvm = Jvm(spark)
    jexprs = {str(e.name()): e.child() for e in jvm.lst(projected.projectList())}
    reader = direct_read(jvm, source._jdf.queryExecution().analyzed(), jexprs)
    assert reader is not None
    try:
        expected = to_arrow(df)
    except Exception:  # noqa: BLE001 - Spark's error on an overflow under ANSI
        expected = None
    rows = [dict(zip(TYPED, r)) for r in data]
    fits = all(
        value is None or bound[0] <= value <= bound[1]
        for _, oracle, bound in _ARITH.values()
        for value in map(oracle, rows)
    )
    try:
        got = reader()
    except Unreadable:
        assert not fits, "the direct read stepped aside on values it computes"
        return
    assert fits and expected is not None  # (a value past its type is never computed here)
    for name in exprs:
        assert got.column(name).to_pylist() == expected.column(name).to_pylist(), name
        assert got.column(name).type == expected.column(name).type, name
    for name, (_, oracle, _) in _ARITH.items():
        assert got.column(name).to_pylist() == [oracle(r) for r in rows], name


#: decimals whose products and casts Spark rounds (half away from zero: ties below)
_ROUNDED_SCHEMA = "w decimal(36,2), v decimal(38,6)"
_WIDE = ["1.00", "-1.00", "3.00", "12345.67", "0.00", "9999999999999999999999999999999999.99"]
_FINE = [
    "1.234550", "-1.234550", "0.000049", "-0.000050", "12.000000",
    "99999999999999999999999999999999.999999",
]  # fmt: skip


def _rounded(value: Any, places: int, digits: int) -> Any:
    """Spark's rounding of an exact ``value`` to ``places`` decimals (Java's HALF_UP),
    and whether it fits ``digits`` digits before the point."""
    from decimal import ROUND_HALF_UP

    if value is None:
        return None, True
    with localcontext(prec=80):
        got = value.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)
    return got, abs(got) < Decimal(10) ** digits


@pytest.mark.spark
@spark_examples("TENSPROV_DIRECT_EXAMPLES", 25)
@given(
    data=st.lists(
        st.tuples(
            st.one_of(st.none(), st.sampled_from([Decimal(a) for a in _WIDE])),
            st.one_of(st.none(), st.sampled_from([Decimal(a) for a in _FINE])),
        ),
        max_size=8,
    )
)
@example(data=[(Decimal("1.00"), Decimal("1.234550")), (Decimal("-1.00"), Decimal("-0.000050"))])
@example(data=[(None, Decimal(_FINE[-1])), (None, Decimal("1.234550"))])  # (rounds past 36,4)
@example(data=[(Decimal(_WIDE[-1]), None)])  # (an exact product of 40 digits)
def test_decimals_spark_rounds_read_from_files_equal_sparks(spark: Any, data: list[tuple]) -> None:
    """A product whose exact scale Spark's analyzer cuts (TPC-H Q11's ``sum(...) *
    0.0001``: decimal(38,6)) and casts of decimals to a smaller scale (Q11's
    comparison as decimal(38,4)) are rounded half away from zero as Spark rounds them,
    ties included; where a rounded value passes its type (Spark's null, or its error
    under ANSI) or an exact product passes 38 digits (Spark rounds it to 38 digits
    first) the read steps aside, and nowhere else."""
    from pyspark.sql import functions as F

    path = _write(spark, data, 1, _ROUNDED_SCHEMA)
    exprs = {
        "p": F.expr("w * CAST(0.0000005 AS decimal(10,10))"),
        "r": F.expr("CAST(v AS decimal(38,4))"),
        "o": F.expr("CAST(v AS decimal(36,4))"),
    }
    from tensprov_lab.capture.spark._jvm import Jvm

    source = spark.read.parquet(path)
    df = source.select(*[e.alias(n) for n, e in exprs.items()])
    jvm = Jvm(spark)
    projected = df._jdf.queryExecution().analyzed()
    jexprs = {str(e.name()): e.child() for e in jvm.lst(projected.projectList())}
    assert [str(e.dataType().simpleString()) for e in jexprs.values()] == [
        "decimal(38,6)", "decimal(38,4)", "decimal(36,4)",
    ]  # fmt: skip
    reader = direct_read(jvm, source._jdf.queryExecution().analyzed(), jexprs)
    assert reader is not None
    oracle = {
        "p": [_rounded(None if w is None else w * Decimal("0.0000005"), 6, 32) for w, _ in data],
        "r": [_rounded(v, 4, 34) for _, v in data],
        "o": [_rounded(v, 4, 32) for _, v in data],
    }
    # (an exact product past 38 digits Spark rounds to 38 digits first: left to it)
    wide = [w is not None and abs(w * Decimal("0.0000005")).scaleb(12) >= 10**38 for w, _ in data]
    fits = all(ok for values in oracle.values() for _, ok in values) and not any(wide)
    try:
        expected = to_arrow(df)
    except Exception:  # noqa: BLE001 - Spark's error on an overflow under ANSI
        expected = None
    try:
        got = reader()
    except Unreadable:
        assert not fits, "the direct read stepped aside on values it computes"
        return
    assert fits and expected is not None
    for name in exprs:
        assert got.column(name).to_pylist() == expected.column(name).to_pylist(), name
        assert got.column(name).to_pylist() == [v for v, _ in oracle[name]], name


@pytest.mark.spark
def test_a_date_spark_would_shift_leaves_the_read_to_it(spark: Any) -> None:
    """A file of the legacy hybrid calendar with a date before 1582-10-15: Spark shifts
    it as it reads it, so the direct read steps aside (from that day on the calendars
    agree, and a date is read from the file)."""
    from pyspark.sql import functions as F

    key = "spark.sql.parquet.datetimeRebaseModeInWrite"
    before = spark.conf.get(key)
    spark.conf.set(key, "LEGACY")
    try:
        old = _write(spark, [(1, dt.date(1500, 3, 1), None, None, None)], 1, TYPED_SCHEMA)
        late = _write(spark, [(1, dt.date(1600, 3, 1), None, None, None)], 1, TYPED_SCHEMA)
    finally:
        spark.conf.set(key, before)
    expected, reader = _read_both(spark, old, {"d": F.col("d")})
    assert reader is not None and expected.column("d").to_pylist() == [dt.date(1500, 3, 1)]
    with pytest.raises(Unreadable, match="1582"):
        reader()
    expected, reader = _read_both(spark, late, {"d": F.col("d")})
    assert reader is not None
    assert reader().column("d").to_pylist() == expected.column("d").to_pylist()


def _compiled(jvm: Any, expr: Any, scope: dict[int, Any]) -> Any:
    try:
        return compile_expr(jvm, expr, scope)
    except Unreadable:
        return "unreadable"


def _special(F: Any) -> list[Any]:  # noqa: N803 - pyspark's functions, as usually named
    """Expressions beside the generated conditions: constants of other types, ones that
    do not evaluate, functions left to Spark, a dropna's count."""
    return [
        F.col("s") == F.lit("x\ty é 😀 \n"),
        F.col("s").isin("", None),
        F.col("x") > F.lit(-0.0),
        F.col("x") < F.lit(float("inf")),
        F.col("x") == F.lit(float("nan")),
        F.col("x") > F.lit(1).cast("float"),
        F.col("k") > F.lit(2**62),
        F.col("i") == (F.lit(1) / F.lit(0)).cast("int"),
        F.col("s").startswith("a"),
        F.col("s") == F.lit("2024-01-02").cast("date"),
        F.col("k").cast("int") == F.col("i"),
        F.col("i").cast("int") == F.col("i"),
        F.lit(None).isNull(),
        F.lit(True) & F.col("b"),
        F.col("k").between(-1, 2),
        F.col("x").between(F.col("k").cast("double"), 2.5),
        F.substring("s", 2, 3) == F.lit("ab"),
        F.substring("s", -2, 1) == F.lit("a"),  # (from the end: left to Spark)
        F.expr("substring(s, 1, i)") == F.lit("a"),
        F.year(F.col("s")) == F.lit(2024),  # (a string cast to a date: left to Spark)
        F.col("s").like("a\\%%"),
        F.expr("s LIKE 'a#%' ESCAPE '#'"),  # (an escape of its own: left to Spark)
        F.col("k") + 1 > 1,
        F.col("x") * 2 > 1,  # (floating-point arithmetic: left to Spark)
        F.col("i") * F.col("i") < F.col("k"),  # (an int product, cast to a bigint)
    ]


def _both_ways(spark: Any, exprs: list[Any]) -> tuple[list[Any], list[Any]]:
    """``exprs`` over the test schema compiled with the helper, and node by node."""
    from tensprov_lab.capture.spark._jvm import Jvm

    df = spark.createDataFrame([], SCHEMA).select(*[e.alias(f"f{n}") for n, e in enumerate(exprs)])
    fast, slow = Jvm(spark), Jvm(spark)
    slow._helper = None  # as where Janino is missing
    assert fast.helper is not None
    plan = df._jdf.queryExecution().analyzed()
    scope = {
        int(a.exprId().id()): ("col", str(a.name()), COLUMNS[str(a.name())])
        for a in fast.lst(plan.child().output())
    }
    got = [_compiled(fast, e, scope) for e in fast.lst(plan.projectList())]
    want = [_compiled(slow, e, scope) for e in slow.lst(plan.projectList())]
    return got, want


@pytest.mark.spark
@settings(max_examples=25, deadline=None, derandomize=True)
@given(draw=st.data())
def test_expressions_compile_alike_with_and_without_the_helper(spark: Any, draw: Any) -> None:
    """The helper's one-round-trip spelling of an expression (TensProvHelper.exprTree)
    compiles to what asking node by node compiles to, refusals included."""
    from pyspark.sql import functions as F

    got, want = _both_ways(spark, draw.draw(st.lists(_conditions(F), min_size=1, max_size=4)))
    assert got == want


@pytest.mark.spark
def test_constants_and_refusals_compile_alike_with_and_without_the_helper(spark: Any) -> None:
    from pyspark.sql import functions as F

    got, want = _both_ways(spark, _special(F))
    assert got == want
    # what each compiles to, so that a change in both shows
    assert got == [
        ("cmp", "equal", ("col", "s", "string"), ("lit", "x\ty é 😀 \n", "string")),
        ("in", ("col", "s", "string"), ("", None), "string"),
        ("cmp", "greater", ("col", "x", "double"), ("lit", -0.0, "double")),
        ("cmp", "less", ("col", "x", "double"), ("lit", math.inf, "double")),
        "unreadable",  # a NaN constant
        ("cmp", "greater", ("col", "x", "double"), ("lit", 1.0, "double")),  # cast, folded
        ("cmp", "greater", ("col", "k", "bigint"), ("lit", 2**62, "bigint")),
        want[7],  # 1 / 0: null, or refused where ANSI makes it an error
        "unreadable",  # startswith
        "unreadable",  # a date
        "unreadable",  # a cast to another type
        ("cmp", "equal", ("col", "i", "int"), ("col", "i", "int")),
        ("lit", True, "boolean"),  # foldable: evaluated
        ("and_kleene", ("lit", True, "boolean"), ("col", "b", "boolean")),
        (  # BETWEEN: both comparisons (Spark 4 binds its input once, 3.5 writes both)
            "and_kleene",
            ("cmp", "greater_equal", ("col", "k", "bigint"), ("lit", -1, "bigint")),
            ("cmp", "less_equal", ("col", "k", "bigint"), ("lit", 2, "bigint")),
        ),
        "unreadable",  # a bound that is a cast to another type
        (
            "cmp",
            "equal",
            ("substr", ("col", "s", "string"), "string", 1, 4),
            ("lit", "ab", "string"),
        ),  # fmt: skip
        "unreadable",  # a substring from the end
        "unreadable",  # a substring of a length that is not a constant
        "unreadable",  # the year of a string (cast to a date)
        ("like", ("col", "s", "string"), "a\\%%"),
        "unreadable",  # LIKE with an escape of its own
        (
            "cmp",
            "greater",
            ("arith", "add_checked", ("col", "k", "bigint"), ("lit", 1, "bigint"), "bigint"),
            ("lit", 1, "bigint"),
        ),
        "unreadable",  # a double's product
        (  # an int product (an int's overflow is Spark's), widened to a bigint
            "cmp",
            "less",
            (
                "cast",
                ("arith", "multiply_checked", ("col", "i", "int"), ("col", "i", "int"), "int"),
                "bigint",
            ),
            ("col", "k", "bigint"),
        ),  # fmt: skip
    ]
    assert want[7] in ("unreadable", ("cmp", "equal", ("col", "i", "int"), ("lit", None, "int")))


@pytest.mark.spark
def test_a_nan_leaves_the_read_to_spark(spark: Any) -> None:
    from pyspark.sql import functions as F

    path = _write(spark, [(1, 1, math.nan, "a", True), (2, 2, 1.0, "b", False)], 1)
    expected, reader = _read_both(spark, path, {"f": F.col("x") > 0.5, "x": F.col("x")})
    assert expected.column("f").to_pylist() == [True, True]  # Spark: NaN above all numbers
    assert reader is not None
    with pytest.raises(Unreadable, match="NaN"):
        reader()
    # a plain read of the column gives the NaN as Spark does
    _, plain = _read_both(spark, path, {"x": F.col("x")})
    assert plain is not None and math.isnan(plain().column("x")[0].as_py())


#: (records, files, row group bytes, split bytes, first column, what the parts are)
SPLITS = [
    (3000, 2, 2048, 3000, "k", "many"),  # parts of several row groups
    (3000, 1, 2048, 9000, "s", "many"),  # a dictionary page before the first data page
    (2500, 3, 8192, 3000, "s", "empty"),  # parts that hold no row group
    (1200, 2, 1 << 20, 3000, "x", "empty"),  # one row group a file, split anyway
    (40, 3, 2048, 1 << 27, "k", "whole"),  # whole files
]


def _split_files(spark: Any, n: int, files: int, block: int, first: str) -> str:
    folder = tempfile.mkdtemp(prefix="tensprov-direct-")
    path = os.path.join(folder, "t")
    rows = [(i, i % 7, float(i % 11), f"s{i % 5}", i % 3 == 0) for i in range(n)]
    order = [first, *[c for c in COLUMNS if c != first]]
    (
        spark.createDataFrame(rows, SCHEMA)
        .select(*order)
        .repartition(files)
        .write.option("parquet.block.size", block)
        .option("parquet.page.size", 1024)
        .parquet(path)
    )
    return path


@pytest.mark.spark
@pytest.mark.parametrize(("n", "files", "block", "split", "first", "shape"), SPLITS)
def test_files_spark_splits_are_read_as_spark_reads_them(
    spark: Any, n: int, files: int, block: int, split: int, first: str, shape: str
) -> None:
    """A file Spark splits between partitions is read by the row groups Spark's reader
    picks for each part: the same records in the same order as Spark's read."""
    from pyspark.sql import functions as F

    path = _split_files(spark, n, files, block, first)
    previous = spark.conf.get("spark.sql.files.maxPartitionBytes")
    spark.conf.set("spark.sql.files.maxPartitionBytes", str(split))
    try:
        exprs = {"k": F.col("k"), "f": F.col("i") > 2}
        expected, reader = _read_both(spark, path, exprs)
        assert reader is not None
        parts = reader.files()
        got = reader()
    finally:
        spark.conf.set("spark.sql.files.maxPartitionBytes", previous)
    assert got.column("k").to_pylist() == expected.column("k").to_pylist()
    assert got.column("f").to_pylist() == expected.column("f").to_pylist()
    # each case is the one it is meant to be
    groups = [g for _, _, g in parts]
    if shape == "many":
        assert any(g is not None and len(g) > 1 for g in groups), parts
    elif shape == "empty":
        assert any(g == () for g in groups) and any(g for g in groups), parts
    else:
        assert all(g is None for g in groups), parts


def _spark_partition_rows(df: Any) -> list[int]:
    """The records of each of ``df``'s partitions, as Spark counts them (a job)."""
    from pyspark.sql import functions as F

    counts = dict(df.groupBy(F.spark_partition_id().alias("p")).count().collect())
    return [counts.get(i, 0) for i in range(df.rdd.getNumPartitions())]


@pytest.mark.spark
@pytest.mark.parametrize(("n", "files", "block", "split", "first", "shape"), SPLITS)
@pytest.mark.parametrize("writer", ["spark", "pyarrow"])
def test_partition_sizes_are_counted_from_footers_as_spark_counts_them(
    spark: Any, n: int, files: int, block: int, split: int, first: str, shape: str, writer: str
) -> None:
    """Each partition's record count, read from the files' footers without a job (the
    row groups Spark's reader picks for each part of a file), is Spark's own count: for
    files of Spark's Parquet writer and of pyarrow's (their row groups start and end
    differently), under a projection (a source's record key), at every split."""
    import pyarrow.parquet as pq
    from pyspark.sql import functions as F

    from tensprov_lab.capture.sources._direct import partition_rows
    from tensprov_lab.capture.spark._jvm import Jvm

    path = _split_files(spark, n, files, block, first)
    if writer == "pyarrow":  # the same records in files of pyarrow's, row groups of 300
        again = tempfile.mkdtemp(prefix="tensprov-direct-")
        for i, name in enumerate(sorted(f for f in os.listdir(path) if f.endswith(".parquet"))):
            table = pq.read_table(os.path.join(path, name))
            pq.write_table(table, os.path.join(again, f"part-{i}.parquet"), row_group_size=300)
        path = again
    previous = spark.conf.get("spark.sql.files.maxPartitionBytes")
    spark.conf.set("spark.sql.files.maxPartitionBytes", str(split))
    try:
        df = spark.read.parquet(path)
        keyed = df.select(F.monotonically_increasing_id().alias("key"), "*")
        jvm = Jvm(spark)
        got = [partition_rows(jvm, d._jdf.queryExecution().analyzed()) for d in (df, keyed)]
        want = _spark_partition_rows(df)
    finally:
        spark.conf.set("spark.sql.files.maxPartitionBytes", previous)
    assert got[0] is not None and got[1] is not None
    assert got[0].tolist() == want == got[1].tolist()
    assert sum(want) == n
    if shape != "whole":
        assert len(want) > files  # the files were split


@pytest.mark.spark
def test_partition_sizes_of_other_plans_are_left_to_spark(spark: Any, tmp_path: Any) -> None:
    """A scan that filters (its row groups may be skipped), one of CSV files, and a plan
    that is no scan of files get no count from footers: Spark counts them."""
    from tensprov_lab.capture.sources._direct import partition_rows
    from tensprov_lab.capture.spark._jvm import Jvm

    jvm = Jvm(spark)
    parquet, csv = str(tmp_path / "p"), str(tmp_path / "c")
    spark.range(100).write.parquet(parquet)
    spark.range(100).write.csv(csv)
    for df in (
        spark.read.parquet(parquet).filter("id > 50"),
        spark.read.csv(csv),
        spark.range(10),
        spark.read.parquet(parquet).groupBy("id").count(),
    ):
        assert partition_rows(jvm, df._jdf.queryExecution().analyzed()) is None
    plain = spark.read.parquet(parquet)._jdf.queryExecution().analyzed()
    assert partition_rows(jvm, plain) is not None


@pytest.mark.spark
def test_the_parts_spark_reads_are_told_apart(spark: Any) -> None:
    """The test above splits files for real: a small split cuts a file of many row
    groups into parts that each read some of them."""
    from pyspark.sql import functions as F

    folder = tempfile.mkdtemp(prefix="tensprov-direct-")
    path = os.path.join(folder, "t")
    rows = [(i, i % 7, float(i % 11), f"s{i % 5}", i % 3 == 0) for i in range(3000)]
    spark.createDataFrame(rows, SCHEMA).coalesce(1).write.option("parquet.block.size", 2048).option(
        "parquet.page.size", 1024
    ).parquet(path)
    previous = spark.conf.get("spark.sql.files.maxPartitionBytes")
    spark.conf.set("spark.sql.files.maxPartitionBytes", "3000")
    try:
        _, reader = _read_both(spark, path, {"k": F.col("k")})
        assert reader is not None
        parts = reader.files()
    finally:
        spark.conf.set("spark.sql.files.maxPartitionBytes", previous)
    assert len(parts) > 1
    groups = [g for _, _, g in parts]
    assert all(g is not None for g in groups)
    picked = sorted(x for g in groups if g is not None for x, _ in g)
    assert len(picked) > 1 and picked == list(range(len(picked)))  # each row group once


@pytest.mark.spark
def test_what_spark_reads_differently_is_left_to_it(spark: Any, tmp_path: Any) -> None:
    """Partition directories, other formats, collated strings and expressions beyond
    the supported ones are not read from the files."""
    from pyspark.sql import functions as F

    data = spark.createDataFrame([(1, 1, 1.0, "a", True), (2, 2, 2.0, "B", False)], SCHEMA)
    data.write.partitionBy("i").parquet(str(tmp_path / "parts"))
    _, reader = _read_both(spark, str(tmp_path / "parts"), {"k": F.col("k")})
    assert reader is None
    data.write.json(str(tmp_path / "json"))
    from tensprov_lab.capture.spark._jvm import Jvm

    jvm = Jvm(spark)
    source = spark.read.json(str(tmp_path / "json"))
    plan = source._jdf.queryExecution().analyzed()
    assert direct_read(jvm, plan, {"k": jvm.output(plan)[0]}) is None
    path = _write(spark, [(1, 1, 1.0, "a", True)], 1)
    for expr in (F.upper("s") == "A", F.col("x") * 2 > 1, F.col("x").cast("int") > 0):
        _, reader = _read_both(spark, path, {"f": expr})
        assert reader is None
    if spark_version() >= (4, 0):  # Spark 3.5 has no collations
        collated = spark.read.parquet(path).select(F.col("s").cast("string collate UTF8_LCASE"))
        jplan = collated._jdf.queryExecution().analyzed()
        assert direct_read(jvm, jplan, {"s": jvm.output(jplan)[0]}) is None


@pytest.mark.spark
def test_a_file_changed_since_spark_listed_it_is_read_by_spark(spark: Any) -> None:
    from pyspark.sql import functions as F

    path = _write(spark, [(1, 1, 1.0, "a", True)], 1)
    _, reader = _read_both(spark, path, {"k": F.col("k")})
    assert reader is not None
    (file, size, _), *_ = reader.files()
    with open(file, "ab") as handle:
        handle.write(b"more")
    with pytest.raises(Unreadable, match="changed"):
        reader()


@pytest.mark.spark
def test_a_catalog_table_of_parquet_files_is_read_from_them(spark: Any) -> None:
    from pyspark.sql import functions as F

    data = spark.createDataFrame(
        [(i, i % 3, float(i), str(i), i % 2 == 0) for i in range(9)], SCHEMA
    )
    data.repartition(2).write.mode("overwrite").format("parquet").saveAsTable("direct_table")
    try:
        from tensprov_lab.capture.spark._jvm import Jvm

        jvm = Jvm(spark)
        table = spark.table("direct_table")
        df = table.select(F.col("k").alias("k"), (F.col("i") > 0).alias("f"))
        jexprs = {
            str(e.name()): e.child()
            for e in jvm.lst(df._jdf.queryExecution().analyzed().projectList())
        }
        plan = table._jdf.queryExecution().analyzed()
        assert jvm.cls(plan) == "SubqueryAlias"
        reader = direct_read(jvm, plan, jexprs)
        assert reader is not None
        got, expected = reader(), to_arrow(df)
        for name in ("k", "f"):
            assert got.column(name).to_pylist() == expected.column(name).to_pylist()
    finally:
        spark.sql("DROP TABLE IF EXISTS direct_table")


def test_three_valued_logic_over_nulls_made_by_if_else() -> None:
    """AND/OR follow SQL's three-valued logic for every pair, also when a null came out
    of ``if_else`` (pyarrow 22's ``and_kleene`` says false for null AND null there)."""
    import itertools

    import pyarrow as pa
    import pyarrow.compute as pc

    from tensprov_lab.capture.sources._direct import _kleene

    vals = [True, False, None]
    pairs = list(itertools.product(vals, vals))
    null = pa.scalar(None, type=pa.bool_())
    # every value passed through if_else, the way IN makes its nulls
    a, b = (pa.chunked_array([[p[i]] for p in pairs], pa.bool_()) for i in (0, 1))
    a, b = (pc.if_else(pc.is_null(x), null, x) for x in (a, b))

    def sql_and(x: bool | None, y: bool | None) -> bool | None:
        return False if False in (x, y) else None if None in (x, y) else True

    def sql_or(x: bool | None, y: bool | None) -> bool | None:
        return True if True in (x, y) else None if None in (x, y) else False

    assert _kleene(True, a, b).to_pylist() == [sql_and(x, y) for x, y in pairs]
    assert _kleene(False, a, b).to_pylist() == [sql_or(x, y) for x, y in pairs]
