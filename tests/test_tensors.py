"""Provenance tensors against an independent dense-matrix oracle."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tensprov_lab.store import (
    AllTensor,
    BlockTensor,
    CrossTensor,
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
from tensprov_lab.store._codes import PatchedInts
from tests._tensor_oracle import (
    SETTINGS,
    check_against_dense,
    dense_from_index,
    dense_from_pairs,
    rows_strategy,
)

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


@SETTINGS
@given(n=st.integers(0, 6), m=st.integers(0, 6), data=st.data())
def test_cross(n: int, m: int, data: st.DataObject) -> None:
    """Both sides of an n x m cross product: pair i * m + j from left i and right j."""
    left, right = CrossTensor(n * m, n, max(m, 1)), CrossTensor(n * m, m, 1)
    dl, dr = np.zeros((n * m, n), dtype=bool), np.zeros((n * m, m), dtype=bool)
    for i in range(n):
        for j in range(m):
            dl[i * m + j, i] = dr[i * m + j, j] = True
    assert left.kind == right.kind == "cross" and left.nbytes == right.nbytes == 0
    check_against_dense(left, dl, data)
    check_against_dense(right, dr, data)


def test_cross_refuses_a_shape_that_is_no_product() -> None:
    with pytest.raises(ValueError, match="whole repeats"):
        CrossTensor(7, 2, stride=3)


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


def test_patched_ints_errors() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        PatchedInts.from_array([1, -1])
    with pytest.raises(ValueError, match="above top"):
        PatchedInts.from_array([1, 5], top=4)
    with pytest.raises(ValueError, match="at least one row"):
        IndexTensor.from_index([], 3, form="pfor")
    assert repr(PatchedInts.from_array([0, 1, 2])).startswith("PatchedInts(size=3")
