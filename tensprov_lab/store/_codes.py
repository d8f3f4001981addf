"""Compact integer codes the tensors are built from (pure numpy).

* :class:`PackedInts`: fixed-width bit packing, random access in O(k).
* ``_EliasFano``: a non-decreasing sequence in about ``2 + log2(u / n)`` bits a value,
  with select/rank samples so that access and ``searchsorted`` need no other index.
* :class:`PatchedInts`: a sequence that mostly follows a straight line (a join's right
  side when both tables were written in time order, a near-sorted permutation):
  per-block offsets from the line in a few bits, and the values that stray as patches.
"""

from __future__ import annotations

import bisect

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["PackedInts", "PatchedInts", "normalize_rows"]

_EMPTY = np.empty(0, dtype=np.int64)
_U64 = np.uint64


# ---------------------------------------------------------------------------------------------
# small helpers


def _uint_dtype(max_value: int) -> np.dtype:
    """Smallest unsigned dtype that holds ``0..max_value``."""
    for dt in (np.uint8, np.uint16, np.uint32):
        if max_value <= np.iinfo(dt).max:
            return np.dtype(dt)
    return np.dtype(np.uint64)


def normalize_rows(rows: ArrayLike, n: int, what: str = "row") -> np.ndarray:
    """Validate row indices against ``0..n-1`` and return them as an ``int64`` array.

    Order and repeats are kept; use the tensor methods for sorted, unique results.

    Parameters
    ----------
    rows : int, sequence of int or integer ndarray
        Row indices; an empty sequence is allowed.
    n : int
        Number of rows of the dataset the indices refer to.
    what : str
        Name used in error messages (e.g. ``"output row"``).

    Raises
    ------
    TypeError
        If the indices are not integers.
    IndexError
        If an index lies outside ``0..n-1``.

    Examples
    --------
    >>> normalize_rows([2, 0, 2], 3)
    array([2, 0, 2])
    >>> normalize_rows([3], 3, "output row")
    Traceback (most recent call last):
    ...
    IndexError: output row 3 out of range: valid output rows are 0..2 (3 rows)
    """
    a = np.asarray(rows)
    a = _as_int_array(a.reshape(1) if a.ndim == 0 else a, f"{what}s")
    if a.size == 0:
        return a
    if a.size == 1:  # single-record queries: skip two reductions
        lo = hi = a[0]
    else:
        lo = a.min()
        hi = a.max()
    if lo < 0 or hi >= n:
        bad = int(lo) if lo < 0 else int(hi)
        valid = f"0..{n - 1}" if n > 0 else "none"
        raise IndexError(f"{what} {bad} out of range: valid {what}s are {valid} ({n} rows)")
    return a.astype(np.int64, copy=False)


def _increasing(a: np.ndarray, strict: bool = True) -> bool:
    """Whether ``a`` is (strictly) increasing, looking at its first values before all
    of them: an array that is not (a join's index of the other side) is usually told
    by its start, without a comparison array as long as itself.

    >>> _increasing(np.array([1, 2, 2])), _increasing(np.array([1, 2, 2]), strict=False)
    (False, True)
    """
    cmp = np.greater if strict else np.greater_equal
    for stop in (_PEEK, len(a)):
        head = a[:stop]
        if len(head) > 1 and not bool(np.all(cmp(head[1:], head[:-1]))):
            return False
    return True


#: values :func:`_increasing` looks at first
_PEEK = 4096


def _popcount64(x: np.ndarray) -> np.ndarray:
    if hasattr(np, "bitwise_count"):  # numpy >= 2.0
        return np.bitwise_count(x).astype(np.int64)
    # SWAR popcount for numpy 1.26, which has no bitwise_count
    x = x - ((x >> _U64(1)) & _U64(0x5555555555555555))
    x = (x & _U64(0x3333333333333333)) + ((x >> _U64(2)) & _U64(0x3333333333333333))
    x = (x + (x >> _U64(4))) & _U64(0x0F0F0F0F0F0F0F0F)
    return ((x * _U64(0x0101010101010101)) >> _U64(56)).astype(np.int64)


