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

from typing import Any

import numpy as np

from tensprov_lab.store import CrossTensor

__all__ = [
    "PARTITION",
    "CrossKeyIndex",
    "GroupIndex",
    "Index",
    "JoinedKeyIndex",
    "KeyIndex",
    "SetsIndex",
    "Unidentifiable",
    "cross_records",
    "key_array",
    "scan_keys",
]


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
            codes = self._codes(self.table)
            index = pd.Index(codes) if codes is not None else pd.MultiIndex.from_arrays(
                list(self.table.T)
            )  # fmt: skip
            if not index.is_unique:
                raise Unidentifiable("records with the same keys (an explode before)")
            self._index = index
        if isinstance(self._index, pd.MultiIndex):
            found = self._index.get_indexer(pd.MultiIndex.from_arrays(list(tuples.T)))
        else:
            codes = self._codes(tuples)
            assert codes is not None
            found = self._index.get_indexer(codes)  # type: ignore[attr-defined]
        return np.asarray(found, dtype=np.int64)

    def _codes(self, tuples: np.ndarray) -> np.ndarray | None:
        """Each key tuple as one int64 (a tuple with a value the table does not hold:
        -1), so lookups hash one integer instead of a tuple; None when the columns'
        distinct values are too many to combine."""
        if tuples.shape[1] == 1:
            return tuples[:, 0]
        import pandas as pd

        if not hasattr(self, "_uniques"):
            # hashed, not sorted: a column of 4M keys takes a tenth of np.unique's time
            self._uniques = [pd.Index(pd.unique(c)) for c in self.table.T]
            sizes = [len(u) + 1 for u in self._uniques]
            self._combinable = float(np.prod(np.asarray(sizes, dtype=float))) < 2.0**62
        if not self._combinable:
            return None
        out = np.zeros(len(tuples), dtype=np.int64)
        missing = np.zeros(len(tuples), dtype=bool)
        for column, uniq in zip(tuples.T, self._uniques):
            pos = np.asarray(uniq.get_indexer(column), dtype=np.int64)
            missing |= pos < 0
            out = out * (len(uniq) + 1) + pos + 1
        out[missing] = -1
        return out

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
    """An aggregate's records, named by the keys of any of their members.

    >>> ix = GroupIndex(KeyIndex(np.array([[3], [5], [8]])), np.array([0, 1, 0]), 2)
    >>> ix.lookup(np.array([[8], [5], [-1]])).tolist()
    [0, 1, -1]
    >>> GroupIndex(KeyIndex(np.zeros((0, 1), np.int64)), np.zeros(0, np.int64), 0).lookup(
    ...     np.array([[-1]])).tolist()
    [-1]
    """

    def __init__(self, members: KeyIndex | GroupIndex, group_of: np.ndarray, n: int) -> None:
        self.members = members
        self.group_of = group_of
        self.n = n

    def lookup(self, tuples: np.ndarray) -> np.ndarray:
        member = self.members.lookup(tuples)
        if not len(self.group_of):  # no records: nothing is found
            return np.full(len(member), -1, dtype=np.int64)
        # (int64 as every lookup gives, whatever the groups are held in)
        found = np.where(member >= 0, self.group_of[np.maximum(member, 0)], -1)
        return found.astype(np.int64, copy=False)


