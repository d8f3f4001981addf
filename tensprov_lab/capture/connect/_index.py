"""Which record of a dataset a key tuple names (capture over Spark Connect).

Examples
--------
>>> import numpy as np
>>> ix = KeyIndex(np.array([[5], [9], [12]]))
>>> ix.lookup(np.array([[12], [5], [-1]])).tolist()
[2, 0, -1]
>>> KeyIndex(np.zeros((1, 0), dtype=np.int64)).lookup(np.zeros((3, 0), dtype=np.int64)).tolist()
[0, 0, 0]
"""

from __future__ import annotations

import numpy as np

__all__ = ["KeyIndex", "GroupIndex", "Unidentifiable"]


class Unidentifiable(Exception):
    """Records of a dataset share their keys (an explode): a later operation cannot tell
    which one it read."""


class KeyIndex:
    """The key tuples of a dataset's records in canonical order (-1: a null key)."""

    def __init__(self, table: np.ndarray) -> None:
        self.table = table
        self.n = int(table.shape[0])
        self._index: object = None

    def lookup(self, tuples: np.ndarray) -> np.ndarray:
        """The record of each key tuple (-1 when there is none, e.g. all keys null)."""
        import pandas as pd

        if self.table.shape[1] == 0:  # one record (a global aggregate): every key is it
            return np.zeros(len(tuples), dtype=np.int64)
        if self._index is None:
            if self.table.shape[1] == 1:
                index = pd.Index(self.table[:, 0])
            else:
                index = pd.MultiIndex.from_arrays(list(self.table.T))
            if not index.is_unique:
                raise Unidentifiable("records with the same keys (an explode before)")
            self._index = index
        if self.table.shape[1] == 1:
            found = self._index.get_indexer(tuples[:, 0])  # type: ignore[attr-defined]
        else:
            found = self._index.get_indexer(  # type: ignore[attr-defined]
                pd.MultiIndex.from_arrays(list(tuples.T))
            )
        return np.asarray(found, dtype=np.int64)

    @property
    def unique(self) -> bool:
        """Whether no two records share their keys."""
        try:
            self.lookup(self.table[:0])
        except Unidentifiable:
            return False
        return True

    def occurrences(self, tuples: np.ndarray) -> np.ndarray:
        """The record of each key tuple of a whole read of the dataset (in Spark's
        order), records that share their keys (an explode's) taken in turn.

        >>> ix = KeyIndex(np.array([[4], [4], [7]]))
        >>> ix.occurrences(np.array([[7], [4], [4]])).tolist()
        [2, 0, 1]
        """
        import pandas as pd

        width = self.table.shape[1]
        if width == 0:
            return np.arange(len(tuples), dtype=np.int64)

        def numbered(t: np.ndarray) -> pd.MultiIndex:
            frame = pd.DataFrame(t, columns=[f"k{i}" for i in range(width)])
            turn = frame.groupby(list(frame.columns), sort=False).cumcount().to_numpy()
            return pd.MultiIndex.from_arrays([*t.T, turn])

        return np.asarray(numbered(self.table).get_indexer(numbered(tuples)), dtype=np.int64)


class GroupIndex:
    """An aggregate's records, named by the keys of any of their members."""

    def __init__(self, members: KeyIndex | GroupIndex, group_of: np.ndarray, n: int) -> None:
        self.members = members
        self.group_of = group_of
        self.n = n

    def lookup(self, tuples: np.ndarray) -> np.ndarray:
        member = self.members.lookup(tuples)
        return np.where(member >= 0, self.group_of[np.maximum(member, 0)], -1)
