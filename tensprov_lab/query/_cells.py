"""Attribute-value (cell) lineage: Q3/Q4 of the paper's Table VII.

A cell is (dataset, row, column).  Record tensors say which rows an operation's output
row comes from; the operation's attribute maps say which input columns flow into an
output column (*contributing*) or decide whether, where or in which group its record
exists (*influencing*).  A cell set is kept per dataset as ``{column: rows}`` and pushed
through an operation one column at a time::

    contributing_in[c] = T^T (rows of every output column o with C[o, c])
    influencing_in[c]  = T^T (rows of contributing o with I[o, c])
                       ∪ T^T (rows of influencing o with C[o, c] or I[o, c])

(forward: the same with ``T`` and the maps transposed), so a self-join or a union of two
branches of one source never mixes the rows of one path with the columns of another.
Influence is transitive: a column that contributes to an influencing column influences.

Pure numpy: no pyspark, no IPython.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from tensprov_lab.query._lineage import _move, _start_rows, _targets, _topo
from tensprov_lab.query._memo import memo
from tensprov_lab.store._graph import Operation, Store
from tensprov_lab.store._sets import unique
from tensprov_lab.store._tensors import Tensor

__all__ = ["CellResult", "Cells", "Move", "cell_lineage", "cell_walk", "move_cells"]

#: column index -> sorted unique rows
Cells = dict[int, np.ndarray]


@dataclass
class CellResult:
    """Cells reached by a cell-lineage query, per dataset.

    Attributes
    ----------
    start, direction : as in :class:`~tensprov_lab.query.LineageResult`
    contributing, influencing : dict[int, dict[int, ndarray]]
        Dataset id -> column index -> sorted rows.  The start dataset holds the start
        cells as contributing.
    blocked : list[int]
        Opaque operations met, where record lineage stops.
    approximate : list[int]
        Operations on the way whose attribute maps are missing or not exact: every
        column of their inputs was taken as contributing (a superset).
    """

    start: int
    direction: str
    contributing: dict[int, Cells]
    influencing: dict[int, Cells]
    blocked: list[int] = field(default_factory=list)
    approximate: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class _Adjacency:
    """An input position's attribute maps as lists, per column of the side cells come
    from (backward: the output's; forward: the input's), of the columns they reach:
    through a contributing map, an influencing one, and either."""

    contributing: list[list[int]]
    influencing: list[list[int]]
    either: list[list[int]]
    exact: bool
    #: the maps read (held, so that their ids in the memo's key are never another's)
    maps: tuple[Any, ...] = field(default=(), repr=False)


def _adjacency(
    store: Store,
    op: Operation,
    k: int,
    direction: str,
    known: dict[tuple[int, ...], _Adjacency] | None = None,
) -> _Adjacency:
    """:class:`_Adjacency` of ``op``'s input ``k`` (kept while the graph and the maps
    stay the same: reading the maps row by row was most of a cell query's time);
    ``known``: :func:`_adjacencies` of the store and direction, when the caller has it."""
    if known is None:
        known = _adjacencies(store, direction)
    # the maps' identity is part of the key: an operation's maps may be set after it
    # was added (an ML model's, once fitted)
    held = (op.contributing, op.influencing)
    key = (op.id, k, id(held[0]), id(held[1]))
    found = known.get(key)
    if found is None:
        found = known[key] = _make_adjacency(store, op, k, direction, held)
    return found


def _adjacencies(store: Store, direction: str) -> dict[tuple[int, ...], _Adjacency]:
    """The :class:`_Adjacency` of every operation input made for ``direction`` so far."""
    known: dict[tuple[int, ...], _Adjacency] = memo(store, ("adjacency", direction), dict)
    return known


def _make_adjacency(
    store: Store, op: Operation, k: int, direction: str, held: tuple[Any, ...]
) -> _Adjacency:
    cm, im, exact = _maps(store, op, k)
    if direction != "backward":
        cm, im = cm.T, im.T

    def lists(m: np.ndarray) -> list[list[int]]:
        rows, cols = np.nonzero(m)
        bounds = np.searchsorted(rows, np.arange(m.shape[0] + 1))
        flat = cols.tolist()
        return [flat[a:b] for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist())]

    return _Adjacency(lists(cm), lists(im), lists(cm | im), exact, held)


def _maps(store: Store, op: Operation, k: int) -> tuple[np.ndarray, np.ndarray, bool]:
    """(contributing, influencing, exact) of input position ``k``."""
    n_out = len(store.datasets[op.output].columns)
    n_in = len(store.datasets[op.inputs[k]].columns)
    if op.contributing is None or op.influencing is None:
        return np.ones((n_out, n_in), dtype=bool), np.zeros((n_out, n_in), dtype=bool), False
    return op.contributing[k], op.influencing[k], op.attributes_exact


def _merge(acc: dict[int, list[np.ndarray]], col: int, rows: np.ndarray) -> None:
    if rows.size:
        acc.setdefault(col, []).append(rows)


def _finish(acc: dict[int, list[np.ndarray]]) -> Cells:
    # (most steps follow one column: nothing to sort)
    items = acc.items() if len(acc) < 2 else sorted(acc.items())
    return {c: parts[0] if len(parts) == 1 else unique(np.concatenate(parts)) for c, parts in items}


def _step(
    t: Tensor, adj: _Adjacency, contrib: Cells, infl: Cells, backward: bool
) -> tuple[Cells, Cells]:
    """Push cells across tensor ``t`` with the maps ``adj`` (backward: output -> input).

    An output column's rows move through ``t.for_column(column)``: a window function's
    column through its frame, every other column through its own record."""
    if t.kind == "identity":  # every column's rows stay (most steps of a pipeline)
        return _step_same(adj, contrib, infl)
    cache: dict[tuple[int, bytes], np.ndarray] = {}

    def moved(out_col: int, rows: np.ndarray) -> np.ndarray:
        tt = t.for_column(out_col)
        key = (id(tt), rows.tobytes())
        if key not in cache:
            cache[key] = _move(tt, rows, backward)
        return cache[key]

    c_acc: dict[int, list[np.ndarray]] = {}
    i_acc: dict[int, list[np.ndarray]] = {}
    for col, rows in contrib.items():
        for c in adj.contributing[col]:
            _merge(c_acc, c, moved(col if backward else c, rows))
        for c in adj.influencing[col]:
            _merge(i_acc, c, moved(col if backward else c, rows))
    for col, rows in infl.items():
        for c in adj.either[col]:
            _merge(i_acc, c, moved(col if backward else c, rows))
    return _finish(c_acc), _finish(i_acc)


def _step_same(adj: _Adjacency, contrib: Cells, infl: Cells) -> tuple[Cells, Cells]:
    """:func:`_step` through an identity tensor: the rows (sorted, unique and in range,
    made by the tensors before) move to the columns the maps reach."""
    c_acc: dict[int, list[np.ndarray]] = {}
    i_acc: dict[int, list[np.ndarray]] = {}
    for col, rows in contrib.items():
        if rows.size:
            for c in adj.contributing[col]:
                c_acc.setdefault(c, []).append(rows)
            for c in adj.influencing[col]:
                i_acc.setdefault(c, []).append(rows)
    for col, rows in infl.items():
        if rows.size:
            for c in adj.either[col]:
                i_acc.setdefault(c, []).append(rows)
    return _finish(c_acc), _finish(i_acc)


def _columns(store: Store, ds_id: int, columns: Iterable[int]) -> list[int]:
    n = len(store.datasets[ds_id].columns)
    cols = sorted({int(c) for c in columns})
    bad = [c for c in cols if not 0 <= c < n]
    if bad:
        raise IndexError(f"column indices {bad} out of range 0..{n - 1}")
    return cols


def cell_lineage(
    store: Store,
    ds_id: int,
    rows: ArrayLike,
    columns: Iterable[int],
    direction: str = "backward",
    to: int | Iterable[int] | None = None,
    localized: bool = False,
) -> CellResult:
    """Cells of other datasets that cells ``rows x columns`` of ``ds_id`` come from
    (``direction="backward"``) or flow into (``"forward"``).

    Examples
    --------
    >>> import numpy as np
    >>> from tensprov_lab.store import Store, MaskTensor
    >>> s = Store()
    >>> a = s.add_dataset("a", columns=["x", "y"], n_rows=3, role="source")
    >>> b = s.add_dataset("b", columns=["y"], n_rows=1)
    >>> _ = s.add_operation("filter", "horizontal_reduction", [a.id], b.id,
    ...     [MaskTensor.from_kept([2], 3)], contributing=[np.array([[False, True]])],
    ...     influencing=[np.array([[True, False]])])
    >>> r = cell_lineage(s, b.id, [0], [0])
    >>> r.contributing[a.id], r.influencing[a.id]
    ({1: array([2])}, {0: array([2])})
    """
    if direction not in ("backward", "forward"):
        raise ValueError("direction must be 'backward' or 'forward'")
    start_rows = _start_rows(store, ds_id, rows)
    start_cols = _columns(store, ds_id, columns)
    targets = _targets(store, to)
    walk = cell_walk(store, ds_id, direction)
    known = _adjacencies(store, direction)
    moves, passed = walk.plan(targets, direction == "backward")
    approximate: set[int] = set()
    pend_c: dict[int, dict[int, list[np.ndarray]]] = {ds_id: {c: [start_rows] for c in start_cols}}
    pend_i: dict[int, dict[int, list[np.ndarray]]] = {}
    contrib: dict[int, Cells] = {}
    infl: dict[int, Cells] = {}
    for d in walk.order:
        if d in passed:
            continue
        contrib[d] = _finish(pend_c.pop(d, {}))
        infl[d] = _finish(pend_i.pop(d, {}))
        if not contrib[d] and not infl[d]:
            continue
        for move in moves[d]:
            c, i = move_cells(store, move, contrib[d], infl[d], direction, known, localized,
                              approximate)  # fmt: skip
            for col, r in c.items():
                pend_c.setdefault(move.target, {}).setdefault(col, []).append(r)
            for col, r in i.items():
                pend_i.setdefault(move.target, {}).setdefault(col, []).append(r)
    if targets is not None:
        keep = targets | {ds_id}
        contrib = {d: v for d, v in contrib.items() if d in keep}
        infl = {d: v for d, v in infl.items() if d in keep}
    return CellResult(ds_id, direction, contrib, infl, list(walk.blocked), sorted(approximate))


def move_cells(
    store: Store,
    move: Move,
    contrib: Cells,
    infl: Cells,
    direction: str,
    known: dict[tuple[int, ...], _Adjacency],
    localized: bool = False,
    approximate: set[int] | None = None,
) -> tuple[Cells, Cells]:
    """Push cells across ``move`` (its steps' ops whose maps are not exact are added
    to ``approximate``)."""
    backward = direction == "backward"
    adj = move.chain.adjacency(store, direction, known) if move.chain is not None else None
    # (a run with loose maps goes step by step: the operations it notes as approximate
    # are the ones cells reach)
    if adj is not None and (adj.exact or approximate is None):
        return _step_same(adj, contrib, infl)
    for op, k in move.edges:
        step = _adjacency(store, op, k, direction, known)
        if approximate is not None and not step.exact:
            approximate.add(op.id)
        assert op.tensors is not None
        t = op.tensors[k].localized() if localized else op.tensors[k]
        contrib, infl = _step(t, step, contrib, infl, backward)
        if not contrib and not infl:  # the walk stops at a dataset no cell reaches
            break
    return contrib, infl


@dataclass(frozen=True)
class Move:
    """One move of a walk out of a dataset: across one operation input, or across a
    run of identity steps taken as one (``chain``), reaching dataset ``target``."""

    edges: tuple[tuple[Operation, int], ...]
    target: int
    chain: _Chain | None = None


class _Chain:
    """A run of two or more identity steps (``parts``, in walk order) through datasets
    nothing else reaches or leaves: cells keep their rows across it, so the run moves
    them in one step with the maps composed (see :meth:`adjacency`).

    Census one-hot encodes a column by a hundred ``withColumn`` calls in a row; taken one
    by one they were most of a cell how-query (Q7/Q8).
    """

    def __init__(self, parts: tuple[tuple[Operation, int], ...]) -> None:
        self.parts = parts
        #: (what the composition was made from, the composition or None) per direction
        self._made: dict[str, tuple[list[Any], _Adjacency | None]] = {}

    def _held(self) -> list[Any]:
        # what the composition depends on: maps and tensors may be set again on an
        # existing operation (an ML model's maps once fitted, a spilled tensor)
        return [
            x
            for op, _ in self.parts
            for x in (op.contributing, op.influencing, op.tensors, op.attributes_exact)
        ]

    def adjacency(
        self, store: Store, direction: str, known: dict[tuple[int, ...], _Adjacency]
    ) -> _Adjacency | None:
        """The run's maps composed into one :class:`_Adjacency`, or None when a step of
        it is no longer an identity (then step through ``parts`` one by one)."""
        held = self._held()
        made = self._made.get(direction)
        if made is not None and len(made[0]) == len(held):
            if all(a is b for a, b in zip(made[0], held)):  # (the flags are bools: `is` too)
                return made[1]
        adj = None
        if all(op.tensors is not None and op.tensors[k].kind == "identity" for op, k in self.parts):
            steps = [_adjacency(store, op, k, direction, known) for op, k in self.parts]
            adj = _compose(steps)
        self._made[direction] = (held, adj)
        return adj


def _compose(steps: list[_Adjacency]) -> _Adjacency:
    """The maps of ``steps`` (identity steps, one after another) as one step.

    A cell set is two states per column, contributing and influencing: a contributing
    cell stays contributing through a contributing map and becomes influencing through
    an influencing one; an influencing cell stays influencing through either.  So over
    two steps A then B: CC = CC_A CC_B, CI = CC_A CI_B + CI_A II_B, II = II_A II_B
    (boolean products; one step: CC = contributing, CI = influencing, II = either).
    """

    def matrix(lists: list[list[int]], width: int) -> np.ndarray:
        m = np.zeros((len(lists), width), dtype=np.float32)
        for i, cols in enumerate(lists):
            m[i, cols] = 1.0
        return m

    def product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        # 0/1 sums of at most a few thousand terms: exact in float32
        return ((a @ b) > 0).astype(np.float32)

    def width(adj: _Adjacency) -> int:
        return 1 + max((c for cols in adj.either for c in cols), default=-1)

    widths = [len(adj.either) for adj in steps[1:]] + [width(steps[-1])]
    first = steps[0]
    cc = matrix(first.contributing, widths[0])
    ci = matrix(first.influencing, widths[0])
    ii = matrix(first.either, widths[0])
    for adj, w in zip(steps[1:], widths[1:]):
        c, i, e = matrix(adj.contributing, w), matrix(adj.influencing, w), matrix(adj.either, w)
        cc, ci, ii = product(cc, c), np.maximum(product(cc, i), product(ci, e)), product(ii, e)

    def lists(m: np.ndarray) -> list[list[int]]:
        return [np.flatnonzero(row).tolist() for row in m]

    exact = all(adj.exact for adj in steps)
    return _Adjacency(lists(cc), lists(ci), lists(ii), exact, tuple(steps))


@dataclass(frozen=True)
class _CellWalk:
    """The datasets a cell query from one dataset visits, in topological order, the
    (operation, input position) steps out of each, and the opaque operations met.

    ``moves`` are the same steps with runs of identity steps taken as one (see
    :class:`_Chain`); ``interior`` are the datasets those runs pass over."""

    order: list[int]
    edges: dict[int, list[tuple[Operation, int]]]
    blocked: list[int]
    moves: dict[int, list[Move]]
    interior: frozenset[int]
    #: moves cut at datasets asked for, per set of such datasets (see :meth:`plan`)
    _cut: dict[frozenset[int], tuple[dict[int, list[Move]], frozenset[int]]] = field(
        default_factory=dict, compare=False, repr=False
    )

    def plan(
        self, targets: set[int] | None, backward: bool
    ) -> tuple[dict[int, list[Move]], frozenset[int]]:
        """The moves out of each dataset and the datasets passed over, for a query
        that reports ``targets`` (None: every dataset, so every step is its own move)."""
        if targets is None:
            single = {
                d: [Move(((op, k),), op.inputs[k] if backward else op.output) for op, k in e]
                for d, e in self.edges.items()
            }
            return single, frozenset()
        cuts = frozenset(targets & self.interior)
        if not cuts:
            return self.moves, self.interior
        found = self._cut.get(cuts)
        if found is None:
            if len(self._cut) >= 64:
                self._cut.clear()
            found = self._cut[cuts] = _cut_moves(self, cuts, backward)
        return found


def _cut_moves(
    walk: _CellWalk, cuts: frozenset[int], backward: bool
) -> tuple[dict[int, list[Move]], frozenset[int]]:
    """``walk.moves`` with the runs that pass over a dataset of ``cuts`` cut there."""
    moves: dict[int, list[Move]] = {}
    for d, out in walk.moves.items():
        moves.setdefault(d, [])
        for move in out:
            if move.chain is None or not cuts & set(_passed(move, backward)):
                moves[d].append(move)
                continue
            at, piece = d, []
            for op, k in move.edges:
                piece.append((op, k))
                nxt = op.inputs[k] if backward else op.output
                if nxt in cuts or nxt == move.target:
                    chain = _Chain(tuple(piece)) if len(piece) > 1 else None
                    moves.setdefault(at, []).append(Move(tuple(piece), nxt, chain))
                    at, piece = nxt, []
    return moves, walk.interior - cuts


def _passed(move: Move, backward: bool) -> list[int]:
    """The datasets ``move`` passes over (the ones between its steps)."""
    return [op.inputs[k] if backward else op.output for op, k in move.edges[:-1]]


def cell_walk(store: Store, ds_id: int, direction: str) -> _CellWalk:
    """The :class:`_CellWalk` from ``ds_id`` (kept while the graph stays the same)."""
    walk: _CellWalk = memo(
        store, ("cells", ds_id, direction), lambda: _cell_walk(store, ds_id, direction)
    )
    return walk


def _cell_walk(store: Store, ds_id: int, direction: str) -> _CellWalk:
    blocked: set[int] = set()
    edges: dict[int, list[tuple[Operation, int]]] = {}
    backward = direction == "backward"

    def target(op: Operation, k: int) -> int:
        return op.inputs[k] if backward else op.output

    def neighbours(d: int) -> list[int]:
        found: list[tuple[Operation, int]] = []
        cand = [store.producer(d)] if backward else store.consumers(d)
        for op in cand:
            if op is None:
                continue
            if op.tensors is None:
                blocked.add(op.id)
                continue
            for k, inp in enumerate(op.inputs):
                if backward or inp == d:
                    found.append((op, k))
        edges[d] = found
        return list(dict.fromkeys(target(op, k) for op, k in found))

    order = _topo(ds_id, neighbours)
    reached: dict[int, int] = {}
    for d in order:
        for op, k in edges[d]:
            reached[target(op, k)] = reached.get(target(op, k), 0) + 1

    def identity(op: Operation, k: int) -> bool:
        return op.tensors is not None and op.tensors[k].kind == "identity"

    moves: dict[int, list[Move]] = {}
    interior: set[int] = set()
    for d in order:  # topological: a run's datasets come after the one it starts from
        if d in interior:
            continue
        moves[d] = []
        for op, k in edges[d]:
            parts = [(op, k)]
            nxt = target(op, k)
            if identity(op, k):
                # on while the next dataset is reached from here alone and leads on by
                # one identity step alone
                while nxt != ds_id and reached.get(nxt) == 1 and len(edges[nxt]) == 1:
                    step = edges[nxt][0]
                    if not identity(*step):
                        break
                    interior.add(nxt)
                    parts.append(step)
                    nxt = target(*step)
            chain = _Chain(tuple(parts)) if len(parts) > 1 else None
            moves[d].append(Move(tuple(parts), nxt, chain))
    return _CellWalk(order, edges, sorted(blocked), moves, frozenset(interior))
