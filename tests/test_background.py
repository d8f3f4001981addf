"""Capture in the background (``track(..., background=True)``): the block returns at once
with pyspark restored, the lineage is the one a foreground capture gives, whatever reads
the run waits for it, and cancelling (or Ctrl-C while waiting) drops the run whole."""

from __future__ import annotations

import threading
import time
import warnings
from typing import Any

import numpy as np
import pytest
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

import tensprov_lab
from tensprov_lab._api import _tracker
from tensprov_lab.capture.recording._tracker import TensProvWarning, Tracker
from tests._interrupts import ctrl_c
from tests.test_interrupt import _earlier_run, _interrupted

pytestmark = pytest.mark.spark

ORDERS = [(i, i % 17, float((i * 37) % 101), f"d{i % 5}") for i in range(600)]
CUSTOMERS = [(c, f"r{c % 4}") for c in range(0, 17, 2)]


def _sources(spark: Any) -> tuple[Any, Any]:
    orders = spark.createDataFrame(ORDERS, "order_id long, cust_id long, amount double, day string")
    customers = spark.createDataFrame(CUSTOMERS, "cust_id long, region string")
    return orders, customers


def _pipeline(orders: Any, customers: Any) -> dict[str, Any]:
    big = orders.filter(F.col("amount") > 30)
    joined = big.join(customers, "cust_id")
    ranked = joined.withColumn(
        "rank", F.row_number().over(Window.partitionBy("region").orderBy("amount", "order_id"))
    )
    both = ranked.select("order_id", "region").union(
        orders.filter("amount < 5").select("order_id", F.col("day").alias("region"))
    )
    out = both.groupBy("region").agg(F.count("*").alias("n"))
    return {"big": big, "joined": joined, "ranked": ranked, "both": both, "out": out}


def _lineage(run: Any, orders: Any, customers: Any, frames: dict[str, Any]) -> dict[str, Any]:
    got: dict[str, Any] = {}
    for name, df in frames.items():
        got[f"orders->{name}"] = run.mapping(orders, df).toarray()
        if name != "big":  # made from orders alone
            got[f"customers->{name}"] = run.mapping(customers, df).toarray()
    got["ops"] = [(op.method, op.category, op.entries, op.opaque) for op in run.operations]
    cells = run.backward(frames["out"], rows=[0], columns=["n"])
    got["cells"] = {
        (src_name, kind, col): rows.tolist()
        for src_name, src in (("orders", orders), ("customers", customers))
        for kind, by_col in cells[src].items()
        for col, rows in by_col.items()
    }
    return got


