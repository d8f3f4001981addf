"""Provenance tensors against an independent dense-matrix oracle."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tensprov_lab.store import (
    AllTensor,
    BlockTensor,
    CSRTensor,
    IdentityTensor,
    IndexTensor,
    MaskTensor,
    PackedInts,
    Tensor,
    make_tensor,
    tensor_from_flags,
    tensor_from_pairs,
)
from tensprov_lab.store._codes import PatchedInts, _ef_layout, _EliasFano

SETTINGS = settings(max_examples=150, deadline=None)


# ---------------------------------------------------------------------------------------------
# oracle helpers


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


# ---------------------------------------------------------------------------------------------
# per class


@SETTINGS
@given(n=st.integers(0, 30), data=st.data())
def test_identity(n: int, data: st.DataObject) -> None:
    t = IdentityTensor(n)
    assert t.kind == "identity" and t.nbytes == 0
    check_against_dense(t, np.eye(n, dtype=bool), data)


@SETTINGS
@given(n_in=st.integers(0, 20), offset=st.integers(0, 10), extra=st.integers(0, 10), data=st.data())
def test_block(n_in: int, offset: int, extra: int, data: st.DataObject) -> None:
    n_out = offset + n_in + extra
    t = BlockTensor(n_out, n_in, offset)
    d = np.zeros((n_out, n_in), dtype=bool)
    for i in range(n_in):
        d[offset + i, i] = True
    assert t.kind == "block" and t.nbytes == 0
    check_against_dense(t, d, data)


@st.composite
def kept_case(draw: st.DrawFn) -> tuple[list[int], int]:
    n_in = draw(st.integers(0, 200))
    kept = sorted(draw(st.sets(st.integers(0, max(n_in - 1, 0)), max_size=n_in)))
    return kept, n_in


@SETTINGS
@given(case=kept_case(), form=st.sampled_from([None, "ints", "bitset"]), data=st.data())
def test_mask(case: tuple[list[int], int], form: str | None, data: st.DataObject) -> None:
    kept, n_in = case
    t = MaskTensor.from_kept(kept, n_in, form=form)
    assert t.kind == "mask"
    if form is not None:
        assert t.form == form
    assert np.array_equal(t.kept(), kept)
    check_against_dense(t, dense_from_index(kept, n_in), data)


@SETTINGS
@given(flags=st.lists(st.booleans(), max_size=300), form=st.sampled_from([None, "ints", "bitset"]))
def test_mask_from_flags_is_the_mask_of_the_flagged_rows(
    flags: list[bool], form: str | None
) -> None:
    """Packed straight from the flags, the same tensor as from the kept rows: the same
    form, the same bytes, the same lineage (bits past the last row stay zero)."""
    f = np.array(flags, dtype=bool)
    got = MaskTensor.from_flags(f, form=form)
    want = MaskTensor.from_kept(np.flatnonzero(f), len(f), form=form)
    assert (got.form, got.shape, got.nbytes) == (want.form, want.shape, want.nbytes)
    assert np.array_equal(got.kept(), np.flatnonzero(f))
    assert np.array_equal(got.forward(np.arange(len(f))), want.forward(np.arange(len(f))))


@SETTINGS
@given(flags=st.lists(st.booleans(), max_size=300))
def test_tensor_from_flags_is_make_tensor_of_the_kept_rows(flags: list[bool]) -> None:
    """The same kind, form and bytes as make_tensor of the kept rows (identity when
    every row is kept, also none of none)."""
    f = np.array(flags, dtype=bool)
    got, want = tensor_from_flags(f), make_tensor(np.flatnonzero(f), len(f))
    assert (got.kind, got.shape, got.nbytes) == (want.kind, want.shape, want.nbytes)
    assert getattr(got, "form", None) == getattr(want, "form", None)
    assert np.array_equal(got.forward(np.arange(len(f))), want.forward(np.arange(len(f))))


def test_mask_from_flags_rejects_what_is_not_flags() -> None:
    with pytest.raises(ValueError, match="booleans"):
        MaskTensor.from_flags([0, 1, 1])
    with pytest.raises(ValueError, match="booleans"):
        MaskTensor.from_flags(np.ones((2, 2), dtype=bool))


def test_mask_picks_smaller_form() -> None:
    dense_keep = MaskTensor.from_kept(np.arange(0, 10_000, 2), 10_000)
    assert dense_keep.form == "bitset"
    assert dense_keep.nbytes == 10_000 // 64 * 8 + 8
    sparse_keep = MaskTensor.from_kept([5, 9_000], 10_000)
    assert sparse_keep.form == "ints"
    assert sparse_keep.nbytes == 2 * 2  # uint16 holds 0..9999


def test_mask_lazy_indexes_are_counted() -> None:
    t = MaskTensor.from_kept(np.arange(0, 100_000, 3), 100_000, form="bitset")
    assert t.index_nbytes == 0
    assert np.array_equal(t.forward([3, 4, 99_999]), [1, 33_333])
    after_forward = t.index_nbytes
    assert 0 < after_forward < t.nbytes  # the rank directory is smaller than the bitset
    assert np.array_equal(t.backward([33_333]), [99_999])
    assert t.index_nbytes > after_forward


@st.composite
def index_case(draw: st.DrawFn) -> tuple[list[int], int]:
    n_in = draw(st.integers(0, 40))
    idx = draw(st.lists(st.integers(-1, n_in - 1), max_size=60))
    shape = draw(st.sampled_from(["random", "sorted", "runs", "line"]))
    if shape == "line" and n_in:
        # near the diagonal with a few strays: the "pfor" form's case
        idx = [min(o * n_in // 60 + draw(st.integers(0, 2)), n_in - 1) for o in range(60)]
        for o in draw(st.lists(st.integers(0, 59), max_size=4)):
            idx[o] = draw(st.integers(-1, n_in - 1))
    elif shape == "runs" and n_in:
        # a join's left side: a few -1 (outer join) first, then groups of equal input rows
        lens = draw(st.lists(st.integers(0, 6), min_size=n_in, max_size=n_in))
        idx = [-1] * draw(st.integers(0, 3)) + [i for i, k in enumerate(lens) for _ in range(k)]
    elif shape != "random":
        idx.sort()
    return idx, n_in


@SETTINGS
@given(
    case=index_case(),
    form=st.sampled_from([None, "packed", "sorted", "ef", "pfor"]),
    data=st.data(),
)
def test_index(case: tuple[list[int], int], form: str | None, data: st.DataObject) -> None:
    idx, n_in = case
    monotone = all(a <= b for a, b in zip(idx, idx[1:], strict=False))
    if form in ("sorted", "ef") and not monotone:
        with pytest.raises(ValueError, match="non-decreasing"):
            IndexTensor.from_index(idx, n_in, form=form)
        return
    if form == "pfor" and not idx:
        with pytest.raises(ValueError, match="at least one row"):
            IndexTensor.from_index(idx, n_in, form=form)
        return
    t = IndexTensor.from_index(idx, n_in, form=form)
    assert t.kind == "index"
    if form is not None:
        assert t.form == form
    assert np.array_equal(t.to_index(), np.asarray(idx, dtype=np.int64))
    d = dense_from_index(idx, n_in)
    check_against_dense(t, d, data)
    if form == "ef":
        # from_index codes the smaller sequence: check the other one on the same case too
        other = "offsets" if t.ef_over == "values" else "values"
        t2 = IndexTensor._build_ef(np.asarray(idx, dtype=np.int64), n_in, over=other)
        assert t2.ef_over == other and t2.nbytes >= t.nbytes and t2.index_nbytes == 0
        check_against_dense(t2, d, data)


def test_index_picks_smallest_form() -> None:
    cases = [
        ([2, 0, 1] * 20, 3),
        (sorted([0, 0, 0, 1, 1, 2] * 10), 3),
        (np.repeat(np.arange(1000), 50), 1000),  # many rows per input row
        (np.arange(0, 20_000, 40), 20_000),  # few output rows, spread out
        (np.repeat(np.arange(5000), np.arange(5000) % 3), 5000),  # a join's left side
        ([], 0),
        ([-1], 0),
        ([-1, -1, 0], 1),
        (np.arange(3000) ^ 1, 3000),  # a near-sorted permutation
    ]
    chosen = []
    for idx, n_in in cases:
        t = IndexTensor.from_index(idx, n_in)
        monotone = bool(np.all(np.diff(np.asarray(idx, dtype=np.int64)) >= 0))
        forms = ("packed", "sorted", "ef") if monotone else ("packed", "pfor")
        sizes = {f: IndexTensor.from_index(idx, n_in, form=f).nbytes for f in forms}
        assert t.nbytes == min(sizes.values()) == sizes[t.form], (idx, n_in, t, sizes)
        chosen.append(t.form)
    assert set(chosen) == {"packed", "sorted", "ef", "pfor"}
    assert IndexTensor.from_index(np.repeat(np.arange(1000), 50), 1000).form == "ef"


@st.composite
def monotone_index_case(draw: st.DrawFn) -> tuple[np.ndarray, int]:
    """Larger sorted idx arrays, made by numpy from a few drawn parameters."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    n_in = draw(st.sampled_from([1, 2, 7, 300, 5_000, 40_000, 1 << 16]))
    n_out = draw(st.sampled_from([0, 1, 5, 200, 4_000, 30_000]))
    shape = draw(st.sampled_from(["uniform", "runs", "gaps", "top", "one"]))
    if shape == "uniform":
        idx = rng.integers(0, n_in, n_out)
    elif shape == "runs":  # a Zipf tail: long runs of one input row, many input rows unused
        groups = rng.choice(n_in, size=min(n_in, max(n_out // 20, 1)), replace=False)
        idx = rng.choice(groups, n_out, p=rng.dirichlet(np.full(len(groups), 0.2)))
    elif shape == "gaps":  # clusters far apart
        idx = np.minimum(
            rng.integers(0, 4, n_out) * (n_in // 4) + rng.integers(0, 3, n_out), n_in - 1
        )
    elif shape == "top":  # values near n_in
        idx = n_in - 1 - np.minimum(rng.geometric(0.3, n_out) - 1, n_in - 1)
    else:
        idx = np.full(n_out, rng.integers(0, n_in))
    idx = np.sort(idx.astype(np.int64))
    missing = draw(st.sampled_from([0, 0, 1, 50]))
    idx[: min(missing, n_out)] = -1  # an outer join's missing side comes first
    return idx, n_in


def _oracle_forward(idx: np.ndarray, rows: np.ndarray) -> np.ndarray:
    u = np.unique(rows)
    lo, hi = np.searchsorted(idx, u, "left"), np.searchsorted(idx, u, "right")
    return np.concatenate([np.arange(a, b) for a, b in zip(lo, hi)] + [np.empty(0, np.int64)])


@settings(max_examples=60, deadline=None)
@given(case=monotone_index_case(), over=st.sampled_from(["values", "offsets"]), data=st.data())
def test_ef_index_against_numpy(
    case: tuple[np.ndarray, int], over: str, data: st.DataObject
) -> None:
    idx, n_in = case
    n_out = len(idx)
    t = IndexTensor._build_ef(idx, n_in, over=over)
    assert t.form == "ef" and t.ef_over == over
    assert t.nnz == int(np.count_nonzero(idx >= 0))
    assert np.array_equal(t.to_index(), idx)
    # the size from_index compares is exactly the size built
    m, last = (n_out, int(idx[-1]) + 1 if n_out else 0) if over == "values" else (n_in + 2, n_out)
    assert t.nbytes == _ef_layout(m, last)[0]
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    for k in (1, 2, 3, 5, 64, 700):  # a few rows take the Python-int path, more take numpy
        if n_out:
            rows = rng.integers(0, n_out, k)
            got = t.backward(rows)
            v = idx[np.unique(rows)]
            assert np.array_equal(got, np.unique(v[v >= 0]))
            po, pi = t.backward_pairs(rows)
            keep = v >= 0
            assert np.array_equal(po, np.unique(rows)[keep]) and np.array_equal(pi, v[keep])
        rows = rng.integers(0, n_in, k)
        rows[:1] = data.draw(st.sampled_from([0, n_in - 1, int(rows[0])]))
        assert np.array_equal(t.forward(rows), _oracle_forward(idx, rows))
    assert t.index_nbytes == 0  # the code answers forward by itself


@settings(max_examples=60, deadline=None)
@given(case=monotone_index_case(), low_bits=st.integers(0, 17), data=st.data())
def test_elias_fano_against_searchsorted(
    case: tuple[np.ndarray, int], low_bits: int, data: st.DataObject
) -> None:
    x = case[0] + 1
    last = int(x[-1]) if len(x) else 0
    low_bits = min(low_bits, last.bit_length())  # any split is a valid code
    ef = _EliasFano.from_sorted(x, low_bits)
    assert ef.low_bits == low_bits and ef.size == len(x)
    assert np.array_equal(ef.to_numpy(), x)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    for k in (1, 4, 300):
        if len(x):
            p = rng.integers(0, len(x), k)
            assert np.array_equal(ef.get(p), x[p])
        v = np.concatenate([rng.integers(0, last + 3, k), [0, last, last + 1, max(last - 1, 0)]])
        for vv in (v, v[:1]):
            lt, le = ef.equal_range(vv)
            assert np.array_equal(lt, np.searchsorted(x, vv, "left"))
            assert np.array_equal(le, np.searchsorted(x, vv, "right"))


@pytest.mark.parametrize("n_high", [63, 64, 65, 2047, 2048, 2049, 4096, 4097, 6200])
@pytest.mark.parametrize("share", [0.05, 0.5, 0.95])
def test_elias_fano_block_edges(n_high: int, share: float) -> None:
    # with no low bits, size + last + 1 = n_high: a bitvector ending on, before or after a
    # word / 2048-bit block boundary; every position and every value is checked
    size = max(int(n_high * share), 1)
    last = n_high - 1 - size
    rng = np.random.default_rng(n_high)
    x = np.sort(np.concatenate([rng.integers(0, last + 1, size - 1), [last]]))
    ef = _EliasFano.from_sorted(x, 0)
    assert ef.high.size == (n_high + 63) // 64
    assert ef.rank1.size == (ef.high.size - 1) // 32 == ef.rank0.size
    assert np.array_equal(ef.get(np.arange(size)), x)
    v = np.arange(last + 3)
    lt, le = ef.equal_range(v)
    assert np.array_equal(lt, np.searchsorted(x, v, "left"))
    assert np.array_equal(le, np.searchsorted(x, v, "right"))
    for one in (0, size - 1):
        assert ef.get(np.array([one]))[0] == x[one]
    for one in (0, last, last + 1):
        lt1, le1 = ef.equal_range(np.array([one]))
        assert (lt1[0], le1[0]) == (lt[one], le[one])


def sf20_like_left(n_customers: int, n_out: int, seed: int = 0) -> np.ndarray:
    """A customers x accounts join's left idx: Zipf counts (<= 500), many zero, sum n_out."""
    rng = np.random.default_rng(seed)
    counts = np.zeros(n_customers, dtype=np.int64)
    holders = rng.random(n_customers) < n_out / n_customers / 1.95
    counts[holders] = np.minimum(rng.zipf(2.5, int(holders.sum())), 500)
    diff = n_out - int(counts.sum())
    if diff > 0:
        np.add.at(counts, rng.integers(0, n_customers, diff), 1)
    else:
        over = np.repeat(np.arange(n_customers), counts)
        np.subtract.at(counts, rng.choice(over, -diff, replace=False), 1)
    assert int(counts.sum()) == n_out and int(counts.max()) <= 501
    return np.repeat(np.arange(n_customers), counts)


def test_join_left_side_picks_elias_fano() -> None:
    # SF20 is 2,411,006 customers x 2,601,648 accounts; the same ratio at 1/12 the size
    n_c = 200_000
    n_out = round(n_c * 2_601_648 / 2_411_006)
    left = sf20_like_left(n_c, n_out)
    t = make_tensor(left, n_c)
    assert isinstance(t, IndexTensor) and t.form == "ef"
    assert t.nbytes * 8 / n_out < 2.5
    assert t.nbytes * 8 < IndexTensor.from_index(left, n_c, form="packed").nbytes
    rng = np.random.default_rng(5)
    rows = rng.integers(0, n_out, 100)
    assert np.array_equal(t.backward(rows), np.unique(left[rows]))
    cust = rng.integers(0, n_c, 100)
    assert np.array_equal(t.forward(cust), _oracle_forward(left, cust))
    assert np.array_equal(t.to_index(), left)


def test_index_forward_builds_counted_inverse() -> None:
    t = IndexTensor.from_index([3, 1, 3, -1, 0], 4, form="packed")
    assert t.index_nbytes == 0
    assert np.array_equal(t.forward([3]), [0, 2])
    assert t.index_nbytes > 0
    s = IndexTensor.from_index([-1, 0, 0, 2], 4, form="sorted")
    assert np.array_equal(s.forward([0, 1, 2]), [1, 2, 3])
    assert s.index_nbytes == 0  # the offsets already answer forward
    e = IndexTensor.from_index([-1, 0, 0, 2], 4, form="ef")
    assert np.array_equal(e.forward([0, 1, 2]), [1, 2, 3])
    assert e.index_nbytes == 0  # so does the Elias-Fano code


@st.composite
def pairs_case(draw: st.DrawFn) -> tuple[list[tuple[int, int]], int, int]:
    n_out = draw(st.integers(0, 20))
    n_in = draw(st.integers(0, 20))
    if n_out == 0 or n_in == 0:
        return [], n_out, n_in
    pairs = draw(
        st.lists(st.tuples(st.integers(0, n_out - 1), st.integers(0, n_in - 1)), max_size=80)
    )
    return pairs, n_out, n_in


@SETTINGS
@given(case=pairs_case(), data=st.data())
def test_csr_from_pairs(case: tuple[list[tuple[int, int]], int, int], data: st.DataObject) -> None:
    pairs, n_out, n_in = case
    o = [p[0] for p in pairs]
    i = [p[1] for p in pairs]
    t = CSRTensor.from_pairs(o, i, n_out, n_in)
    assert t.kind == "csr"
    d = dense_from_pairs(pairs, n_out, n_in)
    check_against_dense(t, d, data)
    if t.nnz:
        t.forward([0])
        assert t.index_nbytes > 0


@SETTINGS
@given(case=pairs_case(), full=st.booleans(), data=st.data())
def test_tensor_from_pairs_picks_all_only_when_full(
    case: tuple[list[tuple[int, int]], int, int], full: bool, data: st.DataObject
) -> None:
    pairs, n_out, n_in = case
    if full:  # every pair, in a scrambled order and repeated: an ML fit, a global aggregate
        pairs = [(o, i) for i in range(n_in) for o in range(n_out)] * 2
    t = tensor_from_pairs([p[0] for p in pairs], [p[1] for p in pairs], n_out, n_in)
    d = dense_from_pairs(pairs, n_out, n_in)
    check_against_dense(t, d, data)
    assert (t.kind == "all") == (d.size > 0 and bool(d.all()))
    if t.kind == "all":
        assert t.nbytes == 0


@SETTINGS
@given(n_out=st.integers(0, 6), n_in=st.integers(0, 12), data=st.data())
def test_all(n_out: int, n_in: int, data: st.DataObject) -> None:
    check_against_dense(AllTensor(n_out, n_in), np.ones((n_out, n_in), dtype=bool), data)


@SETTINGS
@given(case=pairs_case(), data=st.data())
def test_csr_constructor_canonicalises(
    case: tuple[list[tuple[int, int]], int, int], data: st.DataObject
) -> None:
    pairs, n_out, n_in = case
    # rows in order, but indices within a row unsorted and repeated, as a raw builder may give
    by_row: list[list[int]] = [[] for _ in range(n_out)]
    for o, i in pairs:
        by_row[o].append(i)
    indptr = np.concatenate([[0], np.cumsum([len(r) for r in by_row])]).astype(np.int64)
    indices = [i for r in by_row for i in r]
    t = CSRTensor(n_out, n_in, indptr, np.asarray(indices, dtype=np.int64))
    check_against_dense(t, dense_from_pairs(pairs, n_out, n_in), data)


@SETTINGS
@given(n_out=st.integers(1, 300), n_in=st.integers(0, 60), data=st.data())
def test_csr_from_groups_is_the_grouping_of_its_pairs(
    n_out: int, n_in: int, data: st.DataObject
) -> None:
    # every input row in one group (n_out above 256 takes the 16-bit sort)
    group = data.draw(st.lists(st.integers(0, n_out - 1), min_size=n_in, max_size=n_in))
    t = CSRTensor.from_groups(group, n_out)
    pairs = [(g, i) for i, g in enumerate(group)]
    check_against_dense(t, dense_from_pairs(pairs, n_out, n_in), data)
    ref = CSRTensor.from_pairs(group, list(range(n_in)), n_out, n_in)
    assert t.indptr.tolist() == ref.indptr.tolist() and t.indptr.dtype == ref.indptr.dtype
    assert t.indices.tolist() == ref.indices.tolist() and t.indices.dtype == ref.indices.dtype


def test_csr_from_groups_of_many_rows_is_the_grouping_of_its_pairs() -> None:
    # past 65,536 rows the row numbers are 32-bit
    group = np.random.default_rng(5).integers(0, 300, 70_000)
    t = CSRTensor.from_groups(group, 300)
    ref = CSRTensor.from_pairs(group, np.arange(70_000), 300, 70_000)
    assert t.indices.dtype == ref.indices.dtype == np.uint32
    assert np.array_equal(t.indptr, ref.indptr) and np.array_equal(t.indices, ref.indices)


def test_csr_from_groups_rejects_a_group_out_of_range() -> None:
    with pytest.raises(ValueError, match="group must lie in 0..1"):
        CSRTensor.from_groups([0, 2], n_out=2)
    with pytest.raises(ValueError, match="group must lie"):
        CSRTensor.from_groups([-1], n_out=2)


def test_csr_small_dtypes() -> None:
    t = CSRTensor.from_pairs([0, 0, 1], [10, 300, 7], n_out=2, n_in=1000)
    assert t.indices.dtype == np.uint16 and t.indptr.dtype == np.uint8
    assert t.nbytes == 3 * 2 + 3 * 1


# ---------------------------------------------------------------------------------------------
# PackedInts


@st.composite
def packed_case(draw: st.DrawFn) -> tuple[list[int], int]:
    width = draw(st.integers(0, 64))
    # past 128 values: the packer works in blocks of 64 values
    values = draw(st.lists(st.integers(0, 2**width - 1), max_size=300))
    return values, width


@SETTINGS
@given(case=packed_case(), data=st.data())
def test_packed_ints(case: tuple[list[int], int], data: st.DataObject) -> None:
    values, width = case
    p = PackedInts.from_array(np.asarray(values, dtype=np.uint64), width=width)
    assert len(p) == len(values)
    assert p.nbytes == (len(values) * width + 63) // 64 * 8
    want = np.asarray(values, dtype=np.uint64)
    assert np.array_equal(p.to_numpy().astype(np.uint64), want)
    pos = data.draw(rows_strategy(len(values)))
    assert np.array_equal(p.get(pos).astype(np.uint64), want[pos])
    # the layout (value i at bit i * width, little-endian words), from one Python integer
    bits = sum(v << (i * width) for i, v in enumerate(values))
    words = [(bits >> (64 * k)) & (2**64 - 1) for k in range(len(p.words))]
    assert p.words.tolist() == words


def test_packed_ints_errors() -> None:
    with pytest.raises(ValueError, match="does not fit"):
        PackedInts.from_array([8], width=3)
    with pytest.raises(ValueError, match="non-negative"):
        PackedInts.from_array([-1, 2])
    with pytest.raises(IndexError, match="0..2"):
        PackedInts.from_array([1, 2, 3]).get([3])


# ---------------------------------------------------------------------------------------------
# make_tensor


@pytest.mark.parametrize(
    ("idx", "n_in", "kind"),
    [
        ([0, 1, 2, 3], 4, "identity"),
        ([], 0, "identity"),
        ([0, 1, 2, -1, -1], 3, "block"),
        ([-1, -1, 0, 1], 2, "block"),
        ([-1, -1], 0, "block"),
        ([0, 2, 3], 4, "mask"),
        ([1, 2, 3], 4, "mask"),
        ([], 3, "mask"),
        ([1, 0, 2], 3, "index"),  # permutation
        ([0, 0, 1, 1, 2], 3, "index"),  # join left side with repeats
        ([-1, 0, 1], 3, "index"),  # outer join missing side, not every input row present
        ([0, 1, -1, 2], 3, "index"),  # all rows present but not contiguous
    ],
)
def test_make_tensor_kind(idx: list[int], n_in: int, kind: str) -> None:
    t = make_tensor(np.asarray(idx, dtype=np.int64), n_in)
    assert t.kind == kind
    assert np.array_equal(t.to_sparse().toarray(), dense_from_index(idx, n_in))


def test_make_tensor_monotone_index_forms() -> None:
    idx = np.repeat(np.arange(1000), 50)
    t = make_tensor(idx, 1000)
    assert isinstance(t, IndexTensor) and t.form == "ef" and t.ef_over == "offsets"
    # offsets 50 rows apart: 5 low bits + ~2.6 high bits each, vs 16 bits as uint16
    assert t.nbytes <= 1002 * 8 / 8
    assert IndexTensor.from_index(idx, 1000, form="sorted").nbytes == 1002 * 2


@st.composite
def functional_case(draw: st.DrawFn) -> tuple[list[int], int]:
    shape = draw(st.sampled_from(["random", "sorted", "identity", "block", "mask"]))
    n_in = draw(st.integers(0, 30))
    if shape == "identity":
        return list(range(n_in)), n_in
    if shape == "block":
        before = draw(st.integers(0, 5))
        after = draw(st.integers(0, 5))
        return [-1] * before + list(range(n_in)) + [-1] * after, n_in
    if shape == "mask":
        return kept_from(draw, n_in), n_in
    idx = draw(st.lists(st.integers(-1, n_in - 1), max_size=40))
    return (sorted(idx) if shape == "sorted" else idx), n_in


def kept_from(draw: st.DrawFn, n_in: int) -> list[int]:
    return sorted(draw(st.sets(st.integers(0, max(n_in - 1, 0)), max_size=n_in)))


@SETTINGS
@given(case=functional_case(), data=st.data())
def test_make_tensor_is_exact(case: tuple[list[int], int], data: st.DataObject) -> None:
    idx, n_in = case
    t = make_tensor(np.asarray(idx, dtype=np.int64), n_in)
    check_against_dense(t, dense_from_index(idx, n_in), data)


@SETTINGS
@given(
    case=functional_case(),
    form=st.sampled_from([None, "packed", "sorted", "ef", "pfor"]),
    data=st.data(),
)
def test_int32_rows_give_the_tensors_of_int64_rows(
    case: tuple[list[int], int], form: str | None, data: st.DataObject
) -> None:
    """Capture hands row numbers over as int32 below 2**31 rows (half the memory): the
    tensors must be the very ones int64 rows give, in kind, form and bytes."""
    idx, n_in = case
    wide, narrow = np.asarray(idx, dtype=np.int64), np.asarray(idx, dtype=np.int32)
    a, b = make_tensor(wide, n_in), make_tensor(narrow, n_in)

    def shape(t: Any) -> tuple[str, str | None, int]:
        return t.kind, getattr(t, "form", None), t.nbytes

    assert shape(a) == shape(b)
    check_against_dense(b, dense_from_index(idx, n_in), data)
    try:
        c = IndexTensor.from_index(wide, n_in, form=form)
    except ValueError as exc:  # a form this idx cannot take: int32 says the same
        with pytest.raises(ValueError, match=str(exc)[:20]):
            IndexTensor.from_index(narrow, n_in, form=form)
        return
    d = IndexTensor.from_index(narrow, n_in, form=form)
    assert (c.form, c.nbytes) == (d.form, d.nbytes)
    assert np.array_equal(c.to_index(), d.to_index())


def test_order_is_checked_past_the_first_values() -> None:
    """An idx in order over its first thousands of values and not at its end is not
    taken for a mask (or an "ef" index): the whole of it is compared."""
    idx = np.arange(10_000)
    idx[[9_000, 9_001]] = idx[[9_001, 9_000]]
    t = make_tensor(idx, 10_000)
    assert t.kind == "index" and t.form not in ("sorted", "ef")
    assert np.array_equal(t.backward([9_000]), [9_001])
    with pytest.raises(ValueError, match="non-decreasing"):
        IndexTensor.from_index(idx, 10_000, form="ef")


def test_packing_int32_values_is_packing_their_int64_selves() -> None:
    rng = np.random.default_rng(3)
    for n in (0, 1, 63, 64, 65, 700_001):
        v = rng.integers(0, 1 << 20, n)
        wide, narrow = PackedInts.from_array(v), PackedInts.from_array(v.astype(np.int32))
        assert wide.width == narrow.width and np.array_equal(wide.words, narrow.words)
        # past one slice of blocks, with a last block of fewer than 64 values
        assert np.array_equal(narrow.to_numpy(), v)
        ends = [0, n - 1] if n else []
        assert np.array_equal(narrow.get(ends), v[ends])


# ---------------------------------------------------------------------------------------------
# bytes budget: a join of 5M orders with 100k customers, output ordered by (left, right)

N_ORDERS = 5_000_000
N_CUSTOMERS = 100_000


def test_join_bytes_budget_orders_left() -> None:
    rng = np.random.default_rng(0)
    customer = rng.integers(0, N_CUSTOMERS, N_ORDERS)
    # inner join dropping the 10% of orders whose customer is unknown
    matched = np.flatnonzero(rng.random(N_ORDERS) < 0.9)
    left = make_tensor(matched, N_ORDERS)
    right = make_tensor(customer[matched], N_CUSTOMERS)
    n_out = len(matched)
    assert left.kind == "mask" and right.kind == "index"
    assert left.nbytes <= N_ORDERS / 8 + 8  # one bit per left input row
    assert right.nbytes <= n_out * 17 / 8 + 8  # 17 bits per output row
    assert (left.nbytes + right.nbytes) / n_out <= 5
    # every order matched: the left side is free
    left_all = make_tensor(np.arange(N_ORDERS), N_ORDERS)
    assert left_all.kind == "identity" and left_all.nbytes == 0


def test_join_bytes_budget_customers_left() -> None:
    rng = np.random.default_rng(1)
    customer = rng.integers(0, N_CUSTOMERS, N_ORDERS)
    order = np.argsort(customer, kind="stable")  # output ordered by (customer, order)
    left = make_tensor(customer[order], N_CUSTOMERS)
    right = make_tensor(order, N_ORDERS)
    assert isinstance(left, IndexTensor) and left.form == "ef"
    assert left.nbytes <= (N_CUSTOMERS + 2) * 8 / 8 + 2048  # ~8 bits per customer, not 32
    assert (left.nbytes + right.nbytes) / N_ORDERS <= 5
    # spot-check the big tensors against the arrays they were built from
    for o in (0, 123_456, N_ORDERS - 1):
        assert np.array_equal(left.backward([o]), [customer[order[o]]])
        assert np.array_equal(right.backward([o]), [order[o]])


# ---------------------------------------------------------------------------------------------
# bad input


@pytest.mark.parametrize(
    "t",
    [
        IdentityTensor(3),
        BlockTensor(5, 3, 1),
        MaskTensor.from_kept([0, 2], 4, form="ints"),
        MaskTensor.from_kept([0, 2], 4, form="bitset"),
        IndexTensor.from_index([2, 0], 3, form="packed"),
        IndexTensor.from_index([0, 2], 3, form="sorted"),
        IndexTensor.from_index([-1, 0, 2], 3, form="ef"),
        IndexTensor._build_ef(np.array([-1, 0, 2]), 3, over="offsets"),
        IndexTensor.from_index([2, -1, 0], 3, form="pfor"),
        CSRTensor.from_pairs([0, 1], [1, 2], 2, 3),
    ],
    ids=lambda t: repr(t),
)
def test_row_range_errors(t: Tensor) -> None:
    n_out, n_in = t.shape
    with pytest.raises(IndexError, match=rf"output row {n_out} out of range.*0\.\.{n_out - 1}"):
        t.backward([0, n_out])
    with pytest.raises(IndexError, match="output row -1 out of range"):
        t.backward_pairs([-1])
    with pytest.raises(IndexError, match=rf"input row {n_in} out of range.*0\.\.{n_in - 1}"):
        t.forward(np.asarray([n_in], dtype=np.uint8))
    with pytest.raises(TypeError, match="integers"):
        t.backward([0.5])
    with pytest.raises(ValueError, match="1-D"):
        t.forward([[0]])
    assert t.backward([]).dtype == np.int64 and t.backward([]).size == 0
    assert t.forward(np.empty(0, dtype=np.uint32)).size == 0


def test_empty_tensor_rejects_every_row() -> None:
    with pytest.raises(IndexError, match="none"):
        IdentityTensor(0).backward([0])


def test_construction_errors() -> None:
    with pytest.raises(ValueError, match="strictly increasing"):
        MaskTensor.from_kept([2, 1], 4)
    with pytest.raises(ValueError, match="strictly increasing"):
        MaskTensor.from_kept([1, 1], 4)
    with pytest.raises(ValueError, match="0..3"):
        MaskTensor.from_kept([4], 4)
    with pytest.raises(ValueError, match="form"):
        MaskTensor.from_kept([1], 4, form="dense")
    with pytest.raises(ValueError, match="-1 or lie in 0..2"):
        IndexTensor.from_index([3], 3)
    with pytest.raises(ValueError, match="unknown index form"):
        IndexTensor.from_index([0], 3, form="elias")
    with pytest.raises(ValueError, match="'ef' form needs a non-decreasing"):
        IndexTensor.from_index([2, 1], 3, form="ef")
    with pytest.raises(ValueError, match="-1 or lie in 0..2"):
        make_tensor([-2], 3)
    with pytest.raises(TypeError, match="integers"):
        make_tensor(np.array([0.0, 1.0]), 2)
    with pytest.raises(ValueError, match="does not fit"):
        BlockTensor(4, 3, 2)
    with pytest.raises(ValueError, match="indptr"):
        CSRTensor(2, 2, [0, 2, 1], [0, 1])
    with pytest.raises(ValueError, match="indptr needs 3"):
        CSRTensor(2, 2, [0, 1], [0])
    with pytest.raises(ValueError, match="indices must lie"):
        CSRTensor(1, 2, [0, 1], [2])
    with pytest.raises(ValueError, match="2 output rows but 1 input rows"):
        CSRTensor.from_pairs([0, 1], [0], 2, 2)
    with pytest.raises(ValueError, match="n_out must be >= 0"):
        CSRTensor.from_pairs([], [], -1, 2)


def test_index_injective_forward_uses_packed_inverse() -> None:
    rng = np.random.default_rng(3)
    perm = rng.permutation(10_000)
    t = IndexTensor.from_index(perm, 10_000, form="packed")
    assert np.array_equal(t.forward([perm[7], perm[3]]), [3, 7])
    assert 0 < t.index_nbytes <= t.nbytes + 8  # one packed output row per input row
    inv = np.argsort(perm)
    rows = rng.integers(0, 10_000, 50)
    assert np.array_equal(t.forward(rows), np.unique(inv[rows]))


@st.composite
def near_line_case(draw: st.DrawFn) -> tuple[np.ndarray, int]:
    """Larger idx arrays near the line ``o * n_in / n_out``, with strays, made by numpy."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    n_out = draw(st.sampled_from([1, 2, 127, 128, 129, 1_000, 20_000]))
    n_in = draw(st.sampled_from([1, 3, 130, 5_000, 40_000, 1 << 17]))
    noise = draw(st.sampled_from([0, 1, 5, 300]))
    line = np.arange(n_out, dtype=np.int64) * n_in // n_out
    idx = np.clip(line + rng.integers(-noise, noise + 1, n_out), 0, n_in - 1)
    strays = rng.random(n_out) < draw(st.sampled_from([0.0, 0.001, 0.07, 0.5, 1.0]))
    idx[strays] = rng.integers(-1, n_in, int(strays.sum()))
    if draw(st.booleans()):
        idx[rng.random(n_out) < 0.05] = -1  # an outer join's missing rows
    return idx, n_in


@settings(max_examples=80, deadline=None)
@given(case=near_line_case(), data=st.data())
def test_pfor_index_against_numpy(case: tuple[np.ndarray, int], data: st.DataObject) -> None:
    idx, n_in = case
    n_out = len(idx)
    t = IndexTensor.from_index(idx, n_in, form="pfor")
    assert t.form == "pfor" and t.nnz == int(np.count_nonzero(idx >= 0))
    assert np.array_equal(t.to_index(), idx)
    patched = PatchedInts.from_array(idx + 1, top=n_in)
    assert patched.nbytes == t.nbytes  # the size from_index compares is the size built
    assert np.array_equal(patched.to_numpy(), idx + 1)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    for k in (1, 3, 200):
        rows = rng.integers(0, n_out, k)
        v = idx[np.unique(rows)]
        assert np.array_equal(t.backward(rows), np.unique(v[v >= 0]))
        po, pi = t.backward_pairs(rows)
        keep = v >= 0
        assert np.array_equal(po, np.unique(rows)[keep]) and np.array_equal(pi, v[keep])
        rows = rng.integers(0, n_in, k)
        assert np.array_equal(t.forward(rows), np.flatnonzero(np.isin(idx, rows)))
    # without a forced form the smaller of "packed" and "pfor" is kept
    chosen = IndexTensor.from_index(idx, n_in)
    monotone = bool(np.all(idx[1:] >= idx[:-1]))
    if not monotone:
        packed = IndexTensor.from_index(idx, n_in, form="packed").nbytes
        assert chosen.nbytes <= packed
        if chosen.form == "pfor":
            assert chosen.nbytes == t.nbytes < packed
        elif t.nbytes < 0.9 * packed and n_out <= 2 * 128 * 256:
            raise AssertionError(f"pfor ({t.nbytes} B) was smaller than packed ({packed} B)")


def test_pfor_shrinks_a_time_ordered_join_and_not_a_random_one() -> None:
    rng = np.random.default_rng(5)
    n = 200_000
    # accounts in time order: each customer's first account arrives with the customer,
    # 8% are later accounts of an earlier customer (the strays)
    later = rng.random(n) < 0.08
    owner = np.cumsum(~later) - 1
    owner[later] = rng.integers(0, np.maximum(owner[later], 1))
    right = np.lexsort((np.arange(n), owner))  # join output ordered by (customer, account)
    t = make_tensor(right, n)
    assert isinstance(t, IndexTensor) and t.form == "pfor"
    packed = IndexTensor.from_index(right, n, form="packed").nbytes
    assert t.nbytes < packed / 2.5
    assert np.array_equal(t.to_index(), right)
    random = make_tensor(rng.permutation(n), n)
    assert isinstance(random, IndexTensor) and random.form == "packed"


def test_patched_ints_errors() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        PatchedInts.from_array([1, -1])
    with pytest.raises(ValueError, match="above top"):
        PatchedInts.from_array([1, 5], top=4)
    with pytest.raises(ValueError, match="at least one row"):
        IndexTensor.from_index([], 3, form="pfor")
    assert repr(PatchedInts.from_array([0, 1, 2])).startswith("PatchedInts(size=3")
