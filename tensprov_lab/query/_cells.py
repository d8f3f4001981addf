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

import numpy as np
from numpy.typing import ArrayLike

from tensprov_lab.query._lineage import _start_rows, _targets, _topo
from tensprov_lab.store._graph import Operation, Store
from tensprov_lab.store._sets import unique

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
    return {
        c: parts[0] if len(parts) == 1 else unique(np.concatenate(parts))
        for c, parts in sorted(acc.items())
    }


def step_cells(
    store: Store,
    op: Operation,
    k: int,
    contrib: Cells,
    infl: Cells,
    direction: str,
    localized: bool = False,
) -> tuple[Cells, Cells]:
    """Push cells across input position ``k`` of ``op`` (backward: output -> input).

    An output column's rows move through ``t.for_column(column)``: a window function's
    column through its frame, every other column through its own record.  ``localized``:
    through ``t.localized()`` (a window's record alone)."""
    assert op.tensors is not None
    t = op.tensors[k].localized() if localized else op.tensors[k]
    cm, im, _ = _maps(store, op, k)
    backward = direction == "backward"
    if not backward:
        cm, im = cm.T, im.T
    cache: dict[tuple[int, bytes], np.ndarray] = {}

    def moved(out_col: int, rows: np.ndarray) -> np.ndarray:
        tt = t.for_column(out_col)
        key = (id(tt), rows.tobytes())
        if key not in cache:
            cache[key] = tt.backward(rows) if backward else tt.forward(rows)
        return cache[key]

    c_acc: dict[int, list[np.ndarray]] = {}
    i_acc: dict[int, list[np.ndarray]] = {}
    for col, rows in contrib.items():
        for c in np.flatnonzero(cm[col]):
            _merge(c_acc, int(c), moved(col if backward else int(c), rows))
        for c in np.flatnonzero(im[col]):
            _merge(i_acc, int(c), moved(col if backward else int(c), rows))
    for col, rows in infl.items():
        for c in np.flatnonzero(cm[col] | im[col]):
            _merge(i_acc, int(c), moved(col if backward else int(c), rows))
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
    blocked: set[int] = set()
    approximate: set[int] = set()
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
    pend_c: dict[int, dict[int, list[np.ndarray]]] = {ds_id: {c: [start_rows] for c in start_cols}}
    pend_i: dict[int, dict[int, list[np.ndarray]]] = {}
    contrib: dict[int, Cells] = {}
    infl: dict[int, Cells] = {}
    for d in order:
        contrib[d] = _finish(pend_c.pop(d, {}))
        infl[d] = _finish(pend_i.pop(d, {}))
        if not contrib[d] and not infl[d]:
            continue
        for op, k in edges[d]:
            nxt = op.inputs[k] if direction == "backward" else op.output
            if not _maps(store, op, k)[2]:
                approximate.add(op.id)
            c, i = step_cells(store, op, k, contrib[d], infl[d], direction, localized)
            for col, r in c.items():
                pend_c.setdefault(nxt, {}).setdefault(col, []).append(r)
            for col, r in i.items():
                pend_i.setdefault(nxt, {}).setdefault(col, []).append(r)
    if targets is not None:
        keep = targets | {ds_id}
        contrib = {d: v for d, v in contrib.items() if d in keep}
        infl = {d: v for d, v in infl.items() if d in keep}
    return CellResult(ds_id, direction, contrib, infl, sorted(blocked), sorted(approximate))
