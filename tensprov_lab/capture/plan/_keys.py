"""Record keys carried through Spark and their translation to canonical row indices.

Capture adds hidden key columns to an annotated copy of every plan.  A source's key is
``monotonically_increasing_id()`` (increasing in scan order, so its rank is the scan
order whatever the partitioning).  Derived datasets carry the keys of the input records
they come from.  A :class:`KeyIndex` turns the raw keys read back from Spark (an
``m x width`` int64 matrix, ``-1`` for null) into canonical row indices ``0..n-1``.

Pure numpy: testable without a JVM.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tensprov_lab.store._sets import member

__all__ = [
    "IN_LIST",
    "keys_in",
    "keys_sql",
    "KeyIndex",
    "UniqueKeyIndex",
    "ScanKeyIndex",
    "LazyScanKeyIndex",
    "MappedKeyIndex",
    "SubsetKeyIndex",
    "CrossKeyIndex",
    "ComposedKeyIndex",
    "RangeKeyIndex",
    "GroupSetKeyIndex",
    "KeyError_",
    "arrow_keys",
    "row_dtype",
    "POSITION_MASK",
]

#: the bits of a ``monotonically_increasing_id()`` that count records within their
#: partition (the partition's index is in the bits above)
POSITION_MASK = (1 << 33) - 1


class KeyError_(RuntimeError):  # noqa: N801 - a capture invariant failed, not dict lookup
    """Raw keys read back from Spark do not match the recorded dataset."""


class KeyIndex:
    """Maps raw key rows of one dataset to canonical indices."""

    width: int
    n: int

    def lookup(self, raw: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def column_values(self, rows: np.ndarray) -> dict[int, np.ndarray] | None:
        """Per raw key column (by position), the values the keys of canonical ``rows``
        hold there (``-1``: null): a filter on them keeps every one of those records
        (and maybe others, which a lookup then tells apart).  None when not known."""
        return None

    @property
    def nbytes(self) -> int:
        return 0


def row_dtype(n: int) -> np.dtype:
    """The narrowest signed dtype for row numbers ``-1..n-1``: a key index held for a
    run's lifetime takes half the memory below 2^31 rows.

    >>> row_dtype(10), row_dtype(2**31)
    (dtype('int32'), dtype('int64'))
    """
    return np.dtype(np.int32 if n < 2**31 else np.int64)


def _check_found(ok: np.ndarray, what: str) -> None:
    if not bool(np.all(ok)):
        bad = int((~ok).sum())
        raise KeyError_(f"{bad} record key(s) of {what} are unknown: capture is inconsistent")


class UniqueKeyIndex(KeyIndex):
    """One raw column holds a unique value per record (sources, exploded rows).

    Examples
    --------
    >>> import numpy as np
    >>> k = UniqueKeyIndex(np.array([5, 1, 9]), width=1)
    >>> k.lookup(np.array([[9], [5]])).tolist()
    [2, 0]
    """

    def __init__(self, values: np.ndarray, width: int = 1, col: int = 0) -> None:
        values = np.asarray(values, dtype=np.int64)
        self.n = len(values)
        self.width = width
        self.col = col
        if self.n and bool(np.all(values[1:] > values[:-1])):
            self._sorted, self._perm = values, None
        else:
            self._perm = np.argsort(values, kind="stable")
            self._sorted = values[self._perm]
            if self.n and bool(np.any(self._sorted[1:] == self._sorted[:-1])):
                raise KeyError_("record keys are not unique")

    def values(self, rows: np.ndarray) -> np.ndarray:
        """The raw key of canonical rows (the inverse of :meth:`lookup`)."""
        if self._perm is None:
            return self._sorted[rows]
        inv = np.empty_like(self._perm)
        inv[self._perm] = np.arange(self.n)
        return self._sorted[inv[rows]]

    def column_values(self, rows: np.ndarray) -> dict[int, np.ndarray] | None:
        return {self.col: self.values(rows)}

    def lookup(self, raw: np.ndarray) -> np.ndarray:
        v = np.asarray(raw, dtype=np.int64).reshape(-1, self.width)[:, self.col]
        if self.n == 0:
            _check_found(v == -1, "an empty dataset")
            return np.full(len(v), -1, dtype=np.int64)
        pos = np.searchsorted(self._sorted, v)
        pos_c = np.minimum(pos, max(self.n - 1, 0))
        ok = (pos < self.n) & (self._sorted[pos_c] == v) if self.n else np.zeros(len(v), bool)
        out = pos_c if self._perm is None else self._perm[pos_c]
        null = v == -1
        _check_found(ok | null, "a dataset")
        return np.where(null, -1, out).astype(np.int64)

    @property
    def nbytes(self) -> int:
        return self._sorted.nbytes + (0 if self._perm is None else self._perm.nbytes)


class ScanKeyIndex(KeyIndex):
    """A source keyed by ``monotonically_increasing_id``: partition id in the upper 31
    bits, position in the partition in the lower 33.  The scan order is the partitions in
    order, so the canonical index needs only the size of each partition.

    Examples
    --------
    >>> import numpy as np
    >>> k = ScanKeyIndex(np.array([2, 0, 3]))   # partition sizes
    >>> k.lookup(np.array([[1], [(2 << 33) + 2]])).tolist()
    [1, 4]
    """

    _LOW = POSITION_MASK

    def __init__(self, sizes: np.ndarray) -> None:
        self.sizes = np.asarray(sizes, dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes)]).astype(np.int64)
        self.n = int(self.offsets[-1])
        self.width = 1

    @classmethod
    def from_keys(cls, keys: np.ndarray) -> ScanKeyIndex | None:
        """The index of a source whose every key was read in scan order; ``None`` when
        ``keys`` are not that (not increasing, or a partition with a gap).

        >>> ScanKeyIndex.from_keys(np.array([0, 1, (2 << 33), (2 << 33) + 1])).sizes.tolist()
        [2, 0, 2]
        """
        k = np.asarray(keys, dtype=np.int64).reshape(-1)
        if len(k) and (k[0] < 0 or bool(np.any(k[1:] <= k[:-1]))):
            return None
        sizes = np.bincount(k >> 33) if len(k) else np.zeros(0, np.int64)
        # increasing keys: each partition's positions are 0..size-1 iff its last is size-1
        last = np.cumsum(sizes)[sizes > 0] - 1
        if bool(np.any((k[last] & cls._LOW) != sizes[sizes > 0] - 1)):
            return None
        return cls(sizes)

    def lookup(self, raw: np.ndarray) -> np.ndarray:
        v = np.asarray(raw, dtype=np.int64).reshape(-1)
        null = v == -1
        part = np.where(null, 0, v >> 33)
        pos = v & self._LOW
        ok = null | (
            (part < len(self.sizes))
            & (
                pos < self.sizes[np.minimum(part, len(self.sizes) - 1)]
                if len(self.sizes)
                else False
            )
        )
        _check_found(ok, "a source")
        return np.where(null, -1, self.offsets[np.minimum(part, len(self.sizes))] + pos).astype(
            np.int64
        )

    def values(self, rows: np.ndarray) -> np.ndarray:
        rows = np.asarray(rows, dtype=np.int64)
        part = np.searchsorted(self.offsets, rows, side="right") - 1
        return (part << 33) + (rows - self.offsets[part])

    def column_values(self, rows: np.ndarray) -> dict[int, np.ndarray] | None:
        return {0: self.values(rows)}

    @property
    def nbytes(self) -> int:
        return self.sizes.nbytes + self.offsets.nbytes


class LazyScanKeyIndex(ScanKeyIndex):
    """A :class:`ScanKeyIndex` whose size is known and whose partition sizes are
    counted (by ``count``, a Spark job) only when a raw key is first translated: a
    capture that reads a source in scan order needs its keys only for later replays.

    Examples
    --------
    >>> import numpy as np
    >>> k = LazyScanKeyIndex(5, lambda: ScanKeyIndex(np.array([2, 0, 3])))
    >>> k.n, k.lookup(np.array([[(2 << 33) + 2]])).tolist()
    (5, [4])
    """

    def __init__(self, n: int, count: Callable[[], ScanKeyIndex]) -> None:
        self.n = n
        self.width = 1
        self._count: Callable[[], ScanKeyIndex] | None = count
        self._sizes: np.ndarray | None = None
        self._offsets: np.ndarray | None = None

    def _load(self) -> None:
        if self._count is not None:
            counted = self._count()
            if counted.n != self.n:
                raise KeyError_(
                    f"a source counted {counted.n} records where its scan read {self.n}: "
                    "its records changed since capture"
                )
            self._sizes, self._offsets, self._count = counted.sizes, counted.offsets, None

    @property
    def sizes(self) -> np.ndarray:  # type: ignore[override]
        self._load()
        assert self._sizes is not None
        return self._sizes

    @property
    def offsets(self) -> np.ndarray:  # type: ignore[override]
        self._load()
        assert self._offsets is not None
        return self._offsets

    @property
    def nbytes(self) -> int:
        return 0 if self._sizes is None else super().nbytes


class MappedKeyIndex(KeyIndex):
    """Keys pass through from one input; ``in_to_out`` maps input rows to output rows.

    ``in_to_out`` may be given as a function that makes it: it is then made when a key
    is first translated (a fused filter's index, which most captures never look up,
    costs no time and no memory until then).
    """

    def __init__(
        self,
        parent: KeyIndex,
        in_to_out: np.ndarray | Callable[[], np.ndarray] | None,
        n: int,
        null_row: int | None = None,
    ) -> None:
        self.parent = parent
        self.width = parent.width
        self._make: Callable[[], np.ndarray] | None = None
        self._in_to_out: np.ndarray | None = None
        if callable(in_to_out):
            self._make = in_to_out
        elif in_to_out is not None:
            self._in_to_out = in_to_out.astype(row_dtype(n), copy=False)
        self.n = n
        #: the output row whose key is null: a global aggregate over no rows
        self.null_row = null_row

    @property
    def in_to_out(self) -> np.ndarray | None:
        if self._make is not None:
            self._in_to_out = self._make().astype(row_dtype(self.n), copy=False)
            self._make = None
        return self._in_to_out

    def lookup(self, raw: np.ndarray) -> np.ndarray:
        idx = self.parent.lookup(raw)
        in_to_out = self.in_to_out
        if in_to_out is None:
            return idx
        if in_to_out.size:
            out = np.where(idx < 0, -1, in_to_out[np.maximum(idx, 0)])
        else:
            out = np.full(len(idx), -1, dtype=np.int64)
        if self.null_row is not None:
            out = np.where(idx < 0, self.null_row, out)
        _check_found((out >= 0) | (idx < 0), "a derived dataset")
        return out.astype(np.int64)

    def column_values(self, rows: np.ndarray) -> dict[int, np.ndarray] | None:
        rows = np.asarray(rows, dtype=np.int64)
        in_to_out = self.in_to_out
        if in_to_out is None:
            return self.parent.column_values(rows)
        # every input record mapped to one of the rows (a group's members: the group's
        # key is one of theirs)
        got = self.parent.column_values(np.flatnonzero(member(in_to_out, rows)))
        if got is None or self.null_row is None or self.null_row not in rows:
            return got
        return {c: np.append(v, -1) for c, v in got.items()}

    @property
    def nbytes(self) -> int:
        # not made yet: nothing held (the function keeps what the tensor holds anyway)
        return 0 if self._in_to_out is None else self._in_to_out.nbytes


class SubsetKeyIndex(KeyIndex):
    """Keys pass through from one input, of which the output keeps few records: output
    row ``o`` is input row ``rows[o]``.  :class:`MappedKeyIndex` holds a row per input
    record, which for a filter over a cross product of ``n * m`` records is the product
    the filter exists to avoid; this one holds a row per output record.

    Examples
    --------
    >>> parent = RangeKeyIndex(10**12)
    >>> k = SubsetKeyIndex(parent, np.array([7, 10**11, 3]))
    >>> k.lookup(np.array([[3], [10**11]])).tolist()
    [2, 1]
    """

    def __init__(self, parent: KeyIndex, rows: np.ndarray) -> None:
        self.parent = parent
        self.width = parent.width
        rows = np.asarray(rows, dtype=np.int64)
        self.n = len(rows)
        if self.n < 2 or bool(np.all(rows[1:] > rows[:-1])):
            self._sorted, self._perm = rows, None
        else:
            self._perm = np.argsort(rows, kind="stable")
            self._sorted = rows[self._perm]

    def lookup(self, raw: np.ndarray) -> np.ndarray:
        idx = self.parent.lookup(raw)
        pos = np.minimum(np.searchsorted(self._sorted, idx), max(self.n - 1, 0))
        ok = (self._sorted[pos] == idx) if self.n else np.zeros(len(idx), bool)
        _check_found(ok | (idx < 0), "a derived dataset")
        out = pos if self._perm is None else self._perm[pos]
        return np.where(idx < 0, -1, out).astype(np.int64)

    def column_values(self, rows: np.ndarray) -> dict[int, np.ndarray] | None:
        rows = np.asarray(rows, dtype=np.int64)
        picked = self._sorted if self._perm is None else self._sorted[np.argsort(self._perm)]
        return self.parent.column_values(picked[rows[(rows >= 0) & (rows < self.n)]])

    @property
    def nbytes(self) -> int:
        return self._sorted.nbytes + (0 if self._perm is None else self._perm.nbytes)


class CrossKeyIndex(KeyIndex):
    """The records of a cross product, numbered ``i * m + j`` by their left record ``i``
    and right record ``j`` (DESIGN.md §3): a key is a left key beside a right key, and
    nothing is held per pair.

    Examples
    --------
    >>> k = CrossKeyIndex(RangeKeyIndex(3), RangeKeyIndex(4))
    >>> k.lookup(np.array([[2, 1], [0, 3]])).tolist(), k.n
    ([9, 3], 12)
    """

    def __init__(self, left: KeyIndex, right: KeyIndex) -> None:
        self.left, self.right = left, right
        self.width = left.width + right.width
        self.n = left.n * right.n

    def lookup(self, raw: np.ndarray) -> np.ndarray:
        raw = np.asarray(raw, dtype=np.int64).reshape(-1, self.width)
        null = np.all(raw == -1, axis=1)  # the missing side of an outer join further down
        li = self.left.lookup(raw[:, : self.left.width])
        ri = self.right.lookup(raw[:, self.left.width :])
        _check_found(null | ((li >= 0) & (ri >= 0)), "a cross join")
        return np.where(null, -1, li * self.right.n + ri)

    def column_values(self, rows: np.ndarray) -> dict[int, np.ndarray] | None:
        rows = np.asarray(rows, dtype=np.int64)
        rows = rows[(rows >= 0) & (rows < self.n)]
        m = max(self.right.n, 1)
        left = self.left.column_values(np.unique(rows // m))
        right = self.right.column_values(np.unique(rows % m))
        if left is None or right is None:
            return None
        return {**left, **{self.left.width + c: v for c, v in right.items()}}


class RangeKeyIndex(KeyIndex):
    """A raw column that is already an index ``0..n-1`` (an exploded element's position)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.width = 1

    def lookup(self, raw: np.ndarray) -> np.ndarray:
        v = np.asarray(raw, dtype=np.int64).reshape(-1)
        _check_found((v >= -1) & (v < self.n), "an exploded dataset")
        return v

    def column_values(self, rows: np.ndarray) -> dict[int, np.ndarray] | None:
        return {0: np.asarray(rows, dtype=np.int64)}


class GroupSetKeyIndex(KeyIndex):
    """Groups of rollup/cube: a record belongs to one group per grouping set, so a group
    is found from (any member, grouping-set id)."""

    def __init__(
        self, parent: KeyIndex, member: np.ndarray, gid: np.ndarray, group: np.ndarray, n: int
    ) -> None:
        self.parent = parent
        self.width = parent.width + 1
        self.n = n
        self._radix = int(gid.max()) + 1 if len(gid) else 1
        codes = member * self._radix + gid
        order = np.argsort(codes, kind="stable")
        self._codes, self._group = codes[order], group[order]

    def lookup(self, raw: np.ndarray) -> np.ndarray:
        raw = np.asarray(raw, dtype=np.int64).reshape(-1, self.width)
        member = self.parent.lookup(raw[:, :-1])
        code = member * self._radix + raw[:, -1]
        pos = np.minimum(np.searchsorted(self._codes, code), max(len(self._codes) - 1, 0))
        ok = (member >= 0) & (self._codes[pos] == code) if len(self._codes) else member < -1
        _check_found(ok, "a rollup or cube")
        return self._group[pos].astype(np.int64)

    def column_values(self, rows: np.ndarray) -> dict[int, np.ndarray] | None:
        codes = self._codes[member(self._group, rows)]
        got = self.parent.column_values(codes // self._radix)
        if got is None:
            return None
        return {**got, self.width - 1: codes % self._radix}

    @property
    def nbytes(self) -> int:
        return self._codes.nbytes + self._group.nbytes


class ComposedKeyIndex(KeyIndex):
    """Keys made of blocks of several inputs (joins, unions), plus an optional branch.

    Each block is translated by its input's index; the tuple ``(branch, i1, i2, ...)`` is
    coded in mixed radix, which sorts like the canonical order.
    """

    def __init__(
        self,
        blocks: list[tuple[KeyIndex, int]],
        branch_col: int | None,
        n_branches: int,
        codes_in_order: np.ndarray | Callable[[], np.ndarray],
        width: int,
        n: int | None = None,
    ) -> None:
        """``codes_in_order``: the code of each output record, or (with ``n``) a
        function giving them when a key is first translated: a fused capture's join
        is read by nothing else most of the time, and its codes are 8 bytes a record."""
        self.blocks = blocks
        self.branch_col = branch_col
        self.n_branches = n_branches
        self.width = width
        self._make = codes_in_order if callable(codes_in_order) else None
        self.n = len(codes_in_order) if not callable(codes_in_order) else int(n or 0)
        self._sorted_: np.ndarray | None = None
        #: None: the codes are in sorted order already (no permutation kept)
        self._perm: np.ndarray | None = None
        if not callable(codes_in_order):
            self._sort(codes_in_order)

    def _sort(self, codes_in_order: np.ndarray) -> None:
        if len(codes_in_order) != self.n:
            raise KeyError_(f"{len(codes_in_order)} key codes for {self.n} records")
        if self.n < 2 or bool(np.all(codes_in_order[1:] > codes_in_order[:-1])):
            self._sorted_ = codes_in_order
        else:
            self._perm = np.argsort(codes_in_order, kind="stable")
            self._sorted_ = codes_in_order[self._perm]

    @property
    def _sorted(self) -> np.ndarray:
        if self._sorted_ is None:
            assert self._make is not None
            self._sort(self._make())
            self._make = None
        assert self._sorted_ is not None
        return self._sorted_

    def _at(self, pos: np.ndarray) -> np.ndarray:
        """Output rows of sorted positions ``pos``."""
        return pos if self._perm is None else self._perm[pos]

    def has_duplicates(self) -> bool:
        return bool(self.n > 1 and np.any(self._sorted[1:] == self._sorted[:-1]))

    @staticmethod
    def radix(blocks: list[tuple[KeyIndex, int]], n_branches: int) -> list[int]:
        return [max(n_branches, 1)] + [b.n + 1 for b, _ in blocks]

    @staticmethod
    def fits(blocks: list[tuple[KeyIndex, int]], n_branches: int) -> bool:
        total = 1
        for r in ComposedKeyIndex.radix(blocks, n_branches):
            total *= r
        return total < 2**62

    @staticmethod
    def encode(parts: list[np.ndarray], radix: list[int]) -> np.ndarray:
        code = np.zeros(len(parts[0]), dtype=np.int64)
        for p, r in zip(parts, radix):
            code = code * r + p
        return code

    def parts(self, raw: np.ndarray) -> list[np.ndarray]:
        raw = np.asarray(raw, dtype=np.int64).reshape(-1, self.width)
        branch = (
            raw[:, self.branch_col] if self.branch_col is not None else np.zeros(len(raw), np.int64)
        )
        out = [branch]
        for ki, start in self.blocks:
            out.append(ki.lookup(raw[:, start : start + ki.width]) + 1)
        return out

    def lookup(self, raw: np.ndarray) -> np.ndarray:
        raw = np.asarray(raw, dtype=np.int64).reshape(-1, self.width)
        # an all-null key is the missing side of an outer join further down
        null = np.all(raw == -1, axis=1)
        if self.n == 0:
            _check_found(null, "an empty join or union")
            return np.full(len(raw), -1, dtype=np.int64)
        code = self.encode(self.parts(raw), self.radix(self.blocks, self.n_branches))
        pos = np.searchsorted(self._sorted, code)
        pos_c = np.minimum(pos, max(self.n - 1, 0))
        ok = (pos < self.n) & (self._sorted[pos_c] == code) if self.n else np.zeros(len(code), bool)
        _check_found(ok | null, "a join or union")
        return np.where(null, -1, self._at(pos_c)).astype(np.int64)

    def column_values(self, rows: np.ndarray) -> dict[int, np.ndarray] | None:
        rows = np.asarray(rows, dtype=np.int64)
        if self._perm is None:  # the rows' codes as a set, in sorted order (as below)
            wanted = np.unique(rows)
            codes = self._sorted[wanted[(wanted >= 0) & (wanted < self.n)]]
        else:
            codes = self._sorted[member(self._perm, rows)]
        radix = self.radix(self.blocks, self.n_branches)
        parts = []
        for r in reversed(radix):  # mixed radix, least significant last
            parts.append(codes % r)
            codes = codes // r
        branch, *members = reversed(parts)
        out: dict[int, np.ndarray] = {}
        if self.branch_col is not None:
            out[self.branch_col] = branch
        for (ki, start), idx in zip(self.blocks, members):
            got = ki.column_values(idx[idx > 0] - 1)
            if got is None:
                return None
            missing = bool(np.any(idx == 0))  # the missing side of an outer join: null
            for c, v in got.items():
                out[start + c] = np.append(v, -1) if missing else v
        return out

    @property
    def nbytes(self) -> int:
        if self._sorted_ is None:
            return 0
        return self._sorted_.nbytes + (0 if self._perm is None else self._perm.nbytes)


def _flatten(col: Any) -> list[Any]:
    import pyarrow as pa

    if pa.types.is_struct(col.type):
        arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
        out: list[Any] = []
        # flatten() folds a null struct (the missing side of an outer join) into its fields
        for field in arr.flatten():
            out.extend(_flatten(field))
        return out
    return [col]


#: most keys read with an ``IN`` list (more are joined against a local table, or read
#: with compiled code)
IN_LIST = 1000


def keys_in(column: str, values: np.ndarray) -> Any:
    """A Spark condition ``column IN (values)`` for integer key values, parsed from one
    string: building it literal by literal costs a py4j round trip per value.

    With a SparkSession running (pyspark builds the column in the JVM):

    >>> str(keys_in("k", np.array([3, 5])))  # doctest: +SKIP
    "Column<'`k` IN (3, 5)'>"
    >>> str(keys_in("k", np.array([], dtype=np.int64)))  # doctest: +SKIP
    "Column<'false'>"
    """
    from pyspark.sql import functions as F

    return F.expr(keys_sql(column, values))


def keys_sql(column: str, values: np.ndarray) -> str:
    """SQL text of ``column IN (values)`` (``false`` for no values: SQL has no empty IN).

    >>> keys_sql("k", np.array([3, 5]))
    '`k` IN (3, 5)'
    """
    listed = ", ".join(str(int(v)) for v in np.asarray(values).ravel())
    return f"`{column}` IN ({listed})" if listed else "false"


def arrow_keys(table: Any, columns: list[str]) -> np.ndarray:
    """Read key columns of an Arrow table into an ``m x width`` int64 matrix (null → -1)."""
    import pyarrow.compute as pc

    cols: list[Any] = []
    for name in columns:
        cols.extend(_flatten(table.column(name)))
    if not cols:
        return np.zeros((table.num_rows, 0), dtype=np.int64)
    mats = [
        np.asarray(pc.fill_null(c, -1).to_numpy(zero_copy_only=False), dtype=np.int64) for c in cols
    ]
    return np.column_stack(mats) if mats else np.zeros((table.num_rows, 0), np.int64)


def flat_width(dtype: Any) -> int:
    """Number of int64 leaves in a Spark key column type (a long or nested structs)."""
    from pyspark.sql.types import StructType

    if isinstance(dtype, StructType):
        return sum(flat_width(f.dataType) for f in dtype.fields)
    return 1
