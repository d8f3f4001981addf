"""Reading a CSV source's columns straight from its files (capture/sources/_direct_csv.py).

The oracle is Spark's own CSV reader: every column and condition the direct read gives
must equal, record for record and null for null, Spark's read of the same files.  Random
files mix plain tokens with ones Spark and pyarrow might read differently (``+5``,
``NaN``, `` 1``, doubled quotes, an escape, blank lines, rows of another width); on
those the reader may step aside, but never answer otherwise than Spark.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from tensprov_lab.capture.sources._direct import direct_read
from tensprov_lab.capture.sources._direct_csv import (
    CheckedFiles,
    CsvLayout,
    csv_layout,
    read_csv_files,
)
from tensprov_lab.capture.sources._direct_files import Unreadable
from tensprov_lab.capture.spark._versions import to_arrow
from tests._examples import spark_examples

SCHEMA = "k bigint, i int, x double, b boolean, s string, t string"
NAMES = ("k", "i", "x", "b", "s", "t")
LAYOUT = CsvLayout(NAMES, ",", True)

#: tokens every reader reads one way, by column
PLAIN = {
    "k": ["", "0", "7", "-3", "007", "123456789012", "-9223372036854775808"],
    "i": ["", "0", "5", "-12", "2147483647", "-2147483648"],
    "x": ["", "0", "1.5", "-2.25", "1e3", "1E-2", "-0", "-0.0", "4.9e-324", "0.1"],
    "b": ["", "true", "false", "TRUE", "False"],
    "s": ["", "a", "é", "😀", " lead", "trail ", '"q,uoted"', '"plain"', "a b"],
    "t": ["", "z", "NaN", "1", '"x ""y"" z"'],  # t is never read with doubled quotes
}
#: tokens Spark may read otherwise than a plain reading (or not at all)
ODD = {
    "k": ["+5", " 5", "5 ", "9223372036854775808", "1.0", "abc", "٥", "0x10"],
    "i": ["+5", "2147483648", "-2147483649", " 1", "1e2"],
    "x": ["NaN", "Inf", "-Inf", "Infinity", ".5", "5.", "1d", " 1.0", "1e400", "0x1p3"],
    "b": ["yes", "1", " true", "t"],
    "s": ["a"],
    "t": ["q"],
}
#: quoting Spark's parser may split or keep otherwise than pyarrow's
QUOTES = ['""', '"x ""y"" z"', '"x"" , y"', 'a"b', '"ab"c', '"a\nb"', '"x ""y"""', '"a,b"',
          "back\\slash"]  # fmt: skip


def _file(draw: Any, odd: str) -> str:
    """A CSV file's text, without a header line: plain tokens, or plain tokens mixed
    with one kind of oddity (``"tokens"``, ``"quotes"``, ``"lines"``)."""
    rows = draw(st.integers(0, 8))
    lines: list[str] = []
    for _ in range(rows):
        tokens = []
        for c in NAMES:
            pool = PLAIN[c]
            if odd == "tokens" and draw(st.integers(0, 3)) == 0:
                pool = ODD[c]
            elif odd == "quotes" and c in ("s", "t") and draw(st.integers(0, 3)) == 0:
                pool = QUOTES
            tokens.append(draw(st.sampled_from(pool)))
        if odd == "lines" and draw(st.integers(0, 3)) == 0:
            tokens = tokens[:-1] if draw(st.booleans()) else [*tokens, "extra"]
        lines.append(",".join(tokens))
        if odd == "lines" and draw(st.integers(0, 3)) == 0:
            lines.append(draw(st.sampled_from(["", "  ", ","])))
    end = "\r\n" if draw(st.integers(0, 4)) == 0 else "\n"
    text = end.join(lines)
    if lines and draw(st.booleans()):
        text += end
    return text


