"""Cell lineage (Q3/Q4) and how-provenance (Q5-Q8) over random provenance DAGs with
attribute maps, against a dense oracle that enumerates every path.

The stores favour runs of identity steps (a chain of ``withColumn`` calls), which the
queries move across in one step with the maps composed (``_cells._Chain``); the oracle
steps through every operation, cell by cell.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tensprov_lab.query import cell_lineage
from tensprov_lab.query._cells import cell_walk
from tensprov_lab.query._how import how
from tensprov_lab.store import (
    BlockTensor,
    CSRTensor,
    IdentityTensor,
    MaskTensor,
    Store,
    Tensor,
)

SETTINGS = settings(max_examples=200, deadline=None)


@dataclass
class Case:
    store: Store
    #: op id -> (dense record matrix, contributing map, influencing map) per input;
    #: None for an opaque op
    dense: dict[int, list[tuple[np.ndarray, np.ndarray, np.ndarray]] | None] = field(
        default_factory=dict
    )

    def n(self, d: int) -> int:
        n = self.store.datasets[d].n_rows
        assert n is not None
        return n

    def width(self, d: int) -> int:
        return len(self.store.datasets[d].columns)


def _bools(draw: st.DrawFn, shape: tuple[int, int], p: float) -> np.ndarray:
    flat = draw(
        st.lists(st.floats(0, 1), min_size=shape[0] * shape[1], max_size=shape[0] * shape[1])
    )
    return (np.asarray(flat, dtype=float) < p).reshape(shape)


@st.composite
def stores(draw: st.DrawFn) -> Case:
    store = Store()
    case = Case(store)
    ds = []
    for k in range(draw(st.integers(1, 2))):
        width = draw(st.integers(1, 4))
        d = store.add_dataset(
            f"src{k}", columns=[f"c{i}" for i in range(width)],
            n_rows=draw(st.integers(0, 5)), role="source",
        )  # fmt: skip
        ds.append(d.id)
    for k in range(draw(st.integers(1, 12))):
        # mostly go on from the last dataset: runs of steps one after another (the rare
        # outcomes are drawn as middle values: hypothesis draws bounds more often)
        pick = st.sampled_from(ds) if draw(st.integers(0, 3)) == 2 else st.just(ds[-1])
        shape = draw(
            st.sampled_from(["map", "map", "map", "map", "zip", "filter", "union", "general"])
        )
        inputs = [draw(pick)]
        if shape in ("union", "general"):
            inputs += [draw(st.sampled_from(ds)) for _ in range(draw(st.integers(0, 1)))]
        elif shape == "zip":  # a join of records one to one (a self-join, too)
            inputs.append(draw(st.sampled_from([d for d in ds if case.n(d) == case.n(inputs[0])])))
        sizes = [case.n(i) for i in inputs]
        tensors: list[Tensor] = []
        records: list[np.ndarray] = []
        if shape in ("map", "zip"):
            n_out = sizes[0]
            for _ in inputs:
                tensors.append(IdentityTensor(n_out))
                records.append(np.eye(n_out, dtype=bool))
        elif shape == "filter":
            n_in = sizes[0]
            kept = sorted(draw(st.sets(st.integers(0, max(n_in - 1, 0)), max_size=n_in)))
            n_out = len(kept)
            tensors.append(MaskTensor.from_kept(kept, n_in))
            m = np.zeros((n_out, n_in), dtype=bool)
            m[np.arange(n_out), kept] = True
            records.append(m)
        elif shape == "union":
            n_out, off = sum(sizes), 0
            for n_in in sizes:
                tensors.append(BlockTensor(n_out, n_in, off))
                records.append(np.eye(n_out, n_in, -off, dtype=bool))
                off += n_in
        else:
            n_out = draw(st.integers(0, 5))
            for n_in in sizes:
                m = _bools(draw, (n_out, n_in), 0.4)
                outs, ins = np.nonzero(m)
                tensors.append(CSRTensor.from_pairs(outs.tolist(), ins.tolist(), n_out, n_in))
                records.append(m)
        width = draw(st.integers(1, 4))
        cmaps = [_bools(draw, (width, case.width(i)), 0.4) for i in inputs]
        imaps = [_bools(draw, (width, case.width(i)), 0.25) for i in inputs]
        with_maps = draw(st.integers(0, 6)) != 3
        exact = draw(st.integers(0, 5)) != 2
        out = store.add_dataset(f"d{k}", columns=[f"c{i}" for i in range(width)], n_rows=n_out).id
        opaque = draw(st.integers(0, 9)) == 7
        op = store.add_operation(
            shape, shape, inputs, out, None if opaque else tensors,
            contributing=cmaps if with_maps else None,
            influencing=imaps if with_maps else None,
            attributes_exact=exact,
        )  # fmt: skip
        if not with_maps:  # unknown maps: every input column contributes
            cmaps = [np.ones((width, case.width(i)), dtype=bool) for i in inputs]
            imaps = [np.zeros((width, case.width(i)), dtype=bool) for i in inputs]
        case.dense[op.id] = None if opaque else list(zip(records, cmaps, imaps))
        ds.append(out)
    return case


# ---------------------------------------------------------------------------------------------
# oracle: every path, cell by cell


def _steps(case: Case, d: int, backward: bool) -> list[tuple[int, int, int]]:
    """(op id, input position, dataset reached) out of ``d``, opaque ops included."""
    store = case.store
    if backward:
        op = store.producer(d)
        return [] if op is None else [(op.id, j, inp) for j, inp in enumerate(op.inputs)]
    return [
        (op.id, j, op.output)
        for op in store.consumers(d)
        for j, i in enumerate(op.inputs)
        if i == d
    ]


def _push(
    case: Case, op_id: int, j: int, rows: np.ndarray, c: np.ndarray, i: np.ndarray, backward: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows (a vector) and cells (rows x columns matrices) across one operation input."""
    dense = case.dense[op_id]
    assert dense is not None
    t, cm, im = (x.astype(np.int64) for x in dense[j])
    em = np.minimum(cm + im, 1)
    if backward:
        move, maps = t.T, (cm, im, em)
    else:
        move, maps = t, (cm.T, im.T, em.T)
    r2 = (move @ rows.astype(np.int64)) > 0
    c2 = (move @ c.astype(np.int64) @ maps[0]) > 0
    i2 = ((move @ c.astype(np.int64) @ maps[1]) + (move @ i.astype(np.int64) @ maps[2])) > 0
    return r2, c2, i2


