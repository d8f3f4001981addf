"""The memory budget of the store: tensors and capture's keys past it spill to disk.

``track(spark, budget="1GB")`` caps the bytes the store and capture hold in memory:
tensors, the inverse indexes queries build, attribute maps, and the key indexes capture
keeps per dataset to read records back and replay them.  Past it, capture first spills
tensors, largest first (memory-mapped files in the save format, see
:mod:`tensprov_lab.store._spill`), then the arrays of key indexes (``.npy`` files mapped
copy-on-write), so lineage stays record-level and queries keep answering from the
files; only when nothing is left to spill (or with ``spill=False``) do further
operations fall back to coarse lineage, with a warning.  The directory is removed when
the Python process exits; forgetting a run deletes its files.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Iterable
from typing import Any

import numpy as np

from tensprov_lab.store import Store
from tensprov_lab.store._spill import memory_nbytes, release, spill

__all__ = ["Budget", "key_nbytes"]

#: a key index's array smaller than this stays in memory (a file each is not worth it)
_SMALL = 4096
#: the attribute of a key index listing the files its arrays were spilled to
_FILES = "_tensprov_spilled"


def _arrays(ki: Any) -> list[tuple[str, np.ndarray]]:
    return [(k, v) for k, v in vars(ki).items() if isinstance(v, np.ndarray)]


def key_nbytes(ki: Any) -> int:
    """Bytes a key index holds in memory (its arrays not mapped from a file).

    >>> from tensprov_lab.capture._keys import MappedKeyIndex, RangeKeyIndex
    >>> key_nbytes(MappedKeyIndex(RangeKeyIndex(1000), np.arange(1000), 1000))
    8000
    """
    return sum(int(a.nbytes) for _, a in _arrays(ki) if not isinstance(a, np.memmap))


def _held(store: Store, keys: list[Any]) -> int:
    return memory_nbytes(store) + sum(key_nbytes(k) for k in keys)


def _keys(nodes: Iterable[Any]) -> list[Any]:
    seen: dict[int, Any] = {}
    for n in nodes:
        ki = getattr(n, "ki", None)
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

    def __init__(self, limit: int | None = None, spill: bool = True) -> None:
        self.limit = limit
        self.spill = spill
        self._directory: str | None = None

    def directory(self) -> str:
        if self._directory is None:
            self._directory = tempfile.mkdtemp(prefix="tensprov-spill-")
            atexit.register(shutil.rmtree, self._directory, True)
        return self._directory

    def held(self, store: Store, nodes: Iterable[Any] = ()) -> int:
        """Bytes held in memory: the store's and the key indexes of ``nodes``."""
        return _held(store, _keys(nodes))

    def over(self, store: Store, nodes: Iterable[Any] = ()) -> bool:
        """Whether more than the budget is held once what can be spilled is."""
        keys = _keys(nodes)
        if self.limit is None or _held(store, keys) <= self.limit:
            return False
        if self.spill:
            in_keys = sum(key_nbytes(k) for k in keys)
            spill(store, self.directory(), max(self.limit - in_keys, 0))
            self._spill_keys(keys, self.limit - memory_nbytes(store))
        return _held(store, keys) > self.limit

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
                np.save(path, a)
                # copy-on-write: a key index that writes into its arrays still may
                setattr(ki, name, np.load(path, mmap_mode="c"))
                vars(ki).setdefault(_FILES, []).append(path)
                held -= int(a.nbytes)

    def used_up(self, store: Store, nodes: Iterable[Any] = ()) -> str:
        """Why an operation past the budget keeps coarse lineage only."""
        return (
            f"the memory budget of {self.limit or 0:,} bytes is used up "
            f"({self.held(store, nodes):,} bytes held in memory"
            + (", every tensor and key spilled to disk" if self.spill else "")
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
