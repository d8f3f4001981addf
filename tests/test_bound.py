"""The most records a plan can return (capture/plan/_bound.py): the rule per node
without a JVM, the walk over real plans, and the read it spares (an operation's keys
read without counting them first)."""

from __future__ import annotations

from typing import Any

import pytest

from tensprov_lab.capture.plan._bound import combine, remember, rows_at_most


def test_each_node_kind_bounds_its_records() -> None:
    assert combine("Project", [7]) == 7
    assert combine("Aggregate", [7]) == 7
    assert combine("Aggregate", [0]) == 1  # a global aggregate of nothing is one record
    assert combine("Union", [7, 3, 2]) == 12
    assert combine("Join", [4, 3], "Inner") == 12
    assert combine("Join", [4, 3], "Cross") == 12
    assert combine("Join", [4, 3], "LeftOuter") == 19
    assert combine("Join", [4, None], "LeftAnti") == 4
    assert combine("Join", [4, None], "Inner") is None
    assert combine("Generate", [4]) is None  # an explode makes more records than it reads
    assert combine("MapInPandas", [4]) is None  # so may the user's Python
    assert combine("Filter", [None]) is None
    assert combine("LocalRelation", []) is None


def _optimized(df: Any) -> Any:
    return df._jdf.queryExecution().optimizedPlan()


def _analyzed(df: Any) -> Any:
    return df._jdf.queryExecution().analyzed()


@pytest.mark.spark
def test_plans_over_counted_sources_are_bounded(spark: Any) -> None:
    from pyspark.sql import functions as F

    a = spark.createDataFrame([(i, i % 7) for i in range(3000)], "id long, k long")
    b = spark.createDataFrame([(k, f"r{k}") for k in range(7)], "k long, name string")
    # createDataFrame of this many rows is an RDD scan: Spark knows no row count
    assert rows_at_most(_optimized(a.filter("id > 5"))) in (None, 3000)
    remember(_analyzed(a), 3000)
    remember(_analyzed(b), 7)
    assert rows_at_most(_optimized(a.filter("id > 5").select("k"))) == 3000
    assert rows_at_most(_optimized(a.join(b, "k"))) == 21000
    assert rows_at_most(_optimized(a.join(b, "k", "left_semi"))) == 3000
    assert rows_at_most(_optimized(a.groupBy("k").count().union(b.select("k", F.lit(1))))) == 3007
    assert rows_at_most(_optimized(a.sample(True, 2.0, seed=1))) is None
    assert rows_at_most(_optimized(a.select(F.explode(F.array("id", "k"))))) is None
    # a self-join's second side is the leaf again with new attribute ids: not counted
    c = a.alias("x").join(a.alias("y"), F.col("x.id") == F.col("y.k"))
    assert rows_at_most(_optimized(c)) is None
    assert rows_at_most(_optimized(spark.range(50).crossJoin(spark.range(4)))) == 200


@pytest.mark.spark
def test_reads_bounded_by_their_sources_are_not_counted(spark: Any, monkeypatch: Any) -> None:
    """A union, a distinct and joins over tracked sources: their keys are read in one
    job each, the sources' counts bounding them (counted first, each read was a job
    more), with the same tensors."""
    import tensprov_lab
    from tensprov_lab.capture.plan import _pieces

    def tracked() -> Any:
        a = spark.createDataFrame(
            [(i, i % 7, float(i)) for i in range(3000)], "id long, k long, v double"
        )
        b = spark.createDataFrame([(k, f"r{k % 3}") for k in range(7)], "k long, region string")
        with tensprov_lab.track(spark, name="bound") as run:
            big = a.filter("v > 10")
            big.select("k").union(b.select("k")).distinct()
            b.join(big, "k", "full")
            b.join(big, "k", "left_semi")
        return run

    bounded = tracked()
    monkeypatch.setattr(_pieces, "rows_at_most", lambda plan: None)
    counted = tracked()
    assert [op.method for op in bounded.operations] == [op.method for op in counted.operations]
    for mine, theirs in zip(bounded.operations, counted.operations, strict=True):
        assert not mine.opaque and mine.jobs <= theirs.jobs, (mine.method, mine.jobs, theirs.jobs)
        for t, u in zip(mine.tensors, theirs.tensors, strict=True):
            assert (t.to_sparse() != u.to_sparse()).nnz == 0, mine.method
    assert bounded._log.jobs < counted._log.jobs - 3, (bounded._log.jobs, counted._log.jobs)
