"""Freeing old runs: ``tensprov_lab.forget`` / ``Run.forget`` and ``Store.remove_run``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import tensprov_lab
from tensprov_lab import _registry
from tensprov_lab.capture.plan._nodes import persisted
from tensprov_lab.store import CSRTensor, IdentityTensor, MaskTensor, Store, StoreError

# -- the store (no JVM) -----------------------------------------------------------------


def _two_runs() -> tuple[Store, dict[str, int]]:
    """Run 0: a -> b (filter); run 1: b -> c (aggregate) and a -> d (select)."""
    s = Store()
    r0, r1 = s.new_run_id(), s.new_run_id()
    a = s.add_dataset("a", n_rows=4, role="source", run=r0).id
    b = s.add_dataset("b", n_rows=2, run=r0).id
    s.add_operation("filter", "horizontal_reduction", [a], b,
                    [MaskTensor.from_kept([1, 3], 4)], run=r0)  # fmt: skip
    c = s.add_dataset("c", n_rows=1, run=r1).id
    s.add_operation("agg", "aggregate", [b], c,
                    [CSRTensor.from_pairs([0, 0], [0, 1], 1, 2)], run=r1)  # fmt: skip
    d = s.add_dataset("d", n_rows=4, run=r1).id
    s.add_operation("select", "projection", [a], d, [IdentityTensor(4)], run=r1)
    return s, {"a": a, "b": b, "c": c, "d": d, "r0": r0, "r1": r1}


def test_store_remove_run_keeps_indexes_consistent() -> None:
    s, ids = _two_runs()
    assert ids["r0"] != ids["r1"]
    assert s.dependent_runs([ids["r0"]]) == [ids["r1"]]
    assert s.dependent_runs([ids["r1"]]) == []
    assert s.dependent_runs([ids["r0"], ids["r1"]]) == []

    # run 1 reads run 0's datasets: refused, and nothing changes
    before = (dict(s.datasets), dict(s.operations), s.nbytes)
    with pytest.raises(StoreError, match="inputs of operations of run"):
        s.remove_run(ids["r0"])
    assert (dict(s.datasets), dict(s.operations), s.nbytes) == before

    run0_bytes = s.operations[s.producer(ids["b"]).id].nbytes  # type: ignore[union-attr]
    assert s.remove_run(ids["r1"]) == sorted([ids["c"], ids["d"]])
    assert set(s.datasets) == {ids["a"], ids["b"]}
    assert s.producer(ids["c"]) is None and s.producer(ids["d"]) is None
    assert [op.method for op in s.consumers(ids["a"])] == ["filter"]
    assert s.consumers(ids["b"]) == []
    assert s.sources() == [ids["a"]] and s.sinks() == [ids["b"]]
    assert s.nbytes == run0_bytes
    # run 0 is whole: its lineage still answers
    from tensprov_lab.query import backward

    assert backward(s, ids["b"], np.array([1])).rows[ids["a"]].tolist() == [3]

    assert s.remove_run(ids["r0"]) == sorted([ids["a"], ids["b"]])
    assert s.datasets == {} and s.operations == {} and s.nbytes == 0
    assert s.sources() == [] and s.sinks() == []
    # run ids are never given again
    assert s.new_run_id() not in (ids["r0"], ids["r1"])


def test_store_removes_dependent_runs_together() -> None:
    s, ids = _two_runs()
    assert s.remove_run([ids["r0"], ids["r1"]]) == sorted(ids[k] for k in "abcd")
    assert s.datasets == {} and s.operations == {}
    assert s.remove_run(ids["r0"]) == []  # nothing left: nothing to do


# -- tracked runs (JVM) -----------------------------------------------------------------


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """An empty store, no trackers and no runs, as in a fresh kernel: ``forget()`` here
    must not free the runs other tests hold."""
    # the registry of runs lives in tensprov_lab._registry (below Run, see
    # docs/architecture.md)
    monkeypatch.setattr(_registry, "_STORE", Store())
    monkeypatch.setattr(_registry, "_TRACKERS", {})
    monkeypatch.setattr(_registry, "_RUNS", [])
    monkeypatch.setattr(_registry, "_FORGOT", False)
    yield
    tensprov_lab.forget()  # release this test's Spark cache


def _source(spark: Any, seed: int) -> Any:
    """A source whose order is not stable (a shuffle): capture pins it."""
    rows = [(i, (i * seed) % 5, float(i % 7)) for i in range(40)]
    return spark.createDataFrame(rows, "id int, g int, amount double").repartition(3)


def _persistent_rdds(spark: Any) -> set[int]:
    return {int(k) for k in spark.sparkContext._jsc.getPersistentRDDs().keySet().toArray()}


def _kept_in_spark(run: Any) -> tuple[list[Any], list[Any]]:
    """The DataFrames capture persisted for the run's datasets, and the RDDs it pinned."""
    tracker = run._tracker
    nodes = [tracker.by_ds[d.id] for d in run.datasets if d.id in tracker.by_ds]
    # a persist capture still runs in its worker thread is waited for
    cached = [persisted(n.cached) for n in nodes if n.cached is not None]
    pinned = [n.ann.plan.rdd() for n in nodes if n.pinned]
    return cached, pinned