def _hold(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Background captures wait for the returned event before they start."""
    release = threading.Event()
    original = Tracker._end

    def held(self: Tracker, run: Any, frame: Any, progress: Any) -> Any:
        if frame is None:  # the background thread (a foreground capture has the frame)
            assert release.wait(60)
        return original(self, run, frame, progress)

    monkeypatch.setattr(Tracker, "_end", held)
    return release


def test_background_lineage_is_the_foreground_lineage(spark: Any) -> None:
    results = []
    for background in (False, True):
        orders, customers = _sources(spark)
        with tensprov_lab.track(spark, name=f"bg-{background}", background=background) as run:
            frames = _pipeline(orders, customers)
        results.append(_lineage(run, orders, customers, frames))
        assert not run.capturing
        assert not any(op.opaque for op in run.operations)
    fg, bg = results
    assert fg.keys() == bg.keys()
    for key in fg:
        if key == "cells":
            assert fg[key] == bg[key] and fg[key]
        elif key == "ops":
            assert fg[key] == bg[key]
        else:
            assert np.array_equal(fg[key], bg[key]), key
    # and the lineage is not empty: output row 0 has members from the source
    assert fg["orders->out"][0].sum() > 0


def test_block_returns_before_its_capture_and_queries_wait(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = _hold(monkeypatch)
    orders, customers = _sources(spark)
    filter_before = DataFrame.filter
    plain = sorted(_pipeline(orders, customers)["out"].collect())
    with tensprov_lab.track(spark, name="held", background=True) as run:
        frames = _pipeline(orders, customers)
    # the block has returned, its capture has not started: pyspark is as without
    # tracking and the user's DataFrames compute what they compute untracked
    assert run.capturing
    assert DataFrame.filter is filter_before
    assert sorted(frames["out"].collect()) == plain
    threading.Timer(0.5, release.set).start()
    started = time.monotonic()
    back = run.backward(frames["big"], rows=[0])  # waits for the capture
    assert time.monotonic() - started >= 0.4
    assert not run.capturing
    first = next(i for i, r in enumerate(ORDERS) if r[2] > 30)
    assert back[orders].tolist() == [first]
    assert run.dataset(frames["big"]).n_rows == sum(1 for r in ORDERS if r[2] > 30)


def test_a_wait_past_a_moment_says_what_it_waits_for(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tensprov_lab.capture.memory._resident import on_progress

    release = _hold(monkeypatch)
    said: list[str | None] = []
    on_progress(said.append)  # as the notebook extension does: a line in the running cell
    try:
        orders, _ = _sources(spark)
        with tensprov_lab.track(spark, name="saying", background=True) as run:
            kept = orders.filter("amount > 30")
        threading.Timer(1.0, release.set).start()
        run.wait()
    finally:
        on_progress(None)
    assert said and said[-1] is None  # emptied once the capture has ended
    assert all(
        m.startswith("tensprov-lab: waiting for the capture of run saying") for m in said[:-1]
    )
    assert len(said) >= 2
    assert run.dataset(kept).n_rows == sum(1 for r in ORDERS if r[2] > 30)


def test_store_and_runs_wait_for_a_capture(spark: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    release = _hold(monkeypatch)
    orders, _ = _sources(spark)
    with tensprov_lab.track(spark, name="store-waits", background=True) as run:
        big = orders.filter("amount > 30")
    assert run.capturing
    threading.Timer(0.3, release.set).start()
    assert tensprov_lab.last_run() is run  # waited: the run is whole
    assert not run.capturing
    assert run.dataset(big).n_rows == sum(1 for r in ORDERS if r[2] > 30)


def test_next_block_waits_for_the_previous_capture(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = _hold(monkeypatch)
    orders, customers = _sources(spark)
    with tensprov_lab.track(spark, name="first", background=True) as first:
        big = orders.filter("amount > 30")
    threading.Timer(0.3, release.set).start()
    with tensprov_lab.track(spark, name="second") as second:
        assert not first.capturing  # begin waited for it
        joined = big.join(customers, "cust_id")
    assert first.dataset(big).n_rows == sum(1 for r in ORDERS if r[2] > 30)
    kept = {c for c, _ in CUSTOMERS}
    assert second.dataset(joined).n_rows == sum(1 for r in ORDERS if r[2] > 30 and r[1] in kept)


def _slow_block(spark: Any, name: str) -> tuple[Any, Any]:
    @F.udf("boolean")
    def slow(x: int) -> bool:
        time.sleep(0.02)
        return x % 2 == 0

    df = spark.createDataFrame([(i,) for i in range(4000)], "id long")
    with tensprov_lab.track(spark, name=name, background=True) as run:
        kept = df.filter(slow("id"))
    return run, kept


def _dropped(spark: Any, run: Any, kept: Any, state: tuple[int, int]) -> None:
    store = _tracker(spark).store
    assert (len(store.datasets), len(store.operations)) == state
    assert run not in tensprov_lab.runs()
    _interrupted(spark.sparkContext, run, kept)  # no answer, no capture job left


def test_cancel_drops_the_run_and_stops_its_jobs(spark: Any) -> None:
    _, check = _earlier_run(spark)
    store = _tracker(spark).store
    state = (len(store.datasets), len(store.operations))
    started = time.monotonic()
    run, kept = _slow_block(spark, "cancelled")  # its capture job: ~40 s of UDF calls
    time.sleep(1.5)
    assert run.capturing
    run.cancel()
    assert time.monotonic() - started < 30
    assert not run.capturing
    _dropped(spark, run, kept, state)
    check()


def test_ctrl_c_while_waiting_cancels_the_capture(spark: Any) -> None:
    _, check = _earlier_run(spark)
    store = _tracker(spark).store
    state = (len(store.datasets), len(store.operations))
    run, kept = _slow_block(spark, "interrupted")
    timer = threading.Timer(1.5, ctrl_c)
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        run.wait()
    timer.cancel()
    _dropped(spark, run, kept, state)
    check()
    with tensprov_lab.track(spark, name="after") as again:  # the next block as usual
        small = kept.sparkSession.range(10).filter("id > 3")
    assert again.dataset(small).n_rows == 6


def test_warnings_are_shown_when_the_capture_is_waited_for(spark: Any) -> None:
    orders, _ = _sources(spark)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with tensprov_lab.track(spark, name="warns", background=True) as run:
            few = orders.limit(3)  # an unordered limit: flagged as not deterministic
        at_exit = [w for w in caught if issubclass(w.category, TensProvWarning)]
        run.wait()
        after = [w for w in caught if issubclass(w.category, TensProvWarning)]
    assert at_exit == []
    assert len(after) == 1 and "not deterministic" in str(after[0].message)
    assert any("not deterministic" in w for w in run.warnings)
    assert run.dataset(few).n_rows == 3


def test_a_failed_capture_is_a_warning_at_the_first_wait(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(self: Tracker, run: Any) -> None:
        raise RuntimeError("boom while materializing")

    monkeypatch.setattr(Tracker, "_materialize", boom)
    orders, _ = _sources(spark)
    with tensprov_lab.track(spark, name="fails", background=True) as run:
        orders.filter("amount > 30")
    with pytest.warns(TensProvWarning, match="capture failed: boom while materializing"):
        run.wait()
    assert _tracker(spark)._active is None
    monkeypatch.undo()
    with tensprov_lab.track(spark, name="then") as then:
        fine = orders.filter("amount > 90")
    assert then.dataset(fine).n_rows == sum(1 for r in ORDERS if r[2] > 90)
