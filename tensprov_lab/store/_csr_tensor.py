"""The many-to-many tensor (aggregates, dedup): a canonical CSR matrix in the smallest
unsigned dtypes."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from tensprov_lab.store._codes import _as_int_array, _uint_dtype
from tensprov_lab.store._sets import unique
from tensprov_lab.store._tensors import _EMPTY, Tensor, _check_size, _inverse_csr, _ranges

__all__ = ["CSRTensor"]


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
    _lazy = ("_t_indptr", "_t_indices")

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

    @classmethod
    def from_groups(cls, group: ArrayLike, n_out: int) -> CSRTensor:
        """Build from the group of every input row: input row ``i`` is in output row
        ``group[i]`` (every input row in exactly one; ``n_in = len(group)``).

        A grouping's tensor without its pairs: the rows of each group come out of a
        stable sort by group, already in canonical order.  No ``(out, in)`` pair array
        is made, so a grouping of ``n`` records takes about ``n`` small ints of working
        memory where :meth:`from_pairs` takes several int64 arrays of ``n``.

        Raises
        ------
        ValueError
            If a group lies outside ``0..n_out-1``.

        Examples
        --------
        >>> t = CSRTensor.from_groups([1, 0, 1, 1], n_out=2)
        >>> t.backward([1]).tolist(), t.forward([1]).tolist()
        ([0, 2, 3], [0])
        """
        n_out = _check_size(n_out, "n_out")
        g = _as_int_array(group, "group")
        if g.size and (int(g.min()) < 0 or int(g.max()) >= n_out):
            raise ValueError(f"group must lie in 0..{n_out - 1}")
        counts = np.bincount(g, minlength=n_out)
        kind = _uint_dtype(max(len(g) - 1, 0))
        if len(g) < 2**31:
            # each group's rows ascending (the canonical order) by a counting sort:
            # scipy's COO -> CSR places entries row by row in their input order, in
            # linear time and arrays NumPy allocates (a stable argsort's radix buffer
            # is several times slower to fault in on a fresh machine)
            import scipy.sparse as sp

            rows = np.arange(len(g), dtype=np.int32)
            placed = sp.csr_matrix(
                (np.ones(len(g), dtype=np.int8), (g, rows)), shape=(n_out, len(g))
            ).indices
            # (non-negative int32: viewed as uint32 without a copy)
            same = kind == np.uint32 and placed.dtype == np.int32
            indices = placed.view(np.uint32) if same else placed.astype(kind)
        else:
            narrow = g.astype(_uint_dtype(max(n_out - 1, 0)), copy=False)
            indices = np.argsort(narrow, kind="stable").astype(kind, copy=False)
        indptr = np.concatenate([[0], np.cumsum(counts)]).astype(_uint_dtype(len(g)))
        return cls._stored(n_out, len(g), indptr, indices)

    @property
    def nnz(self) -> int:
        return len(self.indices)

    @property
    def nbytes(self) -> int:
        return int(self.indptr.nbytes + self.indices.nbytes)

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
    if n_out * max(n_in, 1) >= 2**62:
        order = np.lexsort((i, o))
        o, i = o[order], i[order]
        if o.size > 1:
            keep = np.concatenate([[True], (o[1:] != o[:-1]) | (i[1:] != i[:-1])])
            o, i = o[keep], i[keep]
    elif o.size > 1:
        key = o * n_in + i
        # (pairs already canonical, as a join's matches come, take one pass, not a sort)
        if not bool(np.all(key[1:] > key[:-1])):
            key = np.sort(key)
            key = key[np.concatenate([[True], key[1:] != key[:-1]])]
            o, i = (key // n_in, key % n_in) if n_in else (key, key)
    indptr = np.zeros(n_out + 1, dtype=np.int64)
    np.cumsum(np.bincount(o, minlength=n_out), out=indptr[1:])
    return indptr, i.astype(np.int64, copy=False)
