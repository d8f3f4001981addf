"""The functional index tensor: each output row comes from at most one input row (joins
side by side, sorts, explode...), in the cheapest of four exact codes."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from tensprov_lab.store._codes import (
    PackedInts,
    PatchedInts,
    _as_rows,
    _ef_layout,
    _EliasFano,
    _increasing,
    _uint_dtype,
)
from tensprov_lab.store._sets import dedup_sorted, unique
from tensprov_lab.store._tensors import (
    _EMPTY,
    Tensor,
    _check_size,
    _inverse_csr,
    _ranges,
    _sorted_unique,
)

__all__ = ["IndexTensor"]


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
    _lazy = ("_inv_indptr", "_inv_order", "_inv_packed")

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
        a = _as_rows(idx, "idx")
        if a.dtype == np.int32 and n_in >= np.iinfo(np.int32).max:
            a = a.astype(np.int64)  # idx + 1 is taken below
        n_out = len(a)
        if n_out and (int(a.min()) < -1 or int(a.max()) >= n_in):
            raise ValueError(f"idx values must be -1 or lie in 0..{n_in - 1}")
        if form not in (None, "packed", "sorted", "ef", "pfor"):
            raise ValueError(f"unknown index form {form!r}; use 'packed', 'sorted', 'ef' or 'pfor'")
        monotone = _increasing(a, strict=False)
        if form in ("sorted", "ef") and not monotone:
            raise ValueError(f"the {form!r} form needs a non-decreasing idx")
        width = n_in.bit_length()
        planned = None
        # one shifted copy for every form that stores idx + 1 (at 16M rows, 128 MB each)
        a1 = a + 1
        if form == "pfor":
            if not n_out:
                raise ValueError("the 'pfor' form needs at least one row")
            planned = PatchedInts.layout(a1, n_in, sample=False)
            if planned is None:
                raise ValueError(f"{n_out} rows of {n_in} are too many for the 'pfor' form")
        if form is None:
            nbytes = {"packed": (n_out * width + 63) // 64 * 8}
            if monotone:
                nbytes["sorted"] = (n_in + 2) * _uint_dtype(n_out).itemsize
                nbytes["ef"] = min(_ef_index_layouts(a, n_in).values())[0]
            else:
                planned = PatchedInts.layout(a1, n_in)
                if planned is not None:
                    nbytes["pfor"] = planned[0]
            form = min(nbytes, key=nbytes.__getitem__)  # dicts keep order: ties go first
        if form == "pfor":
            assert planned is not None
            patched = PatchedInts.from_plan(a1, n_in, planned[1])
            return cls(n_out, n_in, patched=patched, nnz=int(np.count_nonzero(a >= 0)))
        if form == "sorted":
            offsets = np.searchsorted(a1, np.arange(n_in + 2, dtype=np.int64))
            return cls(n_out, n_in, offsets=offsets.astype(_uint_dtype(n_out)))
        if form == "ef":
            return cls._build_ef(a.astype(np.int64, copy=False), n_in)
        values = PackedInts.from_array(a1, width=width)
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
