"""The save format (``store/_persist.py``): every tensor form round-trips, bad saves fail
clearly, and a save is never left half-written.  No JVM."""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tensprov_lab.store import (
    AllTensor,
    BlockTensor,
    CrossTensor,
    CSRTensor,
    IdentityTensor,
    IndexTensor,
    MaskTensor,
    Store,
    Tensor,
)
from tensprov_lab.store._persist import SaveError, read_store, write_store


def _tensors(rng: np.random.Generator) -> dict[str, Tensor]:
    """One tensor of every kind and storage form."""
    n = 3000
    kept = np.sort(rng.choice(n, 1200, replace=False))
    dense_kept = np.sort(rng.choice(n, 2900, replace=False))
    scattered = rng.integers(-1, n, 5000)
    mostly_small = np.where(rng.random(5000) < 0.99, rng.integers(0, 7, 5000), 2999)
    monotone = np.sort(rng.integers(0, n, 5000))
    out = {
        "identity": IdentityTensor(n),
        "all": AllTensor(1, n),
        "block": BlockTensor(n + 10, n, offset=10),
        "cross-left": CrossTensor(n * 7, n, stride=7),
        "cross-right": CrossTensor(n * 7, 7, stride=1),
        "mask-ints": MaskTensor.from_kept(kept, n, form="ints"),
        "mask-bitset": MaskTensor.from_kept(dense_kept, n, form="bitset"),
        "index-packed": IndexTensor.from_index(scattered, n, form="packed"),
        "index-sorted": IndexTensor.from_index(monotone, n, form="sorted"),
        "index-ef-values": IndexTensor._build_ef(monotone, n, over="values"),
        "index-ef-offsets": IndexTensor._build_ef(monotone, n, over="offsets"),
        "index-pfor": IndexTensor.from_index(mostly_small, n, form="pfor"),
        "csr": CSRTensor.from_pairs(rng.integers(0, 40, 4000), rng.integers(0, n, 4000), 40, n),
    }
    assert out["index-pfor"].form == "pfor" and out["index-ef-offsets"].ef_over == "offsets"
    return out


def _store(tensors: dict[str, Tensor]) -> Store:
    s = Store()
    run = s.new_run_id()
    for name, t in tensors.items():
        src = s.add_dataset(f"{name}-in", n_rows=t.n_in, role="source", run=run,
                            columns=["a", "b"], dtypes=["int", "string"])  # fmt: skip
        dst = s.add_dataset(name, n_rows=t.n_out, run=run, columns=["a"], dtypes=["int"])
        s.add_operation(
            "op", "projection", [src.id], dst.id, [t], run=run, expression=f"make {name}",
            contributing=[np.array([[True, False]])], influencing=[np.array([[False, True]])],
            slots={"v": [(0, "a", "a")]}, seconds=0.5, jobs=2, fused=True,
        )  # fmt: skip
    return s


def _save(s: Store, path: str) -> int:
    runs = [{"id": 0, "name": "r", "datasets": list(s.datasets),
             "operations": list(s.operations), "warnings": [], "seconds": 1.0,
             "jobs": 3, "failed": []}]  # fmt: skip
    return write_store(s, path, runs, list(s.datasets), list(s.operations))


