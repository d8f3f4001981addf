"""Capture reads only what the driver can hold: a join without a condition is never read
as its ``n * m`` pairs, and a result past what this process can hold keeps its
operation coarse with a warning that says why (capture/plan/_pieces.py, rules/join.py)."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

import tensprov_lab
from tensprov_lab.store import CrossTensor

pytestmark = pytest.mark.spark


#: the three ways of writing one join without a join condition
SHAPES = ["comma join", "join().where()", "crossJoin().filter()"]


def tracked_shape(session: Any, shape: str, n: int = 50_000, m: int = 1_000) -> tuple:
    """``a`` (``n`` records, key ``id % m``) joined to ``b`` (``m`` records) on ``k``,
    written as ``shape``, untracked and then tracked (classic or Connect ``session``):
    ``(run, out, a, b, crosses)`` with the run's cross-product tensors, once both runs
    gave the same records and no operation was opaque."""
    from pyspark.sql import functions as F

    a = session.range(n).withColumn("k", F.col("id") % m)
    b = session.range(m).withColumnRenamed("id", "k").withColumn("name", F.col("k").cast("string"))
    a.createOrReplaceTempView("pieces_a")
    b.createOrReplaceTempView("pieces_b")

    def make() -> Any:
        if shape == "comma join":
            return session.sql(
                "SELECT pieces_a.id, pieces_b.name FROM pieces_a, pieces_b "
                "WHERE pieces_a.k = pieces_b.k"
            )
        if shape == "join().where()":
            return a.join(b).where(a.k == b.k).select(a.id, b.name)
        return a.crossJoin(b).filter(a.k == b.k).select(a.id, b.name)

    want = sorted(make().collect())
    with tensprov_lab.track(session, name=shape) as run:
        out = make()
        got = sorted(out.collect())
    assert got == want
    assert not [op.warnings for op in run.operations if op.opaque]
    crosses = [t for op in run.operations for t in op.tensors or [] if isinstance(t, CrossTensor)]
    assert all(t.nbytes == 0 for t in crosses)
    return run, out, a, b, crosses


@pytest.mark.parametrize("shape", SHAPES)
def test_a_join_written_without_a_condition_never_reads_the_cross_product(
    spark: Any, shape: str
) -> None:
    """50,000 x 1,000 records: the product (5e7 pairs, 800 MB of keys) killed a 1 GB
    driver; the filter over it is captured as the join it is, its product implicit."""
    run, out, a, b, crosses = tracked_shape(spark, shape)
    if shape == "comma join":
        assert not crosses  # the statement's join has its condition
    else:
        assert len(crosses) == 2
        assert crosses[0].n_out == 50_000 * 1_000
    # record 7 of the output: order 7 (k = 7) and customer 7
    rows = run.rows(out, rows=[7])
    assert rows["id"].tolist() == [7] and rows["name"].tolist() == ["7"]
    lin = run.backward(out, rows=[7])
    assert lin[a].tolist() == [7] and lin[b].tolist() == [7]
    assert run.forward(b, rows=[3], to=out)[out].tolist() == list(range(3, 50_000, 1_000))


def test_a_result_past_what_the_process_can_hold_stays_coarse_with_why(
    spark: Any, monkeypatch: Any
) -> None:
    """A theta join of 2,000 x 2,000 records (about 2M pairs) where this process may hold
    1 MB of keys: the join is an opaque step saying why, the block's result is the
    untracked one, and nothing is raised; under the limit the same join is traced."""
    from pyspark.sql import functions as F

    from tensprov_lab.capture.plan import _pieces

    a = spark.range(2_000).select(F.col("id").alias("x"))
    b = spark.range(2_000).select(F.col("id").alias("y"))
    want = a.join(b, a.x < b.y).count()
    monkeypatch.setattr(_pieces, "_process_budget", lambda: 1 << 20)
    # Spark's estimate of a range is small: say it is large, so capture counts
    monkeypatch.setattr(_pieces, "AT_ONCE_SHARE", 1 << 40)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        with tensprov_lab.track(spark, name="theta") as run:
            out = a.join(b, a.x < b.y)
            got = out.count()
    assert got == want
    (op,) = [op for op in run.operations if op.method == "join"]
    assert op.opaque and "more than this process can hold" in op.warnings[0]
    assert any("more than this process can hold" in str(w.message) for w in said)
    monkeypatch.setattr(_pieces, "_process_budget", lambda: 1 << 40)
    with tensprov_lab.track(spark, name="theta-traced") as run:
        out = a.join(b, a.x < b.y)
    assert not run.operations[-1].opaque
    assert run.dataset(out).n_rows == want
    # output record 0 is the pair (0, 1): canonical order by (left, right)
    assert run.backward(out, rows=[0])[a].tolist() == [0]
    assert run.backward(out, rows=[0])[b].tolist() == [1]
    assert np.array_equal(run.forward(a, rows=[1998], to=out)[out], [want - 1])