def _as_int_array(values: ArrayLike, name: str) -> np.ndarray:
    """``values`` as a 1-D integer array (empty: :data:`_EMPTY`, whatever its dtype, as
    ``np.asarray([])`` is float64)."""
    a = np.asarray(values)
    if a.ndim != 1:
        raise ValueError(f"{name} must be a 1-D sequence of integers, got shape {a.shape}")
    if a.size == 0:
        return _EMPTY
    if a.dtype.kind not in "iu":
        raise TypeError(f"{name} must be integers, got dtype {a.dtype}")
    return a


def _as_rows(values: ArrayLike, name: str) -> np.ndarray:
    """Row numbers as ``int64``, or as the ``int32`` they came in (half the memory: at 16M
    join rows, 64 MB a copy; capture makes them ``int32`` below 2**31 rows)."""
    a = _as_int_array(values, name)
    return a if a.dtype == np.int32 else a.astype(np.int64, copy=False)


# ---------------------------------------------------------------------------------------------
# PackedInts


class PackedInts:
    """Fixed-width bit-packed array of non-negative integers.

    Values of ``width`` bits are laid end to end in little-endian ``uint64`` words, so ``n``
    values take ``ceil(n * width / 64) * 8`` bytes.  ``get`` is vectorised and O(k).

    Parameters
    ----------
    words : ndarray of uint64
        The packed bits.
    width : int
        Bits per value, ``0..64`` (0 stores only zeros, in no memory).
    size : int
        Number of values.

    Examples
    --------
    >>> p = PackedInts.from_array([5, 0, 7, 3])
    >>> p.width, len(p), p.nbytes
    (3, 4, 8)
    >>> p.get([2, 0])
    array([7, 5])
    >>> p.to_numpy()
    array([5, 0, 7, 3])
    """

    def __init__(self, words: np.ndarray, width: int, size: int) -> None:
        if not 0 <= width <= 64:
            raise ValueError(f"width must be in 0..64, got {width}")
        need = (size * width + 63) // 64
        if len(words) != need:
            raise ValueError(f"{size} values of {width} bits need {need} words, got {len(words)}")
        self.words = np.asarray(words, dtype="<u8")
        self.width = int(width)
        self.size = int(size)

    @classmethod
    def from_array(cls, values: ArrayLike, width: int | None = None) -> PackedInts:
        """Pack non-negative integers, by default with the minimal width for their maximum.

        Raises
        ------
        ValueError
            If a value is negative or does not fit in ``width`` bits.
        """
        v = _as_int_array(values, "values")
        n = len(v)
        vmax = int(v.max()) if n else 0
        if n and int(v.min()) < 0:
            raise ValueError(f"PackedInts holds non-negative values, got {int(v.min())}")
        if width is None:
            width = vmax.bit_length()
        if not 0 <= width <= 64:
            raise ValueError(f"width must be in 0..64, got {width}")
        if vmax.bit_length() > width:
            raise ValueError(f"value {vmax} does not fit in {width} bits")
        return cls(_pack(v, width), width, n)

    def __len__(self) -> int:
        return self.size

    @property
    def nbytes(self) -> int:
        """Bytes of the packed words."""
        return int(self.words.nbytes)

    def get(self, positions: ArrayLike) -> np.ndarray:
        """Values at the given positions (``int64``, or ``uint64`` when ``width == 64``).

        Raises
        ------
        IndexError
            If a position lies outside ``0..len-1``.
        """
        p = normalize_rows(positions, self.size, "position")
        out_dtype = np.uint64 if self.width == 64 else np.int64
        if p.size == 0 or self.width == 0:
            return np.zeros(p.size, dtype=out_dtype)
        if p.size == 1:
            # Python ints are much cheaper than a dozen tiny numpy ops for one value
            bit = int(p[0]) * self.width
            w1, o1 = bit >> 6, bit & 63
            v = int(self.words[w1]) >> o1
            if o1 + self.width > 64:
                v |= int(self.words[w1 + 1]) << (64 - o1)
            return np.array([v & ((1 << self.width) - 1)], dtype=out_dtype)
        w_ = _U64(self.width)
        bitpos = p.astype(np.uint64) * w_
        word = bitpos >> _U64(6)
        off = bitpos & _U64(63)
        lo = self.words[word] >> off
        # the clip keeps the read in bounds; np.where drops it where the value does not spill
        nxt = np.minimum(word + _U64(1), _U64(len(self.words) - 1))
        hi = self.words[nxt] << ((_U64(64) - off) & _U64(63))
        val = np.where(off + w_ > _U64(64), lo | hi, lo)
        if self.width < 64:
            val &= (_U64(1) << w_) - _U64(1)
        return val.astype(out_dtype)

    def to_numpy(self) -> np.ndarray:
        """All values, O(n)."""
        out = _unpack(self.words, self.width, self.size)
        return out if self.width == 64 else out.view(np.int64)

    def __repr__(self) -> str:
        return f"PackedInts(size={self.size}, width={self.width}, nbytes={self.nbytes})"


