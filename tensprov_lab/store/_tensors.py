"""Provenance tensors: compact binary matrices ``n_out x n_in`` with fast lineage lookups.

A tensor of one operation with respect to one of its inputs has ``T[o, i] = 1`` iff output
record ``o`` is derived from input record ``i`` (paper §III-A: the order ``n+1`` tensor of an
``n``-input operation is kept as one such matrix per input, its projections).  Each class
stores one family of matrices in its cheapest exact form (DESIGN.md §4):

=================  ====================================  =====================================
class              matrices                              storage
=================  ====================================  =====================================
IdentityTensor     row-preserving ops                    O(1)
AllTensor          every output from every input (ML     O(1)
                   fit, a global aggregate)
BlockTensor        one side of an append/union           O(1)
MaskTensor         filter, sample, limit                 bitset or sorted ints, the smaller
IndexTensor        at most one input row per output row  bit-packed ints; if non-decreasing
                   (joins, permutations, explode)        also group offsets or Elias-Fano
                                                         (~2 bits per row for a join's left
                                                         side), else also offsets from a
                                                         line with patches (PFOR): the
                                                         smallest
CSRTensor          many-to-many (aggregates, dedup)      CSR with the smallest dtypes
=================  ====================================  =====================================

Row arguments may be lists, scalars or integer numpy arrays of any dtype, in any order and
with repeats.  Results are always sorted, unique ``int64`` arrays.  ``nbytes`` counts the
numpy arrays a tensor is made of; ``index_nbytes`` counts inverse indexes built lazily by the
first ``forward`` (or ``backward``, for the bitset mask) call, so that memory reports stay
honest about what queries cost.

Pure numpy/scipy: no pyspark, no IPython.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike

from tensprov_lab.store._codes import (
    PackedInts,
    PatchedInts,
    _as_int_array,
    _ef_layout,
    _EliasFano,
    _popcount64,
    _uint_dtype,
    normalize_rows,
)
from tensprov_lab.store._sets import dedup_sorted, unique

__all__ = [
    "AllTensor",
    "BlockTensor",
    "CSRTensor",
    "IdentityTensor",
    "IndexTensor",
    "MaskTensor",
    "PackedInts",
    "Tensor",
    "make_tensor",
    "normalize_rows",
    "tensor_from_pairs",
]

_EMPTY = np.empty(0, dtype=np.int64)
_U64 = np.uint64


# ---------------------------------------------------------------------------------------------
# small helpers


def _sorted_unique(a: np.ndarray) -> np.ndarray:
    # the common query is one row or an already sorted set: skip the sort then
    if a.size <= 1 or bool(np.all(a[1:] > a[:-1])):
        return a
    return unique(a)


def _ranges(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Concatenation of ``arange(s, e)`` for each pair, vectorised (int64)."""
    if starts.size == 1:
        return np.arange(int(starts[0]), int(ends[0]), dtype=np.int64)
    s = starts.astype(np.int64)
    lens = ends.astype(np.int64) - s
    nz = lens > 0
    if not nz.all():
        s, lens = s[nz], lens[nz]
    if s.size == 0:
        return _EMPTY
    csum = np.cumsum(lens)
    out = np.arange(int(csum[-1]), dtype=np.int64)
    out += np.repeat(s - (csum - lens), lens)
    return out


def _check_size(n: int, name: str) -> int:
    n = int(n)
    if n < 0:
        raise ValueError(f"{name} must be >= 0, got {n}")
    return n


