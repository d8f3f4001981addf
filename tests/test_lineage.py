"""Lineage over random provenance DAGs against a dense-matrix, path-enumerating oracle."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tensprov_lab.query import LineageResult, backward, forward, mapping
from tensprov_lab.store import (
    BlockTensor,
    CSRTensor,
    IdentityTensor,
    IndexTensor,
    MaskTensor,
    Store,
    Tensor,
    make_tensor,
)

SETTINGS = settings(max_examples=150, deadline=None)


@dataclass
class Case:
    store: Store
    #: op id -> dense matrix per input (None for an opaque op)
    dense: dict[int, list[np.ndarray] | None] = field(default_factory=dict)

    def n(self, d: int) -> int:
        n = self.store.datasets[d].n_rows
        assert n is not None
        return n


# ---------------------------------------------------------------------------------------------
# random stores


def draw_functional(draw: st.DrawFn, n_out: int, n_in: int) -> tuple[Tensor, np.ndarray]:
    idx = draw(st.lists(st.integers(-1, n_in - 1), min_size=n_out, max_size=n_out))
    if draw(st.booleans()):
        idx.sort()
    d = np.zeros((n_out, n_in), dtype=bool)
    for o, i in enumerate(idx):
        if i >= 0:
            d[o, i] = True
    form = draw(st.sampled_from(["auto", "packed"]))
    a = np.asarray(idx, dtype=np.int64)
    t = make_tensor(a, n_in) if form == "auto" else IndexTensor.from_index(a, n_in, "packed")
    return t, d


def draw_csr(draw: st.DrawFn, n_out: int, n_in: int) -> tuple[Tensor, np.ndarray]:
    if n_out == 0 or n_in == 0:
        pairs: list[tuple[int, int]] = []
    else:
        pairs = draw(
            st.lists(
                st.tuples(st.integers(0, n_out - 1), st.integers(0, n_in - 1)), max_size=3 * n_out
            )
        )
    d = np.zeros((n_out, n_in), dtype=bool)
    for o, i in pairs:
        d[o, i] = True
    t = CSRTensor.from_pairs([p[0] for p in pairs], [p[1] for p in pairs], n_out, n_in)
    return t, d


@st.composite
def stores(draw: st.DrawFn) -> Case:
    store = Store()
    case = Case(store)
    ds = [
        store.add_dataset(f"src{k}", n_rows=draw(st.integers(0, 6)), role="source").id
        for k in range(draw(st.integers(1, 3)))
    ]
    for k in range(draw(st.integers(1, 6))):
        inputs = [draw(st.sampled_from(ds)) for _ in range(draw(st.integers(1, 3)))]
        sizes = [case.n(i) for i in inputs]
        shape = draw(st.sampled_from(["union", "filter", "map", "general", "general"]))
        tensors: list[Tensor] = []
        dense: list[np.ndarray] = []
        if shape == "union":
            n_out = sum(sizes)
            off = 0
            for n_in in sizes:
                tensors.append(BlockTensor(n_out, n_in, off))
                dense.append(np.eye(n_out, n_in, -off, dtype=bool))
                off += n_in
        elif shape == "filter":
            inputs, n_in = inputs[:1], sizes[0]
            kept = sorted(draw(st.sets(st.integers(0, max(n_in - 1, 0)), max_size=n_in)))
            n_out = len(kept)
            form = draw(st.sampled_from(["ints", "bitset"]))
            tensors.append(MaskTensor.from_kept(kept, n_in, form=form))
            m = np.zeros((n_out, n_in), dtype=bool)
            m[np.arange(n_out), kept] = True
            dense.append(m)
        elif shape == "map":
            inputs, n_out = inputs[:1], sizes[0]
            tensors.append(IdentityTensor(n_out))
            dense.append(np.eye(n_out, dtype=bool))
        else:
            n_out = draw(st.integers(0, 7))
            for n_in in sizes:
                maker = draw(st.sampled_from([draw_functional, draw_csr]))
                t, m = maker(draw, n_out, n_in)
                tensors.append(t)
                dense.append(m)
        out = store.add_dataset(f"d{k}", n_rows=n_out).id
        opaque = draw(st.integers(0, 5)) == 0
        op = store.add_operation(shape, shape, inputs, out, None if opaque else tensors)
        case.dense[op.id] = None if opaque else dense
        ds.append(out)
    return case


# ---------------------------------------------------------------------------------------------
# oracle: enumerate every path, OR the products of the dense matrices


def oracle_lineage(
    case: Case, start: int, rows: list[int], direction: str
) -> tuple[dict[int, np.ndarray], set[int]]:
    reached: dict[int, np.ndarray] = {}
    blocked: set[int] = set()

    def walk(d: int, v: np.ndarray) -> None:
        reached[d] = reached.get(d, np.zeros(case.n(d), dtype=bool)) | v
        if direction == "backward":
            op = case.store.producer(d)
            steps = [] if op is None else [(op, j) for j in range(len(op.inputs))]
        else:
            steps = [
                (op, j) for op in case.store.consumers(d) for j, i in enumerate(op.inputs) if i == d
            ]
        for op, j in steps:
            dense = case.dense[op.id]
            if dense is None:
                blocked.add(op.id)
                continue
            m = dense[j].astype(np.int64)
            if direction == "backward":
                walk(op.inputs[j], (m.T @ v.astype(np.int64)) > 0)
            else:
                walk(op.output, (m @ v.astype(np.int64)) > 0)

    v0 = np.zeros(case.n(start), dtype=bool)
    v0[rows] = True
    walk(start, v0)
    return {d: np.flatnonzero(v) for d, v in reached.items()}, blocked


def oracle_mapping(case: Case, src: int, dst: int) -> tuple[bool, np.ndarray, set[int]]:
    """(reachable, OR over paths of the products, opaque ops on those paths)."""

    def go(d: int) -> tuple[bool, np.ndarray, set[int]]:
        if d == src:
            return True, np.eye(case.n(src), dtype=np.int64), set()
        acc = np.zeros((case.n(d), case.n(src)), dtype=np.int64)
        op = case.store.producer(d)
        reachable, opaque = False, set()
        if op is None:
            return False, acc, opaque
        for j, inp in enumerate(op.inputs):
            r, m, o = go(inp)
            if not r:
                continue
            reachable = True
            opaque |= o
            dense = case.dense[op.id]
            if dense is None:
                opaque.add(op.id)
            else:
                acc += dense[j].astype(np.int64) @ m
        return reachable, np.minimum(acc, 1), opaque

    r, m, o = go(dst)
    return r, m.astype(bool), o


def check_result(res: LineageResult, want: dict[int, np.ndarray], blocked: set[int]) -> None:
    assert res.blocked == sorted(blocked)
    assert set(res.rows) == set(want)
    for d, rows in want.items():
        got = res.rows[d]
        assert got.dtype == np.int64
        assert np.array_equal(got, rows), (d, got, rows)


# ---------------------------------------------------------------------------------------------
# properties


@SETTINGS
@given(case=stores(), data=st.data())
def test_backward_matches_oracle(case: Case, data: st.DataObject) -> None:
    start = data.draw(st.sampled_from(sorted(case.store.datasets)))
    n = case.n(start)
    rows = data.draw(st.lists(st.integers(0, n - 1), max_size=n + 2)) if n else []
    want, blocked = oracle_lineage(case, start, rows, "backward")
    res = backward(case.store, start, rows)
    assert res.start == start and res.direction == "backward"
    check_result(res, want, blocked)

    targets = data.draw(st.sets(st.sampled_from(sorted(case.store.datasets)), max_size=3))
    sub = backward(case.store, start, np.asarray(rows, dtype=np.int32), to=targets)
    keep = {d: r for d, r in want.items() if d == start or d in targets}
    check_result(sub, keep, blocked)


@SETTINGS
@given(case=stores(), data=st.data())
def test_forward_matches_oracle(case: Case, data: st.DataObject) -> None:
    start = data.draw(st.sampled_from(sorted(case.store.datasets)))
    n = case.n(start)
    rows = data.draw(st.lists(st.integers(0, n - 1), max_size=n + 2)) if n else []
    want, blocked = oracle_lineage(case, start, rows, "forward")
    res = forward(case.store, start, rows)
    assert res.start == start and res.direction == "forward"
    check_result(res, want, blocked)

    target = data.draw(st.sampled_from(sorted(case.store.datasets)))
    sub = forward(case.store, start, rows, to=target)
    keep = {d: r for d, r in want.items() if d in (start, target)}
    check_result(sub, keep, blocked)


@SETTINGS
@given(case=stores())
def test_mapping_matches_oracle(case: Case) -> None:
    ids = sorted(case.store.datasets)
    for src in ids:  # every pair: random pairs are mostly unrelated or equal
        for dst in ids:
            reachable, want, opaque = oracle_mapping(case, src, dst)
            if not reachable:
                with pytest.raises(ValueError, match="not reachable"):
                    mapping(case.store, src, dst)
            elif opaque:
                with pytest.raises(ValueError, match="opaque") as err:
                    mapping(case.store, src, dst)
                assert any(f"operation {o} " in str(err.value) for o in opaque)
            else:
                got = mapping(case.store, src, dst)
                assert got.dtype == bool
                assert got.shape == (case.n(dst), case.n(src))
                assert np.array_equal(got.toarray(), want)


@SETTINGS
@given(case=stores())
def test_mapping_agrees_with_backward(case: Case) -> None:
    """Whole-dataset mapping and record tracing are two views of the same relation."""
    ids = sorted(case.store.datasets)
    for src in ids:
        for dst in ids:
            try:
                m = mapping(case.store, src, dst).toarray()
            except ValueError:
                continue
            for o in range(case.n(dst)):
                res = backward(case.store, dst, [o], to=src)
                got = res.rows.get(src, np.empty(0, dtype=np.int64))
                assert np.array_equal(got, np.flatnonzero(m[o]))
            fwd = forward(case.store, src, range(case.n(src)), to=dst).rows[dst]
            assert np.array_equal(fwd, np.flatnonzero(m.any(axis=1)))


# ---------------------------------------------------------------------------------------------
# hand-made graphs


def diamond() -> tuple[Store, dict[str, int]]:
    """a -> (f: filter, g: map) -> j = join(f, g) -> u = union(j, a)."""
    s = Store()
    a = s.add_dataset("a", n_rows=4, role="source").id
    f = s.add_dataset("f", n_rows=2).id
    s.add_operation("filter", "reduction", [a], f, [MaskTensor.from_kept([1, 3], 4)])
    g = s.add_dataset("g", n_rows=4).id
    s.add_operation("select", "projection", [a], g, [IdentityTensor(4)])
    j = s.add_dataset("j", n_rows=3).id
    s.add_operation(
        "join", "join", [f, g], j, [make_tensor([0, 0, 1], 2), make_tensor([0, 2, 3], 4)]
    )
    u = s.add_dataset("u", n_rows=7).id
    s.add_operation("union", "append", [j, a], u, [BlockTensor(7, 3, 0), BlockTensor(7, 4, 3)])
    return s, {"a": a, "f": f, "g": g, "j": j, "u": u}


def test_diamond_backward_unions_paths() -> None:
    s, ids = diamond()
    res = backward(s, ids["u"], [1])  # j row 1 = (f row 0 = a row 1, g row 2 = a row 2)
    assert res.blocked == []
    assert res.rows[ids["a"]].tolist() == [1, 2]
    assert res.rows[ids["f"]].tolist() == [0]
    assert res.rows[ids["g"]].tolist() == [2]
    res = backward(s, ids["u"], [1, 5], to=ids["a"])  # row 5 is a row 2 via the union
    assert set(res.rows) == {ids["u"], ids["a"]}
    assert res.rows[ids["a"]].tolist() == [1, 2]


def test_diamond_forward_unions_paths() -> None:
    s, ids = diamond()
    res = forward(s, ids["a"], [3])
    assert res.rows[ids["f"]].tolist() == [1]
    assert res.rows[ids["j"]].tolist() == [2]
    assert res.rows[ids["u"]].tolist() == [2, 6]
    # a row reaching nothing downstream still lists every dataset on a path
    res = forward(s, ids["a"], [0])
    assert res.rows[ids["f"]].tolist() == [] and res.rows[ids["u"]].tolist() == [0, 3]


def test_self_join() -> None:
    s = Store()
    a = s.add_dataset("a", n_rows=3, role="source").id
    j = s.add_dataset("j", n_rows=2).id
    s.add_operation("join", "join", [a, a], j, [make_tensor([0, 1], 3), make_tensor([2, 2], 3)])
    assert backward(s, j, [0]).rows[a].tolist() == [0, 2]
    assert forward(s, a, [2]).rows[j].tolist() == [0, 1]
    assert mapping(s, a, j).toarray().tolist() == [
        [True, False, True],
        [False, True, True],
    ]


def test_opaque_blocks() -> None:
    s = Store()
    a = s.add_dataset("a", n_rows=3, role="source").id
    b = s.add_dataset("b", n_rows=3).id
    op = s.add_operation("mapPartitions", "opaque", [a], b, None, opaque=True)
    c = s.add_dataset("c", n_rows=3).id
    s.add_operation("select", "projection", [b], c, [IdentityTensor(3)])
    res = backward(s, c, [1])
    assert res.blocked == [op.id] and set(res.rows) == {c, b}
    res = forward(s, a, [1])
    assert res.blocked == [op.id] and set(res.rows) == {a}
    with pytest.raises(ValueError, match=rf"operation {op.id} \(mapPartitions\).*opaque"):
        mapping(s, a, c)
    assert mapping(s, b, c).toarray().tolist() == np.eye(3, dtype=bool).tolist()


def test_mapping_errors_and_identity() -> None:
    s, ids = diamond()
    with pytest.raises(ValueError, match="not reachable"):
        mapping(s, ids["u"], ids["a"])
    with pytest.raises(ValueError, match="not reachable"):
        mapping(s, ids["f"], ids["g"])
    with pytest.raises(ValueError, match="unknown dataset"):
        mapping(s, ids["a"], 999)
    eye = mapping(s, ids["j"], ids["j"])
    assert eye.shape == (3, 3) and eye.dtype == bool and eye.toarray().trace() == 3


def test_bad_queries() -> None:
    s, ids = diamond()
    with pytest.raises(ValueError, match="unknown dataset id 999"):
        backward(s, 999, [0])
    with pytest.raises(ValueError, match="unknown dataset id 999"):
        forward(s, ids["a"], [0], to=[999])
    with pytest.raises(IndexError, match="row 4 out of range"):
        backward(s, ids["a"], [4])
    res = backward(s, ids["u"], [])
    assert all(r.size == 0 for r in res.rows.values()) and len(res.rows) == 5


def test_queries_do_not_materialise_tensors(monkeypatch: pytest.MonkeyPatch) -> None:
    """Record queries must stay O(rows), never O(tensor size)."""
    s, ids = diamond()

    def boom(self: Tensor) -> None:
        raise AssertionError("to_sparse called by a record query")

    monkeypatch.setattr(Tensor, "to_sparse", boom)
    backward(s, ids["u"], [1, 2])
    forward(s, ids["a"], [0, 3])


def test_deep_chain_no_recursion_limit() -> None:
    s = Store()
    d = s.add_dataset("a", n_rows=2, role="source").id
    first = d
    for k in range(3000):
        nxt = s.add_dataset(f"d{k}", n_rows=2).id
        s.add_operation("select", "projection", [d], nxt, [IdentityTensor(2)])
        d = nxt
    assert backward(s, d, [1], to=first).rows[first].tolist() == [1]
    assert forward(s, first, [0], to=d).rows[d].tolist() == [0]
