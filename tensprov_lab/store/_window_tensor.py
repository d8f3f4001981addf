"""Window tensors: each output record's frame, kept as a range over the sorted partition.

A window function's value for a record comes from the records of its *frame*: the
rows of its partition between two bounds of the partition's sort order (a running sum:
the partition's start up to the record; ``lag``: the one row before it; a ranking
function: the whole partition, whose order decides the rank).  Laid out partition after
partition in sort order, every frame is a range ``[lo, hi)`` of sorted positions, and
along the sorted order both bounds never decrease.  So a frame costs two integers a
record (:class:`FrameTensor`), backward is a slice of the sorted order, and forward is
two binary searches.

A window operation's output record keeps its own columns (its input record: the
paper's localized view) and adds one column per window function, each with its frame:
:class:`WindowTensor` is their union at record level, and knows which part each output
column comes from, so cell lineage stays exact (a passed-through column's cell comes
from its own record only).  ``localized()`` is the record itself (the old answer).

Pure numpy.
"""

from __future__ import annotations

import numpy as np

from tensprov_lab.store._codes import PackedInts
from tensprov_lab.store._sets import unique
from tensprov_lab.store._tensors import IdentityTensor, MaskTensor, Tensor, _ranges

__all__ = ["FrameTensor", "WindowTensor"]


def _packed(a: np.ndarray) -> PackedInts:
    return PackedInts.from_array(np.asarray(a, dtype=np.int64))