#: blocks of 64 values :func:`_pack` packs at a time
_PACK_BLOCKS = 8192


def _pack(v: np.ndarray, width: int) -> np.ndarray:
    """The words holding ``v``'s values at ``width`` bits each, value ``i`` at bit
    ``i * width``.  Block-wise: 64 values fill exactly ``width`` words, so value ``j`` of
    every block lands at the same word and shift, one vectorised step per ``j`` (64
    steps over ``n / 64`` values) instead of a dozen temporaries of ``n`` values."""
    n = len(v)
    nwords = (n * width + 63) // 64
    if nwords == 0:
        return np.zeros(0, dtype="<u8")
    blocks = -(-n // 64)
    # non-negative int64 values have the bits of their uint64 selves: a view, no copy;
    # narrower ones are widened a slice at a time below, not all at once
    flat = v.view(np.uint64) if v.dtype == np.int64 else v
    full = n // 64
    values = flat[: full * 64].reshape(full, 64)
    words = np.empty((blocks, width), dtype="<u8")
    steps = []
    for j in range(64):
        bit = j * width
        w, o = bit >> 6, bit & 63
        steps.append((j, w, _U64(o), _U64(64 - o) if o + width > 64 else None))
    # a slice of blocks at a time (4 MB of values): the 64 passes stay in the cache
    # instead of reading every value from memory 64 times (2x faster at 16M values)
    slices = [(values[b0 : b0 + _PACK_BLOCKS], b0) for b0 in range(0, full, _PACK_BLOCKS)]
    if n % 64:
        # only the last block is padded with zeros (not a padded copy of every value)
        last = np.zeros(64, dtype=flat.dtype)
        last[: n - full * 64] = flat[full * 64 :]
        slices.append((last.reshape(1, 64), full))
    # each slice transposed into buffers used again and again: value j of every block,
    # and word w of every block, each contiguous, so every step is one contiguous
    # shift and or (2x faster than the same steps along strided columns)
    size = min(_PACK_BLOCKS, blocks)
    by_value = np.empty((64, size), dtype=np.uint64)
    by_word = np.empty((width, size), dtype=np.uint64)
    shifted = np.empty(size, dtype=np.uint64)
    for part, b0 in slices:
        k = len(part)
        vals, into, tmp = by_value[:, :k], by_word[:, :k], shifted[:k]
        np.copyto(vals, part.T, casting="unsafe")  # (non-negative: widened as they are)
        into[...] = 0
        for j, w, shift, back in steps:
            into[w] |= np.left_shift(vals[j], shift, out=tmp)
            if back is not None:
                into[w + 1] |= np.right_shift(vals[j], back, out=tmp)
        words[b0 : b0 + k] = into.T
    out = words.reshape(-1)
    return out if len(out) == nwords else out[:nwords].copy()


def _unpack(words: np.ndarray, width: int, n: int) -> np.ndarray:
    """The ``n`` values (``uint64``) that :func:`_pack` put in ``words``."""
    if width == 0 or n == 0:
        return np.zeros(n, dtype=np.uint64)
    blocks = -(-n // 64)
    flat = np.zeros(blocks * width, dtype="<u8")
    flat[: len(words)] = words
    padded = flat.reshape(blocks, width)
    values = np.empty((blocks, 64), dtype=np.uint64)
    mask = _U64((1 << width) - 1) if width < 64 else _U64(0xFFFFFFFFFFFFFFFF)
    for j in range(64):
        bit = j * width
        w, o = bit >> 6, bit & 63
        col = padded[:, w] >> _U64(o)
        if o + width > 64:
            col |= padded[:, w + 1] << _U64(64 - o)
        values[:, j] = col & mask
    return values.reshape(-1)[:n]


# ---------------------------------------------------------------------------------------------
# Elias-Fano


# A rank sample every 2048 bits of the high bitvector: about 3% on top of it, and a select
# scans one 256-byte block, which numpy does in a few vectorised calls.
_EF_BLOCK_WORDS = 32
_EF_BLOCK_BITS = 64 * _EF_BLOCK_WORDS


def _byte_tables() -> tuple[np.ndarray, np.ndarray]:
    """Popcount of each byte, and position of the ``r``-th set bit of each byte (8 x 256)."""
    bits = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1, bitorder="little")
    rank_in_byte = np.cumsum(bits, axis=1) - 1
    sel = np.zeros((256, 8), dtype=np.int64)
    b, p = np.nonzero(bits)
    sel[b, rank_in_byte[b, p]] = p
    return bits.sum(axis=1).astype(np.int32), sel


_POP8, _SEL8 = _byte_tables()


def _ef_nbytes(size: int, last: int, low_bits: int) -> int:
    """Bytes of :class:`_EliasFano` for ``size`` values in ``0..last`` (exact, not built)."""
    n_high = size + (last >> low_bits) + 1
    n_words = (n_high + 63) // 64
    n_samples = (n_words - 1) // _EF_BLOCK_WORDS  # block 0 needs none: it starts at 0
    sample_bytes = _uint_dtype(size).itemsize + _uint_dtype(n_high - size).itemsize
    return (size * low_bits + 63) // 64 * 8 + n_words * 8 + n_samples * sample_bytes


def _ef_layout(size: int, last: int) -> tuple[int, int]:
    """``(nbytes, low_bits)`` of the smallest Elias-Fano code of ``size`` values in ``0..last``.

    The textbook ``floor(log2(last / size))`` is within a few bytes of the optimum, but the
    word rounding and the directory make an exhaustive search (at most 64 widths) exact.
    """
    return min((_ef_nbytes(size, last, low), low) for low in range(last.bit_length() + 1))


class _EliasFano:
    """Elias-Fano code of a non-decreasing sequence ``x`` of ``size`` integers in ``0..last``.

    Each value is split at ``low_bits``: the low bits go to a :class:`PackedInts`, and the
    high part ``h = x[i] >> low_bits`` sets bit ``h + i`` of the ``high`` bitvector, so
    bucket ``h``'s ones are followed by the ``h``-th zero (the bucket sizes in unary).
    That is ``size * low_bits + size + (last >> low_bits) + 1`` bits, about
    ``2 + log2(last / size)`` bits per value at the best ``low_bits``.

    ``rank1[b - 1]`` / ``rank0[b - 1]`` hold the number of ones / zeros before 2048-bit
    block ``b >= 1``.  A select is then a binary search in the samples and a table-driven
    scan of one block, so ``get`` (select1) and ``equal_range`` (select0, then a binary
    search of the low bits inside one bucket) are vectorised and need no other index.

    Examples
    --------
    >>> ef = _EliasFano.from_sorted(np.array([0, 3, 3, 9, 20]))
    >>> ef.get(np.array([1, 4]))
    array([ 3, 20])
    >>> ef.equal_range(np.array([3, 4, 21]))
    (array([1, 3, 5]), array([3, 3, 5]))
    >>> ef.to_numpy()
    array([ 0,  3,  3,  9, 20])
    """

    def __init__(
        self,
        low: PackedInts,
        high: np.ndarray,
        rank1: np.ndarray,
        rank0: np.ndarray,
        last: int,
    ) -> None:
        self.low = low
        self.high = high
        self.rank1 = rank1
        self.rank0 = rank0
        self.size = len(low)
        self.low_bits = low.width
        self.last = int(last)

    @classmethod
    def from_sorted(cls, x: np.ndarray, low_bits: int | None = None) -> _EliasFano:
        """Code a non-decreasing ``int64`` array of non-negative values (not checked)."""
        size = len(x)
        last = int(x[-1]) if size else 0
        if low_bits is None:
            low_bits = _ef_layout(size, last)[1]
        low = PackedInts.from_array(x & ((1 << low_bits) - 1), width=low_bits)
        n_high = size + (last >> low_bits) + 1
        n_words = (n_high + 63) // 64
        bits = np.zeros(n_words * 64, dtype=bool)
        bits[(x >> low_bits) + np.arange(size, dtype=np.int64)] = True
        high = np.packbits(bits, bitorder="little").view("<u8")
        # ones per block, from the words padded to whole blocks for the count only
        n_blocks = (n_words + _EF_BLOCK_WORDS - 1) // _EF_BLOCK_WORDS
        padded = np.zeros(n_blocks * _EF_BLOCK_WORDS, dtype="<u8")
        padded[:n_words] = high
        per_block = _popcount64(padded).reshape(n_blocks, _EF_BLOCK_WORDS).sum(axis=1)
        ones = np.cumsum(per_block[:-1])
        zeros = np.arange(1, n_blocks, dtype=np.int64) * _EF_BLOCK_BITS - ones
        return cls(
            low,
            high,
            ones.astype(_uint_dtype(size)),
            zeros.astype(_uint_dtype(n_high - size)),
            last,
        )

    @property
    def nbytes(self) -> int:
        """Bytes of the low bits, the high bitvector and both rank samples."""
        arrays = (self.high, self.rank1, self.rank0)
        return self.low.nbytes + sum(int(a.nbytes) for a in arrays)

    def _select(self, ks: np.ndarray, bit: int) -> np.ndarray:
        """Bit positions of the ``ks``-th (0-based) ones (``bit=1``) or zeros (``bit=0``).

        Every ``k`` must be below the number of such bits.  Zeros past the end of the
        bitvector read as ones here, which is harmless: callers only ask for zeros that end
        a bucket, and those all come before.
        """
        if ks.size <= 4:
            return self._select_few(ks, bit)
        rank = self.rank1 if bit else self.rank0
        if rank.size:
            block = np.searchsorted(rank, ks.astype(rank.dtype), side="right")
            before = np.where(block > 0, rank[np.maximum(block - 1, 0)], 0)
            r = ks - before.astype(np.int64)
        else:
            block = np.zeros(ks.size, dtype=np.int64)
            r = ks
        n_words = len(self.high)
        wi = block[:, None] * _EF_BLOCK_WORDS + np.arange(_EF_BLOCK_WORDS)
        words = self.high[np.minimum(wi, n_words - 1)]
        if n_words % _EF_BLOCK_WORDS:  # the last block is short: blank the repeated word
            words[wi >= n_words] = 0
        if not bit:
            words = ~words
        # word in the block by popcounts, then byte in the word, then bit by table
        rows = np.arange(ks.size)
        cum = np.cumsum(_popcount64(words), axis=1)
        wj = np.count_nonzero(cum <= r[:, None], axis=1)
        r = r - np.where(wj > 0, cum[rows, np.maximum(wj - 1, 0)], 0)
        by = words[rows, wj].astype("<u8").view(np.uint8).reshape(ks.size, 8)
        cum8 = np.cumsum(_POP8[by], axis=1)
        bj = np.count_nonzero(cum8 <= r[:, None], axis=1)
        r = r - np.where(bj > 0, cum8[rows, np.maximum(bj - 1, 0)], 0)
        bit_in_byte = _SEL8[by[rows, bj], r]
        return block.astype(np.int64) * _EF_BLOCK_BITS + wj * 64 + bj * 8 + bit_in_byte

    def _select_few(self, ks: np.ndarray, bit: int) -> np.ndarray:
        return np.array([self._select_one(k, bit) for k in ks.tolist()], dtype=np.int64)

    def _select_one(self, k: int, bit: int) -> int:
        """:meth:`_select` with Python ints: a few queries skip two dozen tiny numpy calls."""
        rank = self.rank1 if bit else self.rank0
        block = bisect.bisect_right(rank, k)
        r = k - (int(rank[block - 1]) if block else 0)
        first = block * _EF_BLOCK_WORDS
        flip = 0 if bit else (1 << 64) - 1
        w = 0
        for w in self.high[first : first + _EF_BLOCK_WORDS].tolist():
            w ^= flip
            c = w.bit_count()
            if r < c:
                break
            first += 1
            r -= c
        for _ in range(r):
            w &= w - 1  # drop the lowest set bit
        return first * 64 + (w & -w).bit_length() - 1

    def get(self, positions: np.ndarray) -> np.ndarray:
        """``x[positions]`` (``int64``; positions in ``0..size-1``, not checked)."""
        p = positions.astype(np.int64, copy=False)
        if p.size == 0:
            return _EMPTY
        hi = self._select(p, 1) - p
        if self.low_bits == 0:
            return hi
        return (hi << self.low_bits) | self.low.get(p)

    def _bisect_low(self, lo: np.ndarray, hi: np.ndarray, want: np.ndarray) -> np.ndarray:
        """First position in ``[lo, hi)`` whose low bits are ``>= want`` (one bucket each)."""
        # a run of equal values sits in one bucket: bisect its low bits, all rows at once
        for _ in range(int((hi - lo).max()).bit_length()):
            active = lo < hi
            mid = (lo + hi) >> 1
            below = active & (self.low.get(np.where(active, mid, 0)) < want)
            lo = np.where(below, mid + 1, lo)
            hi = np.where(active & ~below, mid, hi)
        return lo

    def equal_range(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(# entries < v, # entries <= v)`` for each value (``int64``, any ``v >= 0``).

        The entries equal to ``v`` are ``x[lt:le]``: ``np.searchsorted`` left and right.
        """
        v = values.astype(np.int64, copy=False)
        if v.size == 0:
            return _EMPTY, _EMPTY
        if v.size == 1:
            lt1, le1 = self._equal_range_one(int(v[0]))
            return np.array([lt1]), np.array([le1])
        vc = np.minimum(v, self.last)  # buckets past the last one end in no zero
        h = vc >> self.low_bits
        # bucket h holds entries [select0(h - 1) + 1 - h, select0(h) - h)
        ends = self._select(np.concatenate([h, np.maximum(h - 1, 0)]), 0)
        end = ends[: h.size] - h
        start = np.where(h > 0, ends[h.size :] + 1 - h, 0)
        if self.low_bits:
            want = vc & ((1 << self.low_bits) - 1)
            lt = self._bisect_low(start, end, want)
            le = self._bisect_low(lt, end, want + 1)
        else:  # a bucket is one value
            lt, le = start, end
        return np.where(v > self.last, self.size, lt), le

    def _equal_range_one(self, v: int) -> tuple[int, int]:
        """:meth:`equal_range` of one value, with Python ints."""
        vc = min(v, self.last)
        h = vc >> self.low_bits
        start = self._select_one(h - 1, 0) + 1 - h if h else 0
        end = self._select_one(h, 0) - h
        if not self.low_bits:
            return (self.size if v > self.last else start), end
        want = vc & ((1 << self.low_bits) - 1)
        bounds = []
        for target in (want, want + 1):
            lo, hi = start, end
            while lo < hi:
                mid = (lo + hi) >> 1
                if int(self.low.get(mid)[0]) < target:
                    lo = mid + 1
                else:
                    hi = mid
            bounds.append(lo)
            start = lo
        return (self.size if v > self.last else bounds[0]), bounds[1]

    def to_numpy(self) -> np.ndarray:
        """All values, O(size)."""
        bits = np.unpackbits(self.high.view(np.uint8), bitorder="little")
        hi = np.flatnonzero(bits) - np.arange(self.size, dtype=np.int64)
        if self.low_bits == 0:
            return hi
        return (hi << self.low_bits) | self.low.to_numpy()


# ---------------------------------------------------------------------------------------------
# PatchedInts


_PATCH_BLOCK = 128
# how many strays a block may patch: the window of the other values is tried for each
_PATCH_TRIES = (0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)
_PATCH_SAMPLE_BLOCKS = 256


def _line(positions: np.ndarray, top: int, size: int) -> np.ndarray:
    """The straight line ``0 .. top`` over ``size`` positions that patched values follow."""
    return (positions * top) // size


def _first_fit(span: np.ndarray, width: int) -> np.ndarray:
    """Per block, the index into ``_PATCH_TRIES`` of the fewest strays that leave a window
    of ``width`` bits (``len(_PATCH_TRIES)``: none of the tries does)."""
    fits = span < (1 << width)
    return np.where(fits.any(axis=0), fits.argmax(axis=0), len(_PATCH_TRIES))


class PatchedInts:
    """Non-negative integers near the line ``i * top // size``, with the strays patched.

    A patched frame of reference (PFOR) code for random access.  Positions are cut into
    blocks of 128.  Value ``i`` is ``line(i) + base[i // 128] + low[i]``, with ``low`` of a
    fixed ``width`` bits for every position (a :class:`PackedInts`) and one ``base`` per
    block.  Values that do not fit their block's window are *patches*: their positions
    are an Elias-Fano code and their values are packed at ``bit_length(top)`` bits.

    This is the shape of a join's right side when both tables were written in time order
    (each customer's first account comes when the customer does; later accounts are the
    patches) and of a near-sorted permutation.  For values in no particular order every
    value would be a patch, so :meth:`layout` reports the size before anything is built,
    and callers keep plain :class:`PackedInts` when that is smaller.

    Examples
    --------
    >>> v = np.arange(1000) + np.arange(1000) % 3  # near the line, one stray
    >>> v[500] = 5
    >>> p = PatchedInts.from_array(v, top=1002)
    >>> p.width, p.patches, p.nbytes < PackedInts.from_array(v).nbytes
    (2, 1, True)
    >>> p.get(np.array([0, 499, 500, 999]))
    array([  0, 500,   5, 999])
    >>> bool(np.array_equal(p.to_numpy(), v))
    True
    """

    def __init__(
        self,
        size: int,
        top: int,
        base_min: int,
        base: PackedInts,
        low: PackedInts,
        patch_pos: _EliasFano | None,
        patch_val: PackedInts,
    ) -> None:
        self.size = int(size)
        self.top = int(top)
        self.base_min = int(base_min)
        self.base = base
        self.low = low
        self.width = low.width
        self.patch_pos = patch_pos
        self.patch_val = patch_val
        self.patches = len(patch_val)

    @staticmethod
    def layout(values: np.ndarray, top: int, sample: bool = True) -> tuple[int, dict] | None:
        """``(nbytes, plan)`` of the smallest code of ``values`` (``int64`` in ``0..top``).

        With ``sample``, a first pass over at most 256 evenly spaced blocks returns
        ``None`` when the code cannot beat plain packing by a tenth, so that values in no
        particular order cost a few milliseconds, not a sort of every block.
        ``None`` too when ``size * top`` would overflow the line's ``int64`` arithmetic.
        """
        n = len(values)
        vw = int(top).bit_length()
        if n == 0 or n * max(int(top), 1) >= 1 << 62:
            return None
        nb = -(-n // _PATCH_BLOCK)
        if sample and nb > 2 * _PATCH_SAMPLE_BLOCKS:
            picked = np.linspace(0, nb - 2, _PATCH_SAMPLE_BLOCKS).astype(np.int64)
            pos = (picked[:, None] * _PATCH_BLOCK + np.arange(_PATCH_BLOCK)).ravel()
            est = PatchedInts._plan(values[pos], pos, n, top, vw, len(picked))
            packed_bits = _PATCH_BLOCK * len(picked) * vw
            if est["bits"] >= 0.9 * packed_bits:
                return None
        plan = PatchedInts._plan(values, np.arange(n, dtype=np.int64), n, top, vw, nb)
        return plan["nbytes"], plan

    @staticmethod
    def _plan(v: np.ndarray, pos: np.ndarray, n: int, top: int, vw: int, nb: int) -> dict:
        """Pick the width and each block's base for the values ``v`` at positions ``pos``."""
        r = v - _line(pos, int(top), n)
        full = nb * _PATCH_BLOCK
        pad = np.full(full, r[-1], dtype=np.int64)  # the last block's tail copies a real value
        pad[: len(r)] = r
        # rank-major: row j holds every block's j-th smallest value, contiguous
        s = np.ascontiguousarray(np.sort(pad.reshape(nb, _PATCH_BLOCK), axis=1).T)
        del pad
        spans, starts = [], []
        for k in _PATCH_TRIES:
            # the tightest window holding all but k of the block's values; one row at a
            # time keeps the temporaries at one value a block
            span_k, start_k = s[_PATCH_BLOCK - k - 1] - s[0], s[0].copy()
            for i in range(1, k + 1):
                d = s[_PATCH_BLOCK - k - 1 + i] - s[i]
                better = d < span_k
                span_k[better] = d[better]
                start_k[better] = s[i][better]
            spans.append(span_k)
            starts.append(start_k)
        span = np.stack(spans)
        tries = np.array(_PATCH_TRIES + (_PATCH_BLOCK,), dtype=np.int64)
        best: tuple[int, int, np.ndarray] | None = None
        for w in range(vw + 2):
            fit = _first_fit(span, w)
            m = int(tries[fit].sum())
            bits = len(v) * w + m * vw + _ef_layout(m, len(v))[0] * 8 + nb * (vw + 2)
            if best is None or bits < best[0]:
                best = (bits, w, fit)
        assert best is not None
        bits, w, fit = best
        # a block no try fits keeps the window of its smallest values: all else strays
        choice = np.where(fit < len(_PATCH_TRIES), fit, 0)
        base = np.stack(starts)[choice, np.arange(nb)]
        b_of = base[np.arange(len(r)) // _PATCH_BLOCK]
        stray = (r < b_of) | (r - b_of >= (1 << w))
        at = np.flatnonzero(stray)
        base_w = int(base.max() - base.min()).bit_length()
        nbytes = (
            (len(v) * w + 63) // 64 * 8
            + (nb * base_w + 63) // 64 * 8
            + (at.size * vw + 63) // 64 * 8
            + (_ef_layout(at.size, int(at[-1]))[0] if at.size else 0)
        )
        return {"bits": bits, "nbytes": nbytes, "width": w, "base": base, "at": at, "r": r}

    @classmethod
    def from_plan(cls, values: np.ndarray, top: int, plan: dict) -> PatchedInts:
        """Build the code that :meth:`layout` planned for the same ``values``."""
        base, at, r = plan["base"], plan["at"], plan["r"]
        base_min = int(base.min())
        low = r - np.repeat(base, _PATCH_BLOCK)[: len(r)]
        low[at] = 0
        return cls(
            len(values),
            top,
            base_min,
            PackedInts.from_array(base - base_min),
            PackedInts.from_array(low, width=plan["width"]),
            _EliasFano.from_sorted(at) if at.size else None,
            PackedInts.from_array(values[at], width=int(top).bit_length()),
        )

    @classmethod
    def from_array(cls, values: ArrayLike, top: int | None = None) -> PatchedInts:
        """Code non-negative integers (``top``: their upper bound, by default the maximum)."""
        v = _as_int_array(values, "values").astype(np.int64, copy=False)
        if len(v) and int(v.min()) < 0:
            raise ValueError(f"PatchedInts holds non-negative values, got {int(v.min())}")
        top = int(v.max()) if top is None and len(v) else int(top or 0)
        if len(v) and int(v.max()) > top:
            raise ValueError(f"value {int(v.max())} is above top={top}")
        planned = cls.layout(v, top, sample=False)
        if planned is None:
            raise ValueError(f"{len(v)} values up to {top} are too many for a PatchedInts")
        return cls.from_plan(v, top, planned[1])

    def __len__(self) -> int:
        return self.size

    @property
    def nbytes(self) -> int:
        """Bytes of the low bits, the block bases and the patches."""
        pos = self.patch_pos.nbytes if self.patch_pos is not None else 0
        return self.low.nbytes + self.base.nbytes + pos + self.patch_val.nbytes

    def get(self, positions: np.ndarray) -> np.ndarray:
        """Values at ``positions`` (``int64`` in ``0..size-1``, not checked)."""
        p = positions.astype(np.int64, copy=False)
        if p.size == 0:
            return _EMPTY
        val = _line(p, self.top, self.size) + self.base_min
        val += self.base.get(p // _PATCH_BLOCK) + self.low.get(p)
        if self.patch_pos is not None:
            lt, le = self.patch_pos.equal_range(p)
            hit = le > lt
            if hit.any():
                val[hit] = self.patch_val.get(lt[hit])
        return val

    def to_numpy(self) -> np.ndarray:
        """All values, O(size)."""
        p = np.arange(self.size, dtype=np.int64)
        val = _line(p, self.top, self.size) + self.base_min
        val += np.repeat(self.base.to_numpy(), _PATCH_BLOCK)[: self.size] + self.low.to_numpy()
        if self.patch_pos is not None:
            val[self.patch_pos.to_numpy()] = self.patch_val.to_numpy()
        return val

    def __repr__(self) -> str:
        return (
            f"PatchedInts(size={self.size}, width={self.width}, patches={self.patches}, "
            f"nbytes={self.nbytes})"
        )
