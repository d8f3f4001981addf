"""Property-based: random pipelines over sources written as files, against the oracle.

The sources are drawn as files a user has: CSV in random dialects (separator, quote,
header or not, values holding the separator, the quote or a line break), with malformed
lines read PERMISSIVE or DROPMALFORMED, in one to three files; Parquet in several files
with small row groups, partitioned by a column, or of two schemas merged.  Each
pipeline (steps, an equi-join, maybe an aggregate: the shapes fused capture reads from
the sources) is captured twice, with the sources' columns read straight from their
files where capture can and with every read through Spark, and both runs are checked
against the oracle (tests/oracle.py) record by record and cell by cell.  Which path
ran is asserted: the Spark-only run reads no file itself, and the plain files are read
directly.
"""

from __future__ import annotations

import csv
import os
import tempfile
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st

from tests.test_capture_oracle import A_COLS, B_COLS, a_rows, b_rows, draw_fused_steps, run_steps

pytestmark = pytest.mark.spark

A_SCHEMA, B_SCHEMA = "k bigint, v bigint, s string", "k bigint, w bigint"
#: the string values a CSV source's column ``s`` takes (the oracle's x/y/z mapped)
_TEXT = {"x": "x", "y": "y, with sep", "z": 'z "quoted"\nover two lines'}


@st.composite
def csv_specs(draw: Any) -> dict[str, Any]:
    multiline = draw(st.booleans())
    return {
        "fmt": "csv",
        "sep": draw(st.sampled_from([",", ";", "\t", "|"])),
        "quote": draw(st.sampled_from(['"', "'"])),
        "header": draw(st.booleans()),
        "multiline": multiline,
        "files": draw(st.integers(1, 3)),
        "malformed": draw(st.integers(0, 2)),
        "mode": draw(st.sampled_from(["PERMISSIVE", "DROPMALFORMED"])),
    }


@st.composite
def parquet_specs(draw: Any) -> dict[str, Any]:
    return {
        "fmt": "parquet",
        "files": draw(st.integers(1, 3)),
        "row_group": draw(st.integers(1, 4)),
        "layout": draw(st.sampled_from(["plain", "partitioned", "merged"])),
    }


def _text(value: str | None, spec: dict[str, Any]) -> str | None:
    if value is None:
        return None
    text = _TEXT[value]
    text = text.replace(",", spec["sep"]).replace('"', spec["quote"])
    return text if spec["multiline"] else text.replace("\n", " ")