def test_every_tensor_form_round_trips(tmp_path: Any) -> None:
    rng = np.random.default_rng(7)
    tensors = _tensors(rng)
    s = _store(tensors)
    nbytes = _save(s, str(tmp_path / "save"))
    assert nbytes > sum(t.nbytes for t in tensors.values())
    saved = read_store(tmp_path / "save")
    got = saved.store
    assert saved.runs[0]["name"] == "r" and saved.runs[0]["jobs"] == 3
    assert set(got.datasets) == set(s.datasets) and set(got.operations) == set(s.operations)
    for d, ds in s.datasets.items():
        assert got.datasets[d] == ds
    for o, op in s.operations.items():
        new = got.operations[o]
        assert (new.method, new.inputs, new.output, new.expression) == (
            op.method, op.inputs, op.output, op.expression,
        )  # fmt: skip
        assert (new.seconds, new.jobs, new.fused, new.slots) == (0.5, 2, True, op.slots)
        assert new.contributing is not None and new.influencing is not None
        assert np.array_equal(new.contributing[0], op.contributing[0])  # type: ignore[index]
        assert np.array_equal(new.influencing[0], op.influencing[0])  # type: ignore[index]
        a, b = op.tensors[0], new.tensors[0]  # type: ignore[index]
        assert type(a) is type(b) and a.shape == b.shape and a.nbytes == b.nbytes
        assert getattr(a, "form", None) == getattr(b, "form", None)
        assert (a.to_sparse() != b.to_sparse()).nnz == 0
        rows = rng.integers(0, a.n_out, 50) if a.n_out else np.zeros(0, dtype=np.int64)
        assert np.array_equal(a.backward(rows), b.backward(rows))
        ins = rng.integers(0, a.n_in, 50)
        assert np.array_equal(a.forward(ins), b.forward(ins))
    # a new dataset or run in the loaded store never reuses a saved id
    fresh = got.add_dataset("new")
    assert fresh.id > max(s.datasets) and fresh.id > max(s.operations)


@settings(max_examples=40, deadline=None)
@given(
    idx=st.lists(st.integers(-1, 200), max_size=300),
    form=st.sampled_from([None, "packed", "pfor"]),
)
def test_index_tensors_round_trip(tmp_path_factory: Any, idx: list[int], form: str | None) -> None:
    if form == "pfor" and not idx:
        return  # the pfor form needs a row (from_index refuses, as it should)
    try:
        t = IndexTensor.from_index(np.array(idx, dtype=np.int64), 201, form=form)
    except ValueError:
        assert form == "pfor"  # too many rows for that form: nothing to save
        return
    path = str(tmp_path_factory.mktemp("idx") / "save")
    _save(_store({"t": t}), path)
    back = read_store(path).store.operations[2].tensors[0]  # type: ignore[index]
    assert np.array_equal(back.to_sparse().toarray(), t.to_sparse().toarray())


def test_a_save_replaces_an_earlier_one_whole(tmp_path: Any) -> None:
    rng = np.random.default_rng(1)
    path = str(tmp_path / "save")
    _save(_store({"csr": _tensors(rng)["csr"]}), path)
    _save(_store({"mask": MaskTensor.from_kept([1, 2], 5)}), path)
    assert [op.method for op in read_store(path).store.operations.values()] == ["op"]
    assert read_store(path).store.datasets[1].name == "mask"
    assert sorted(os.listdir(tmp_path)) == ["save"]  # no temporary directory left behind


def test_a_failed_save_leaves_the_earlier_one(tmp_path: Any, monkeypatch: Any) -> None:
    from tensprov_lab.store import _persist

    path = str(tmp_path / "save")
    _save(_store({"mask": MaskTensor.from_kept([1, 2], 5)}), path)

    def broken(t: Tensor, where: str) -> None:
        raise KeyboardInterrupt  # Ctrl-C in the middle of writing

    monkeypatch.setattr(_persist, "_write_tensor", broken)
    with pytest.raises(KeyboardInterrupt):
        _save(_store({"id": IdentityTensor(3), "csr": CSRTensor(1, 3, [0, 1], [2])}), path)
    assert sorted(os.listdir(tmp_path)) == ["save"]
    assert read_store(path).store.datasets[1].name == "mask"


