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
    _as_int_array,
    _popcount64,
    _uint_dtype,
    normalize_rows,
)
from tensprov_lab.store._sets import unique

# IndexTensor (_index_tensor.py), CSRTensor (_csr_tensor.py) and the builders make_tensor
# and tensor_from_pairs (_make.py) build on this module
__all__ = [
    "AllTensor",
    "BlockTensor",
    "CrossTensor",
    "IdentityTensor",
    "MaskTensor",
    "PackedInts",
    "Tensor",
    "normalize_rows",
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


def file_backed(a: np.ndarray) -> bool:
    """Whether array ``a`` is pages of a memory-mapped file (its bytes are the operating
    system's to keep or drop, not the process's).

    >>> file_backed(np.zeros(3))
    False
    """
    import mmap

    base: object = a
    while base is not None:
        if isinstance(base, (np.memmap, mmap.mmap)):
            return True
        base = getattr(base, "base", None)
    return False


def held_nbytes(value: object) -> int:
    """Bytes an index value holds in memory: an array not mapped from a file, a tuple of
    them, or packed ints (their words)."""
    if value is None:
        return 0
    if isinstance(value, tuple):
        return sum(held_nbytes(v) for v in value)
    if isinstance(value, PackedInts):
        return held_nbytes(value.words)
    if isinstance(value, np.ndarray):
        return 0 if file_backed(value) else int(value.nbytes)
    raise TypeError(f"an index of type {type(value).__name__}")


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
    validated, sorted and unique; the public methods do the normalisation, and raise
    ``IndexError`` for a row out of range.
    """

    kind: str = "abstract"
    #: the attributes holding indexes queries build lazily (arrays, tuples of arrays or
    #: :class:`PackedInts`): counted in ``index_nbytes``, and what a memory budget may
    #: move to memory-mapped files (:func:`~._spill.map_indexes`)
    _lazy: tuple[str, ...] = ()

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
        """Bytes of lazily built inverse indexes the process holds (0 until a query
        builds them; indexes mapped from files are pages of the file, not counted)."""
        own = sum(held_nbytes(getattr(self, name)) for name in self._lazy)
        return own + sum(t.index_nbytes for t in self.components())

    def components(self) -> list[Tensor]:
        """The tensors this one is made of (a window's frames, a column tensor's
        parts): their indexes are this one's."""
        return []

    def backward(self, rows: ArrayLike) -> np.ndarray:
        """Input rows that the given output rows derive from (sorted, unique, int64)."""
        return self._backward(self._rows(rows, self.n_out, "output row"))

    def forward(self, rows: ArrayLike) -> np.ndarray:
        """Output rows derived from the given input rows (sorted, unique, int64)."""
        return self._forward(self._rows(rows, self.n_in, "input row"))

    def backward_pairs(self, rows: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """Every one in the given output rows, as aligned ``(out_rows, in_rows)`` int64 arrays.

        Repeated output rows are reported once; pairs are sorted by output row, then input
        row.
        """
        return self._pairs(self._rows(rows, self.n_out, "output row"))

    @staticmethod
    def _rows(rows: ArrayLike, n: int, what: str) -> np.ndarray:
        """``rows`` sorted and unique, each checked to be in ``0..n-1``.

        Raises
        ------
        IndexError
            If a row is out of range (the message names it ``what``).
        """
        return _sorted_unique(normalize_rows(rows, n, what))

    def localized(self) -> Tensor:
        """The tensor of the paper's localized view: for a window operation its input
        record alone (:class:`~._window_tensor.WindowTensor`), else the tensor itself."""
        return self

    def for_column(self, column: int) -> Tensor:
        """The tensor that output column ``column``'s values come through: a window
        operation's frame for the column a window function makes, else the tensor."""
        return self

    def in_memory(self) -> Tensor:
        """This tensor in a form the process holds: itself, except for a tensor kept
        elsewhere (e.g. a Spark-resident one), which reads itself back (saving a run
        writes this form)."""
        return self

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


class _EachInputOnce(Tensor):
    """An O(1) form (no arrays) in which every input row is in exactly one output row."""

    @property
    def nnz(self) -> int:
        return self.n_in

    @property
    def nbytes(self) -> int:
        return 0


class IdentityTensor(_EachInputOnce):
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


class BlockTensor(_EachInputOnce):
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


class CrossTensor(Tensor):
    """One side of a cross product: output row ``r`` comes from input row
    ``(r // stride) % n_in``.

    A cross join of ``n`` left and ``m`` right records numbers its pairs ``i * m + j``
    (DESIGN.md §3, by left row then right row): its left tensor has ``stride = m``, its
    right one ``stride = 1``.  The pairs are implicit, so ``nbytes`` is 0 whatever
    ``n * m`` is (the issue of a comma join captured as ``n * m`` listed pairs).

    Parameters
    ----------
    n_out, n_in : int
        Shape; ``n_out`` is a multiple of ``n_in * stride``.
    stride : int
        Consecutive output rows that share an input row.

    Examples
    --------
    >>> left, right = CrossTensor(6, 2, stride=3), CrossTensor(6, 3, stride=1)
    >>> left.backward([4]), right.backward([4])    # pair 4 = (left 1, right 1)
    (array([1]), array([1]))
    >>> left.forward([0]), right.forward([2])
    (array([0, 1, 2]), array([2, 5]))
    >>> left.nbytes, right.nnz
    (0, 6)
    """

    kind = "cross"

    def __init__(self, n_out: int, n_in: int, stride: int) -> None:
        super().__init__(n_out, n_in)
        self.stride = int(stride)
        block = self.n_in * self.stride
        if self.stride < 1 or (block == 0 and self.n_out) or (block and self.n_out % block):
            raise ValueError(
                f"{self.n_out} output rows are not whole repeats of {self.n_in} input rows "
                f"in runs of {self.stride}"
            )

    @property
    def nnz(self) -> int:
        return self.n_out

    @property
    def nbytes(self) -> int:
        return 0

    def _of(self, u: np.ndarray) -> np.ndarray:
        return (u // self.stride) % self.n_in

    def _backward(self, u: np.ndarray) -> np.ndarray:
        return _sorted_unique(self._of(u)) if u.size > 1 else self._of(u)

    def _forward(self, u: np.ndarray) -> np.ndarray:
        if not u.size:
            return _EMPTY
        block = self.n_in * self.stride
        starts = (np.arange(self.n_out // block, dtype=np.int64)[:, None] * block
                  + u[None, :] * self.stride).ravel()  # fmt: skip
        # each start begins a run of `stride` rows; ordered by repeat, then by input row
        return _ranges(starts, starts + self.stride)

    def _pairs(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return u, self._of(u)

    def _repr_extra(self) -> str:
        return f", stride={self.stride}"


# ---------------------------------------------------------------------------------------------
# MaskTensor


def _bit_words(mask: np.ndarray) -> np.ndarray:
    """One bit per entry of a boolean array, little-endian in 64-bit words (the bits past
    its end zero)."""
    packed = np.packbits(mask, bitorder="little")
    padded = np.zeros((len(mask) + 63) // 64 * 8, dtype=np.uint8)
    padded[: len(packed)] = packed
    return padded.view("<u8")


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
    _lazy = ("_rank", "_kept_index")

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
            return cls(n_in, bits=_bit_words(mask))
        raise ValueError(f"unknown mask form {form!r}; use 'ints' or 'bitset'")

    @classmethod
    def from_flags(cls, flags: ArrayLike, form: str | None = None) -> MaskTensor:
        """Build from one flag per input row (true: the row is kept), e.g. a filter's
        condition evaluated on every input row: the bit set is packed from the flags
        straight away, with no kept rows in between.

        Parameters
        ----------
        flags : sequence of bool
            One per input row.
        form : {None, "ints", "bitset"}
            Force a storage form; ``None`` picks the one with fewer bytes (as
            :meth:`from_kept`).

        Raises
        ------
        ValueError
            If ``flags`` is not one-dimensional booleans.

        Examples
        --------
        >>> t = MaskTensor.from_flags([False, True, True, False, True])
        >>> t.shape, t.backward([0, 2]).tolist()
        ((3, 5), [1, 4])
        >>> MaskTensor.from_flags([True] * 200).form
        'bitset'
        """
        f = np.asarray(flags)
        if f.ndim != 1 or f.dtype != bool:
            raise ValueError(f"flags must be one-dimensional booleans, not {f.dtype} of {f.shape}")
        n_in = len(f)
        dt = _uint_dtype(max(n_in - 1, 0))
        ints_bytes = int(np.count_nonzero(f)) * dt.itemsize
        if form is None:
            form = "bitset" if (n_in + 63) // 64 * 8 < ints_bytes else "ints"
        if form == "ints":
            return cls(n_in, kept=np.flatnonzero(f).astype(dt))
        if form == "bitset":
            return cls(n_in, bits=_bit_words(f))
        raise ValueError(f"unknown mask form {form!r}; use 'ints' or 'bitset'")

    @property
    def nnz(self) -> int:
        return self.n_out

    @property
    def nbytes(self) -> int:
        arr = self._kept if self._kept is not None else self._bits
        assert arr is not None
        return int(arr.nbytes)

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