def _conditions(F: Any, df: Any) -> dict[str, Any]:  # noqa: N803 - pyspark's functions
    return {
        "f_cmp": (df.key > 0) & (df.x <= 1.5),
        "f_or": df.i.isin(5, -12) | df.b,
        "f_null": df.s.isNull() | (df.s == "a"),
    }


def _read_both(spark: Any, path: str, header: bool) -> tuple[Any, Any, Any]:
    """Spark's read of the columns and conditions, Spark's dropna of the same records,
    and the direct reader of both (through a projection that renames a column)."""
    from pyspark.sql import functions as F

    from tensprov_lab.capture.spark._jvm import Jvm

    jvm = Jvm(spark)
    source = spark.read.csv(path, schema=SCHEMA, header=header)
    projected = source.select(F.col("k").alias("key"), "i", "x", "b", "s", "t")
    plan = projected._jdf.queryExecution().analyzed()
    exprs = {n: F.col(n) for n in ("key", "i", "x", "b", "s")} | _conditions(F, projected)
    df = projected.select(*[e.alias(n) for n, e in exprs.items()])
    jexprs = {
        str(e.name()): e.child() for e in jvm.lst(df._jdf.queryExecution().analyzed().projectList())
    }
    kept = projected.dropna(subset=["key", "x", "s"])
    jexprs["f_dropna"] = kept._jdf.queryExecution().analyzed().condition()
    expected = to_arrow(df)
    dropped = [tuple(r) for r in kept.select("key", "i", "x", "b", "s").collect()]
    return expected, dropped, direct_read(jvm, plan, jexprs)


@pytest.mark.spark
@spark_examples("TENSPROV_DIRECT_EXAMPLES", 30)
@given(
    odd=st.sampled_from(["plain", "tokens", "quotes", "lines"]),
    files=st.integers(1, 3),
    draw=st.data(),
)
def test_csv_columns_read_from_files_equal_sparks(
    spark: Any, odd: str, files: int, draw: Any
) -> None:
    folder = tempfile.mkdtemp(prefix="tensprov-csv-")
    header = draw.draw(st.booleans())
    for n in range(files):
        text = _file(draw.draw, odd)
        if header:  # every file of a source has a header, or none has
            text = "k,i,x,b,s,t\n" + text
        with open(os.path.join(folder, f"part-{n}.csv"), "w", encoding="utf-8") as handle:
            handle.write(text)
    expected, dropped, reader = _read_both(spark, folder, header)
    assert reader is not None
    try:
        got = reader()
    except Unreadable as exc:
        # stepping aside is always allowed, but not on files of plain tokens
        assert odd != "plain", "the direct read stepped aside on a file of plain tokens"
        event(f"refused: {str(exc).split(': ', 1)[-1][:24]}")
        return
    event(f"read directly ({odd})")
    assert got.num_rows == expected.num_rows
    for name in expected.column_names:
        assert got.column(name).to_pylist() == expected.column(name).to_pylist(), name
        assert got.column(name).type == expected.column(name).type, name
    flags = got.column("f_dropna").to_pylist()
    assert None not in flags
    rows = zip(*(got.column(n).to_pylist() for n in ("key", "i", "x", "b", "s")))
    assert [r for r, keep in zip(rows, flags) if keep] == dropped


