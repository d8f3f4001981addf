"""The memory budget of the store: tensors and capture's keys past it spill to disk.

``track(spark, budget="1GB")`` caps the bytes the store and capture hold in memory:
tensors, the inverse indexes queries build, attribute maps, and the key indexes capture
keeps per dataset to read records back and replay them.  Past it, capture first spills
tensors, largest first (memory-mapped files in the save format, see
:mod:`tensprov_lab.store._spill`), then the arrays of key indexes (``.npy`` files mapped
copy-on-write), then the inverse indexes queries built on spilled tensors (``.npy``
files mapped read-only), so lineage stays record-level and queries keep answering from the
files; only when nothing is left to spill (or with ``spill=False``) do further
operations fall back to coarse lineage, with a warning.  The directory is removed when
the Python process exits; forgetting a run deletes its files.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import weakref
from collections.abc import Iterable
from typing import Any

import numpy as np

from tensprov_lab.capture.memory._resident import SparkTensor, to_spark
from tensprov_lab.store import Store
from tensprov_lab.store._spill import (
    Put,
    map_indexes,
    mapped_npy,
    memory_nbytes,
    release,
    spill,
    to_files,
)

__all__ = ["Budget", "key_nbytes", "records_nbytes"]

#: a key index's array smaller than this stays in memory (a file each is not worth it)
_SMALL = 4096
#: the attribute of a key index listing the files its arrays were spilled to
_FILES = "_tensprov_spilled"


def _free(directory: str) -> int:
    """Bytes free on the filesystem of ``directory``."""
    return shutil.disk_usage(directory).free


def _arrays(ki: Any) -> list[tuple[str, np.ndarray]]:
    return [(k, v) for k, v in vars(ki).items() if isinstance(v, np.ndarray)]


def key_nbytes(ki: Any) -> int:
    """Bytes a key index holds in memory (its arrays not mapped from a file).

    >>> from tensprov_lab.capture.plan._keys import MappedKeyIndex, RangeKeyIndex
    >>> key_nbytes(MappedKeyIndex(RangeKeyIndex(1000), np.arange(1000), 1000))
    4000
    """
    return sum(int(a.nbytes) for _, a in _arrays(ki) if not isinstance(a, np.memmap))


def _held(store: Store, keys: list[Any], nodes: Iterable[Any] = ()) -> int:
    return memory_nbytes(store) + sum(key_nbytes(k) for k in keys) + records_nbytes(nodes)


#: bytes of each kept records frame, by ``id`` (with a weak reference to tell a new
#: frame at the same address): measuring a frame of strings takes milliseconds, and
#: every query checks the budget
_SIZES: dict[int, tuple[Any, int]] = {}


def records_nbytes(nodes: Iterable[Any]) -> int:
    """Bytes of the records a replay read whole and keeps on a node (``Node.records``:
    a pandas frame and its index), counted against the budget like the rest."""
    total = 0
    for n in nodes:
        kept = getattr(n, "records", None)
        if kept is not None:
            pdf, idx = kept
            known = _SIZES.get(id(pdf))
            if known is None or known[0]() is not pdf:
                size = int(pdf.memory_usage(index=True, deep=True).sum())
                known = _SIZES[id(pdf)] = (weakref.ref(pdf), size)
            total += known[1] + int(np.asarray(idx).nbytes)
    return total


def _keys(nodes: Iterable[Any]) -> list[Any]:
    seen: dict[int, Any] = {}
    for n in nodes:
        # a classic node's key index, or a Connect node's
        ki = getattr(n, "ki", None) or getattr(n, "index", None)
        if ki is not None:
            seen.setdefault(id(ki), ki)
    return list(seen.values())


class Budget:
    """How many bytes the store and capture may hold in memory, and where they spill.

    Examples
    --------
    >>> from tensprov_lab.store import Store
    >>> b = Budget(limit=1000)
    >>> b.over(Store())
    False
    """

    def __init__(self, limit: int | None = None, spill: bool = True, storage: str = "disk") -> None:
        self.limit = limit
        self.spill = spill
        #: where tensors past the budget go: "disk", or "spark" (tables Spark keeps)
        self.storage = storage
        #: the directory of Spark-resident tables (None: a temporary one)
        self.spark_dir: str | None = None
        #: the session that keeps Spark-resident tensors (set by the tracker)
        self.spark: Any = None
        self._directory: str | None = None

    def put(self) -> Put:
        """Where the next spilled operation goes: Spark with ``storage="spark"``, else
        local disk while it has room for it (twice its bytes and 64 MB to spare), else
        Spark."""
        to_disk = to_files(self.directory())
        to_table = (
            to_spark(self.spark, self._spark_directory(), fallback=self.directory())
            if self.spark is not None
            else None
        )

        def put(op: Any) -> Any:
            if to_table is not None and (
                self.storage == "spark" or _free(self.directory()) < 2 * op.nbytes + (64 << 20)
            ):
                return to_table(op)
            return to_disk(op)

        return put

    def _spark_directory(self) -> str:
        if self.spark_dir is not None:
            return self.spark_dir
        return os.path.join(self.directory(), "spark")

    def directory(self) -> str:
        if self._directory is None:
            self._directory = tempfile.mkdtemp(prefix="tensprov-spill-")
            atexit.register(shutil.rmtree, self._directory, True)
        return self._directory

    def held(self, store: Store, nodes: Iterable[Any] = ()) -> int:
        """Bytes held in memory: the store's, and the key indexes and kept records of
        ``nodes``."""
        nodes = list(nodes)
        return _held(store, _keys(nodes), nodes)

    def over(self, store: Store, nodes: Iterable[Any] = ()) -> bool:
        """Whether more than the budget is held once what can be spilled is."""
        nodes = list(nodes)
        keys = _keys(nodes)
        # storage="spark" without a budget: every tensor goes to Spark
        limit = 0 if self.limit is None and self.storage == "spark" else self.limit
        if limit is None or _held(store, keys, nodes) <= limit:
            return False
        if self.spill:
            try:
                fixed = sum(key_nbytes(k) for k in keys) + records_nbytes(nodes)
                spill(store, self.directory(), max(limit - fixed, 0), put=self.put())
                self._spill_keys(keys, limit - memory_nbytes(store) - records_nbytes(nodes))
                # the inverse indexes queries built on spilled tensors: from files too
                fixed = sum(key_nbytes(k) for k in keys) + records_nbytes(nodes)
                map_indexes(store, self.directory(), max(limit - fixed, 0))
            except OSError as exc:
                # a full disk: what did not fit stays in memory (nothing half written);
                # past the budget, capture then keeps coarse lineage and says why
                from tensprov_lab._warn import warn

                warn(
                    f"could not spill past the memory budget to {self.directory()} "
                    f"({exc.strerror or exc}): what did not fit stays in memory. Free "
                    "space there, or set TMPDIR to a larger disk before starting Python"
                )
        return self.limit is not None and _held(store, keys, nodes) > self.limit

    def move(self, store: Store, op_ids: Iterable[int], to: str) -> list[int]:
        """Move the tensors of the operations ``op_ids`` out of memory: to local disk
        (``to="disk"``) those still in memory, into Spark (``"spark"``) those not there
        yet (from memory or disk); returns the ids of those moved."""
        if to not in ("disk", "spark"):
            raise ValueError(f"to must be 'disk' or 'spark', not {to!r}")
        ops = [store.operations[i] for i in op_ids]
        if to == "disk":
            put = to_files(self.directory())
            todo = [op.id for op in ops if not op.spilled]
        else:
            if self.spark is None:
                raise LookupError(
                    "these runs have no Spark session (loaded from a save): their tensors "
                    "can go to disk only"
                )
            put = to_spark(self.spark, self._spark_directory())
            todo = [op.id for op in ops if op.tensors and not any(
                isinstance(t, SparkTensor) for t in op.tensors)]  # fmt: skip
        if not todo:
            return []
        return spill(store, self.directory(), -1, put=put, ops=todo)

    def _spill_keys(self, keys: list[Any], room: int) -> None:
        """Spill the arrays of key indexes, largest first, until they fit in ``room``."""
        held = sum(key_nbytes(k) for k in keys)
        for ki in sorted(keys, key=key_nbytes, reverse=True):
            if held <= room:
                return
            for name, a in _arrays(ki):
                if isinstance(a, np.memmap) or a.nbytes < _SMALL:
                    continue
                path = os.path.join(self.directory(), f"key{id(ki)}_{name}.npy")
                # copy-on-write: a key index that writes into its arrays still may
                setattr(ki, name, mapped_npy(a, path, mode="c"))
                vars(ki).setdefault(_FILES, []).append(path)
                held -= int(a.nbytes)

    def used_up(self, store: Store, nodes: Iterable[Any] = ()) -> str:
        """Why an operation past the budget keeps coarse lineage only."""
        return (
            f"the memory budget of {self.limit or 0:,} bytes is used up "
            f"({self.held(store, nodes):,} bytes held in memory"
            + (
                (
                    ", every tensor and key spilled to disk"
                    if self.storage == "disk"
                    else ", every tensor spilled to Spark and every key to disk"
                )
                if self.spill
                else ""
            )
            + "); raise it with budget=... or free old runs with "
            "tensprov_lab.forget(run) (every run: tensprov_lab.forget())"
        )

    def forget(self, store: Store, run_ids: set[int]) -> list[str]:
        """The spilled files of the operations of ``run_ids`` (to delete once the runs
        are removed from ``store``)."""
        return [
            p for op in store.operations.values()
            if op.run in run_ids and op.spilled for p in op.spilled
        ]  # fmt: skip

    @staticmethod
    def key_files(nodes: Iterable[Any]) -> list[str]:
        """The files the key indexes of ``nodes`` were spilled to."""
        return [p for ki in _keys(nodes) for p in vars(ki).get(_FILES, [])]

    @staticmethod
    def release(paths: list[str]) -> None:
        release(paths)
