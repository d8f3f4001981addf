"""The tracker's own machinery: counting sources while the block runs."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from pyspark.sql import functions as F

import tensprov_lab
from tensprov_lab.capture.recording import _tracker

pytestmark = pytest.mark.spark


def _pipeline(spark: Any) -> tuple[Any, dict[str, Any]]:
    """Sources first read by a projection, a filter, an aggregate and a join."""
    a = spark.range(0, 40, 1, 3).withColumn("g", F.col("id") % 4)
    b = spark.createDataFrame([(i, f"v{i}") for i in range(0, 40, 3)], "id long, v string")
    c = spark.range(0, 25, 1, 2)
    d = spark.createDataFrame([(i % 5, i) for i in range(12)], "k long, x long")
    with tensprov_lab.track(spark) as run:
        out = {
            "projected": a.withColumn("h", F.col("g") * 2),
            "filtered": c.filter("id % 3 = 1"),
            "summed": d.groupBy("k").agg(F.sum("x").alias("s")),
        }
        out["joined"] = out["projected"].join(b, "id")
    return run, out


def _summary(run: Any, out: dict[str, Any]) -> dict[str, Any]:
    return {
        "operations": [(o.method, o.category, o.opaque) for o in run.operations],
        "rows": {d.label: d.n_rows for d in run.datasets},
        "lineage": {name: run.backward(df).to_dict() for name, df in out.items()},
        "records": {name: run.rows(df).values.tolist() for name, df in out.items()},
    }


def _watch_spark_counts(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the threads that count sources with a Spark job, as they count."""
    threads: list[str] = []
    real = _tracker.Tracker._scan_index

    def spy(self, ann):  # noqa: ANN001, ANN202
        threads.append(threading.current_thread().name)
        return real(self, ann)

    monkeypatch.setattr(_tracker.Tracker, "_scan_index", spy)
    return threads


def test_sources_are_counted_while_the_block_runs(spark, monkeypatch) -> None:  # noqa: ANN001
    threads = _watch_spark_counts(monkeypatch)
    run, out = _pipeline(spark)
    # three sources are read first by a projection, a filter and an aggregate: the first
    # is counted by the worker; the filter and the aggregate read their sources in scan
    # order (the fused capture), which sizes them without a count; the join's right
    # side is read by the join, which numbers it from its own read
    assert sorted(threads) == ["tensprov-lab-index_0"]
    assert [o.method for o in run.operations if o.fused] == ["filter", "agg", "join"]
    early = _summary(run, out)

    # the oracle: the same pipeline counted at the end of the block, in this thread
    threads.clear()
    monkeypatch.setattr(_tracker.Tracker, "_index_early", lambda self, method, inputs: None)
    late_run, late_out = _pipeline(spark)
    # not counted at all: the fused reads size every source (the projected one too,
    # whose join key its read carries)
    assert threads == []
    late = _summary(late_run, late_out)
    assert early["operations"] == late["operations"]
    assert sorted(early["rows"].values(), key=str) == sorted(late["rows"].values(), key=str)
    assert early["lineage"] == late["lineage"]
    assert early["records"] == late["records"]
    assert run.dataset(out["filtered"]).n_rows == 8


def test_a_failed_count_is_made_again(spark, monkeypatch) -> None:  # noqa: ANN001
    real = _tracker.Tracker._scan_index

    def flaky(self, ann):  # noqa: ANN001, ANN202
        if threading.current_thread().name.startswith("tensprov-lab-index"):
            raise RuntimeError("the worker's job failed")
        return real(self, ann)

    monkeypatch.setattr(_tracker.Tracker, "_scan_index", flaky)
    run, out = _pipeline(spark)
    assert not any(o.opaque for o in run.operations)
    assert run.dataset(out["filtered"]).n_rows == 8
    assert run.backward(out["filtered"]).to_dict() == {"c": [1, 4, 7, 10, 13, 16, 19, 22]}


def test_the_workers_dataframes_are_not_recorded(spark) -> None:  # noqa: ANN001
    src = spark.range(0, 30, 1, 2)
    with tensprov_lab.track(spark) as run:
        out = src.withColumn("x", F.col("id") + 1)
        # the user keeps writing while the worker counts ``src`` with DataFrame calls
        more = [out.withColumn(f"y{i}", F.col("x") * i) for i in range(20)]
    assert [o.method for o in run.operations] == ["withColumn"] * 21
    assert len(run.datasets) == 22
    assert run.rows(more[-1]).shape == (30, 1 + 3)


@pytest.mark.parametrize("source", ["parquet", "csv", "csv with a blank line"])
def test_a_source_of_one_file_is_counted_from_it(
    spark: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch, source: str
) -> None:
    """A source that is one local file Spark reads whole is counted from the file, not
    by a Spark job; a CSV file that is not plain (a blank line, which Spark skips) is
    counted by Spark.  Either way the lineage is that of Spark's count."""
    from tensprov_lab.capture.recording import _recording

    rows = [(i, f"s{i}", float(i) / 2) for i in range(23)]
    if source == "parquet":
        spark.createDataFrame(rows, "k long, s string, x double").coalesce(1).write.parquet(
            str(tmp_path / "one")
        )
    else:
        lines = ["k,s,x", *(f"{k},{s},{x}" for k, s, x in rows)]
        if source != "csv":
            lines.insert(5, "")
        (tmp_path / "one.csv").write_text("\n".join(lines) + "\n")
    spark_counts = _watch_spark_counts(monkeypatch)

    def capture() -> tuple[Any, Any, Any]:
        if source == "parquet":
            src = spark.read.parquet(str(tmp_path / "one"))
        else:
            src = spark.read.csv(
                str(tmp_path / "one.csv"), header=True, schema="k long, s string, x double"
            )
        with tensprov_lab.track(spark) as run:
            out = src.withColumn("y", F.col("x") * 2).select("k", "y")
        return run, src, out

    run, src, out = capture()
    assert spark_counts == ([] if source != "csv with a blank line" else ["tensprov-lab-index_0"])
    assert run.dataset(src).n_rows == 23
    lineage = run.backward(out, rows=[0, 22]).to_dict()
    # the oracle: Spark's count of the same source
    spark_counts.clear()
    monkeypatch.setattr(_recording, "direct_count", lambda jvm, plan, checked=None: None)
    oracle, src2, out2 = capture()
    assert spark_counts == ["tensprov-lab-index_0"]
    assert oracle.dataset(src2).n_rows == 23
    assert oracle.backward(out2, rows=[0, 22]).to_dict() == lineage
    assert (
        run.rows(out, rows=[0, 22]).values.tolist()
        == oracle.rows(out2, rows=[0, 22]).values.tolist()
    )