@pytest.mark.spark
def test_the_compas_file_is_read_from_its_file_as_spark_reads_it(spark: Any) -> None:
    """The published COMPAS file (quoted values, doubled quotes in columns not read) is
    read directly, and its columns and dropna equal Spark's."""
    from tensprov_lab import datasets
    from tensprov_lab.capture.spark._jvm import Jvm

    folder = datasets.data_dir(None)
    if folder is None or not datasets.available("compas", folder):
        pytest.skip("TENSPROV_DATA does not hold compas.csv")
    raw = datasets.load(spark, "compas", path=folder)
    keep = ["age", "c_charge_degree", "race", "sex", "priors_count",
            "days_b_screening_arrest", "two_year_recid", "c_jail_in", "c_jail_out"]  # fmt: skip
    picked = raw.select(*keep)
    jvm = Jvm(spark)
    plan = picked._jdf.queryExecution().analyzed()
    condition = picked.dropna()._jdf.queryExecution().analyzed().condition()
    reader = direct_read(
        jvm, plan, {c: a for c, a in zip(keep, jvm.output(plan))} | {"f": condition}
    )
    assert reader is not None
    got = reader()
    expected = to_arrow(picked)
    for c in keep:
        assert got.column(c).to_pylist() == expected.column(c).to_pylist(), c
    assert sum(got.column("f").to_pylist()) == picked.dropna().count() == 6907
    # a column holding doubled quotes is left to Spark
    doubled = raw.select("r_charge_desc")
    dplan = doubled._jdf.queryExecution().analyzed()
    other = direct_read(jvm, dplan, {"r": jvm.output(dplan)[0]})
    assert other is not None
    with pytest.raises(Unreadable, match="quote"):
        other()


@pytest.mark.spark
def test_a_csv_file_spark_splits_is_left_to_spark(spark: Any, tmp_path: Any) -> None:
    path = tmp_path / "big.csv"
    path.write_text("".join(f"{i},{i % 7},1.5,true,s{i},t\n" for i in range(4000)))
    previous = spark.conf.get("spark.sql.files.maxPartitionBytes")
    spark.conf.set("spark.sql.files.maxPartitionBytes", "20000")
    try:
        from tensprov_lab.capture.spark._jvm import Jvm

        jvm = Jvm(spark)
        source = spark.read.csv(str(path), schema=SCHEMA)
        plan = source._jdf.queryExecution().analyzed()
        reader = direct_read(jvm, plan, {"k": jvm.output(plan)[0]})
        assert reader is not None
        parts = reader.files()
        assert len(parts) > 1 and all(g is not None for _, _, g in parts)
        with pytest.raises(Unreadable, match="part"):
            reader()
    finally:
        spark.conf.set("spark.sql.files.maxPartitionBytes", previous)


@pytest.mark.spark
def test_csv_options_that_change_the_reading_are_left_to_spark(spark: Any, tmp_path: Any) -> None:
    from tensprov_lab.capture.spark._jvm import Jvm

    path = tmp_path / "t.csv"
    path.write_text("1,2,1.5,true,a,b\n")
    jvm = Jvm(spark)
    for options in ({"quote": "'"}, {"nullValue": "NA"}, {"ignoreLeadingWhiteSpace": True},
                    {"multiLine": True}, {"sep": "\t"}, {"mode": "DROPMALFORMED"}):  # fmt: skip
        source = spark.read.options(**options).csv(str(path), schema=SCHEMA)
        plan = source._jdf.queryExecution().analyzed()
        assert direct_read(jvm, plan, {"k": jvm.output(plan)[0]}) is None, options
    for options in ({"header": False}, {"sep": ";"}, {"mode": "permissive"}):
        source = spark.read.options(**options).csv(str(path), schema=SCHEMA)
        plan = source._jdf.queryExecution().analyzed()
        assert direct_read(jvm, plan, {"k": jvm.output(plan)[0]}) is not None, options


# -- without a JVM -------------------------------------------------------------------------


def _read(tmp_path: Any, text: bytes, columns: tuple[tuple[str, str], ...]) -> pa.Table:
    path = tmp_path / "t.csv"
    path.write_bytes(text)
    return read_csv_files(((str(path), len(text), None),), columns, LAYOUT)


def test_plain_tokens_are_converted_as_spark_converts_them(tmp_path: Any) -> None:
    text = b'k,i,x,b,s,t\n007,-5,1e3,TRUE,"a,b",z\n,,,, ,\n'
    got = _read(tmp_path, text, (("k", "bigint"), ("i", "int"), ("x", "double"),
                                 ("b", "boolean"), ("s", "string")))  # fmt: skip
    assert got.to_pydict() == {
        "k": [7, None], "i": [-5, None], "x": [1000.0, None], "b": [True, None],
        "s": ["a,b", " "],
    }  # fmt: skip
    assert got.schema.types == [pa.int64(), pa.int32(), pa.float64(), pa.bool_(), pa.string()]