def oracle(
    case: Case, start: int, rows: list[int], cols: list[int], backward: bool, targets: set[int]
) -> tuple[dict[int, tuple[np.ndarray, np.ndarray]], set[int], list[tuple]]:
    """(cells reached per dataset, opaque ops met, how-paths reaching ``targets``)."""
    reached: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    blocked: set[int] = set()
    paths: list[tuple] = []
    r0 = np.zeros(case.n(start), dtype=bool)
    r0[rows] = True
    c0 = np.zeros((case.n(start), case.width(start)), dtype=bool)
    c0[np.ix_(rows, cols)] = True

    def walk(d: int, edges: tuple, r: np.ndarray, c: np.ndarray, i: np.ndarray) -> None:
        old = reached.get(d)
        reached[d] = (c, i) if old is None else (old[0] | c, old[1] | i)
        for op_id, j, nxt in _steps(case, d, backward):
            if case.dense[op_id] is None:
                continue
            r2, c2, i2 = _push(case, op_id, j, r, c, i, backward)
            if not r2.any() or not (c2.any() or i2.any()):
                continue
            e2 = (*edges, (op_id, j))
            if nxt in targets:
                paths.append((nxt, e2, _cells_of(r2[:, None]).get(0), _cells_of(c2), _cells_of(i2)))
            walk(nxt, e2, r2, c2, i2)

    walk(start, (), r0, c0, np.zeros_like(c0))
    # opaque operations met by the walk over the graph, whether cells reach them or not
    seen, todo = {start}, [start]
    while todo:
        for op_id, _, nxt in _steps(case, todo.pop(), backward):
            if case.dense[op_id] is None:
                blocked.add(op_id)
            elif nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return reached, blocked, sorted(paths, key=lambda p: (len(p[1]), p[1]))


