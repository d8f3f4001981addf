"""Tensors past the memory budget spill to local disk, memory-mapped.

A spilled operation's tensors are written in the save format (one Arrow IPC file per
tensor, :mod:`._persist`) and read back memory-mapped: the same tensor classes over
arrays that are pages of the file, so queries answer as before (the first touch of a
page reads it from disk, the operating system keeps hot pages cached and drops cold
ones) while the process holds none of their bytes.  Inverse indexes the queries build
later count against the budget; past it, those of spilled operations are memory-mapped
from files of their own too (:func:`map_indexes`), so the budget bounds what the
process holds however many queries ran.

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
from typing import Literal

import numpy as np

from tensprov_lab.store._codes import PackedInts
from tensprov_lab.store._graph import Operation, Store
from tensprov_lab.store._persist import _read_tensor, _write_tensor
from tensprov_lab.store._tensors import Tensor, held_nbytes

__all__ = ["Put", "map_indexes", "mapped_npy", "memory_nbytes", "release", "spill", "to_files"]


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
        paths: list[str] = []
        mapped = []
        try:
            for k, t in enumerate(op.tensors):
                path = os.path.join(directory, f"op{op.id}_{k}.arrow")
                paths.append(path)
                _write_tensor(t, path)
                mapped.append(_read_tensor(path))
        except BaseException:
            # a full disk or Ctrl-C mid-write: the operation keeps its tensors in
            # memory, and no file of it is left behind
            release(paths)
            raise
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


def map_indexes(store: Store, directory: str, limit: int) -> list[int]:
    """Move the inverse indexes queries built on spilled operations' tensors to
    memory-mapped files in ``directory``, largest first, until ``store`` holds at most
    ``limit`` bytes in memory (or none is left).  The files join the operation's
    ``spilled`` files (released with them).  Returns the ids of the operations whose
    indexes moved.

    Examples
    --------
    >>> import tempfile
    >>> from tensprov_lab.store import IndexTensor, Store
    >>> s = Store()
    >>> a = s.add_dataset("a", n_rows=100_000, role="source")
    >>> b = s.add_dataset("b", n_rows=100_000)
    >>> t = IndexTensor.from_index(np.arange(100_000)[::-1], n_in=100_000)
    >>> op = s.add_operation("sort", "reorder", [a.id], b.id, [t])
    >>> _ = spill(s, tempfile.mkdtemp(), limit=0)
    >>> s.operations[op.id].tensors[0].forward([0]).tolist()   # builds its inverse index
    [99999]
    >>> memory_nbytes(s) > 0, map_indexes(s, tempfile.mkdtemp(), 0) == [op.id], memory_nbytes(s)
    (True, True, 0)
    >>> s.operations[op.id].tensors[0].forward([1]).tolist()
    [99998]
    """
    held = memory_nbytes(store)
    done: list[int] = []
    spilled = [op for op in store.operations.values() if op.spilled and op.index_nbytes]
    for op in sorted(spilled, key=lambda o: (-o.index_nbytes, o.id)):
        if held <= limit:
            break
        assert op.tensors is not None and op.spilled is not None
        before = op.index_nbytes
        os.makedirs(directory, exist_ok=True)
        for k, t in enumerate(op.tensors):
            made: list[str] = []
            try:
                _map_tensor(t, os.path.join(directory, f"op{op.id}_{k}_index"), made)
            finally:
                # the indexes mapped so far are the operation's files (a full disk or
                # Ctrl-C stops here: the rest stay in memory, none is half written)
                op.spilled.extend(made)
        held -= before - op.index_nbytes
        done.append(op.id)
    return done


def _map_tensor(t: Tensor, stem: str, made: list[str]) -> None:
    """Map the indexes of ``t`` (and of the tensors it is made of) from files, listing
    the files in ``made``."""
    for k, part in enumerate(t.components()):
        _map_tensor(part, f"{stem}{k}", made)
    for name in t._lazy:
        at = len(made)
        try:
            value = _mapped(getattr(t, name), f"{stem}{name}", made)
        except BaseException:
            release(made[at:])  # this index stays in memory whole
            del made[at:]
            raise
        # one assignment: a query running beside reads the old index or the new one
        setattr(t, name, value)


def _mapped(value: object, stem: str, made: list[str]) -> object:
    """``value`` (an index: array, tuple of arrays, packed ints) with its arrays read
    back from ``.npy`` files mapped read-only (listed in ``made``)."""
    if isinstance(value, tuple):
        return tuple(_mapped(v, f"{stem}_{i}", made) for i, v in enumerate(value))
    if isinstance(value, PackedInts):
        words = _mapped(value.words, stem, made)
        return value if words is value.words else PackedInts(words, value.width, value.size)  # type: ignore[arg-type]
    if not isinstance(value, np.ndarray) or held_nbytes(value) == 0:
        return value
    path = f"{stem}.npy"
    made.append(path)
    return mapped_npy(value, path)


def mapped_npy(a: np.ndarray, path: str, mode: Literal["r", "c"] = "r") -> np.ndarray:
    """``a`` written to the ``.npy`` file ``path`` and read back memory-mapped
    (``mode`` of :func:`numpy.load`); a write stopped by a full disk or Ctrl-C leaves
    no file.

    >>> import os, tempfile
    >>> m = mapped_npy(np.arange(4), os.path.join(tempfile.mkdtemp(), "a.npy"))
    >>> type(m).__name__, m.tolist()
    ('memmap', [0, 1, 2, 3])
    """
    try:
        np.save(path, a)
    except BaseException:
        release([path])
        raise
    return np.load(path, mmap_mode=mode)


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