def _split(rows: list[tuple], parts: int) -> list[list[tuple]]:
    size = -(-len(rows) // parts) if rows else 0
    return [rows[i * size : (i + 1) * size] for i in range(parts)] if size else [[]]


def write_csv(folder: str, name: str, cols: list[str], rows: list[tuple], spec: dict) -> str:
    """``rows`` as CSV files in ``folder/name`` in ``spec``'s dialect (nulls as empty
    fields), ``spec["malformed"]`` malformed lines in the first file."""
    path = os.path.join(folder, name)
    os.makedirs(path)
    for i, part in enumerate(_split(rows, spec["files"])):
        with open(os.path.join(path, f"part-{i}.csv"), "w", newline="") as f:
            w = csv.writer(f, delimiter=spec["sep"], quotechar=spec["quote"], lineterminator="\n")
            if spec["header"]:
                w.writerow(cols)
            for r in part:
                w.writerow(["" if v is None else _text(v, spec) if c == "s" else v
                            for c, v in zip(cols, r)])  # fmt: skip
            if i == 0:
                for m in range(spec["malformed"]):
                    # a word where a number goes, or a line of too many fields
                    wide = ["1"] * (len(cols) + 2)
                    w.writerow(["n/a", *["1"] * (len(cols) - 1)] if m % 2 == 0 else wide)
    return path


def read_csv(spark: Any, path: str, schema: str, spec: dict) -> Any:
    """The files read as a user would: options given where they are not Spark's
    defaults (the quote doubled inside a value, RFC 4180, with another quote)."""
    options = {"sep": spec["sep"], "header": spec["header"], "mode": spec["mode"]}
    if spec["quote"] != '"':
        options.update(quote=spec["quote"], escape=spec["quote"])
    if spec["multiline"]:
        options["multiLine"] = True
    return spark.read.csv(path, schema=schema, **options)


def write_parquet(folder: str, name: str, schema: Any, rows: list[tuple], spec: dict) -> str:
    """``rows`` as Parquet files in ``folder/name`` with pyarrow (row groups of
    ``spec["row_group"]`` rows): plain, partitioned by the last column (``s`` or
    ``w``), or with the last column missing from the first file (schemas merged)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = os.path.join(folder, name)
    os.makedirs(path)
    names = schema.names
    parts = _split(rows, spec["files"])
    for i, part in enumerate(parts):
        table = pa.Table.from_pylist([dict(zip(names, r)) for r in part], schema=schema)
        where = path
        if spec["layout"] == "partitioned" and rows:  # (no rows: no directory to read)
            pq.write_to_dataset(
                table, path, partition_cols=[names[-1]], row_group_size=spec["row_group"],
                basename_template=f"part-{i}-{{i}}.parquet",
            )  # fmt: skip
            continue
        if spec["layout"] == "merged" and i == 0 and len(parts) > 1:
            table = table.drop_columns([names[-1]])
        pq.write_table(
            table, os.path.join(where, f"part-{i}.parquet"), row_group_size=spec["row_group"]
        )
    return path


def read_parquet(spark: Any, path: str, cols: list[str], spec: dict) -> Any:
    df = spark.read.parquet(path, mergeSchema=spec["layout"] == "merged")
    # a partition column comes last, and is typed from its directory names
    return df.select(*cols)


def sources(spark: Any, folder: str, a: list[tuple], b: list[tuple], spec: dict) -> tuple:
    if spec["fmt"] == "csv":
        a_df = read_csv(spark, write_csv(folder, "a", A_COLS, a, spec), A_SCHEMA, spec)
        b_df = read_csv(spark, write_csv(folder, "b", B_COLS, b, spec), B_SCHEMA, spec)
        return a_df, b_df
    import pyarrow as pa

    a_schema = pa.schema([("k", pa.int64()), ("v", pa.int64()), ("s", pa.string())])
    b_schema = pa.schema([("k", pa.int64()), ("w", pa.int64())])
    if spec["layout"] == "partitioned":
        # b partitioned by its key (the last column is the partition column)
        b_schema = pa.schema([("w", pa.int64()), ("k", pa.int64())])
        b = [(w, k) for k, w in b]
    a_df = read_parquet(spark, write_parquet(folder, "a", a_schema, a, spec), A_COLS, spec)
    b_df = read_parquet(spark, write_parquet(folder, "b", b_schema, b, spec), B_COLS, spec)
    return a_df, b_df


def _plain(spec: dict, a: list[tuple]) -> bool:
    """Sources capture reads straight from their files: Parquet files of one schema, not
    partitioned; CSV in Spark's default dialect, read PERMISSIVE, every line well formed
    and no quote inside a value."""
    if spec["fmt"] == "csv":
        return (
            spec["mode"] == "PERMISSIVE" and spec["quote"] == '"' and not spec["multiline"]
            and not spec["malformed"] and all(r[2] != "z" for r in a)
        )  # fmt: skip
    return spec["layout"] == "plain"


_EXAMPLES = int(os.environ.get("TENSPROV_FILE_EXAMPLES", "12"))


@settings(
    max_examples=_EXAMPLES,
    deadline=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(a=a_rows, b=b_rows, spec=st.one_of(csv_specs(), parquet_specs()), data=st.data())
def test_pipelines_over_files_match_oracle(spark, a, b, spec, data) -> None:  # noqa: ANN001
    import tensprov_lab

    steps = draw_fused_steps(data, a, b, max_steps=2)
    tracker = tensprov_lab._api._tracker(spark)
    with tempfile.TemporaryDirectory(prefix="tensprov-files-") as folder:
        a_df, b_df = sources(spark, folder, a, b, spec)
        for direct in (True, False):
            tracker.direct_reads = direct
            try:
                run = run_steps(spark, a_df, b_df, steps)
            finally:
                tracker.direct_reads = True
            reads = run._log.file_reads
            if not direct:
                assert reads == 0
            elif _plain(spec, a):
                assert reads > 0, spec
            plain = "plain" if _plain(spec, a) else "other"
            event(f"{spec['fmt']} {plain}, direct={direct}: {'some' if reads else 'no'} file reads")
            tensprov_lab.forget(run)
