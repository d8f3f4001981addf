"""Ctrl-C while a block is captured: the store is as before the block, pyspark's methods
are restored, earlier runs stay queryable and capture's Spark jobs are cancelled."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

import tensprov_lab
from tensprov_lab._api import _tracker
from tensprov_lab.capture.spark._versions import spark4
from tests._interrupts import ctrl_c

pytestmark = pytest.mark.spark


def _state(spark: Any) -> tuple[int, int, Any]:
    store = _tracker(spark).store
    return len(store.datasets), len(store.operations), DataFrame.filter


def _earlier_run(spark: Any) -> tuple[Any, Any]:
    df = spark.createDataFrame([(i, i % 7) for i in range(50)], "id long, g long")
    with tensprov_lab.track(spark, name="before") as run:
        out = df.filter("g > 2").groupBy("g").count()

    def check() -> None:
        # output row 0 is the group of the first kept record (id 3, g = 3)
        assert run.backward(out, rows=[0])[df].tolist() == list(range(3, 50, 7))

    check()
    return run, check


def test_interrupt_between_operations(spark: Any) -> None:
    _, check = _earlier_run(spark)
    datasets, operations, filter_method = _state(spark)
    df = spark.createDataFrame([(i, i % 5) for i in range(40)], "id long, g long")
    calls = []

    def progress(i: int, n: int, what: str) -> None:
        calls.append(what)
        if len(calls) == 3:  # a source and an operation are in the store by now
            raise KeyboardInterrupt

    tracked = tensprov_lab.track(spark, name="interrupted")
    tracked._progress = progress
    with pytest.raises(KeyboardInterrupt), tracked as run:
        a = df.filter("g > 1")
        b = a.withColumn("h", a.g * 2)
        b.groupBy("g").count()
    assert len(calls) == 3
    assert _state(spark) == (datasets, operations, filter_method)
    assert DataFrame.filter is filter_method
    with pytest.raises(LookupError, match="interrupted"):
        run.backward(a, rows=[0])
    # the earlier run answers as before, and the next block is captured as usual
    check()
    with tensprov_lab.track(spark, name="after") as again:
        c = df.filter("g > 1")
    assert again.dataset(c).n_rows == sum(1 for i in range(40) if i % 5 > 1)


def _interrupted(sc: Any, run: Any, df: Any) -> None:
    """The interrupted run answers nothing, and capture's jobs were cancelled, not left
    running."""
    with pytest.raises(LookupError, match="interrupted"):
        run.backward(df, rows=[0])
    deadline = time.monotonic() + 20
    while sc.statusTracker().getActiveJobsIds() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not sc.statusTracker().getActiveJobsIds()


def test_interrupt_during_a_spark_job(spark: Any) -> None:
    _, check = _earlier_run(spark)
    datasets, operations, filter_method = _state(spark)

    @F.udf("boolean")
    def slow(x: int) -> bool:
        time.sleep(0.02)
        return x % 2 == 0

    df = spark.createDataFrame([(i,) for i in range(4000)], "id long")
    timer = threading.Timer(3.0, ctrl_c)
    sc = spark.sparkContext
    with pytest.raises(KeyboardInterrupt), tensprov_lab.track(spark) as run:
        kept = df.filter(slow("id"))
        timer.start()  # the capture's job takes ~40 s of UDF calls on two cores
    timer.cancel()
    assert _state(spark) == (datasets, operations, filter_method)
    _interrupted(sc, run, kept)
    check()


def test_interrupt_during_reads_run_side_by_side(spark: Any) -> None:
    """A fused capture reads its sources in jobs side by side (worker threads): Ctrl-C
    cancels them all and leaves everything as before the block."""
    _, check = _earlier_run(spark)
    state = _state(spark)
    left = spark.range(0, 60_000_000).withColumnRenamed("id", "k")
    right = spark.range(0, 1000).withColumnRenamed("id", "k")
    sc = spark.sparkContext
    timer = threading.Timer(1.5, ctrl_c)
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt), tensprov_lab.track(spark) as run:
        big = left.filter("k % 3 = 1")
        joined = big.join(right, "k")
        timer.start()
    timer.cancel()
    assert _state(spark) == state
    _interrupted(sc, run, joined)
    assert time.monotonic() - started < 30
    check()


@pytest.mark.parametrize("side_by_side", [False, True], ids=["alone", "side-by-side"])
def test_interrupt_during_a_read_in_pieces(
    spark: Any, monkeypatch: Any, side_by_side: bool
) -> None:
    """A source read through Spark in many pieces (a job each): Ctrl-C stops the read,
    which asks for no more pieces (its job group's cancelling stops only the job that
    runs), alone in the main thread or side by side with another read in a worker."""
    from tensprov_lab.capture.plan import _pieces
    from tensprov_lab.capture.sources import _fused

    _, check = _earlier_run(spark)
    state = _state(spark)
    asked: list[int] = []
    read_in_pieces = _pieces.read_in_pieces

    def counted(read: Any, partitions: Any, per: int, stop: Any) -> Any:
        def piece(lo: int, hi: int) -> Any:
            asked.append(lo)
            if len(asked) == 3:
                # Ctrl-C while the third piece's job runs: set off by the read itself, as
                # a timer set off while the block runs can come after a warm JVM read
                # every piece (150 jobs in under a second late in the suite)
                threading.Timer(0.01, ctrl_c).start()
            return read(lo, hi)

        return read_in_pieces(piece, partitions, per, stop)

    # 3M records in each of 2 partitions, pieces of 20,000 positions: 150 scans
    monkeypatch.setattr(_fused, "positions_per_piece", lambda session, row: 20_000)
    monkeypatch.setattr(_pieces, "read_in_pieces", counted)
    left = spark.range(0, 6_000_000, 1, 2).withColumnRenamed("id", "k")
    right = spark.range(0, 1000).withColumnRenamed("id", "k")
    sc = spark.sparkContext
    with pytest.raises(KeyboardInterrupt), tensprov_lab.track(spark) as run:
        big = left.filter("k % 3 = 1")
        if side_by_side:
            big.join(right, "k")
    before = len(asked)
    assert before >= 3  # (the Ctrl-C came while pieces were read)
    _interrupted(sc, run, big)
    time.sleep(2.0)  # time for a dozen more pieces, had the read gone on
    assert len(asked) <= before + 1, (before, len(asked))
    assert _state(spark) == state
    check()


@pytest.mark.skipif(
    not spark4(),
    reason="KNOWN FAILURE on pyspark 3.5 in CI's 3.5 list (passes alone): the Ctrl-C took "
    "the whole 40 s job there; open, see the stop note of 2026-11-30",
)
def test_interrupt_during_a_recomputation(spark: Any) -> None:
    """Ctrl-C while ``run.rows`` recomputes records (a Spark job of ~40 s) raises it at
    once, with the job cancelled, and the run answers as before."""

    @F.udf("long")
    def slow(x: int) -> int:
        time.sleep(0.02)
        return x * 2

    df = spark.createDataFrame([(i,) for i in range(4000)], "id long")
    with tensprov_lab.track(spark, name="recomputed") as run:
        doubled = df.withColumn("twice", slow("id"))  # captured without a job
    timer = threading.Timer(2.0, ctrl_c)
    started = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        run.rows(doubled)
    timer.cancel()
    assert time.monotonic() - started < 30  # (the whole job takes ~40 s)
    deadline = time.monotonic() + 20
    sc = spark.sparkContext
    while sc.statusTracker().getActiveJobsIds() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not sc.statusTracker().getActiveJobsIds()
    assert run.backward(doubled, rows=[7])[df].tolist() == [7]


def test_python_tasks_after_a_cancelled_capture_run_as_without_it(
    spark: Any, tmp_path: Any
) -> None:
    """Cancelling a capture kills its Python tasks.  Spark 3.5 can leave the killed
    tasks' workers, closed, in its pool of idle workers, and the next Python task given
    one fails with "Socket is closed" (no job of the user's was running: the capture's
    was).  The user's next Python jobs must run as if nothing had been tracked."""

    @F.udf("boolean")
    def slow(x: int) -> bool:
        time.sleep(0.02)
        return x % 2 == 0

    # (a pyspark 3.5 DataFrame made from a list reads its rows through Python tasks)
    df = spark.createDataFrame([(i,) for i in range(4000)], "id long")
    rows = [(j, str(j)) for j in range(20)]

    def python_job(path: str) -> None:
        spark.createDataFrame(rows, "a long, b string").repartition(3).write.parquet(path)
        assert sorted(tuple(r) for r in spark.read.parquet(path).collect()) == rows

    python_job(str(tmp_path / "before"))
    status = spark.sparkContext.statusTracker()
    with tensprov_lab.track(spark, background=True) as run:
        df.filter(slow("id"))
    deadline = time.monotonic() + 60
    while not status.getActiveStageIds() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert status.getActiveStageIds(), "the capture's UDF job did not start"
    time.sleep(1.0)  # its tasks are well inside their Python workers
    run.cancel()
    for i in range(8):  # the user's next Python tasks (each takes an idle worker)
        python_job(str(tmp_path / f"after{i}"))
