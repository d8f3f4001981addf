"""Tensors past the memory budget spill to local disk, memory-mapped.

A spilled operation's tensors are written in the save format (one Arrow IPC file per
tensor, :mod:`._persist`) and read back memory-mapped: the same tensor classes over
arrays that are pages of the file, so queries answer as before (the first touch of a
page reads it from disk, the operating system keeps hot pages cached and drops cold
ones) while the process holds none of their bytes.  Inverse indexes the queries build
later stay in memory and count against the budget.

Pure numpy and pyarrow, no Spark.

Examples
--------
>>> import tempfile
>>> from tensprov_lab.store import IndexTensor, Store
>>> s = Store()
>>> a = s.add_dataset("a", n_rows=4, role="source")
>>> b = s.add_dataset("b", n_rows=3)
>>> t = IndexTensor.from_index([0, 2, 3], n_in=4)
>>> op = s.add_operation("join", "join", [a.id], b.id, [t])
>>> memory_nbytes(s) > 0
True
>>> spilled = spill(s, tempfile.mkdtemp(), limit=0)
>>> memory_nbytes(s), s.operations[op.id].tensors[0].backward([1]).tolist()
(0, [2])
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterable

from tensprov_lab.store._graph import Operation, Store
from tensprov_lab.store._persist import _read_tensor, _write_tensor
from tensprov_lab.store._tensors import Tensor

__all__ = ["Put", "memory_nbytes", "release", "spill", "to_files"]


def _held(op: Operation) -> int:
    """Bytes of ``op`` the process holds: its tensors unless spilled, the inverse
    indexes queries built, and its attribute maps."""
    maps = sum(int(m.nbytes) for ms in (op.contributing, op.influencing) if ms for m in ms)
    return (0 if op.spilled else op.nbytes) + op.index_nbytes + maps


def memory_nbytes(store: Store) -> int:
    """Bytes of tensors, indexes and attribute maps ``store`` holds in memory (spilled
    tensors are pages of their files, not counted)."""
    return sum(_held(op) for op in store.operations.values())


#: where an operation's tensors go: given the operation, its tensors in their new home
#: and the paths that hold them (None: this destination cannot take them)
Put = Callable[[Operation], "tuple[list[Tensor], list[str]] | None"]


def to_files(directory: str) -> Put:
    """The local-disk destination: each tensor written as ``op<O>_<k>.arrow`` in
    ``directory`` (the save format) and replaced by its memory-mapped copy."""

    def put(op: Operation) -> tuple[list[Tensor], list[str]]:
        assert op.tensors is not None
        os.makedirs(directory, exist_ok=True)
        paths, mapped = [], []
        for k, t in enumerate(op.tensors):
            path = os.path.join(directory, f"op{op.id}_{k}.arrow")
            _write_tensor(t, path)
            paths.append(path)
            mapped.append(_read_tensor(path))
        return mapped, paths

    return put


def spill(
    store: Store, directory: str, limit: int, put: Put | None = None, ops: Iterable[int] = ()
) -> list[int]:
    """Spill the tensors of ``store``'s operations, largest first, until it holds at most
    ``limit`` bytes in memory (or nothing is left to spill).  Returns the ids of the
    operations spilled.

    ``put`` says where they go (default: :func:`to_files` of ``directory``, memory-mapped);
    ``Operation.spilled`` names the files (:func:`release` deletes them).  ``ops``
    restricts the spill to those operations, and also moves ones already spilled
    elsewhere (their earlier files are released).
    """
    put = put or to_files(directory)
    held = memory_nbytes(store)
    done: list[int] = []
    only = set(ops)
    candidates = [
        op for op in store.operations.values()
        if op.tensors and (op.id in only if only else not op.spilled)
    ]  # fmt: skip
    for op in sorted(candidates, key=lambda o: (-o.nbytes, o.id)):
        if held <= limit:
            break
        if op.nbytes == 0 and not op.spilled:  # O(1) tensors: nothing to gain
            continue
        placed = put(op)
        if placed is None:
            continue
        if not op.spilled:
            held -= op.nbytes
        earlier = op.spilled
        op.tensors, op.spilled = placed
        if earlier:
            release(earlier)
        done.append(op.id)
    return done


def release(paths: list[str]) -> None:
    """Delete spilled files and table directories (of operations removed from the
    store); paths that are not local (``hdfs://...``) are left to their filesystem."""
    for path in paths:
        if "://" in path and not path.startswith("file://"):
            continue
        path = path.removeprefix("file://")
        try:
            if os.path.isdir(path):
                shutil.rmtree(path)
            else:
                os.remove(path)
        except OSError:
            pass  # gone already, or still mapped on a platform that refuses