def _cells_of(m: np.ndarray) -> dict[int, list[int]]:
    return {c: np.flatnonzero(m[:, c]).tolist() for c in range(m.shape[1]) if m[:, c].any()}


def _plain(cells: dict[int, np.ndarray]) -> dict[int, list[int]]:
    return {c: r.tolist() for c, r in cells.items() if r.size}


# ---------------------------------------------------------------------------------------------
# properties


def _query(case: Case, data: st.DataObject) -> tuple[int, list[int], list[int], bool, set[int]]:
    store = case.store
    backward = data.draw(st.booleans())
    ends = store.sources() if backward else store.sinks()
    # mostly from a sink backward, from a source forward: the whole pipeline between
    starts = store.sinks() if backward else store.sources()
    start = data.draw(st.sampled_from(sorted(starts)) | st.sampled_from(sorted(store.datasets)))
    n = case.n(start)
    empty = data.draw(st.integers(0, 7)) == 5  # no row asked for, now and then
    rows = [] if empty or not n else sorted(data.draw(st.sets(st.integers(0, n - 1), min_size=1)))
    cols = sorted(data.draw(st.sets(st.integers(0, case.width(start) - 1), min_size=1)))
    targets = data.draw(
        st.sampled_from([set(ends), set(ends) - {start}, set(store.datasets)])
        | st.sets(st.sampled_from(sorted(store.datasets)), min_size=1)
    )
    return start, rows, cols, backward, targets


@SETTINGS
@given(case=stores(), data=st.data())
def test_cell_lineage_matches_the_oracle(case: Case, data: st.DataObject) -> None:
    start, rows, cols, backward, targets = _query(case, data)
    direction = "backward" if backward else "forward"
    want, blocked, _ = oracle(case, start, rows, cols, backward, targets)
    for to in (targets, None):
        res = cell_lineage(case.store, start, rows, cols, direction, to=to)
        keep = set(want) if to is None else (set(want) & (to | {start}))
        assert res.blocked == sorted(blocked)
        got_c = {d: _plain(v) for d, v in res.contributing.items() if _plain(v)}
        got_i = {d: _plain(v) for d, v in res.influencing.items() if _plain(v)}
        want_c = {d: _cells_of(want[d][0]) for d in keep if want[d][0].any()}
        want_i = {d: _cells_of(want[d][1]) for d in keep if want[d][1].any()}
        assert got_c == want_c
        assert got_i == want_i
        # an operation is approximate when its maps are missing or not exact
        on_way = {
            op_id
            for d in want
            for op_id, _, _ in _steps(case, d, backward)
            # (the start dataset's steps are taken even when no row is asked for)
            if case.dense[op_id] is not None
            and (d == start or want[d][0].any() or want[d][1].any())
        }
        loose = {
            o for o in on_way
            if case.store.operations[o].contributing is None
            or not case.store.operations[o].attributes_exact
        }  # fmt: skip
        assert set(res.approximate) == loose


@SETTINGS
@given(case=stores(), data=st.data())
def test_how_paths_match_the_oracle(case: Case, data: st.DataObject) -> None:
    start, rows, cols, backward, targets = _query(case, data)
    direction = "backward" if backward else "forward"
    _, _, want = oracle(case, start, rows, cols, backward, targets)
    paths, truncated = how(case.store, start, rows, direction, to=targets, columns=cols)
    assert not truncated
    got = [
        (p.dataset, p.edges, p.rows.tolist(), _plain(p.contributing or {}),
         _plain(p.influencing or {}))
        for p in paths
    ]  # fmt: skip
    assert got == [(d, e, r, c, i) for d, e, r, c, i in want]
    # record-level how (Q5/Q6): the same paths, each with the records it reaches
    rec_paths, _ = how(case.store, start, rows, direction, to=targets)
    want_rec = _record_paths(case, start, rows, backward, targets)
    assert [(p.dataset, p.edges, p.rows.tolist()) for p in rec_paths] == want_rec