class SetsIndex:
    """A rollup's, cube's or grouping sets' records, named by the keys of any of their
    members followed by the ``grouping_id()`` of their set.

    >>> members = KeyIndex(np.array([[10], [11], [12]]))
    >>> # groups: 0 = {0, 2} and 1 = {1} of set 0, 2 = {0, 1, 2} of set 1
    >>> ix = SetsIndex(members, np.array([0, 2, 1, 0, 1, 2]), np.array([0, 0, 0, 1, 1, 1]),
    ...                np.array([0, 0, 1, 2, 2, 2]), 3)
    >>> ix.lookup(np.array([[12, 0], [11, 0], [11, 1], [13, 0], [10, 2]])).tolist()
    [0, 1, 2, -1, -1]
    """

    def __init__(
        self, members: KeyIndex | GroupIndex, member: np.ndarray, gid: np.ndarray,
        out: np.ndarray, n: int,
    ) -> None:  # fmt: skip
        import pandas as pd

        self.members = members
        self.n = n
        self._gids = pd.Index(pd.unique(gid))
        self._width = int(members.n) + 1
        self._index = pd.Index(self._gids.get_indexer(gid) * self._width + member)
        self._out = np.asarray(out, dtype=np.int64)

    def lookup(self, tuples: np.ndarray) -> np.ndarray:
        member = self.members.lookup(tuples[:, :-1])
        gid = np.asarray(self._gids.get_indexer(tuples[:, -1]), dtype=np.int64)
        found = np.asarray(self._index.get_indexer(gid * self._width + member), np.int64)
        ok = (member >= 0) & (gid >= 0) & (found >= 0)
        if not len(self._out):  # no records: nothing is found
            return np.full(len(member), -1, dtype=np.int64)
        return np.where(ok, self._out[np.maximum(found, 0)], -1)


#: what names a dataset's records by key tuples
Index = KeyIndex | GroupIndex | SetsIndex


class JoinedKeyIndex(KeyIndex):
    """A join's records, named by the keys of the records it pairs side by side (-1: a
    side without a record), from each side's index and the pairs.  The table of keys is
    built when first asked for (a later operation reads the join's keys); until then
    only the pairs are held, in the narrowest integers.

    >>> ix = JoinedKeyIndex([KeyIndex(np.array([[7], [8]])), KeyIndex(np.array([[1]]))],
    ...                     [np.array([0, 1]), np.array([0, -1])])
    >>> ix.table.tolist(), ix.lookup(np.array([[8, -1], [7, 1]])).tolist()
    ([[7, 1], [8, -1]], [1, 0])
    """

    def __init__(self, sides: list[KeyIndex], rows: list[np.ndarray]) -> None:
        self._sides = sides
        self.n = len(rows[0])
        dtype = np.int32 if max((s.n for s in sides), default=0) < 2**31 else np.int64
        # arrays of their own (not in a list): the memory budget counts and spills them
        self._left: np.ndarray | None = rows[0].astype(dtype)
        self._right: np.ndarray | None = rows[1].astype(dtype)
        self._table: np.ndarray | None = None
        self._index = None

    @property
    def table(self) -> np.ndarray:  # type: ignore[override]
        if self._table is None:
            assert self._left is not None and self._right is not None
            parts = []
            for side, at in zip(self._sides, (self._left, self._right)):
                width = side.table.shape[1]
                keys = side.table[np.maximum(at, 0)] if side.n else \
                    np.zeros((len(at), width), dtype=np.int64)  # fmt: skip
                keys[at < 0] = -1
                parts.append(keys)
            self._table = np.hstack(parts)
            self._left = self._right = None
        return self._table