def _is_cached(df: Any) -> bool:
    return bool(df.storageLevel.useMemory or df.storageLevel.useDisk)


@pytest.mark.spark
def test_forget_one_run_frees_store_bytes_and_spark_cache(spark: Any, fresh: None) -> None:
    rdds_before = _persistent_rdds(spark)
    src = _source(spark, 3)
    with tensprov_lab.track(spark, name="first") as first:
        big = src.filter("amount > 2")
        out = big.groupBy("g").agg({"amount": "sum"})
    with tensprov_lab.track(spark, name="second") as second:
        other = _source(spark, 7).filter("id > 5").distinct()
    first.rows(big, rows=[0, 1])  # caches the keyed source for recomputation
    first.rows(out)  # reads the materialized output: its cache is filled
    second.rows(other)

    cached, pinned = _kept_in_spark(first)
    assert cached and pinned, "the pipeline output and the pinned source are kept"
    assert all(_is_cached(df) for df in cached)
    assert {int(r.id()) for r in pinned} <= _persistent_rdds(spark)
    kept_cached, kept_pinned = _kept_in_spark(second)
    total = tensprov_lab.store().nbytes
    second_bytes = second.nbytes
    assert first.nbytes > 0 and total == first.nbytes + second_bytes

    tensprov_lab.forget(first)

    assert tensprov_lab.runs() == [second]
    assert tensprov_lab.store().nbytes == second_bytes < total
    assert {d.run for d in tensprov_lab.store().datasets.values()} == {second.id}
    assert not any(_is_cached(df) for df in cached)
    assert not {int(r.id()) for r in pinned} & _persistent_rdds(spark)
    tracker = second._tracker
    assert tracker.node_of(big) is None and tracker.node_of(src) is None
    assert set(tracker.by_ds) <= set(tracker.store.datasets)
    assert first.id not in tracker.runs
    # the other run keeps its cache, and answers
    assert all(_is_cached(df) for df in kept_cached)
    assert {int(r.id()) for r in kept_pinned} <= _persistent_rdds(spark)
    assert len(second.rows(other)) == other.count()

    tensprov_lab.forget(second)
    assert tensprov_lab.runs() == [] and tensprov_lab.store().nbytes == 0
    assert _persistent_rdds(spark) <= rdds_before


@pytest.mark.spark
def test_forgetting_releases_the_proxies_of_its_plans(spark: Any, fresh: None) -> None:
    """Capture remembers facts of plans by their py4j proxies; a proxy alive in Python
    keeps its plan alive in the JVM, so forgetting the run lets them go."""
    import gc
    import weakref

    src = _source(spark, 3)
    with tensprov_lab.track(spark, name="gone") as run:
        out = src.filter("amount > 2").select("id", "amount")
    node = run._tracker.node_of(out)
    assert node is not None and node.ann is not None
    plans = [weakref.ref(node.plan), weakref.ref(node.ann.plan)]
    del node
    gc.collect()
    assert all(p() is not None for p in plans), "held while the run is kept"
    tensprov_lab.forget(run)
    gc.collect()
    assert [p() for p in plans] == [None, None]
    # the DataFrames still work, and are new sources when tracked again
    with tensprov_lab.track(spark, name="again") as again:
        twice = out.filter("amount > 3")
    assert again.dataset(out).role == "source"
    assert len(again.rows(twice)) == twice.count() == 16  # amount = i % 7 in {4, 5, 6}


