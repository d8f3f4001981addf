"""The memory budget of the store: tensors past it spill to local disk.

``track(spark, budget="1GB")`` caps the bytes of tensors and indexes the store holds in
memory.  Past it, capture first spills tensors, largest first, to a directory of its
own (memory-mapped files in the save format, see :mod:`tensprov_lab.store._spill`), so
lineage stays record-level and queries keep answering from the files; only when nothing
is left to spill (or with ``spill=False``) do further operations fall back to coarse
lineage, with a warning.  The directory is removed when the Python process exits;
forgetting a run deletes its files.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile

from tensprov_lab.store import Store
from tensprov_lab.store._spill import memory_nbytes, release, spill

__all__ = ["Budget"]


class Budget:
    """How many bytes the store may hold in memory, and where tensors spill past it.

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
        #: operations spilled so far, and their bytes
        self.spilled: list[int] = []
        self.spilled_bytes = 0

    def directory(self) -> str:
        if self._directory is None:
            self._directory = tempfile.mkdtemp(prefix="tensprov-spill-")
            atexit.register(shutil.rmtree, self._directory, True)
        return self._directory

    def over(self, store: Store) -> bool:
        """Whether ``store`` holds more than the budget once what can be spilled is."""
        if self.limit is None or memory_nbytes(store) <= self.limit:
            return False
        if self.spill:
            done = spill(store, self.directory(), self.limit)
            self.spilled += done
            self.spilled_bytes += sum(store.operations[o].nbytes for o in done)
        return memory_nbytes(store) > self.limit

    def used_up(self, store: Store) -> str:
        """Why an operation past the budget keeps coarse lineage only."""
        return (
            f"the memory budget of {self.limit or 0:,} bytes is used up "
            f"({memory_nbytes(store):,} bytes held in memory"
            + (", every tensor spilled to disk" if self.spill else "")
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
    def release(paths: list[str]) -> None:
        release(paths)
