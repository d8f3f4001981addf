"""Provenance tensors against an independent dense-matrix oracle."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tensprov_lab.store import (
    BlockTensor,
    CSRTensor,
    IdentityTensor,
    IndexTensor,
    MaskTensor,
    PackedInts,
    Tensor,
    make_tensor,
)

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
    if draw(st.booleans()):
        idx.sort()
    return idx, n_in


@SETTINGS
@given(case=index_case(), form=st.sampled_from([None, "packed", "sorted"]), data=st.data())
def test_index(case: tuple[list[int], int], form: str | None, data: st.DataObject) -> None:
    idx, n_in = case
    monotone = all(a <= b for a, b in zip(idx, idx[1:], strict=False))
    if form == "sorted" and not monotone:
        with pytest.raises(ValueError, match="non-decreasing"):
            IndexTensor.from_index(idx, n_in, form=form)
        return
    t = IndexTensor.from_index(idx, n_in, form=form)
    assert t.kind == "index"
    if form is not None:
        assert t.form == form
    assert np.array_equal(t.to_index(), np.asarray(idx, dtype=np.int64))
    check_against_dense(t, dense_from_index(idx, n_in), data)


def test_index_forward_builds_counted_inverse() -> None:
    t = IndexTensor.from_index([3, 1, 3, -1, 0], 4, form="packed")
    assert t.index_nbytes == 0
    assert np.array_equal(t.forward([3]), [0, 2])
    assert t.index_nbytes > 0
    s = IndexTensor.from_index([-1, 0, 0, 2], 4, form="sorted")
    assert np.array_equal(s.forward([0, 1, 2]), [1, 2, 3])
    assert s.index_nbytes == 0  # the offsets already answer forward


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


def test_csr_small_dtypes() -> None:
    t = CSRTensor.from_pairs([0, 0, 1], [10, 300, 7], n_out=2, n_in=1000)
    assert t.indices.dtype == np.uint16 and t.indptr.dtype == np.uint8
    assert t.nbytes == 3 * 2 + 3 * 1


# ---------------------------------------------------------------------------------------------
# PackedInts


@st.composite
def packed_case(draw: st.DrawFn) -> tuple[list[int], int]:
    width = draw(st.integers(0, 64))
    values = draw(st.lists(st.integers(0, 2**width - 1), max_size=100))
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


def test_make_tensor_sorted_index_form() -> None:
    t = make_tensor(np.repeat(np.arange(1000), 50), 1000)
    assert isinstance(t, IndexTensor) and t.form == "sorted"
    assert t.nbytes == 1002 * 2  # offsets up to 50_000 fit uint16


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
    assert isinstance(left, IndexTensor) and left.form == "sorted"
    assert left.nbytes <= (N_CUSTOMERS + 2) * 4  # per-customer offsets
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
