"""Tensors past the memory budget spill to disk, memory-mapped (store._spill,
capture.memory._budget): the same answers, no bytes held in memory, files gone with the run."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pandas as pd
import pytest

import tensprov_lab
from tensprov_lab.store import (
    ColumnsTensor,
    CSRTensor,
    FrameTensor,
    IndexTensor,
    MaskTensor,
    Store,
    WindowTensor,
)
from tensprov_lab.store._spill import map_indexes, memory_nbytes, release, spill


def _tensors() -> list[Any]:
    rng = np.random.default_rng(0)
    n = 2000
    groups = rng.integers(0, 50, n)
    return [
        IndexTensor.from_index(np.sort(rng.integers(0, 700, n)), n_in=700),
        IndexTensor.from_index(rng.integers(-1, 300, n), n_in=300),
        MaskTensor.from_kept(np.flatnonzero(rng.random(n) > 0.3), n_in=n),
        CSRTensor.from_pairs(groups, np.arange(n), n_out=50, n_in=n),
        WindowTensor(6, [FrameTensor([0, 1, 2, 3, 4, 5], [0, 0, 1, 2, 3, 4], [0, 1, 2, 3, 4, 5])],
                     {1: [0], 2: [-1, 0]}),
        ColumnsTensor(
            CSRTensor.from_pairs(groups, np.arange(n), n_out=50, n_in=n),
            [CSRTensor.from_pairs(groups[::2], np.arange(0, n, 2), n_out=50, n_in=n)],
            {1: 0},
        ),
    ]  # fmt: skip


def _arrays(obj: Any, depth: int = 0) -> list[np.ndarray]:
    """The numpy arrays a tensor is made of (its attributes, recursively)."""
    if isinstance(obj, np.ndarray):
        return [obj]
    if depth > 4 or not hasattr(obj, "__dict__"):
        items = obj if isinstance(obj, (list, tuple)) and depth <= 4 else []
        return [a for x in items for a in _arrays(x, depth + 1)]
    return [a for v in vars(obj).values() for a in _arrays(v, depth + 1)]


def _store() -> Store:
    s = Store()
    for t in _tensors():
        a = s.add_dataset("in", n_rows=t.n_in, role="source")
        b = s.add_dataset("out", n_rows=t.n_out)
        s.add_operation("op", "join", [a.id], b.id, [t])
    return s


def _answers(s: Store) -> list[Any]:
    out = []
    for op in s.operations.values():
        (t,) = op.tensors
        rows_out = np.arange(0, t.n_out, max(t.n_out // 17, 1))
        rows_in = np.arange(0, t.n_in, max(t.n_in // 13, 1))
        pairs = [a.tolist() for a in t.backward_pairs(rows_out)]
        out.append((t.backward(rows_out).tolist(), t.forward(rows_in).tolist(), pairs, t.nnz))
    return out


def test_spilled_tensors_answer_as_before_and_hold_no_memory(tmp_path: Any) -> None:
    s = _store()
    before = _answers(s)
    held = memory_nbytes(s)
    assert held > 0
    done = spill(s, str(tmp_path), limit=0)
    assert sorted(done) == sorted(o.id for o in s.operations.values() if o.nbytes)
    assert memory_nbytes(s) == 0
    # before any query builds an index: the arrays are pages of the files, not copies
    for op in s.operations.values():
        if op.spilled:
            arrays = _arrays(op.tensors[0])
            assert arrays and not any(a.flags.owndata or a.flags.writeable for a in arrays)
    assert _answers(s) == before
    files = [p for op in s.operations.values() for p in op.spilled or []]
    assert files and all(os.path.exists(p) for p in files)
    # queries build their inverse indexes in memory again: counted
    _answers(s)
    assert memory_nbytes(s) == sum(op.index_nbytes for op in s.operations.values())
    release(files)
    assert not any(os.path.exists(p) for p in files)


def test_indexes_queries_build_on_spilled_tensors_map_to_files(tmp_path: Any) -> None:
    """Past the limit, the inverse indexes of spilled tensors move to files too: the
    store then holds nothing, answers stay the same, the files go with the operation's."""
    s = _store()
    before = _answers(s)
    spill(s, str(tmp_path), limit=0)
    _answers(s)  # builds every inverse index, in memory
    indexed = {op.id: op.index_nbytes for op in s.operations.values() if op.index_nbytes}
    assert indexed and memory_nbytes(s) == sum(indexed.values())
    spilled_before = {op.id: list(op.spilled or []) for op in s.operations.values()}
    # the largest first, until the limit
    largest = max(indexed, key=lambda i: (indexed[i], -i))
    assert map_indexes(s, str(tmp_path / "idx"), memory_nbytes(s) - 1) == [largest]
    done = map_indexes(s, str(tmp_path / "idx"), 0)
    assert sorted([largest, *done]) == sorted(indexed)
    assert memory_nbytes(s) == 0
    assert _answers(s) == before  # read through the mapped indexes, none rebuilt
    assert memory_nbytes(s) == 0
    files = [p for op in s.operations.values() for p in op.spilled or []]
    new = [p for p in files if p not in {q for ps in spilled_before.values() for q in ps}]
    assert new and all(p.endswith(".npy") and os.path.exists(p) for p in new)
    release(files)
    assert not any(os.path.exists(p) for p in files)