def _inverse_csr(targets: np.ndarray, n_targets: int) -> tuple[np.ndarray, np.ndarray]:
    """Group positions ``0..len(targets)-1`` by target value (``-1`` entries dropped).

    Returns ``(indptr, order)``: the positions with target ``t`` are
    ``order[indptr[t]:indptr[t+1]]``, ascending (stable sort).
    """
    t = targets.astype(np.int64, copy=False)
    order = np.argsort(t, kind="stable")
    missing = int(np.count_nonzero(t < 0))
    order = order[missing:]
    counts = np.bincount(t[t >= 0], minlength=n_targets)
    indptr = np.zeros(n_targets + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    n_pos = len(targets)
    return (
        indptr.astype(_uint_dtype(int(indptr[-1]))),
        order.astype(_uint_dtype(max(n_pos - 1, 0))),
    )


# ---------------------------------------------------------------------------------------------
# Tensor base class


class Tensor(ABC):
    """A binary provenance matrix ``n_out x n_in`` of one operation w.r.t. one input.

    Subclasses implement ``_backward``, ``_forward`` and ``_pairs`` on rows that are already
    validated, sorted and unique; the public methods do the normalisation.
    """

    kind: str = "abstract"

    def __init__(self, n_out: int, n_in: int) -> None:
        self.n_out = _check_size(n_out, "n_out")
        self.n_in = _check_size(n_in, "n_in")

    @property
    def shape(self) -> tuple[int, int]:
        """``(n_out, n_in)``."""
        return (self.n_out, self.n_in)

    @property
    @abstractmethod
    def nnz(self) -> int:
        """Number of ones."""

    @property
    @abstractmethod
    def nbytes(self) -> int:
        """Bytes of the numpy arrays the tensor is made of (0 for O(1) forms)."""

    @property
    def index_nbytes(self) -> int:
        """Bytes of lazily built inverse indexes (0 until a query builds them)."""
        return 0

    def backward(self, rows: ArrayLike) -> np.ndarray:
        """Input rows that the given output rows derive from (sorted, unique, int64).

        Raises
        ------
        IndexError
            If an output row is outside ``0..n_out-1``.
        """
        u = _sorted_unique(normalize_rows(rows, self.n_out, "output row"))
        return self._backward(u)

    def forward(self, rows: ArrayLike) -> np.ndarray:
        """Output rows derived from the given input rows (sorted, unique, int64).

        Raises
        ------
        IndexError
            If an input row is outside ``0..n_in-1``.
        """
        u = _sorted_unique(normalize_rows(rows, self.n_in, "input row"))
        return self._forward(u)

    def backward_pairs(self, rows: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """Every one in the given output rows, as aligned ``(out_rows, in_rows)`` int64 arrays.

        Repeated output rows are reported once; pairs are sorted by output row, then input
        row.
        """
        u = _sorted_unique(normalize_rows(rows, self.n_out, "output row"))
        return self._pairs(u)

    def to_sparse(self) -> sp.csr_array:
        """The whole matrix as a boolean ``scipy.sparse.csr_array`` (``n_out x n_in``)."""
        out, inp = self._pairs(np.arange(self.n_out, dtype=np.int64))
        indptr = np.zeros(self.n_out + 1, dtype=np.int64)
        np.cumsum(np.bincount(out, minlength=self.n_out), out=indptr[1:])
        return sp.csr_array((np.ones(len(inp), dtype=bool), inp, indptr), shape=self.shape)

    @abstractmethod
    def _backward(self, u: np.ndarray) -> np.ndarray: ...

    @abstractmethod
    def _forward(self, u: np.ndarray) -> np.ndarray: ...

    @abstractmethod
    def _pairs(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]: ...

    def _repr_extra(self) -> str:
        return ""

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(shape={self.shape}{self._repr_extra()}, nnz={self.nnz}, "
            f"nbytes={self.nbytes}, index_nbytes={self.index_nbytes})"
        )


# ---------------------------------------------------------------------------------------------
# O(1) forms


class IdentityTensor(Tensor):
    """Identity ``n x n``: row-preserving operations (select, withColumn, ...).

    Stores no arrays, so ``nbytes`` is 0.

    Examples
    --------
    >>> t = IdentityTensor(4)
    >>> t.backward([3, 1, 3])
    array([1, 3])
    >>> t.nnz, t.nbytes
    (4, 0)
    """

    kind = "identity"

    def __init__(self, n: int) -> None:
        super().__init__(n, n)

    @property
    def nnz(self) -> int:
        return self.n_in

    @property
    def nbytes(self) -> int:
        return 0

    def _backward(self, u: np.ndarray) -> np.ndarray:
        return u

    def _forward(self, u: np.ndarray) -> np.ndarray:
        return u

    def _pairs(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return u, u.copy()


class AllTensor(Tensor):
    """All ones ``n_out x n_in``: every output record derives from every input record.

    SystemL's *all* mapping: the fitted model of an ML estimator, the single row of a
    global aggregate.  Stores no arrays, so ``nbytes`` is 0.

    Examples
    --------
    >>> t = AllTensor(1, 4)
    >>> t.backward([0])
    array([0, 1, 2, 3])
    >>> t.forward([2]), t.nnz, t.nbytes
    (array([0]), 4, 0)
    """

    kind = "all"

    @property
    def nnz(self) -> int:
        return self.n_out * self.n_in

    @property
    def nbytes(self) -> int:
        return 0

    def _backward(self, u: np.ndarray) -> np.ndarray:
        return np.arange(self.n_in if u.size else 0, dtype=np.int64)

    def _forward(self, u: np.ndarray) -> np.ndarray:
        return np.arange(self.n_out if u.size else 0, dtype=np.int64)

    def _pairs(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return np.repeat(u, self.n_in), np.tile(np.arange(self.n_in, dtype=np.int64), u.size)


class BlockTensor(Tensor):
    """One input's block of an append: output rows ``offset..offset+n_in-1`` are its rows.

    The paper's block-diagonal append tensor (§III-A); stores no arrays, so ``nbytes`` is 0.

    Parameters
    ----------
    n_out, n_in : int
        Shape.
    offset : int
        Output row of input row 0; ``offset + n_in <= n_out``.

    Examples
    --------
    >>> t = BlockTensor(5, 2, offset=3)        # second input of a 3 + 2 row union
    >>> t.backward([0, 3, 4])
    array([0, 1])
    >>> t.forward([1])
    array([4])
    """

    kind = "block"

    def __init__(self, n_out: int, n_in: int, offset: int) -> None:
        super().__init__(n_out, n_in)
        self.offset = int(offset)
        if self.offset < 0 or self.offset + self.n_in > self.n_out:
            raise ValueError(
                f"block of {self.n_in} rows at offset {self.offset} does not fit in "
                f"{self.n_out} output rows"
            )

    @property
    def nnz(self) -> int:
        return self.n_in

    @property
    def nbytes(self) -> int:
        return 0

    def _backward(self, u: np.ndarray) -> np.ndarray:
        lo, hi = np.searchsorted(u, [self.offset, self.offset + self.n_in])
        return u[lo:hi] - self.offset

    def _forward(self, u: np.ndarray) -> np.ndarray:
        return u + self.offset

    def _pairs(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        lo, hi = np.searchsorted(u, [self.offset, self.offset + self.n_in])
        return u[lo:hi], u[lo:hi] - self.offset

    def _repr_extra(self) -> str:
        return f", offset={self.offset}"


# ---------------------------------------------------------------------------------------------
# MaskTensor


class MaskTensor(Tensor):
    """Row subset: output row ``o`` is input row ``kept[o]``, ``kept`` strictly increasing.

    Two exact forms, the smaller is chosen by :meth:`from_kept`:

    * ``"ints"``: ``kept`` in the smallest unsigned dtype that holds ``n_in - 1``
      (``n_out * itemsize`` bytes).  backward is ``kept[rows]``, O(k); forward is a binary
      search, O(k log n).
    * ``"bitset"``: one bit per input row, ``ceil(n_in / 64) * 8`` bytes.  forward is a bit
      test plus a rank (a lazily built directory of popcounts per 64-bit word, ``n_in / 64``
      small ints), O(k); backward materialises ``kept`` once, lazily, O(k) per query after
      that.  Both lazy arrays count in ``index_nbytes``.

    Examples
    --------
    >>> t = MaskTensor.from_kept([1, 2, 4], n_in=5)
    >>> t.shape, t.form
    ((3, 5), 'ints')
    >>> t.backward([0, 2])
    array([1, 4])
    >>> t.forward([0, 4])
    array([2])
    """

    kind = "mask"

    def __init__(
        self,
        n_in: int,
        *,
        kept: np.ndarray | None = None,
        bits: np.ndarray | None = None,
    ) -> None:
        if (kept is None) == (bits is None):
            raise ValueError("give exactly one of kept= or bits=")
        n_in = _check_size(n_in, "n_in")
        self._kept: np.ndarray | None = None
        self._bits: np.ndarray | None = None
        self._rank: np.ndarray | None = None
        self._kept_index: np.ndarray | None = None
        if kept is not None:
            self._kept = kept
            n_out = len(kept)
            self.form = "ints"
        else:
            assert bits is not None
            if len(bits) != (n_in + 63) // 64:
                raise ValueError(f"{n_in} input rows need {(n_in + 63) // 64} words")
            self._bits = np.asarray(bits, dtype="<u8")
            n_out = int(_popcount64(self._bits).sum())
            self.form = "bitset"
        super().__init__(n_out, n_in)

    @classmethod
    def from_kept(cls, kept: ArrayLike, n_in: int, form: str | None = None) -> MaskTensor:
        """Build from the kept input rows.

        Parameters
        ----------
        kept : sequence of int
            Strictly increasing input rows in ``0..n_in-1``.
        n_in : int
            Number of input rows.
        form : {None, "ints", "bitset"}
            Force a storage form; ``None`` picks the one with fewer bytes.

        Raises
        ------
        ValueError
            If ``kept`` is not strictly increasing or out of range.
        """
        n_in = _check_size(n_in, "n_in")
        k = _as_int_array(kept, "kept")
        if k.size:
            if int(k.min()) < 0 or int(k.max()) >= n_in:
                raise ValueError(f"kept rows must lie in 0..{n_in - 1}")
            if not bool(np.all(k[1:] > k[:-1])):
                raise ValueError("kept rows must be strictly increasing")
        dt = _uint_dtype(max(n_in - 1, 0))
        ints_bytes = len(k) * dt.itemsize
        bits_bytes = (n_in + 63) // 64 * 8
        if form is None:
            form = "bitset" if bits_bytes < ints_bytes else "ints"
        if form == "ints":
            return cls(n_in, kept=k.astype(dt))
        if form == "bitset":
            mask = np.zeros(n_in, dtype=bool)
            mask[k] = True
            packed = np.packbits(mask, bitorder="little")
            padded = np.zeros(bits_bytes, dtype=np.uint8)
            padded[: len(packed)] = packed
            return cls(n_in, bits=padded.view("<u8"))
        raise ValueError(f"unknown mask form {form!r}; use 'ints' or 'bitset'")

    @property
    def nnz(self) -> int:
        return self.n_out

    @property
    def nbytes(self) -> int:
        arr = self._kept if self._kept is not None else self._bits
        assert arr is not None
        return int(arr.nbytes)

    @property
    def index_nbytes(self) -> int:
        return sum(int(a.nbytes) for a in (self._rank, self._kept_index) if a is not None)

    def kept(self) -> np.ndarray:
        """The kept input rows, one per output row (int64)."""
        return self._kept_array().astype(np.int64)

    def _kept_array(self) -> np.ndarray:
        if self._kept is not None:
            return self._kept
        if self._kept_index is None:
            assert self._bits is not None
            bits = np.unpackbits(self._bits.view(np.uint8), bitorder="little", count=self.n_in)
            self._kept_index = np.flatnonzero(bits).astype(_uint_dtype(max(self.n_in - 1, 0)))
        return self._kept_index

    def _backward(self, u: np.ndarray) -> np.ndarray:
        # kept is strictly increasing, so sorted unique u maps to sorted unique rows
        return self._kept_array()[u].astype(np.int64)

    def _forward(self, u: np.ndarray) -> np.ndarray:
        if u.size == 0:
            return _EMPTY
        if self._kept is not None:
            kept = self._kept
            pos = np.searchsorted(kept, u.astype(kept.dtype))
            hit = pos < len(kept)
            hit[hit] = kept[pos[hit]] == u[hit]
            return pos[hit].astype(np.int64)
        assert self._bits is not None
        if self._rank is None:
            counts = _popcount64(self._bits)
            rank = np.zeros(len(counts), dtype=np.int64)
            np.cumsum(counts[:-1], out=rank[1:])
            self._rank = rank.astype(_uint_dtype(self.n_out))
        uu = u.astype(np.uint64)
        word_i = uu >> _U64(6)
        bit = uu & _U64(63)
        word = self._bits[word_i]
        hit = ((word >> bit) & _U64(1)).astype(bool)
        below = word & ((_U64(1) << bit) - _U64(1))
        rank_u = self._rank[word_i].astype(np.int64) + _popcount64(below)
        return rank_u[hit]

    def _pairs(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return u, self._backward(u)

    def _repr_extra(self) -> str:
        return f", form={self.form!r}"


# ---------------------------------------------------------------------------------------------
# IndexTensor


class IndexTensor(Tensor):
    """Functional map: output row ``o`` comes from input row ``idx[o]``, or none if ``-1``.

    One side of a join (``-1`` on the missing side of an outer join), a permutation
    (orderBy), explode.  Three exact forms, the smallest is chosen by :meth:`from_index`:

    * ``"packed"``: ``idx + 1`` bit-packed with ``bit_length(n_in)`` bits per output row
      (:class:`PackedInts`).  backward O(k); forward uses an inverse index built on first use
      and counted in ``index_nbytes``: the output row + 1 of each input row, bit-packed, when
      no input row is used twice (permutations, one side of a 1:1 join), else a CSR of
      input row -> output rows (stable argsort).
    * ``"sorted"``: only for a non-decreasing ``idx`` (e.g. the left side of a join whose
      output is ordered by left index; ``-1`` rows can only come first).  Stores the group
      offsets, ``offsets[v + 1]`` = first output row with ``idx >= v`` for
      ``v = -1..n_in`` (``n_in + 2`` ints in the smallest dtype that holds ``n_out``): this is
      the count of output rows per input row, in prefix-sum form so that both directions
      need no extra index.  backward is a binary search, O(k log n_in); forward O(k + out).
    * ``"ef"``: only for a non-decreasing ``idx``.  An Elias-Fano code of ``idx + 1``
      (``ef_over == "values"``: ``n_out`` values in ``0..n_in``) or of the offsets above
      (``"offsets"``: ``n_in + 2`` values in ``0..n_out``), whichever is smaller.  ``m``
      values in ``0..u`` take about ``m * (2 + log2(u / m))`` bits plus ~3% of rank
      samples, so when ``n_out`` and ``n_in`` are of the same order (a join's left side)
      this is about ``n_out + n_in`` bits in all.  Both directions are a select on the
      code's bitvector (a binary search in the samples, then a one-block scan) and, for
      a lower bound, a bisection of one bucket's low bits: O(k log n), vectorised, and
      with no inverse index.
    * ``"pfor"``: ``idx + 1`` as a :class:`~tensprov_lab.store._codes.PatchedInts`, for an
      ``idx`` that mostly follows the line ``o * n_in / n_out`` (the right side of a join
      of two tables written in time order; a near-sorted permutation): a few bits a row
      for its offset from the line, and the rows that stray as patches.  Lookups and the
      inverse index are as for "packed".

    Examples
    --------
    >>> t = IndexTensor.from_index([2, -1, 0, 2], n_in=3)
    >>> t.form
    'packed'
    >>> t.backward([0, 1, 3])
    array([2])
    >>> t.forward([2])
    array([0, 3])
    >>> IndexTensor.from_index([0, 0, 0, 1, 1, 2] * 10, n_in=3).form
    'packed'
    >>> IndexTensor.from_index(sorted([0, 0, 0, 1, 1, 2] * 10), n_in=3).form
    'sorted'
    >>> idx = np.repeat(np.arange(5000), np.arange(5000) % 3)  # 0, 1 or 2 rows per input
    >>> left = IndexTensor.from_index(idx, n_in=5000)
    >>> left.form, left.ef_over, left.nbytes, IndexTensor.from_index(idx, 5000, "packed").nbytes
    ('ef', 'values', 1272, 8128)
    >>> left.backward([0, 4998]), left.forward([1, 2, 3])
    (array([   1, 4999]), array([0, 1, 2]))
    """

    kind = "index"

    def __init__(
        self,
        n_out: int,
        n_in: int,
        *,
        values: PackedInts | None = None,
        offsets: np.ndarray | None = None,
        ef: _EliasFano | None = None,
        ef_over: str = "values",
        patched: PatchedInts | None = None,
        nnz: int | None = None,
    ) -> None:
        super().__init__(n_out, n_in)
        if sum(x is not None for x in (values, offsets, ef, patched)) != 1:
            raise ValueError("give exactly one of values=, offsets=, ef= or patched=")
        self._values = values
        self._offsets = offsets
        self._ef = ef
        self._patched = patched
        self.ef_over: str | None = None
        self._inv_indptr: np.ndarray | None = None
        self._inv_order: np.ndarray | None = None
        self._inv_packed: PackedInts | None = None
        if values is not None:
            if len(values) != self.n_out:
                raise ValueError(f"{len(values)} packed values for {self.n_out} output rows")
            self.form = "packed"
            # counting needs a full unpack, so take it from the builder when it knows it
            self._nnz = -1 if nnz is None else int(nnz)
        elif patched is not None:
            if len(patched) != self.n_out or patched.top > self.n_in:
                raise ValueError("a 'pfor' code of idx + 1 needs n_out values in 0..n_in")
            self.form = "pfor"
            self._nnz = -1 if nnz is None else int(nnz)
        elif offsets is not None:
            if len(offsets) != self.n_in + 2 or int(offsets[-1]) != self.n_out:
                raise ValueError("offsets must have n_in + 2 entries ending at n_out")
            self.form = "sorted"
            self._nnz = self.n_out - int(offsets[1])
        else:
            assert ef is not None
            self.form = "ef"
            self.ef_over = ef_over
            one = np.ones(1, dtype=np.int64)
            if ef_over == "values":
                if ef.size != self.n_out or ef.last > self.n_in:
                    raise ValueError("an 'ef' code of idx + 1 needs n_out values in 0..n_in")
                self._nnz = self.n_out - int(ef.equal_range(one)[0][0])
            elif ef_over == "offsets":
                if ef.size != self.n_in + 2 or ef.last != self.n_out:
                    raise ValueError("an 'ef' code of offsets needs n_in + 2 values to n_out")
                self._nnz = self.n_out - int(ef.get(one)[0])
            else:
                raise ValueError(f"ef_over must be 'values' or 'offsets', got {ef_over!r}")

    @classmethod
    def from_index(cls, idx: ArrayLike, n_in: int, form: str | None = None) -> IndexTensor:
        """Build from ``idx`` (one entry per output row, ``-1`` or in ``0..n_in-1``).

        Parameters
        ----------
        idx : sequence of int
            Input row of each output row, ``-1`` for none.
        n_in : int
            Number of input rows.
        form : {None, "packed", "sorted", "ef", "pfor"}
            Force a storage form; ``None`` picks the one with the fewest bytes ("sorted" and
            "ef" are only possible for a non-decreasing ``idx``, and "pfor" is only tried for
            an ``idx`` that is not; ties go to the first of "packed", "sorted", "ef",
            "pfor").

        Raises
        ------
        ValueError
            If a value is out of range, or ``form`` is "sorted" or "ef" for an unsorted
            ``idx``.
        """
        n_in = _check_size(n_in, "n_in")
        a = _as_int_array(idx, "idx").astype(np.int64, copy=False)
        n_out = len(a)
        if n_out and (int(a.min()) < -1 or int(a.max()) >= n_in):
            raise ValueError(f"idx values must be -1 or lie in 0..{n_in - 1}")
        if form not in (None, "packed", "sorted", "ef", "pfor"):
            raise ValueError(f"unknown index form {form!r}; use 'packed', 'sorted', 'ef' or 'pfor'")
        monotone = n_out <= 1 or bool(np.all(a[1:] >= a[:-1]))
        if form in ("sorted", "ef") and not monotone:
            raise ValueError(f"the {form!r} form needs a non-decreasing idx")
        width = n_in.bit_length()
        planned = None
        if form == "pfor":
            if not n_out:
                raise ValueError("the 'pfor' form needs at least one row")
            planned = PatchedInts.layout(a + 1, n_in, sample=False)
            if planned is None:
                raise ValueError(f"{n_out} rows of {n_in} are too many for the 'pfor' form")
        if form is None:
            nbytes = {"packed": (n_out * width + 63) // 64 * 8}
            if monotone:
                nbytes["sorted"] = (n_in + 2) * _uint_dtype(n_out).itemsize
                nbytes["ef"] = min(_ef_index_layouts(a, n_in).values())[0]
            else:
                planned = PatchedInts.layout(a + 1, n_in)
                if planned is not None:
                    nbytes["pfor"] = planned[0]
            form = min(nbytes, key=nbytes.__getitem__)  # dicts keep order: ties go first
        if form == "pfor":
            assert planned is not None
            patched = PatchedInts.from_plan(a + 1, n_in, planned[1])
            return cls(n_out, n_in, patched=patched, nnz=int(np.count_nonzero(a >= 0)))
        if form == "sorted":
            offsets = np.searchsorted(a + 1, np.arange(n_in + 2, dtype=np.int64))
            return cls(n_out, n_in, offsets=offsets.astype(_uint_dtype(n_out)))
        if form == "ef":
            return cls._build_ef(a, n_in)
        values = PackedInts.from_array(a + 1, width=width)
        return cls(n_out, n_in, values=values, nnz=int(np.count_nonzero(a >= 0)))

    @classmethod
    def _build_ef(cls, a: np.ndarray, n_in: int, over: str | None = None) -> IndexTensor:
        """The "ef" form of a non-decreasing ``int64`` ``idx``, over the smaller sequence.

        ``over`` forces ``"values"`` or ``"offsets"`` (tests reach both codes through it).
        """
        layouts = _ef_index_layouts(a, n_in)
        if over is None:
            # ties go to the values: backward, the usual lineage query, is then one select
            over = "offsets" if layouts["offsets"][0] < layouts["values"][0] else "values"
        low_bits = layouts[over][1]
        if over == "values":
            ef = _EliasFano.from_sorted(a + 1, low_bits)
        else:
            offsets = np.zeros(n_in + 2, dtype=np.int64)
            np.cumsum(np.bincount(a + 1, minlength=n_in + 1), out=offsets[1:])
            ef = _EliasFano.from_sorted(offsets, low_bits)
        return cls(len(a), n_in, ef=ef, ef_over=over)

    @property
    def nnz(self) -> int:
        if self._nnz < 0:
            self._nnz = int(np.count_nonzero(self.to_index() >= 0))
        return self._nnz

    @property
    def nbytes(self) -> int:
        if self._values is not None:
            return self._values.nbytes
        if self._patched is not None:
            return self._patched.nbytes
        if self._ef is not None:
            return self._ef.nbytes
        assert self._offsets is not None
        return int(self._offsets.nbytes)

    @property
    def index_nbytes(self) -> int:
        arrays = (self._inv_indptr, self._inv_order)
        packed = self._inv_packed.nbytes if self._inv_packed is not None else 0
        return packed + sum(int(a.nbytes) for a in arrays if a is not None)

    def to_index(self) -> np.ndarray:
        """The full ``idx`` array (int64, ``-1`` for no input row), O(n_out)."""
        if self._values is not None:
            return self._values.to_numpy() - 1
        if self._patched is not None:
            return self._patched.to_numpy() - 1
        if self._ef is not None and self.ef_over == "values":
            return self._ef.to_numpy() - 1
        off = self._ef.to_numpy() if self._ef is not None else self._offsets
        assert off is not None
        off = off.astype(np.int64, copy=False)
        return np.repeat(np.arange(-1, self.n_in, dtype=np.int64), off[1:] - off[:-1])

    def _lookup(self, u: np.ndarray) -> np.ndarray:
        """``idx[u]`` for sorted unique u (non-decreasing result unless "packed" or "pfor")."""
        if self._values is not None:
            return self._values.get(u) - 1
        if self._patched is not None:
            return self._patched.get(u) - 1
        if self._ef is not None:
            if self.ef_over == "values":
                return self._ef.get(u) - 1
            # offsets <= u: the 0 before the -1 group, then one per group started by u
            return self._ef.equal_range(u)[1] - 2
        assert self._offsets is not None
        off = self._offsets
        return np.searchsorted(off, u.astype(off.dtype), side="right").astype(np.int64) - 2

    def _backward(self, u: np.ndarray) -> np.ndarray:
        v = self._lookup(u)
        v = v[v >= 0]
        monotone = self._values is None and self._patched is None
        return dedup_sorted(v) if monotone else _sorted_unique(v)

    def _forward(self, u: np.ndarray) -> np.ndarray:
        if u.size == 0:
            return _EMPTY
        # the monotone forms lay groups out in input order, so the ranges come out sorted
        if self._offsets is not None:
            return _ranges(self._offsets[u + 1], self._offsets[u + 2])
        if self._ef is not None:
            if self.ef_over == "values":
                return _ranges(*self._ef.equal_range(u + 1))  # the rows with idx + 1 == u + 1
            bounds = self._ef.get(np.concatenate([u + 1, u + 2]))
            return _ranges(bounds[: u.size], bounds[u.size :])
        if self._inv_order is None and self._inv_packed is None:
            self._build_inverse()
        if self._inv_packed is not None:
            o = self._inv_packed.get(u) - 1
            return np.sort(o[o >= 0])  # injective: no repeats to drop
        assert self._inv_indptr is not None and self._inv_order is not None
        pos = _ranges(self._inv_indptr[u], self._inv_indptr[u + 1])
        out = self._inv_order[pos].astype(np.int64)
        return out if u.size == 1 else unique(out)

    def _build_inverse(self) -> None:
        idx = self.to_index()
        valid = idx >= 0
        counts = np.bincount(idx[valid], minlength=self.n_in)
        if counts.size == 0 or int(counts.max()) <= 1:
            # one output per input row at most: a flat packed inverse is ~3x smaller than CSR
            inv = np.zeros(self.n_in, dtype=np.int64)
            inv[idx[valid]] = np.flatnonzero(valid) + 1
            self._inv_packed = PackedInts.from_array(inv, width=self.n_out.bit_length())
        else:
            self._inv_indptr, self._inv_order = _inverse_csr(idx, self.n_in)

    def _pairs(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        v = self._lookup(u)
        keep = v >= 0
        return u[keep], v[keep]

    def _repr_extra(self) -> str:
        over = f", ef_over={self.ef_over!r}" if self.ef_over is not None else ""
        return f", form={self.form!r}{over}"


def _ef_index_layouts(a: np.ndarray, n_in: int) -> dict[str, tuple[int, int]]:
    """``{"values" | "offsets": (nbytes, low_bits)}`` of the two "ef" codes of a sorted idx."""
    n_out = len(a)
    return {
        "values": _ef_layout(n_out, int(a[-1]) + 1 if n_out else 0),
        "offsets": _ef_layout(n_in + 2, n_out),
    }


# ---------------------------------------------------------------------------------------------
# CSRTensor


class CSRTensor(Tensor):
    """Many-to-many: output row ``o`` derives from ``indices[indptr[o]:indptr[o+1]]``.

    Aggregates and dedup (every contributing input row is kept: why-provenance).  Stored
    canonically (sorted, unique column indices per row) with the smallest unsigned dtypes.
    forward uses the transposed CSR, built on first use and counted in ``index_nbytes``.

    Parameters
    ----------
    n_out, n_in : int
        Shape.
    indptr : sequence of int
        ``n_out + 1`` non-decreasing offsets into ``indices``, from 0.
    indices : sequence of int
        Input rows in ``0..n_in-1``; rows that are unsorted or repeat an index are
        canonicalised.

    Examples
    --------
    >>> t = CSRTensor(2, 4, indptr=[0, 3, 4], indices=[0, 2, 3, 1])   # groupBy
    >>> t.backward([0])
    array([0, 2, 3])
    >>> t.forward([1, 3])
    array([0, 1])
    >>> CSRTensor.from_pairs([1, 0, 1], [1, 0, 2], n_out=2, n_in=3).backward_pairs([1])
    (array([1, 1]), array([1, 2]))
    """

    kind = "csr"

    def __init__(self, n_out: int, n_in: int, indptr: ArrayLike, indices: ArrayLike) -> None:
        super().__init__(n_out, n_in)
        ip = _as_int_array(indptr, "indptr").astype(np.int64, copy=False)
        ix = _as_int_array(indices, "indices").astype(np.int64, copy=False)
        if len(ip) != self.n_out + 1:
            raise ValueError(f"indptr needs {self.n_out + 1} entries, got {len(ip)}")
        if ip[0] != 0 or ip[-1] != len(ix) or bool(np.any(ip[1:] < ip[:-1])):
            raise ValueError("indptr must be non-decreasing from 0 to len(indices)")
        if ix.size and (int(ix.min()) < 0 or int(ix.max()) >= self.n_in):
            raise ValueError(f"indices must lie in 0..{self.n_in - 1}")
        if ix.size > 1:
            inc = ix[1:] > ix[:-1]
            starts = ip[1:-1]
            starts = starts[(starts > 0) & (starts < len(ix))]
            inc[starts - 1] = True  # a new row may restart low
            if not inc.all():
                rows = np.repeat(np.arange(self.n_out, dtype=np.int64), np.diff(ip))
                ip, ix = _canonical_csr(rows, ix, self.n_out, self.n_in)
        self.indptr = ip.astype(_uint_dtype(len(ix)))
        self.indices = ix.astype(_uint_dtype(max(self.n_in - 1, 0)))
        self._t_indptr: np.ndarray | None = None
        self._t_indices: np.ndarray | None = None

    @classmethod
    def _stored(cls, n_out: int, n_in: int, indptr: np.ndarray, indices: np.ndarray) -> CSRTensor:
        """A tensor of arrays that were canonical when saved (a save being loaded: kept
        as they are, memory-mapped, where the constructor would copy and re-check)."""
        t = cls.__new__(cls)
        Tensor.__init__(t, n_out, n_in)
        if len(indptr) != t.n_out + 1 or (len(indptr) and int(indptr[-1]) != len(indices)):
            raise ValueError(f"a saved CSR tensor of {n_out} rows has {len(indptr)} offsets")
        t.indptr, t.indices = indptr, indices
        t._t_indptr, t._t_indices = None, None
        return t

    @classmethod
    def from_pairs(
        cls, out_rows: ArrayLike, in_rows: ArrayLike, n_out: int, n_in: int
    ) -> CSRTensor:
        """Build from aligned ``(out_rows, in_rows)`` pairs (any order, repeats allowed).

        Raises
        ------
        ValueError
            If the arrays differ in length or a row is out of range.
        """
        n_out = _check_size(n_out, "n_out")
        n_in = _check_size(n_in, "n_in")
        o = _as_int_array(out_rows, "out_rows").astype(np.int64, copy=False)
        i = _as_int_array(in_rows, "in_rows").astype(np.int64, copy=False)
        if len(o) != len(i):
            raise ValueError(f"{len(o)} output rows but {len(i)} input rows")
        if o.size and (int(o.min()) < 0 or int(o.max()) >= n_out):
            raise ValueError(f"out_rows must lie in 0..{n_out - 1}")
        if i.size and (int(i.min()) < 0 or int(i.max()) >= n_in):
            raise ValueError(f"in_rows must lie in 0..{n_in - 1}")
        ip, ix = _canonical_csr(o, i, n_out, n_in)
        return cls(n_out, n_in, ip, ix)

    @property
    def nnz(self) -> int:
        return len(self.indices)

    @property
    def nbytes(self) -> int:
        return int(self.indptr.nbytes + self.indices.nbytes)

    @property
    def index_nbytes(self) -> int:
        return sum(int(a.nbytes) for a in (self._t_indptr, self._t_indices) if a is not None)

    def _backward(self, u: np.ndarray) -> np.ndarray:
        if u.size == 0:
            return _EMPTY
        pos = _ranges(self.indptr[u], self.indptr[u + 1])
        out = self.indices[pos].astype(np.int64)
        return out if u.size == 1 else unique(out)

    def _forward(self, u: np.ndarray) -> np.ndarray:
        if u.size == 0:
            return _EMPTY
        if self._t_indices is None:
            self._t_indptr, self._t_indices = self._transpose()
        assert self._t_indptr is not None
        pos = _ranges(self._t_indptr[u], self._t_indptr[u + 1])
        out = self._t_indices[pos].astype(np.int64)
        return out if u.size == 1 else unique(out)

    def _transpose(self) -> tuple[np.ndarray, np.ndarray]:
        t_indptr, order = _inverse_csr(self.indices, self.n_in)
        # order lists entry positions; map them to their output rows
        ip = self.indptr.astype(np.int64)
        entry_row = np.repeat(np.arange(self.n_out, dtype=np.int64), ip[1:] - ip[:-1])
        return t_indptr, entry_row[order].astype(_uint_dtype(max(self.n_out - 1, 0)))

    def _pairs(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if u.size == 0:
            return _EMPTY, _EMPTY
        starts = self.indptr[u].astype(np.int64)
        lens = self.indptr[u + 1].astype(np.int64) - starts
        pos = _ranges(starts, starts + lens)
        return np.repeat(u, lens), self.indices[pos].astype(np.int64)


def _canonical_csr(
    o: np.ndarray, i: np.ndarray, n_out: int, n_in: int
) -> tuple[np.ndarray, np.ndarray]:
    """Sort pairs by (out, in), drop repeats, return ``(indptr, indices)`` as int64."""
    if n_out * max(n_in, 1) < 2**62:
        key = np.sort(o * n_in + i)
        if key.size > 1:
            key = key[np.concatenate([[True], key[1:] != key[:-1]])]
        o, i = (key // n_in, key % n_in) if n_in else (key, key)
    else:
        order = np.lexsort((i, o))
        o, i = o[order], i[order]
        if o.size > 1:
            keep = np.concatenate([[True], (o[1:] != o[:-1]) | (i[1:] != i[:-1])])
            o, i = o[keep], i[keep]
    indptr = np.zeros(n_out + 1, dtype=np.int64)
    np.cumsum(np.bincount(o, minlength=n_out), out=indptr[1:])
    return indptr, i.astype(np.int64, copy=False)


# ---------------------------------------------------------------------------------------------
# factory


def make_tensor(idx: ArrayLike, n_in: int) -> Tensor:
    """The cheapest exact tensor for a functional map ``idx`` (``-1`` = no input row).

    Tried in order: :class:`IdentityTensor` (``idx == arange(n_in)``), :class:`BlockTensor`
    (one contiguous run ``0..n_in-1`` with ``-1`` elsewhere), :class:`MaskTensor` (strictly
    increasing, no ``-1``), else :class:`IndexTensor` in its smallest form (bit-packed
    values, or for a non-decreasing ``idx`` "sorted" group offsets or an "ef" Elias-Fano
    code).

    Parameters
    ----------
    idx : sequence of int
        One entry per output row: ``-1`` or an input row in ``0..n_in-1``.
    n_in : int
        Number of input rows.

    Raises
    ------
    ValueError
        If a value is out of range.

    Examples
    --------
    >>> make_tensor([0, 1, 2], 3).kind
    'identity'
    >>> make_tensor([-1, -1, 0, 1], 2).kind
    'block'
    >>> make_tensor([0, 2], 3).kind
    'mask'
    >>> make_tensor([2, 0, -1], 3).kind
    'index'
    """
    n_in = _check_size(n_in, "n_in")
    a = _as_int_array(idx, "idx").astype(np.int64, copy=False)
    n_out = len(a)
    if n_out and (int(a.min()) < -1 or int(a.max()) >= n_in):
        raise ValueError(f"idx values must be -1 or lie in 0..{n_in - 1}")
    valid = np.flatnonzero(a >= 0)
    n_valid = len(valid)
    if n_valid == n_in:
        # every input row appears: identity or block if they appear as one contiguous run
        offset = int(valid[0]) if n_valid else 0
        run = n_valid == 0 or (
            int(valid[-1]) - offset == n_in - 1
            and bool(np.array_equal(a[offset : offset + n_in], np.arange(n_in)))
        )
        if run:
            if n_out == n_in:
                return IdentityTensor(n_in)
            return BlockTensor(n_out, n_in, offset)
    if n_valid == n_out and (n_out <= 1 or bool(np.all(a[1:] > a[:-1]))):
        return MaskTensor.from_kept(a, n_in)
    return IndexTensor.from_index(a, n_in)


def tensor_from_pairs(out_rows: ArrayLike, in_rows: ArrayLike, n_out: int, n_in: int) -> Tensor:
    """The cheapest exact tensor for many-to-many ``(out_rows, in_rows)`` pairs.

    :class:`AllTensor` when every output row derives from every input row (no arrays),
    else :class:`CSRTensor` (see :meth:`CSRTensor.from_pairs` for the arguments).

    Examples
    --------
    >>> tensor_from_pairs([0, 0, 0], [2, 0, 1], n_out=1, n_in=3).kind
    'all'
    >>> tensor_from_pairs([0, 1], [0, 0], n_out=2, n_in=3).kind
    'csr'
    """
    t = CSRTensor.from_pairs(out_rows, in_rows, n_out, n_in)
    if t.n_out and t.n_in and t.nnz == t.n_out * t.n_in:
        return AllTensor(t.n_out, t.n_in)
    return t
