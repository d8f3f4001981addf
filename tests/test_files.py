"""A source file that changes after capture: reading its records (or anything derived from
them) is a clear error naming the file, never other records under the captured rows."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

import tensprov_lab

pytestmark = pytest.mark.spark


def _write_csv(path: Path, rows: list[tuple[int, float]]) -> None:
    path.write_text("oid,amount\n" + "".join(f"{o},{a}\n" for o, a in rows))


def test_a_rewritten_csv_is_an_error_not_other_records(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "o.csv"
    _write_csv(path, [(i, float(i * 7)) for i in range(50)])
    with tensprov_lab.track(spark, name="files") as run:
        orders = spark.read.csv(str(path), header=True, inferSchema=True)
        big = orders.filter("amount > 40")
    first = run.rows(big, rows=[0])
    assert (int(first["oid"][0]), float(first["amount"][0])) == (6, 42.0)
    assert run.backward(big, rows=[0])[orders].tolist() == [6]

    time.sleep(0.01)  # (a later modification time even on coarse clocks)
    _write_csv(path, [(i, float(i * 11)) for i in range(60)])
    # lineage still answers: it is kept in the store
    assert run.backward(big, rows=[0])[orders].tolist() == [6]
    for read in (lambda: run.rows(big, rows=[0]), lambda: run.rows(orders, rows=[6])):
        with pytest.raises(ValueError, match="o.csv changed since capture") as err:
            read()
        assert "capture again" in str(err.value)
    with pytest.raises(ValueError, match="o.csv changed since capture"):
        run.what_if(drop={orders: [6]}, to=[big])

    # captured again, the new file is read as it is now
    with tensprov_lab.track(spark, name="files-again") as again:
        orders2 = spark.read.csv(str(path), header=True, inferSchema=True)
        big2 = orders2.filter("amount > 40")
    row = again.rows(big2, rows=[0])
    assert (int(row["oid"][0]), float(row["amount"][0])) == (4, 44.0)


def test_a_removed_parquet_file_is_named(spark: Any, tmp_path: Path) -> None:
    folder = tmp_path / "orders.parquet"
    spark.range(40).selectExpr("id", "id * 2 AS twice").repartition(2).write.parquet(str(folder))
    with tensprov_lab.track(spark, name="parquet-files") as run:
        orders = spark.read.parquet(str(folder))
        even = orders.filter("id % 2 = 0")
    assert len(run.rows(even)) == 20
    victim = sorted(p for p in os.listdir(folder) if p.endswith(".parquet"))[0]
    moved = tmp_path / victim
    shutil.move(str(folder / victim), moved)
    try:
        with pytest.raises(ValueError, match=f"{victim} was removed since capture"):
            run.rows(even, rows=[0])
    finally:
        shutil.move(str(moved), folder / victim)
    assert len(run.rows(even)) == 20  # put back as it was: readable again


def test_a_source_without_files_is_not_checked(spark: Any) -> None:
    df = spark.createDataFrame([(1,), (2,), (3,)], "x long")
    with tensprov_lab.track(spark, name="no-files") as run:
        kept = df.filter("x > 1")
    assert run.rows(kept)["x"].tolist() == [2, 3]


def test_a_csv_read_dropping_malformed_records_is_exact(spark: Any, tmp_path: Path) -> None:
    """``mode=DROPMALFORMED`` with a schema some lines do not fit: which records exist
    depends on the columns a query parses (a count parses none), so capture pins the
    source; every query answers, with the records the user's DataFrames hold."""
    path = tmp_path / "m.csv"
    lines = [f"{i},{i * 3}.5,r{i % 4}" if i % 9 else f"{i},not-a-number,r0" for i in range(60)]
    path.write_text("id,amount,region\n" + "\n".join(lines) + "\n")
    schema = "id INT, amount DOUBLE, region STRING"
    with tensprov_lab.track(spark, name="malformed") as run:
        src = spark.read.csv(str(path), header=True, schema=schema, mode="DROPMALFORMED")
        big = src.filter("amount > 40")
        per = big.groupBy("region").count()
    kept = [i for i in range(60) if i % 9]
    assert run.dataset(src).n_rows == len(kept)
    assert run.rows(src)["id"].tolist() == [r.id for r in src.collect()]
    big_rows = run.rows(big)
    assert big_rows["id"].tolist() == [r.id for r in big.collect()]
    src_ids = run.rows(src)["id"].tolist()
    for i, rid in enumerate(big_rows["id"].tolist()):
        assert [src_ids[j] for j in run.backward(big, rows=[i])[src].tolist()] == [rid]
    counts = {r.region: r["count"] for r in per.collect()}
    for i, region in enumerate(run.rows(per)["region"].tolist()):
        assert len(run.backward(per, rows=[i])[src]) == counts[region]


@pytest.mark.parametrize(
    "options",
    [
        {"header": "true", "inferSchema": "true"},
        {"header": "true", "inferSchema": "true", "recursiveFileLookup": "true"},
        {"header": "true", "inferSchema": "true", "pathGlobFilter": "*a.csv"},
        {
            "header": "true",
            "schema": "id INT, amount DOUBLE, _corrupt STRING",
            "columnNameOfCorruptRecord": "_corrupt",
        },
        {"header": "true", "inferSchema": "true", "modifiedAfter": "2023-01-01T00:00:00"},
        {"header": "true", "inferSchema": "true", "modifiedBefore": "2023-01-01T00:00:00"},
        {"header": "true", "inferSchema": "true", "samplingRatio": "0.3"},
    ],
    ids=["header-across-files", "recursive", "glob", "corrupt-column", "modified-after",
         "modified-before", "sampling-ratio"],
)  # fmt: skip
def test_reader_options_that_decide_records_are_read_as_spark_reads_them(
    spark: Any, tmp_path: Path, options: dict[str, str]
) -> None:
    """A directory of CSV files (headers in each, one nested folder, one malformed
    line) under options that decide which files and records exist: capture's records
    are the ones the user's DataFrame holds, and each filtered record's lineage is its
    own source record."""
    folder = tmp_path / "parts"
    (folder / "nested").mkdir(parents=True)
    bodies = {
        "1a.csv": [f"{i},{i * 1.5}" for i in range(0, 12)],
        "2b.csv": [f"{i},{i * 1.5}" for i in range(12, 20)] + ["20,oops"],
        "nested/3a.csv": [f"{i},{i * 1.5}" for i in range(21, 30)],
    }
    import datetime
    import os

    for (name, body), year in zip(bodies.items(), (2020, 2024, 2022)):
        (folder / name).write_text("id,amount\n" + "\n".join(body) + "\n")
        # modifiedBefore/After pick files by these times
        stamp = datetime.datetime(year, 6, 1, tzinfo=datetime.timezone.utc).timestamp()
        os.utime(folder / name, (stamp, stamp))
    opts = dict(options)
    schema = opts.pop("schema", None)
    with tensprov_lab.track(spark, name="reader-options") as run:
        reader = spark.read.options(**opts)
        src = (reader.schema(schema) if schema else reader).csv(str(folder))
        big = src.filter("id % 3 = 0")
    import pandas as pd

    pd.testing.assert_frame_equal(
        run.rows(src).drop(columns="_row"), src.toPandas(), check_dtype=False
    )
    src_ids = run.rows(src)["id"].tolist()
    assert src_ids == [r.id for r in src.collect()]
    big_ids = run.rows(big)["id"].tolist()
    assert big_ids == [r.id for r in big.collect()]
    for i, rid in enumerate(big_ids):
        assert [src_ids[j] for j in run.backward(big, rows=[i])[src].tolist()] == [rid]