def _files(directory: Any) -> set[str]:
    return {str(p) for p in directory.rglob("*") if p.is_file()}


def _held_files(s: Store) -> set[str]:
    return {p for op in s.operations.values() for p in op.spilled or []}


def _failing(write: Any, at: int, fault: str) -> Any:
    """``write(obj, path)`` that, on its ``at``-th call, leaves a partial file and then
    stops as Ctrl-C (``fault="interrupt"``) or a full disk would."""
    import errno

    calls = [0]

    def failing(obj: Any, path: str) -> None:
        calls[0] += 1
        if calls[0] != at:
            write(obj, path)
            return
        with open(path, "wb") as f:
            f.write(b"partial")
        if fault == "interrupt":
            raise KeyboardInterrupt
        raise OSError(errno.ENOSPC, "No space left on device")

    return failing


@pytest.mark.parametrize("fault", ["interrupt", "disk full"])
def test_a_spill_stopped_midway_leaves_every_operation_whole(
    tmp_path: Any, monkeypatch: Any, fault: str
) -> None:
    """Ctrl-C in the driver, or a full disk, while the third tensor is written: the
    operations spilled before it are spilled, the rest keep their tensors in memory,
    no file is half written or left unreferenced, and every answer is unchanged."""

    from tensprov_lab.store import _spill

    s = _store()
    before = _answers(s)
    real = _spill._write_tensor
    monkeypatch.setattr(_spill, "_write_tensor", _failing(real, 3, fault))
    with pytest.raises(KeyboardInterrupt if fault == "interrupt" else OSError):
        spill(s, str(tmp_path), limit=0)
    spilled = [op for op in s.operations.values() if op.spilled]
    assert len(spilled) == 2
    assert _files(tmp_path) == _held_files(s)
    in_memory = [op for op in s.operations.values() if not op.spilled]
    assert memory_nbytes(s) == sum(op.nbytes + op.index_nbytes for op in in_memory)
    assert _answers(s) == before
    # and a later spill, with room again, takes the rest
    monkeypatch.setattr(_spill, "_write_tensor", real)
    spill(s, str(tmp_path), limit=0)
    assert all(op.spilled for op in s.operations.values() if op.nbytes)
    assert _answers(s) == before and _files(tmp_path) == _held_files(s)


def test_a_full_disk_while_mapping_indexes_keeps_them_in_memory(
    tmp_path: Any, monkeypatch: Any
) -> None:

    s = _store()
    before = _answers(s)
    spill(s, str(tmp_path), limit=0)
    _answers(s)
    held = memory_nbytes(s)
    real = np.save
    failing = _failing(lambda a, path: real(path, a), 2, "disk full")
    monkeypatch.setattr(np, "save", lambda path, a: failing(a, path))
    with pytest.raises(OSError, match="No space left"):
        map_indexes(s, str(tmp_path / "idx"), 0)
    monkeypatch.setattr(np, "save", real)
    assert _files(tmp_path) == _held_files(s)
    assert 0 < memory_nbytes(s) < held  # the first index moved, the rest stayed
    assert _answers(s) == before


def test_a_budget_that_cannot_spill_for_a_full_disk_warns_and_keeps_answering(
    tmp_path: Any, monkeypatch: Any
) -> None:
    import errno

    from tensprov_lab._warn import TensProvWarning
    from tensprov_lab.capture.memory._budget import Budget
    from tensprov_lab.store import _spill

    s = _store()
    before = _answers(s)
    budget = Budget(limit=1000)
    budget._directory = str(tmp_path)

    def full(t: Any, path: str) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(_spill, "_write_tensor", full)
    with pytest.warns(TensProvWarning, match="could not spill .*No space left on device.*TMPDIR"):
        assert budget.over(s) is True
    assert _files(tmp_path) == set() and not any(op.spilled for op in s.operations.values())
    assert _answers(s) == before