@pytest.mark.parametrize(
    ("text", "column", "why"),
    [
        (b"k,i,x,b,s,t\n+5,1,1,true,a,b\n", ("k", "bigint"), "plain"),
        (b"k,i,x,b,s,t\n1,2147483648,1,true,a,b\n", ("i", "int"), "range"),
        (b"k,i,x,b,s,t\n1,1,NaN,true,a,b\n", ("x", "double"), "plain"),
        (b"k,i,x,b,s,t\n1,1,1e400,true,a,b\n", ("x", "double"), "range"),
        (b"k,i,x,b,s,t\n1,1,1,yes,a,b\n", ("b", "boolean"), "plain"),
        (b"k,i,x,b,s,t\n1,1,1,1,a,b\n", ("b", "boolean"), "plain"),
        (b"k,i,x,b,s,t\n12a,1,1,true,a,b\n", ("k", "bigint"), "plain"),
        (b"k,i,x,b,s,t\n\xd9\xa1,1,1,true,a,b\n", ("k", "bigint"), "plain"),
        (b'k,i,x,b,s,t\n1,1,1,true,"a ""b"" c",b\n', ("s", "string"), "quote"),
        (b'k,i,x,b,s,t\n1,1,1,true,"a ""b"", c",b\n', ("k", "bigint"), "quote"),
        (b'k,i,x,b,s,t\n1,1,1,true,"",b\n', ("k", "bigint"), "quote"),
        (b'k,i,x,b,s,t\n1,1,1,true,a"b,b\n', ("k", "bigint"), "quote"),
        (b"k,i,x,b,s,t\n1,1,1,true,a\\b,b\n", ("k", "bigint"), "escape"),
        (b"k,i,x,b,s,t\r1,1,1,true,a,b\r", ("k", "bigint"), "carriage"),
        (b"\xef\xbb\xbfk,i,x,b,s,t\n1,1,1,true,a,b\n", ("k", "bigint"), "byte-order"),
        (b"  \nk,i,x,b,s,t\n1,1,1,true,a,b\n", ("k", "bigint"), "blank"),
        (b"k,i,x,b,s,t\n1,1,1,true,a,b\n\n2,1,1,true,a,b\n", ("k", "bigint"), "blank"),
        (b"k,i,x,b,s,t\n1,1,1,true,a,b\n \n2,1,1,true,a,b\n", ("k", "bigint"), "columns"),
        (b"k,i,x,b,s,t\n1,1,1,true,a\n", ("k", "bigint"), "columns"),
    ],
)
def test_tokens_spark_might_read_otherwise_are_refused(
    tmp_path: Any, text: bytes, column: tuple[str, str], why: str
) -> None:
    with pytest.raises(Unreadable, match=why):
        _read(tmp_path, text, (column,))


def test_doubled_quotes_in_a_column_not_read_are_accepted(tmp_path: Any) -> None:
    text = b'k,i,x,b,s,t\n1,1,1,true,a,"x ""y"" z"\r\n2,1,1,true,b,c\r\n'
    assert _read(tmp_path, text, (("k", "bigint"), ("s", "string"))).to_pydict() == {
        "k": [1, 2], "s": ["a", "b"],
    }  # fmt: skip


def test_a_header_alone_or_an_empty_file_has_no_records(tmp_path: Any) -> None:
    for text in (b"", b"k,i,x,b,s,t", b"k,i,x,b,s,t\n"):
        assert _read(tmp_path, text, (("k", "bigint"),)).num_rows == 0