def test_a_full_disk_while_saving_says_so_and_leaves_nothing(
    tmp_path: Any, monkeypatch: Any
) -> None:
    """The disk fills up in the middle of a save: a clear OSError (what, where, what to
    do), the earlier save whole, no temporary directory or partial file left."""
    import errno

    from tensprov_lab.store import _persist

    path = str(tmp_path / "save")
    _save(_store({"mask": MaskTensor.from_kept([1, 2], 5)}), path)
    written = []
    real = _persist._write_tensor

    def filling(t: Tensor, where: str) -> None:
        if written:
            with open(where, "wb") as f:
                f.write(b"ARROW1 partial")  # the bytes that fitted
            raise OSError(errno.ENOSPC, "No space left on device")
        written.append(where)
        real(t, where)

    monkeypatch.setattr(_persist, "_write_tensor", filling)
    tensors = _tensors(np.random.default_rng(2))
    with pytest.raises(OSError, match="could not write the save .*No space left on device.*"
                       "Nothing was written.*free space") as got:  # fmt: skip
        _save(_store(tensors), path)
    assert got.value.errno == errno.ENOSPC
    assert len(written) == 1 and not os.path.exists(written[0])
    assert sorted(os.listdir(tmp_path)) == ["save"]
    assert read_store(path).store.datasets[1].name == "mask"


def test_a_path_that_is_not_a_save_is_never_overwritten(tmp_path: Any) -> None:
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(SaveError, match="is not a tensprov-lab save: choose another path"):
        _save(_store({"id": IdentityTensor(2)}), str(tmp_path / "mine"))
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"


def _saved(tmp_path: Any) -> tuple[str, dict[str, Any]]:
    path = str(tmp_path / "save")
    _save(_store({"csr": CSRTensor(2, 3, [0, 1, 3], [2, 0, 1])}), path)
    with open(os.path.join(path, "manifest.json")) as f:
        return path, json.load(f)


def test_bad_saves_say_what_is_wrong(tmp_path: Any) -> None:
    with pytest.raises(FileNotFoundError, match="no tensprov-lab save at"):
        read_store(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(SaveError, match="is not a tensprov-lab save: it has no manifest.json"):
        read_store(tmp_path / "empty")

    path, manifest = _saved(tmp_path)
    (name,) = manifest["files"]
    full = os.path.join(path, name)
    data = open(full, "rb").read()

    # a corrupted tensor file (same size, one byte flipped)
    with open(full, "wb") as f:
        f.write(data[:-20] + bytes([data[-20] ^ 0xFF]) + data[-19:])
    with pytest.raises(SaveError, match="is corrupted: its checksum does not match"):
        read_store(path)
    # a truncated one
    with open(full, "wb") as f:
        f.write(data[: len(data) // 2])
    with pytest.raises(SaveError, match="is truncated or was changed"):
        read_store(path)
    # a missing one
    os.remove(full)
    with pytest.raises(FileNotFoundError, match="is missing from the save"):
        read_store(path)
    with open(full, "wb") as f:
        f.write(data)
    assert read_store(path).store.operations[2].tensors[0].backward([1]).tolist() == [0, 1]  # type: ignore[index]

    mpath = os.path.join(path, "manifest.json")
    text = open(mpath).read()
    with open(mpath, "w") as f:
        f.write(text[: len(text) // 2])
    with pytest.raises(SaveError, match="is truncated or not JSON"):
        read_store(path)
    with open(mpath, "w") as f:
        json.dump({**manifest, "version": 99}, f)
    with pytest.raises(SaveError, match="format version 99; this tensprov-lab reads up to"):
        read_store(path)
    with open(mpath, "w") as f:
        json.dump({**manifest, "format": "something-else"}, f)
    with pytest.raises(SaveError, match="is not a tensprov-lab manifest"):
        read_store(path)


def test_a_tensor_file_is_an_ordinary_arrow_file(tmp_path: Any) -> None:
    """Other tools can read the format: typed columns, the tensor's kind in metadata."""
    import pyarrow as pa
    import pyarrow.ipc as ipc

    path, manifest = _saved(tmp_path)
    (name,) = manifest["files"]
    table = ipc.open_file(pa.memory_map(os.path.join(path, name))).read_all()
    meta = json.loads(table.schema.metadata[b"tensprov-lab"])
    assert meta["type"] == "csr" and (meta["n_out"], meta["n_in"]) == (2, 3)
    assert table.column("indices").to_pylist() == [[2, 0, 1]]
    assert table.column("indptr").to_pylist() == [[0, 1, 3]]