def _chained(spark: Any) -> tuple[Any, Any, dict[str, Any]]:
    """Run 1 makes ``big`` and ``out1``; run 2 starts from ``big`` (run 1's dataset)."""
    src = _source(spark, 3)
    with tensprov_lab.track(spark, name="early") as early:
        big = src.filter("amount > 2")
        out1 = big.groupBy("g").count()
    with tensprov_lab.track(spark, name="late") as late:
        out2 = big.filter("id < 30").select("id", "amount")
    return early, late, {"src": src, "big": big, "out1": out1, "out2": out2}


@pytest.mark.spark
def test_forgetting_a_run_a_later_run_reads_is_refused(spark: Any, fresh: None) -> None:
    early, late, df = _chained(spark)
    assert early.dataset(df["big"]).id in {i for op in late.operations for i in op.inputs}
    lineage = early.backward(df["out1"], rows=[0]).to_dict()
    nbytes = tensprov_lab.store().nbytes

    with pytest.raises(ValueError) as err:
        tensprov_lab.forget(early)
    message = str(err.value)
    assert "'early'" in message and "'late'" in message
    assert "first" in message and "tensprov_lab.forget()" in message

    # nothing was changed
    assert tensprov_lab.runs() == [early, late]
    assert not early.forgotten
    assert tensprov_lab.store().nbytes == nbytes
    assert early.backward(df["out1"], rows=[0]).to_dict() == lineage
    assert late.backward(df["out2"], rows=[0]).to_dict()


@pytest.mark.spark
def test_forgetting_the_later_run_keeps_the_earlier_working(spark: Any, fresh: None) -> None:
    early, late, df = _chained(spark)
    back = early.backward(df["out1"], rows=[0, 1])
    fwd = early.forward(df["src"], rows=[3, 10], to=df["out1"]).to_dict()
    records = early.rows(df["big"], rows=[0, 2])
    early_bytes = early.nbytes

    late.forget()

    assert late.forgotten and tensprov_lab.runs() == [early]
    assert tensprov_lab.store().nbytes == early_bytes
    again = early.backward(df["out1"], rows=[0, 1])
    assert again.to_dict() == back.to_dict() and len(again) == len(back)
    assert early.forward(df["src"], rows=[3, 10], to=df["out1"]).to_dict() == fwd
    assert early.rows(df["big"], rows=[0, 2]).equals(records)
    # big is still run 1's dataset: a new run reads it as such
    with tensprov_lab.track(spark, name="again") as again_run:
        out3 = df["big"].filter("id < 20")
    assert again_run.store.producer(again_run.dataset(out3).id).inputs == [  # type: ignore[union-attr]
        early.dataset(df["big"]).id
    ]
    # and now the earlier run can go, with the newest first
    with pytest.raises(ValueError, match="'again'"):
        early.forget()
    again_run.forget()
    early.forget()
    assert tensprov_lab.runs() == [] and tensprov_lab.store().datasets == {}


@pytest.mark.spark
def test_forget_everything(spark: Any, fresh: None) -> None:
    rdds_before = _persistent_rdds(spark)
    early, late, df = _chained(spark)
    early.rows(df["big"], rows=[0])
    late.rows(df["out2"])
    cached = _kept_in_spark(early)[0] + _kept_in_spark(late)[0]
    assert cached and tensprov_lab.store().nbytes > 0

    tensprov_lab.forget()  # dependent runs too: all at once

    assert tensprov_lab.runs() == []
    store = tensprov_lab.store()
    assert store.datasets == {} and store.operations == {} and store.nbytes == 0
    assert early.forgotten and late.forgotten
    assert not any(_is_cached(d) for d in cached)
    assert _persistent_rdds(spark) <= rdds_before
    tracker = early._tracker
    assert tracker.nodes == {} and tracker.by_ds == {} and tracker.runs == {}
    with pytest.raises(LookupError, match="forgotten"):
        tensprov_lab.last_run()
    tensprov_lab.forget()  # nothing left: nothing to do


