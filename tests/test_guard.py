"""Capture never fails the user's block (tensprov_lab/capture/recording/_guard.py).

Whatever capture meets after the block's code ran (a streaming DataFrame, a source the
block removed, a subquery DataFrame with outer references, a failure of any of its own
steps), the block ends as it would untracked: same results, nothing raised, no Spark
error pages on the console, and one warning that says why.
"""

from __future__ import annotations

import os
import tempfile
import warnings
from collections.abc import Callable
from typing import Any

import pytest
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

import tensprov_lab
from tensprov_lab._warn import TensProvWarning
from tensprov_lab.capture.recording import _columns as columns_module
from tensprov_lab.capture.recording import _tracker as tracker_module
from tensprov_lab.capture.recording._tracker import Tracker

pytestmark = pytest.mark.spark


def _tracked(spark: Any, body: Callable[[], Any]) -> tuple[Any, Any, list[str]]:
    """``body()`` in a tracked block: its result, the run and the warnings it gave."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with tensprov_lab.track(spark) as run:
            result = body()
    said = [str(w.message) for w in caught if issubclass(w.category, TensProvWarning)]
    return result, run, said


def _spark_errors(err: str) -> list[str]:
    return [line for line in err.splitlines() if " ERROR " in line or "Exception" in line]


def _assert_next_block_captures(spark: Any) -> None:
    with tensprov_lab.track(spark) as run:
        kept = spark.range(10).filter("id > 6")
    assert run.dataset(kept).n_rows == 3
    assert list(run.backward(kept, rows=[0]).to_dict().values()) == [[7]]


# -- what capture must not read --------------------------------------------------------


def test_streaming_dataframes_are_one_coarse_node_with_one_warning(spark: Any) -> None:
    batch = spark.range(5)

    def body() -> Any:
        stream = spark.readStream.format("rate").load()
        marked = stream.withWatermark("timestamp", "1 minute")
        values = marked.select("value", (F.col("value") * 2).alias("twice"))
        joined = values.join(batch, values.value == batch.id)
        once = marked.dropDuplicatesWithinWatermark(["value"])
        return values, joined, once

    (values, joined, once), run, said = _tracked(spark, body)
    assert values.isStreaming and joined.isStreaming and once.isStreaming
    assert values.columns == ["value", "twice"]
    assert len(said) == 1 and "streaming DataFrame" in said[0], said
    for df in (values, joined, once):
        ds = run.dataset(df)
        assert ds.n_rows is None
        assert run.store.producer(ds.id).opaque
    # the batch input of the join is still a source of its own, and read
    sources = [d for d in run.datasets if d.role == "source"]
    assert sum(d.n_rows == 5 for d in sources) == 1
    assert any(d.origin.startswith("not read: a streaming DataFrame") for d in sources)
    _assert_next_block_captures(spark)


def test_a_stream_of_an_earlier_block_is_not_read_by_a_later_one(spark: Any) -> None:
    with tensprov_lab.track(spark):
        values = spark.readStream.format("rate").load().select("value")
    _, run, said = _tracked(spark, lambda: values.withColumn("twice", F.col("value") * 2))
    (op,) = run.operations
    assert op.opaque and "streaming DataFrame" in op.warnings[0]
    assert not any("cannot be read" in w for w in op.warnings), op.warnings
    assert len(said) == 1 and "streaming DataFrame" in said[0], said


def test_files_removed_inside_the_block(spark: Any, capfd: pytest.CaptureFixture) -> None:
    def body() -> Any:
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "x")
            spark.range(10).write.parquet(path)
            big = spark.read.parquet(path).filter("id > 3")
            counted = big.count()
            shown = sorted(r.id for r in big.collect())
        return big, counted, shown

    capfd.readouterr()
    (big, counted, shown), run, said = _tracked(spark, body)
    err = capfd.readouterr().err
    assert (counted, shown) == (6, [4, 5, 6, 7, 8, 9])
    assert len(said) == 1 and "files were removed before the block ended" in said[0], said
    assert _spark_errors(err) == [], err[:2000]
    assert run.dataset(big).n_rows is None and run.store.producer(run.dataset(big).id).opaque
    _assert_next_block_captures(spark)


def test_table_dropped_inside_the_block(spark: Any, capfd: pytest.CaptureFixture) -> None:
    def body() -> Any:
        spark.range(8).write.mode("overwrite").saveAsTable("guard_dropped")
        few = spark.table("guard_dropped").filter("id < 3")
        counted = few.count()
        spark.sql("DROP TABLE guard_dropped")
        return few, counted

    capfd.readouterr()
    (few, counted), run, said = _tracked(spark, body)
    err = capfd.readouterr().err
    assert counted == 3
    assert len(said) == 1 and "files were removed" in said[0], said
    assert _spark_errors(err) == [], err[:2000]
    assert run.dataset(few).n_rows is None


@pytest.mark.skipif(not hasattr(Column, "outer"), reason="Column.outer is new in Spark 4.0")
def test_subquery_dataframes_with_outer_references(
    spark: Any, capfd: pytest.CaptureFixture
) -> None:
    a = spark.range(5)
    b = spark.range(5).withColumnRenamed("id", "j")

    def body() -> Any:
        below = b.where(F.col("j") < F.col("id").outer()).select(F.count("*")).scalar()
        return a.select("id", below.alias("c"))

    plain = body().collect()
    capfd.readouterr()
    out, run, said = _tracked(spark, body)
    err = capfd.readouterr().err
    assert out.collect() == plain and len(plain) == 5
    assert _spark_errors(err) == [], err[:2000]
    assert not any("could not record" in s for s in said), said
    assert run.dataset(out).n_rows == 5


@pytest.mark.skipif(not hasattr(DataFrame, "lateralJoin"), reason="lateralJoin is new in 4.0")
def test_a_lateral_join_of_a_table_function_with_outer_references(
    spark: Any, capfd: pytest.CaptureFixture
) -> None:
    """The table function's DataFrame is part of the join's expression, no dataset: it
    is not read (Spark would log its failed analysis), the join is one opaque step with
    one warning, and what follows it is traced."""
    a = spark.createDataFrame([(1, "x"), (2, "y"), (3, "z")], "k int, s string")

    def body() -> tuple[Any, Any]:
        fn = spark.tvf.explode(F.array(F.col("k").outer(), F.lit(7))).alias("t")
        joined = a.filter("k > 1").lateralJoin(fn)
        return joined, joined.filter("col > 2")

    plain = body()[1].collect()
    capfd.readouterr()
    (joined, out), run, said = _tracked(spark, body)
    err = capfd.readouterr().err
    assert out.collect() == plain and len(plain) == 3
    assert _spark_errors(err) == [], err[:2000]
    assert len(said) == 1 and "LateralJoin" in said[0], said
    assert [op.method for op in run.operations] == ["filter", "lateralJoin", "filter"]
    assert [op.opaque for op in run.operations] == [False, True, False]
    # the opaque join's records are numbered afresh; the filter after it is traced
    rows = run.rows(joined)
    got = [tuple(r) for r in run.rows(out)[["k", "s", "col"]].itertuples(index=False)]
    assert got == [tuple(r) for r in plain]
    first = run.backward(out, rows=[0], to=joined)[joined].tolist()
    assert len(first) == 1 and tuple(rows.iloc[first[0]][["k", "s", "col"]]) == got[0]


# -- a failure of capture's own steps --------------------------------------------------


def _boom(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("injected failure 42")


#: capture's steps, each made to fail: (what is patched, its attribute, what the one
#: warning says)
STEPS = [
    (tracker_module, "rewrite", "capture failed"),
    (tracker_module, "annotate_source", "capture failed"),
    (columns_module, "attribute_maps", "column lineage not captured"),
    (Tracker, "_tensors", "capture failed"),
    (Tracker, "_scan_index", "capture failed"),
    (Tracker, "_capture_source", "capture failed"),
    (Tracker, "_capture_operation", "capture failed"),
    (Tracker, "_name_variables", "the operations after it are not recorded"),
    (Tracker, "_account", "the operations after it are not recorded"),
]


def _pipeline(spark: Any) -> Any:
    left = spark.createDataFrame([(i, i % 3) for i in range(12)], ["id", "g"])
    right = spark.createDataFrame([(g, f"g{g}") for g in range(3)], ["g", "label"])
    big = left.filter("id > 2")
    joined = big.join(right, "g")
    # a window step, which a fused read does not cover: without one, the whole pipeline
    # is captured by fused reads and some of capture's steps (counting a source's
    # records) never run
    ranked = joined.withColumn("r", F.row_number().over(Window.partitionBy("label").orderBy("id")))
    return ranked.groupBy("label").agg(F.count("*").alias("n")).orderBy("label")


@pytest.mark.parametrize("owner,name,says", STEPS, ids=[name for _, name, _ in STEPS])
def test_a_failing_step_leaves_the_block_as_untracked(
    spark: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
    owner: Any,
    name: str,
    says: str,
) -> None:
    plain = [tuple(r) for r in _pipeline(spark).collect()]
    monkeypatch.setattr(owner, name, _boom)

    def body() -> Any:
        out = _pipeline(spark)
        print(out.count())
        return out

    capsys.readouterr()
    out, run, said = _tracked(spark, body)
    printed = capsys.readouterr().out
    assert printed == "3\n"
    assert [tuple(r) for r in out.collect()] == plain
    about = [s for s in said if "injected failure 42" in s]
    assert len(about) == 1, said
    assert says in about[0], about
    assert tensprov_lab.last_run() is run
    monkeypatch.undo()
    _assert_next_block_captures(spark)


def test_a_failing_fused_read_still_captures_record_level(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failure of an optional step (the fused reads) costs speed, not provenance."""
    monkeypatch.setattr(tracker_module._fused, "plan", _boom)
    out, run, said = _tracked(spark, lambda: spark.range(10).filter("id > 6"))
    assert [s for s in said if "injected failure 42" in s] == [
        "fused capture not used (injected failure 42)"
    ], said
    assert run.dataset(out).n_rows == 3
    assert list(run.backward(out, rows=[0]).to_dict().values()) == [[7]]