class FrameTensor(Tensor):
    """The frame of every record of a window function: ``n x n``.

    Parameters
    ----------
    order : array of int
        ``order[p]`` is the record at sorted position ``p`` (partitions one after
        another, each in its sort order): a permutation of ``0..n-1``.
    lo, hi : array of int
        The frame of the record at sorted position ``p`` is the records at positions
        ``lo[p] .. hi[p]-1`` (empty when ``lo[p] == hi[p]``); both non-decreasing.

    Examples
    --------
    Two partitions, records 0, 2, 4 and 1, 3, a running sum (frame: the partition's
    start up to the record):

    >>> t = FrameTensor(order=[0, 2, 4, 1, 3], lo=[0, 0, 0, 3, 3], hi=[1, 2, 3, 4, 5])
    >>> t.backward([4])          # record 4 is third in its partition
    array([0, 2, 4])
    >>> t.forward([2])           # record 2 is in the frames of records 2 and 4
    array([2, 4])
    >>> t.nnz
    9
    """

    kind = "frame"
    _lazy = ("_pos", "_lohi")

    def __init__(self, order: object, lo: object, hi: object) -> None:
        o = np.asarray(order, dtype=np.int64)
        lo_a = np.asarray(lo, dtype=np.int64)
        hi_a = np.asarray(hi, dtype=np.int64)
        n = len(o)
        super().__init__(n, n)
        if len(lo_a) != n or len(hi_a) != n:
            raise ValueError(f"{n} records but {len(lo_a)} / {len(hi_a)} frame bounds")
        if n:
            if not (np.sort(o) == np.arange(n)).all():
                raise ValueError("order is not a permutation of the records")
            if (lo_a < 0).any() or (hi_a > n).any() or (lo_a > hi_a).any():
                raise ValueError("a frame lies outside the records")
            if (np.diff(lo_a) < 0).any() or (np.diff(hi_a) < 0).any():
                raise ValueError("frame bounds must not decrease along the sorted order")
        self._order = _packed(o)
        self._lo = _packed(lo_a)
        self._hi = _packed(hi_a)
        self._pos: np.ndarray | None = None
        self._lohi: tuple[np.ndarray, np.ndarray] | None = None

    @classmethod
    def _stored(cls, order: PackedInts, lo: PackedInts, hi: PackedInts) -> FrameTensor:
        """A tensor from saved codes (checked when it was made)."""
        t = cls.__new__(cls)
        Tensor.__init__(t, order.size, order.size)
        t._order, t._lo, t._hi, t._pos, t._lohi = order, lo, hi, None, None
        return t

    @property
    def codes(self) -> tuple[PackedInts, PackedInts, PackedInts]:
        """The packed ``order``, ``lo`` and ``hi`` (what a save writes)."""
        return self._order, self._lo, self._hi

    @property
    def nnz(self) -> int:
        lo, hi = self._bounds()
        return int((hi - lo).sum())

    @property
    def nbytes(self) -> int:
        return self._order.nbytes + self._lo.nbytes + self._hi.nbytes

    def _bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """``lo`` and ``hi`` unpacked (built once: forward searches them)."""
        if self._lohi is None:
            self._lohi = (self._lo.to_numpy(), self._hi.to_numpy())
        return self._lohi

    def _positions(self, rows: np.ndarray) -> np.ndarray:
        """Sorted position of each record (the inverse of ``order``, built once)."""
        if self._pos is None:
            pos = np.empty(self.n_in, dtype=np.int64)
            pos[self._order.to_numpy()] = np.arange(self.n_in, dtype=np.int64)
            self._pos = pos
        return self._pos[rows]

    def _backward(self, u: np.ndarray) -> np.ndarray:
        p = self._positions(u)
        got = _ranges(self._lo.get(p), self._hi.get(p))
        return unique(self._order.get(got)) if got.size else got

    def _forward(self, u: np.ndarray) -> np.ndarray:
        # position q is in the frame of p iff lo[p] <= q < hi[p]: with both bounds
        # non-decreasing, those p form one range
        q = self._positions(u)
        lo, hi = self._bounds()
        first = np.searchsorted(hi, q, side="right")
        last = np.searchsorted(lo, q, side="right")
        got = _ranges(first, last)
        return unique(self._order.get(got)) if got.size else got

    def _pairs(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        p = self._positions(u)
        lo, hi = self._lo.get(p), self._hi.get(p)
        rows = _ranges(lo, hi)
        outs = np.repeat(u, hi - lo)
        ins = self._order.get(rows) if rows.size else rows
        order = np.lexsort((ins, outs))
        return outs[order], ins[order]


class WindowTensor(Tensor):
    """A window operation: each output record from its input record (the columns it
    keeps) and from the frame of each window function (the column it adds).

    Parameters
    ----------
    n : int
        Records (the same in and out).
    frames : list of FrameTensor
        One per window function.
    columns : dict of int to list of int
        Output column -> the indexes into ``frames`` of the functions its values come
        from, ``-1`` for its input record itself; a column not listed is its input
        record's own (passed through).
    own : bool
        Whether each output record also comes from its own input record (the columns
        it keeps); False only for the union of frames of one computed column.
    kept : MaskTensor, optional
        The records the operation keeps after its window functions, when the same
        operation also filters (``row_number().over(w)`` then ``filter("n = 1")``):
        output record ``o`` is record ``kept.backward([o])`` of the ``n`` the frames
        are over.  None: every record, in order.

    Examples
    --------
    ``lag`` over one partition of records 0, 1, 2 adds column 1:

    >>> lag = FrameTensor(order=[0, 1, 2], lo=[0, 0, 1], hi=[0, 1, 2])
    >>> t = WindowTensor(3, [lag], {1: [0]})
    >>> t.backward([2])                   # record 2 and the row before it
    array([1, 2])
    >>> t.for_column(0).backward([2]), t.for_column(1).backward([2])
    (array([2]), array([1]))
    >>> t.localized().backward([2])       # the paper's localized answer
    array([2])

    The same, keeping records 0 and 2 only (a filter in the same operation):

    >>> k = WindowTensor(3, [lag], {1: [0]}, kept=MaskTensor.from_kept([0, 2], 3))
    >>> k.shape, k.backward([1]).tolist(), k.forward([1]).tolist()
    ((2, 3), [1, 2], [1])
    """

    kind = "window"

    def __init__(
        self,
        n: int,
        frames: list[FrameTensor],
        columns: dict[int, list[int]],
        own: bool = True,
        kept: MaskTensor | None = None,
    ) -> None:
        if kept is not None and kept.n_in != n:
            raise ValueError(f"the kept records are of {kept.n_in} records, the frames of {n}")
        super().__init__(n if kept is None else kept.n_out, n)
        if any(f.shape != (n, n) for f in frames):
            raise ValueError(f"every frame must be {n} x {n}")
        if any(not -1 <= i < len(frames) for parts in columns.values() for i in parts):
            raise ValueError("a column names a frame that does not exist")
        self.frames = list(frames)
        self.columns = {int(c): sorted({int(i) for i in parts}) for c, parts in columns.items()}
        self.kept = kept
        self._own: Tensor = IdentityTensor(n) if kept is None else kept
        self._views: dict[tuple[int, ...], Tensor] = {}
        self._with_own = own

    def localized(self) -> Tensor:
        return self._own

    def for_column(self, column: int) -> Tensor:
        parts = tuple(self.columns.get(int(column), [-1]))
        if parts == (-1,):
            return self._own
        if len(parts) == 1 and self.kept is None:
            return self.frames[parts[0]]
        view = self._views.get(parts)
        if view is None:
            own = -1 in parts
            picked = [self.frames[i] for i in parts if i >= 0]
            view = self._views[parts] = WindowTensor(self.n_in, picked, {}, own=own, kept=self.kept)
        return view

    @property
    def nnz(self) -> int:
        """Ones of the matrix, counted from the frames' bounds (never by listing every
        pair: a running sum over a million-row partition has half a trillion).  Exact
        when the frames share one sort order (one window spec: the usual operation);
        with several orders, frames of different orders are not intersected, so the
        count is an upper bound."""
        n = self.n_in
        if n == 0 or self.n_out == 0:
            return 0
        groups: list[list[FrameTensor]] = []
        for f in self.frames:
            same = next(
                (g for g in groups if g[0].codes[0] is f.codes[0] or _same_order(g[0], f)), None
            )
            if same is None:
                groups.append([f])
            else:
                same.append(f)
        if not groups:
            return self.n_out if self._with_own else 0
        rows = None if self.kept is None else self.kept.backward(np.arange(self.n_out))
        total = 0
        for k, group in enumerate(groups):
            # the record itself is counted once, with the first group
            lengths = _union_lengths(group, own=self._with_own and k == 0)
            total += int(lengths.sum() if rows is None else lengths[rows].sum())
        return total

    @property
    def nbytes(self) -> int:
        return sum(f.nbytes for f in self.frames) + (0 if self.kept is None else self.kept.nbytes)

    def components(self) -> list[Tensor]:
        return [*self.frames, *([] if self.kept is None else [self.kept])]

    def _records(self, u: np.ndarray) -> np.ndarray:
        """The records (of the ``n`` the frames are over) of output records ``u``."""
        return u if self.kept is None else self.kept._backward(u)

    def _mine(self, r: np.ndarray) -> list[np.ndarray]:
        return [r] if self._with_own else []

    def _backward(self, u: np.ndarray) -> np.ndarray:
        r = self._records(u)
        return unique(np.concatenate([*self._mine(r), *(f._backward(r) for f in self.frames)]))

    def _forward(self, u: np.ndarray) -> np.ndarray:
        got = unique(np.concatenate([*self._mine(u), *(f._forward(u) for f in self.frames)]))
        # the records the operation dropped after its window functions are no output
        return got if self.kept is None else self.kept._forward(got)

    def _pairs(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        r = self._records(u)
        parts = [*((r, r) for _ in self._mine(r)), *(f._pairs(r) for f in self.frames)]
        outs = np.concatenate([p[0] for p in parts])
        ins = np.concatenate([p[1] for p in parts])
        n = max(self.n_in, 1)
        key = np.unique(outs * n + ins)
        outs, ins = key // n, key % n
        # back from records to output records (r is sorted: the mask keeps the order)
        return (outs if self.kept is None else u[np.searchsorted(r, outs)]), ins


def _same_order(a: FrameTensor, b: FrameTensor) -> bool:
    oa, ob = a.codes[0], b.codes[0]
    if oa is ob:
        return True
    return oa.size == ob.size and bool(np.array_equal(oa.to_numpy(), ob.to_numpy()))


def _union_lengths(frames: list[FrameTensor], own: bool) -> np.ndarray:
    """Per record, the size of the union of its frames (all in one sort order) and, with
    ``own``, of itself."""
    n = frames[0].n_in
    at = np.arange(n, dtype=np.int64)  # the record at sorted position p is itself at p
    starts = ([at] if own else []) + [f._bounds()[0] for f in frames]
    ends = ([at + 1] if own else []) + [f._bounds()[1] for f in frames]
    lo, hi = np.stack(starts, axis=1), np.stack(ends, axis=1)
    by_start = np.argsort(lo, axis=1, kind="stable")
    lo, hi = np.take_along_axis(lo, by_start, 1), np.take_along_axis(hi, by_start, 1)
    covered = np.maximum.accumulate(hi, axis=1)
    before = np.concatenate([np.full((n, 1), -1, dtype=np.int64), covered[:, :-1]], axis=1)
    at_position = np.maximum(0, hi - np.maximum(lo, before)).sum(axis=1)
    by_record = np.empty(n, dtype=np.int64)
    by_record[frames[0].codes[0].to_numpy()] = at_position
    return by_record