def test_spill_stops_at_the_limit_largest_first(tmp_path: Any) -> None:
    s = _store()
    sizes = sorted(((op.nbytes, op.id) for op in s.operations.values()), reverse=True)
    largest = sizes[0]
    limit = memory_nbytes(s) - largest[0]
    assert spill(s, str(tmp_path), limit=limit) == [largest[1]]
    assert memory_nbytes(s) <= limit
    assert spill(s, str(tmp_path), limit=memory_nbytes(s)) == []


# ------------------------------------------------------------------------------------
# with Spark: a run past its budget


def _pipeline(spark: Any) -> tuple[Any, Any, Any]:
    from pyspark.sql import functions as F

    orders = spark.createDataFrame(
        [(i, i % 9, float(i % 13)) for i in range(20_000)], "id long, cust long, amount double"
    )
    cust = spark.createDataFrame([(c, f"r{c % 3}") for c in range(9)], "cust long, region string")
    return orders, cust, F


@pytest.mark.spark
def test_a_run_past_its_budget_spills_and_keeps_record_lineage(spark: Any, tmp_path: Any) -> None:
    orders, cust, F = _pipeline(spark)

    def block(**kw: Any) -> tuple[Any, list[Any]]:
        with tensprov_lab.track(spark, name="spill", **kw) as run:
            big = orders.filter("amount > 3")
            joined = big.join(cust, "cust")
            out = joined.groupBy("region").agg(F.sum("amount").alias("t"))
        return run, [big, joined, out]

    plain, frames = block()
    want = {
        i: [plain.backward(df, rows=[r]).to_dict() for r in range(plain.dataset(df).n_rows)]
        for i, df in enumerate(frames)
    }  # every record (the spilled run is checked at a spread of them)
    fwd = [plain.forward(orders, rows=[r], to=frames[-1]).to_dict() for r in range(0, 20_000, 97)]
    records = plain.rows(frames[1], rows=[0, 7, 500])
    tensprov_lab.forget(plain)

    # room for the block's attribute maps (a few hundred bytes), not for its tensors or
    # the key indexes capture keeps to read records back (8 bytes a record here)
    tracker = tensprov_lab._api._tracker(spark)
    # what earlier runs of the session hold spills first, so that the block's own
    # tensors and keys must spill (else they could fit where those were)
    tracker.budget.limit = 0
    tracker.budget.over(tracker.store, tracker.nodes.values())
    budget = tracker.budget.held(tracker.store, tracker.nodes.values()) + 4000
    run, frames = block(budget=budget)
    # within the budget after capture (the queries below build indexes in memory again)
    assert tracker.budget.held(tracker.store, tracker.nodes.values()) <= budget
    ops = run.operations
    assert not any(op.opaque for op in ops)
    spilled = [op for op in ops if op.spilled]
    assert spilled and all(op.nbytes > 0 for op in spilled)
    files = [p for op in spilled for p in op.spilled]
    assert all(os.path.exists(p) for p in files)
    for i, df in enumerate(frames):
        n = run.dataset(df).n_rows
        picks = range(0, n, max(n // 300, 1))
        assert [run.backward(df, rows=[r]).to_dict() for r in picks] == [want[i][r] for r in picks]
    got = [run.forward(orders, rows=[r], to=frames[-1]).to_dict() for r in range(0, 20_000, 97)]
    assert got == fwd
    # and after them: the inverse indexes they built on spilled tensors are mapped too
    assert tracker.budget.held(tracker.store, tracker.nodes.values()) <= budget
    assert any(p.endswith(".npy") for op in spilled for p in op.spilled)
    # the key indexes were spilled too, and records are read back through them
    mine = [n for n in tracker.nodes.values() if n.run == run._log.id]
    key_files = tracker.budget.key_files(mine)
    assert key_files and all(os.path.exists(p) for p in key_files)
    pd.testing.assert_frame_equal(run.rows(frames[1], rows=[0, 7, 500]), records)
    # a spilled run saves and loads like any other
    tensprov_lab.save(str(tmp_path / "spilled.tpl"), runs=[run])
    (loaded,) = tensprov_lab.load(str(tmp_path / "spilled.tpl"))
    assert (
        loaded.backward("out", rows=[0]).to_dict() == run.backward(frames[-1], rows=[0]).to_dict()
    )
    # forgetting the run deletes its files (the indexes' files among them)
    files = [p for op in spilled for p in op.spilled]
    tensprov_lab.forget(run)
    assert not any(os.path.exists(p) for p in files + key_files)