def test_a_file_changed_since_listing_is_refused(tmp_path: Any) -> None:
    path = tmp_path / "t.csv"
    path.write_bytes(b"k,i,x,b,s,t\n1,1,1,true,a,b\n")
    with pytest.raises(Unreadable, match="changed"):
        read_csv_files(((str(path), 3, None),), (("k", "bigint"),), LAYOUT)


def test_a_file_found_plain_is_checked_again_when_its_bytes_change(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A capture checks a file once (its early count, then its fused read): the bytes
    read again are compared with the ones found plain, and other bytes are checked."""
    from tensprov_lab.capture.sources import _direct_csv

    checks: list[int] = []
    check = _direct_csv._check_plain
    monkeypatch.setattr(_direct_csv, "_check_plain", lambda d, s: checks.append(1) or check(d, s))
    path = tmp_path / "t.csv"
    checked = CheckedFiles()

    def read(data: bytes) -> Any:
        path.write_bytes(data)
        files = ((str(path), len(data), None),)
        return read_csv_files(files, (("k", "bigint"), ("s", "string")), LAYOUT, checked)

    plain = b"k,i,x,b,s,t\n1,1,1,true,a,b\n"
    assert read(plain).to_pydict() == {"k": [1], "s": ["a"]}
    assert read(plain).to_pydict() == {"k": [1], "s": ["a"]} and len(checks) == 1
    # the same size, an escape now (Spark reads it otherwise): checked, and refused
    with pytest.raises(Unreadable, match="escape"):
        read(b"k,i,x,b,s,t\n1,1,1,true,\\,b\n")
    assert len(checks) == 2
    checked.clear()
    assert read(plain).num_rows == 1 and len(checks) == 3
    # past its limit a CheckedFiles keeps nothing: every read checks
    few = CheckedFiles(limit=4)
    for _ in range(2):
        read_csv_files(((str(path), len(plain), None),), (("k", "bigint"),), LAYOUT, few)
    assert len(checks) == 5


def test_layout_options() -> None:
    assert csv_layout({"header": "TRUE", "inferschema": "true"}, ["a", "b"]) == CsvLayout(
        ("a", "b"), ",", True
    )
    assert csv_layout({"sep": "|"}, ["a", "b"]) == CsvLayout(("a", "b"), "|", False)
    for options in ({"sep": "\t"}, {"sep": '"'}, {"enforceschema": "false"}, {"comment": "#"},
                    {"encoding": "latin1"}, {"nullvalue": "NA"}):  # fmt: skip
        assert csv_layout(options, ["a", "b"]) is None, options
    assert csv_layout({}, ["a"]) is None  # one column: blank lines are values to pyarrow
    assert csv_layout({}, ["a", "A"]) is None


def test_a_file_says_whether_a_value_quotes_a_quote(tmp_path: Any) -> None:
    """Only a file with a doubled quote inside a quoted value has values holding a
    quote; the flag is kept with the bytes a capture found plain, so a second read of
    the file still refuses such a value in a column it reads."""
    from tensprov_lab.capture.sources._direct_csv import _check_plain

    assert _check_plain(b"a,b\n1,2\n", b",") is False
    assert _check_plain(b'a,b\n1,"x, y"\n', b",") is False
    assert _check_plain(b'a,b\n1,"x ""y"" z"\n', b",") is True
    path = tmp_path / "t.csv"
    text = b'k,i,x,b,s,t\n1,1,1,true,"a ""b"" c",b\n2,1,1,true,d,b\n'
    path.write_bytes(text)
    checked = CheckedFiles()
    files = ((str(path), len(text), None),)
    for _ in range(2):
        with pytest.raises(Unreadable, match="quote"):
            read_csv_files(files, (("k", "bigint"), ("s", "string")), LAYOUT, checked)
        # the column without it is read, from the bytes checked once
        got = read_csv_files(files, (("k", "bigint"), ("t", "string")), LAYOUT, checked)
        assert got.to_pydict() == {"k": [1, 2], "t": ["b", "b"]}
    assert checked.known(str(path), text, b",")
