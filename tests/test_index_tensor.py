"""IndexTensor (a functional map: joins, sorts, explodes) in each of its forms against the
dense-matrix oracle, the form it picks, and its bytes at the scale of a 5M-order join."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tensprov_lab.store import (
    IndexTensor,
    make_tensor,
)
from tensprov_lab.store._codes import PatchedInts, _ef_layout, _EliasFano
from tests._tensor_oracle import (
    SETTINGS,
    check_against_dense,
    dense_from_index,
)


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
