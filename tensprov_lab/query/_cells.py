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

__all__ = ["CellResult", "Cells", "cell_lineage", "step_cells"]

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


def step_cells(
    store: Store,
    op: Operation,
    k: int,
    contrib: Cells,
    infl: Cells,
    direction: str,
    localized: bool = False,
    known: dict[tuple[int, ...], _Adjacency] | None = None,
) -> tuple[Cells, Cells]:
    """Push cells across input position ``k`` of ``op`` (backward: output -> input).

    An output column's rows move through ``t.for_column(column)``: a window function's
    column through its frame, every other column through its own record.  ``localized``:
    through ``t.localized()`` (a window's record alone); ``known``: the store's
    :func:`_adjacencies` for ``direction``, when the caller has them."""
    assert op.tensors is not None
    t = op.tensors[k].localized() if localized else op.tensors[k]
    adj = _adjacency(store, op, k, direction, known)
    return _step(t, adj, contrib, infl, direction == "backward")


def _step(
    t: Tensor, adj: _Adjacency, contrib: Cells, infl: Cells, backward: bool
) -> tuple[Cells, Cells]:
    """:func:`step_cells` through tensor ``t`` with the maps ``adj``."""
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
    walk = memo(store, ("cells", ds_id, direction), lambda: _cell_walk(store, ds_id, direction))
    known = _adjacencies(store, direction)
    approximate: set[int] = set()
    pend_c: dict[int, dict[int, list[np.ndarray]]] = {ds_id: {c: [start_rows] for c in start_cols}}
    pend_i: dict[int, dict[int, list[np.ndarray]]] = {}
    contrib: dict[int, Cells] = {}
    infl: dict[int, Cells] = {}
    for d in walk.order:
        contrib[d] = _finish(pend_c.pop(d, {}))
        infl[d] = _finish(pend_i.pop(d, {}))
        if not contrib[d] and not infl[d]:
            continue
        for op, k in walk.edges[d]:
            nxt = op.inputs[k] if direction == "backward" else op.output
            adj = _adjacency(store, op, k, direction, known)
            if not adj.exact:
                approximate.add(op.id)
            assert op.tensors is not None
            t = op.tensors[k].localized() if localized else op.tensors[k]
            c, i = _step(t, adj, contrib[d], infl[d], direction == "backward")
            for col, r in c.items():
                pend_c.setdefault(nxt, {}).setdefault(col, []).append(r)
            for col, r in i.items():
                pend_i.setdefault(nxt, {}).setdefault(col, []).append(r)
    if targets is not None:
        keep = targets | {ds_id}
        contrib = {d: v for d, v in contrib.items() if d in keep}
        infl = {d: v for d, v in infl.items() if d in keep}
    return CellResult(ds_id, direction, contrib, infl, list(walk.blocked), sorted(approximate))


@dataclass(frozen=True)
class _CellWalk:
    """The datasets a cell query from one dataset visits, in topological order, the
    (operation, input position) steps out of each, and the opaque operations met."""

    order: list[int]
    edges: dict[int, list[tuple[Operation, int]]]
    blocked: list[int]


def _cell_walk(store: Store, ds_id: int, direction: str) -> _CellWalk:
    blocked: set[int] = set()
    edges: dict[int, list[tuple[Operation, int]]] = {}

    def neighbours(d: int) -> list[int]:
        found: list[tuple[Operation, int]] = []
        cand = [store.producer(d)] if direction == "backward" else store.consumers(d)
        for op in cand:
            if op is None:
                continue
            if op.tensors is None:
                blocked.add(op.id)
                continue
            for k, inp in enumerate(op.inputs):
                if direction == "backward" or inp == d:
                    found.append((op, k))
        edges[d] = found
        if direction == "backward":
            return list(dict.fromkeys(op.inputs[k] for op, k in found))
        return list(dict.fromkeys(op.output for op, _ in found))

    order = _topo(ds_id, neighbours)
    return _CellWalk(order, edges, sorted(blocked))