def _record_paths(
    case: Case, start: int, rows: list[int], backward: bool, targets: set[int]
) -> list[tuple]:
    found: list[tuple] = []
    r0 = np.zeros(case.n(start), dtype=bool)
    r0[rows] = True

    def walk(d: int, edges: tuple, r: np.ndarray) -> None:
        for op_id, j, nxt in _steps(case, d, backward):
            dense = case.dense[op_id]
            if dense is None:
                continue
            t = dense[j][0].astype(np.int64)
            r2 = ((t.T if backward else t) @ r.astype(np.int64)) > 0
            if not r2.any():
                continue
            e2 = (*edges, (op_id, j))
            if nxt in targets:
                found.append((nxt, e2, np.flatnonzero(r2).tolist()))
            walk(nxt, e2, r2)

    walk(start, (), r0)
    return sorted(found, key=lambda p: (len(p[1]), p[1]))


def _chain_store(n_ops: int = 5) -> tuple[Store, list[int]]:
    s = Store()
    d = s.add_dataset("src", columns=["a", "b"], n_rows=3, role="source").id
    ids = [d]
    for k in range(n_ops):
        nxt = s.add_dataset(f"d{k}", columns=["a", "b"], n_rows=3).id
        swap = np.array([[False, True], [True, False]])
        s.add_operation(
            "withColumn", "projection", [ids[-1]], nxt, [IdentityTensor(3)],
            contributing=[swap], influencing=[np.zeros((2, 2), dtype=bool)],
        )  # fmt: skip
        ids.append(nxt)
    return s, ids


def test_a_run_of_identity_steps_is_one_move() -> None:
    s, ids = _chain_store()
    walk = cell_walk(s, ids[0], "forward")
    assert [len(m.edges) for m in walk.moves[ids[0]]] == [5]
    assert walk.moves[ids[0]][0].target == ids[-1]
    assert walk.interior == frozenset(ids[1:-1])
    # five swaps: column 0 ends in column 1
    res = cell_lineage(s, ids[0], [1], [0], "forward", to=ids[-1])
    assert _plain(res.contributing[ids[-1]]) == {1: [1]}
    # a dataset the run passes over, asked for: the run is cut there
    res = cell_lineage(s, ids[0], [1], [0], "forward", to=[ids[2], ids[-1]])
    assert _plain(res.contributing[ids[2]]) == {0: [1]}
    assert _plain(res.contributing[ids[-1]]) == {1: [1]}
    paths, _ = how(s, ids[0], [1], "forward", to=[ids[2], ids[-1]], columns=[0])
    assert [(p.dataset, len(p.edges), _plain(p.contributing or {})) for p in paths] == [
        (ids[2], 2, {0: [1]}),
        (ids[-1], 5, {1: [1]}),
    ]


def test_a_run_follows_tensors_and_maps_set_again() -> None:
    """A composed run is made again when an operation of it gets other maps, and
    stepped through when one of its tensors is no longer an identity."""
    s, ids = _chain_store()
    assert _plain(
        cell_lineage(s, ids[0], [1], [0], "forward", to=ids[-1]).contributing[ids[-1]]
    ) == {1: [1]}
    op = s.producer(ids[2])
    assert op is not None
    op.contributing = [np.array([[True, False], [False, True]])]  # keeps columns in place
    res = cell_lineage(s, ids[0], [1], [0], "forward", to=ids[-1])
    assert _plain(res.contributing[ids[-1]]) == {0: [1]}
    op.tensors = [MaskTensor.from_kept([0, 2], 3)]  # row 1 dropped (sizes kept for the test)
    res = cell_lineage(s, ids[0], [1], [0], "forward", to=ids[-1])
    assert _plain(res.contributing[ids[-1]]) == {}
    paths, _ = how(s, ids[0], [1], "forward", to={ids[-1]})
    assert paths == []
