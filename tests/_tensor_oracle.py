"""The dense-matrix oracle the tensor tests check every tensor form against."""

from __future__ import annotations

import numpy as np
from hypothesis import settings
from hypothesis import strategies as st

from tensprov_lab.store import (
    Tensor,
)

#: Hypothesis settings of the tensor properties
SETTINGS = settings(max_examples=150, deadline=None)


def dense_from_index(idx: list[int], n_in: int) -> np.ndarray:
    d = np.zeros((len(idx), n_in), dtype=bool)
    for o, i in enumerate(idx):
        if i >= 0:
            d[o, i] = True
    return d


def dense_from_pairs(pairs: list[tuple[int, int]], n_out: int, n_in: int) -> np.ndarray:
    d = np.zeros((n_out, n_in), dtype=bool)
    for o, i in pairs:
        d[o, i] = True
    return d


def rows_strategy(n: int) -> st.SearchStrategy[list[int]]:
    if n == 0:
        return st.just([])
    return st.lists(st.integers(0, n - 1), max_size=2 * n + 2)


def as_kind(rows: list[int], how: str) -> object:
    """The same rows in the different shapes callers pass."""
    if how == "list":
        return rows
    if how == "uint16":
        return np.asarray(rows, dtype=np.uint16)
    if how == "int32":
        return np.asarray(rows, dtype=np.int32)
    return np.asarray(rows, dtype=np.int64)


def check_against_dense(t: Tensor, d: np.ndarray, data: st.DataObject) -> None:
    n_out, n_in = d.shape
    assert t.shape == (n_out, n_in)
    assert t.nnz == int(d.sum())
    assert isinstance(t.nbytes, int) and t.nbytes >= 0
    assert t.index_nbytes >= 0
    assert type(t).__name__ in repr(t)

    s = t.to_sparse()
    assert s.shape == (n_out, n_in)
    assert s.dtype == bool
    assert np.array_equal(s.toarray(), d)

    how = data.draw(st.sampled_from(["list", "uint16", "int32", "int64"]))
    for _ in range(3):
        out_rows = data.draw(rows_strategy(n_out))
        want_back = np.flatnonzero(d[out_rows].any(axis=0)) if out_rows else np.empty(0)
        got_back = t.backward(as_kind(out_rows, how))
        assert got_back.dtype == np.int64
        assert np.array_equal(got_back, want_back)

        u = sorted(set(out_rows))
        po, pi = np.nonzero(d[u]) if u else (np.empty(0, int), np.empty(0, int))
        got_o, got_i = t.backward_pairs(as_kind(out_rows, how))
        assert got_o.dtype == np.int64 and got_i.dtype == np.int64
        assert np.array_equal(got_o, np.asarray(u, dtype=np.int64)[po])
        assert np.array_equal(got_i, pi)

        in_rows = data.draw(rows_strategy(n_in))
        want_fwd = np.flatnonzero(d[:, in_rows].any(axis=1)) if in_rows else np.empty(0)
        got_fwd = t.forward(as_kind(in_rows, how))
        assert got_fwd.dtype == np.int64
        assert np.array_equal(got_fwd, want_fwd)

    for single in range(min(n_out, 4)):
        assert np.array_equal(t.backward(single), np.flatnonzero(d[single]))
    for single in range(min(n_in, 4)):
        assert np.array_equal(t.forward([single]), np.flatnonzero(d[:, single]))
