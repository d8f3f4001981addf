"""How-provenance (Q5–Q8): which chain of operations connects each reached record.

Lineage is followed one path at a time: a path is a sequence of ``(operation, input
position)`` edges from the start dataset, and the records (or cells) it reaches are the
start records pushed across exactly those edges.  A record reached along two paths (a
diamond, a self-join) is listed with both.  Paths are enumerated depth first, sharing
the work of common prefixes; ``max_paths`` bounds the enumeration on very branchy DAGs.

Pure numpy: no pyspark, no IPython.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from tensprov_lab.query._cells import (
    Cells,
    Move,
    _adjacencies,
    _columns,
    cell_walk,
    move_cells,
)
from tensprov_lab.query._lineage import _move, _start_rows, _targets
from tensprov_lab.store._graph import Store

__all__ = ["Path", "how"]

Edge = tuple[int, int]  # (operation id, input position)


@dataclass
class Path:
    """Records (and, for a cell query, cells) reached along one path of operations."""

    dataset: int
    edges: tuple[Edge, ...]
    rows: np.ndarray
    contributing: Cells | None = None
    influencing: Cells | None = None


def _move_rows(
    store: Store, move: Move, rows: np.ndarray, backward: bool, known: dict[tuple[int, ...], Any]
) -> np.ndarray:
    """``rows`` across ``move``: a run of identity steps passes them on as they are."""
    direction = "backward" if backward else "forward"
    if move.chain is not None and move.chain.adjacency(store, direction, known) is not None:
        return rows
    for op, k in move.edges:
        assert op.tensors is not None
        rows = _move(op.tensors[k], rows, backward)
        if not rows.size:
            break
    return rows


def how(
    store: Store,
    ds_id: int,
    rows: ArrayLike,
    direction: str = "backward",
    to: int | Iterable[int] | None = None,
    columns: Iterable[int] | None = None,
    max_paths: int = 10_000,
) -> tuple[list[Path], bool]:
    """Every path from ``ds_id`` with the records (or cells) reached along it.

    Returns the paths that reach at least one record, and whether the enumeration was
    cut at ``max_paths``.

    Examples
    --------
    A DataFrame unioned with itself: each of its records reached by one of two paths.

    >>> from tensprov_lab.store import BlockTensor, Store
    >>> s = Store()
    >>> a, u = s.add_dataset("a", n_rows=2, role="source"), s.add_dataset("u", n_rows=4)
    >>> op = s.add_operation("union", "append", [a.id, a.id], u.id,
    ...                      [BlockTensor(4, 2, 0), BlockTensor(4, 2, 2)])
    >>> paths, _ = how(s, u.id, [1, 2])
    >>> [(p.edges, p.rows.tolist()) for p in paths]
    [(((2, 0),), [1]), (((2, 1),), [0])]
    """
    if direction not in ("backward", "forward"):
        raise ValueError("direction must be 'backward' or 'forward'")
    start_rows = _start_rows(store, ds_id, rows)
    targets = _targets(store, to)
    cells = columns is not None
    start_c: Cells = (
        {c: start_rows for c in _columns(store, ds_id, columns)} if columns is not None else {}
    )
    found: list[Path] = []
    truncated = False
    backward = direction == "backward"
    known = _adjacencies(store, direction)
    moves, _ = cell_walk(store, ds_id, direction).plan(targets, backward)
    # depth-first over paths; each stack entry carries what reached its dataset
    stack: list[tuple[int, tuple[Edge, ...], np.ndarray, Cells, Cells]] = [
        (ds_id, (), start_rows, start_c, {})
    ]
    while stack:
        d, edges, r, c, i = stack.pop()
        for move in moves[d]:
            r2 = _move_rows(store, move, r, backward, known)
            if not r2.size:
                continue
            c2: Cells = {}
            i2: Cells = {}
            if cells:
                c2, i2 = move_cells(store, move, c, i, direction, known)
                if not c2 and not i2:
                    continue
            e2 = (*edges, *((op.id, k) for op, k in move.edges))
            nxt = move.target
            if targets is None or nxt in targets:
                if len(found) >= max_paths:
                    truncated = True
                    stack.clear()
                    break
                found.append(Path(nxt, e2, r2, c2 if cells else None, i2 if cells else None))
            stack.append((nxt, e2, r2, c2, i2))
    found.sort(key=lambda p: (len(p.edges), p.edges))
    return found, truncated