@pytest.mark.spark
def test_a_forgotten_run_fails_clearly(spark: Any, fresh: None) -> None:
    early, late, df = _chained(spark)
    lineage = late.backward(df["out2"], rows=[0])
    late.forget()
    for query in (
        lambda: late.backward(df["out2"], rows=[0]),
        lambda: late.forward(df["big"], rows=[0]),
        lambda: late.rows(df["out2"]),
        lambda: late.dataset("out2"),
        lambda: late.datasets,
        lambda: late.summary(),
        lambda: lineage.to_dict(),
    ):
        with pytest.raises(LookupError, match="late was forgotten"):
            query()
    assert repr(late) == "<Run late: forgotten>"
    assert "forgotten" in late._repr_html_()
    late.forget()  # again: nothing to do
    tensprov_lab.forget(late)
    assert tensprov_lab.runs() == [early]
    # forgetting inside a tracked block is refused (its capture may read those runs)
    with pytest.raises(RuntimeError, match="tracked block is running"):
        with tensprov_lab.track(spark, name="inside"):
            tensprov_lab.forget(early)
    assert not early.forgotten


@pytest.mark.spark
def test_dataframes_of_a_forgotten_run_are_new_sources_later(spark: Any, fresh: None) -> None:
    early, _, df = _chained(spark)
    tensprov_lab.forget()
    big = df["big"]
    with tensprov_lab.track(spark, name="retracked") as run:
        out = big.filter("id < 30").orderBy("id")
    assert early.forgotten and tensprov_lab.runs() == [run]
    ds = run.dataset(big)
    assert ds.role == "source" and ds.run == run.id
    assert [d.role for d in run.datasets].count("source") == 1  # src is not seen again
    # the lineage is that of the new run: out row i comes from the big record with
    # the i-th smallest id below 30
    big_rows = run.rows(big)
    out_rows = run.rows(out)
    assert out_rows["id"].tolist() == sorted(i for i in big_rows["id"] if i < 30)
    for i in range(len(out_rows)):
        (found,) = run.backward(out, rows=[i]).to_dict().values()
        assert len(found) == 1
        assert int(big_rows.loc[found[0], "id"]) == int(out_rows.loc[i, "id"])
    assert run.backward(out, rows=[0]).to_dict().keys() == {ds.label}


@pytest.mark.spark
def test_the_budget_message_names_forget_and_forgetting_frees_the_budget(
    spark: Any, fresh: None
) -> None:
    from tensprov_lab.capture.recording._tracker import TensProvWarning

    src = _source(spark, 3)
    with tensprov_lab.track(spark, name="full") as full:
        a = src.filter("amount > 2")
    # what the budget counts: tensors, indexes, column maps and capture's key indexes
    tracker = full._tracker
    budget = tracker.budget.held(tracker.store, tracker.nodes.values())
    assert budget > tensprov_lab.store().nbytes > 0
    with pytest.warns(TensProvWarning, match=r"memory budget.*tensprov_lab\.forget\(run\)"):
        with tensprov_lab.track(spark, name="over", budget=budget - 1, spill=False) as over:
            b = a.filter("id > 3")
    assert [op.opaque for op in over.operations] == [True]
    # the advice works: with the old runs forgotten, the same budget traces records again
    tensprov_lab.forget(over)
    tensprov_lab.forget(full)
    with tensprov_lab.track(spark, name="fits", budget=budget - 1, spill=False) as fits:
        c = b.filter("id > 5")
    assert [op.opaque for op in fits.operations] == [False]
    assert len(fits.backward(c, rows=[0])) == 1