class CrossKeyIndex(KeyIndex):
    """The records of a cross product, ``i * m + j`` from left record ``i`` and right
    record ``j`` (a key tuple: the left's keys, then the right's), with nothing held
    per pair.

    >>> ix = CrossKeyIndex(KeyIndex(np.array([[7], [8]])), KeyIndex(np.array([[1], [2], [3]])))
    >>> ix.n, ix.lookup(np.array([[8, 2], [7, 3], [-1, -1]])).tolist()
    (6, [4, 2, -1])
    """

    #: most pairs whose key table is built when a replay asks for it
    TABLE_MOST = 10_000_000

    def __init__(self, left: KeyIndex, right: KeyIndex) -> None:
        self._sides = (left, right)
        self._width = key_width(left)
        self.n = left.n * right.n
        self._table: np.ndarray | None = None
        self._index = None

    def lookup(self, tuples: np.ndarray) -> np.ndarray:
        left, right = self._sides
        li = left.lookup(tuples[:, : self._width])
        ri = right.lookup(tuples[:, self._width :])
        return np.where((li >= 0) & (ri >= 0), li * right.n + ri, -1)

    @property
    def table(self) -> np.ndarray:  # type: ignore[override]
        if self._table is None:
            if self.n > self.TABLE_MOST:
                raise RuntimeError(
                    f"the {self.n:,} records of a cross product are not held one by one: "
                    "ask for the records of the filter or join over it"
                )
            left, right = self._sides
            m = right.n
            rows = np.arange(self.n, dtype=np.int64)
            self._table = np.hstack([left.table[rows // max(m, 1)], right.table[rows % max(m, 1)]])
        return self._table


def cross_records(rel: Any, inputs: list[Any]) -> tuple[int, list[Any], CrossKeyIndex, str] | None:
    """The records of a Connect ``join`` relation of its call's two ``inputs`` that has
    no condition (inner or cross), each side traced with its keys: pair ``i * m + j``
    from the sides' sizes alone, no job (a filter over it is the join Spark runs; its
    ``n * m`` pairs are never read).  None for any other join."""
    from pyspark.sql.connect import proto

    from tensprov_lab.capture.plan import _proto as P

    kinds = proto.Join.JoinType
    join = rel.join
    if join.HasField("join_condition") or list(join.using_columns) or len(inputs) != 2:
        return None
    if join.join_type not in (kinds.JOIN_TYPE_INNER, kinds.JOIN_TYPE_CROSS):
        return None
    if [P.plan_id(join.left), P.plan_id(join.right)] != [n.ident for n in inputs]:
        return None
    left, right = (n.index for n in inputs)
    if not isinstance(left, KeyIndex) or not isinstance(right, KeyIndex):
        return None
    n, m = left.n, right.n
    tensors: list[Any] = [CrossTensor(n * m, n, max(m, 1)), CrossTensor(n * m, m, 1)]
    return n * m, tensors, CrossKeyIndex(left, right), "join"


def key_width(index: KeyIndex) -> int:
    """The number of key columns of ``index``'s tuples (its table not built for it)."""
    sides = getattr(index, "_sides", None)
    if sides is not None:
        return sum(key_width(s) for s in sides)
    return int(index.table.shape[1])


#: the column a source's fused read gives its records' partitions in (see scan_keys)
PARTITION = "__tp_partition"


def scan_keys(partitions: Any) -> np.ndarray:
    """The ``monotonically_increasing_id()`` of every record of a source read in scan
    order, from the partition each record came from (``spark_partition_id()``): the id
    is the partition shifted left 33 bits plus the record's place in its partition, and
    a read returns each partition's records together, in order.  Four bytes a record
    through gRPC instead of eight.  Raises ValueError when the partitions do not come in
    runs in increasing order (then the ids must be read as they are).

    >>> scan_keys(np.array([0, 0, 2, 2, 2], dtype=np.int32))[:, 0].tolist()
    [0, 1, 17179869184, 17179869185, 17179869186]
    """
    pid = np.asarray(partitions)
    n = len(pid)
    if n == 0:
        return np.zeros((0, 1), dtype=np.int64)
    starts = np.concatenate([[0], np.flatnonzero(pid[1:] != pid[:-1]) + 1, [n]])
    first = pid[starts[:-1]].astype(np.int64)
    if bool(np.any(first[1:] <= first[:-1])) or int(first[0]) < 0:
        raise ValueError("a read's partitions did not come in order")
    # one array, changed in place run by run (a read has few partitions): every
    # temporary of n records is fresh memory, slower to touch than to compute
    ids = np.arange(n, dtype=np.int64)
    for part, lo, hi in zip(first.tolist(), starts[:-1].tolist(), starts[1:].tolist()):
        ids[lo:hi] += (part << 33) - lo
    return ids.reshape(n, 1)


def key_array(table: Any, names: list[str]) -> np.ndarray:
    """Key columns of an Arrow table as one int64 array (a row per record; -1: null)."""
    if not names:
        return np.zeros((table.num_rows, 0), dtype=np.int64)
    return np.column_stack(
        [np.asarray(table.column(k).fill_null(-1).to_numpy(), dtype=np.int64) for k in names]
    ).reshape(table.num_rows, len(names))
