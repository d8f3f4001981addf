"""Spark-resident tensors (capture.memory._resident): a tensor kept as a Parquet table that
queries read with Spark jobs answers exactly as the tensor it came from; a run with
``storage="spark"`` keeps record-level lineage, saves, loads and forgets its tables."""

from __future__ import annotations

import os
import warnings
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tensprov_lab
from tensprov_lab.capture.memory import _budget, _resident
from tensprov_lab.capture.memory._resident import (
    SparkTensor,
    SparkTierError,
    spark_tensor,
    to_spark,
)
from tensprov_lab.store import (
    ColumnsTensor,
    CSRTensor,
    IdentityTensor,
    IndexTensor,
    MaskTensor,
    Store,
    WindowTensor,
    tensor_from_pairs,
)
from tensprov_lab.store._spill import release, spill
from tests.test_spill import _tensors

pytestmark = pytest.mark.spark


def _answers(t: Any) -> list[Any]:
    rows_out = np.arange(0, t.n_out, max(t.n_out // 17, 1))
    rows_in = np.arange(0, t.n_in, max(t.n_in // 13, 1))
    pairs = [a.tolist() for a in t.backward_pairs(rows_out)]
    return [t.backward(rows_out).tolist(), t.forward(rows_in).tolist(), pairs, t.nnz]


def test_each_tensor_kind_answers_the_same_from_spark(spark: Any, tmp_path: Any) -> None:
    for k, t in enumerate(_tensors()):
        moved = spark_tensor(spark, t, str(tmp_path / f"t{k}"))
        if isinstance(t, WindowTensor):
            assert moved is t  # frames stay ranges (as pairs they can be quadratic)
            continue
        assert moved.nbytes == 0 and moved is not t
        assert _answers(moved) == _answers(t), type(t).__name__
        assert (moved.to_sparse() != t.to_sparse()).nnz == 0
        back = moved.in_memory()
        assert back.nbytes > 0 and (back.to_sparse() != t.to_sparse()).nnz == 0
        if isinstance(t, ColumnsTensor):
            for c in (0, 1, 2):
                assert _answers(moved.for_column(c)) == _answers(t.for_column(c))
            assert isinstance(moved.whole, SparkTensor)
        else:
            assert isinstance(moved, SparkTensor) and moved.disk_nbytes() > 0
    # an O(1) tensor stays as it is
    ident = IdentityTensor(5)
    assert spark_tensor(spark, ident, str(tmp_path / "id")) is ident


def test_a_lookup_of_many_rows_reads_them_through_a_keys_table(spark: Any, tmp_path: Any) -> None:
    rng = np.random.default_rng(3)
    n = 30_000
    t = IndexTensor.from_index(rng.integers(-1, 5000, n), n_in=5000)
    moved = spark_tensor(spark, t, str(tmp_path / "big"))
    rows = np.sort(rng.choice(n, _resident._ISIN * 2, replace=False))
    assert np.array_equal(moved.backward(rows), t.backward(rows))
    ins = np.sort(rng.choice(5000, _resident._ISIN + 10, replace=False))
    assert np.array_equal(moved.forward(ins), t.forward(ins))
    # the keys table is gone once the lookup is done
    assert not [f for f in os.listdir(tmp_path) if f.startswith("keys-")]
    # every row at once reads the table whole
    assert np.array_equal(moved.backward(np.arange(n)), t.backward(np.arange(n)))


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    n_out=st.integers(1, 40),
    n_in=st.integers(1, 40),
    density=st.floats(0.0, 0.5),
    seed=st.integers(0, 2**16),
)
def test_random_tensors_answer_as_the_matrix_they_hold(
    spark: Any, tmp_path_factory: Any, n_out: int, n_in: int, density: float, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    dense = rng.random((n_out, n_in)) < density
    o, i = np.nonzero(dense)
    t = tensor_from_pairs(o, i, n_out=n_out, n_in=n_in)
    moved = spark_tensor(spark, t, str(tmp_path_factory.mktemp("rand") / "t"))
    rows_out = np.flatnonzero(rng.random(n_out) < 0.5)
    rows_in = np.flatnonzero(rng.random(n_in) < 0.5)
    # the oracle: the dense matrix itself
    assert moved.backward(rows_out).tolist() == np.flatnonzero(dense[rows_out].any(0)).tolist()
    assert moved.forward(rows_in).tolist() == np.flatnonzero(dense[:, rows_in].any(1)).tolist()
    po, pi = moved.backward_pairs(rows_out)
    sub = dense[rows_out]
    want = sorted((int(rows_out[a]), int(b)) for a, b in zip(*np.nonzero(sub)))
    assert list(zip(po.tolist(), pi.tolist())) == want
    assert moved.nnz == int(dense.sum())


def test_a_table_spark_cannot_read_back_is_refused_and_the_spill_goes_to_disk(
    spark: Any, tmp_path: Any, monkeypatch: Any
) -> None:
    s = Store()
    t = MaskTensor.from_kept(np.arange(0, 900, 3), n_in=900)
    a = s.add_dataset("in", n_rows=900, role="source")
    b = s.add_dataset("out", n_rows=300)
    op = s.add_operation("filter", "filter", [a.id], b.id, [t])
    # executors that do not see the directory: Spark finds no pairs there
    monkeypatch.setattr(
        SparkTensor, "_table", lambda self: spark.range(0).selectExpr("id AS o", "id AS i")
    )
    with pytest.raises(SparkTierError, match="shared"):
        spark_tensor(spark, t, str(tmp_path / "refused"))
    assert not os.path.exists(tmp_path / "refused")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        put = to_spark(spark, str(tmp_path / "sp"), fallback=str(tmp_path / "disk"))
        done = spill(s, str(tmp_path / "disk"), -1, put=put)
    assert done == [op.id] and any("shared" in str(w.message) for w in caught)
    assert op.spilled and op.spilled[0].endswith(".arrow") and os.path.exists(op.spilled[0])
    assert op.tensors[0].backward([1]).tolist() == [3]
    release(op.spilled)


# ------------------------------------------------------------------------------------
# whole runs


def _frames(spark: Any) -> tuple[Any, Any, Any]:
    from pyspark.sql import functions as F

    orders = spark.createDataFrame(
        [(i, i % 9, float(i % 13)) for i in range(6000)], "id long, cust long, amount double"
    )
    cust = spark.createDataFrame([(c, f"r{c % 3}") for c in range(9)], "cust long, region string")
    return orders, cust, F


def _block(spark: Any, orders: Any, cust: Any, F: Any, **kw: Any) -> tuple[Any, list[Any]]:
    with tensprov_lab.track(spark, name="resident", **kw) as run:
        big = orders.filter("amount > 3")
        joined = big.join(cust, "cust")
        out = joined.groupBy("region").agg(F.sum("amount").alias("t"))
    return run, [big, joined, out]


def _lineage(run: Any, orders: Any, frames: list[Any]) -> list[Any]:
    answers = []
    for df in frames:
        n = run.dataset(df).n_rows
        answers += [run.backward(df, rows=[r]).to_dict() for r in range(0, n, max(n // 7, 1))]
    answers += [run.forward(orders, rows=[r], to=frames[-1]).to_dict() for r in (0, 4, 777)]
    answers.append(run.backward(frames[-1], rows=[0], columns=["t"]).to_pandas().to_dict())
    return answers


def test_a_run_with_spark_storage_keeps_its_lineage_in_spark(spark: Any, tmp_path: Any) -> None:
    orders, cust, F = _frames(spark)
    plain, frames = _block(spark, orders, cust, F)
    want = _lineage(plain, orders, frames)
    records = plain.rows(frames[1], rows=[0, 7, 500])
    tensprov_lab.forget(plain)

    run, frames = _block(spark, orders, cust, F, storage="spark", spark_dir=str(tmp_path / "t"))
    ops = run.operations
    assert not any(op.opaque for op in ops)
    moved = [op for op in ops if op.spilled]
    # every operation with tensors that are not O(1) is in Spark, none in memory
    assert {op.method for op in moved} == {"filter", "join", "agg"}
    assert all(any(isinstance(t, SparkTensor) for t in op.tensors) for op in moved)
    assert sum(op.nbytes for op in ops) == 0
    tables = [p for op in moved for p in op.spilled]
    assert all(p.startswith(str(tmp_path / "t")) and os.path.isdir(p) for p in tables)
    assert _lineage(run, orders, frames) == want
    pd.testing.assert_frame_equal(run.rows(frames[1], rows=[0, 7, 500]), records)
    # a save holds the data of the tables: the loaded run answers without Spark
    tensprov_lab.save(str(tmp_path / "r.tpl"), runs=[run])
    loaded = next(r for r in tensprov_lab.load(str(tmp_path / "r.tpl")) if r.name == "resident")
    assert (
        loaded.backward("out", rows=[0]).to_dict() == run.backward(frames[-1], rows=[0]).to_dict()
    )
    assert not any(isinstance(t, SparkTensor) for op in loaded.operations for t in op.tensors)
    tensprov_lab.forget(run)
    assert not any(os.path.exists(p) for p in tables)


def test_run_spill_moves_a_run_from_memory_to_disk_to_spark(spark: Any) -> None:
    orders, cust, F = _frames(spark)
    run, frames = _block(spark, orders, cust, F)
    want = _lineage(run, orders, frames)
    assert run.nbytes > 0
    on_disk = run.spill(to="disk")
    assert {op.method for op in on_disk} == {"filter", "join", "agg"}
    files = [p for op in on_disk for p in op.spilled]
    assert all(p.endswith(".arrow") for p in files)
    assert _lineage(run, orders, frames) == want
    in_spark = run.spill(to="spark")
    assert [op.id for op in in_spark] == [op.id for op in on_disk]
    assert not any(os.path.exists(p) for p in files)  # the disk copies are released
    assert _lineage(run, orders, frames) == want
    assert run.spill(to="spark") == []  # nothing left to move
    with pytest.raises(ValueError, match="'disk' or 'spark'"):
        run.spill(to="tape")
    tensprov_lab.forget(run)


def _room_for_maps_only(spark: Any) -> int:
    """A budget with room for a block's attribute maps, not for its tensors or keys
    (what earlier runs of the session hold is spilled first)."""
    tracker = tensprov_lab._api._tracker(spark)
    tracker.budget.limit = 0
    tracker.budget.over(tracker.store, tracker.nodes.values())
    return int(tracker.budget.held(tracker.store, tracker.nodes.values())) + 4000


def test_a_disk_short_of_room_sends_the_spill_to_spark(spark: Any, monkeypatch: Any) -> None:
    orders, cust, F = _frames(spark)
    plain, frames = _block(spark, orders, cust, F)
    want = _lineage(plain, orders, frames)
    tensprov_lab.forget(plain)
    monkeypatch.setattr(_budget, "_free", lambda directory: 0)
    run, frames = _block(spark, orders, cust, F, budget=_room_for_maps_only(spark))
    assert not any(op.opaque for op in run.operations)
    moved = [op for op in run.operations if op.spilled]
    assert moved and all(any(isinstance(t, SparkTensor) for t in op.tensors) for op in moved)
    assert _lineage(run, orders, frames) == want
    tensprov_lab.forget(run)
    monkeypatch.undo()  # room again: to disk
    run, frames = _block(spark, orders, cust, F, budget=_room_for_maps_only(spark))
    moved = [op for op in run.operations if op.spilled]
    assert moved and all(p.endswith(".arrow") for op in moved for p in op.spilled)
    tensprov_lab.forget(run)


def test_indexes_a_query_builds_count_and_spill_past_the_budget(spark: Any) -> None:
    orders, cust, F = _frames(spark)
    plain, frames = _block(spark, orders, cust, F)
    want = _lineage(plain, orders, frames)
    tensprov_lab.forget(plain)
    tracker = tensprov_lab._api._tracker(spark)
    # room for the run as captured, not for the inverse indexes forward queries build
    run, frames = _block(spark, orders, cust, F, budget="1GB")
    held = tracker.budget.held(tracker.store, tracker.nodes.values())
    tracker.budget.limit = held + 100
    assert not any(op.spilled for op in run.operations)
    assert _lineage(run, orders, frames) == want  # forward queries build indexes
    assert any(op.spilled for op in run.operations)
    assert tracker.budget.held(tracker.store, tracker.nodes.values()) <= held + 100
    assert _lineage(run, orders, frames) == want
    tensprov_lab.forget(run)


def test_records_kept_on_a_node_count_against_the_budget() -> None:
    class Kept:
        def __init__(self, records: Any) -> None:
            self.records = records

    pdf = pd.DataFrame({"a": np.arange(1000, dtype=np.int64)})
    assert _budget.records_nbytes([Kept((pdf, np.arange(1000))), Kept(None)]) >= 16_000
    assert _budget.Budget().held(Store(), [Kept((pdf, np.arange(1000)))]) >= 16_000


def test_bad_storage_is_refused_with_the_choices(spark: Any) -> None:
    with pytest.raises(ValueError, match="'disk' or 'spark'"):
        tensprov_lab.track(spark, storage="s3")


def test_a_csr_tensor_round_trips(spark: Any, tmp_path: Any) -> None:
    t = CSRTensor.from_pairs([0, 0, 2], [1, 3, 3], n_out=3, n_in=4)
    moved = spark_tensor(spark, t, str(tmp_path / "csr"))
    assert moved.backward([0]).tolist() == [1, 3] and moved.forward([3]).tolist() == [0, 2]
    assert moved.backward([1]).tolist() == []


def test_a_table_spark_cannot_read_gives_a_clear_error(spark: Any, tmp_path: Any) -> None:
    t = MaskTensor.from_kept(np.arange(0, 90, 3), n_in=90)
    moved = spark_tensor(spark, t, str(tmp_path / "gone"), label="operation 7 (filter)")
    release([moved.path])  # e.g. its directory cleaned up under the session
    with pytest.raises(LookupError, match=r"operation 7 \(filter\) from its table in Spark"):
        moved.backward([1])
