"""Structure and co-lineage queries: Q9 (transformations), Q10 (co-contributors) and
Q11 (co-dependents) of the paper's Table VII.

Pure numpy: no pyspark, no IPython.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
from numpy.typing import ArrayLike

from tensprov_lab.query._lineage import LineageResult, _check_dataset, _topo, backward, forward
from tensprov_lab.query._memo import memo
from tensprov_lab.store._graph import Store
from tensprov_lab.store._sets import unique

__all__ = ["co_contributors", "co_dependents", "meeting_points", "transformations"]


def _up(store: Store, d: int) -> list[int]:
    op = store.producer(d)
    return [] if op is None else list(dict.fromkeys(op.inputs))


def _down(store: Store, d: int) -> list[int]:
    return list(dict.fromkeys(op.output for op in store.consumers(d)))


def transformations(store: Store, ds_id: int, direction: str = "backward") -> list[int]:
    """Q9: ids of the operations that produced ``ds_id`` (``"backward"``: every
    operation upstream of it) or that consumed it (``"forward"``), in execution order.

    Examples
    --------
    Two projections in a row, ``a`` to ``b`` to ``c``:

    >>> from tensprov_lab.store import IdentityTensor, Store
    >>> s = Store()
    >>> a, b, c = (s.add_dataset(name, n_rows=1) for name in "abc")
    >>> o1 = s.add_operation("select", "projection", [a.id], b.id, [IdentityTensor(1)])
    >>> o2 = s.add_operation("select", "projection", [b.id], c.id, [IdentityTensor(1)])
    >>> transformations(s, c.id) == [o1.id, o2.id]
    True
    """
    _check_dataset(store, ds_id)
    if direction not in ("backward", "forward"):
        raise ValueError("direction must be 'backward' or 'forward'")
    return list(
        memo(store, ("transformations", ds_id, direction), lambda: _ops(store, ds_id, direction))
    )


def _ops(store: Store, ds_id: int, direction: str) -> tuple[int, ...]:
    if direction == "backward":
        order = _topo(ds_id, lambda d: _up(store, d))[::-1]
        ops = [store.producer(d) for d in order]
    else:
        order = _topo(ds_id, lambda d: _down(store, d))
        ops = [store.producer(d) for d in order if d != ds_id]
    return tuple(sorted({op.id for op in ops if op is not None}))


def meeting_points(store: Store, a: int, b: int) -> list[int]:
    """Nearest datasets downstream of both ``a`` and ``b`` (where their records are
    first combined): common descendants that no other common descendant leads to."""
    _check_dataset(store, a)
    _check_dataset(store, b)
    common = set(_topo(a, lambda d: _down(store, d))) & set(_topo(b, lambda d: _down(store, d)))
    below: set[int] = set()
    for d in common:
        below |= set(_topo(d, lambda x: _down(store, x))) - {d}
    return sorted(common - below)


def co_contributors(
    store: Store,
    ds_id: int,
    rows: ArrayLike,
    other: int,
    at: int | Iterable[int] | None = None,
) -> np.ndarray:
    """Q10: rows of ``other`` combined with ``rows`` of ``ds_id`` into common outputs.

    The outputs are the records of ``at`` (default: :func:`meeting_points`) derived from
    the given rows; the answer is every record of ``other`` those outputs come from.

    Examples
    --------
    >>> from tensprov_lab.store import Store, IndexTensor
    >>> s = Store()
    >>> l = s.add_dataset("l", n_rows=2, role="source")
    >>> r = s.add_dataset("r", n_rows=3, role="source")
    >>> j = s.add_dataset("j", n_rows=3)
    >>> _ = s.add_operation("join", "join", [l.id, r.id], j.id,
    ...     [IndexTensor.from_index([0, 0, 1], 2), IndexTensor.from_index([0, 2, 1], 3)])
    >>> co_contributors(s, l.id, [0], r.id)
    array([0, 2])
    """
    targets = meeting_points(store, ds_id, other) if at is None else at
    if isinstance(targets, (int, np.integer)):
        targets = [int(targets)]
    return _round_trip(store, ds_id, rows, list(targets), forward, backward, other)


def co_dependents(store: Store, ds_id: int, rows: ArrayLike, other: int) -> np.ndarray:
    """Q11: rows of ``other`` that depend on a source record the given rows depend on.

    Examples
    --------
    Two filters of one source: ``b`` keeps its rows 0 and 2, ``c`` its rows 1 and 2, so
    row 1 of ``b`` and row 1 of ``c`` are the same source record:

    >>> from tensprov_lab.store import MaskTensor, Store
    >>> s = Store()
    >>> a = s.add_dataset("a", n_rows=3, role="source")
    >>> b, c = s.add_dataset("b", n_rows=2), s.add_dataset("c", n_rows=2)
    >>> for out, kept in ((b, [0, 2]), (c, [1, 2])):
    ...     mask = MaskTensor.from_kept(kept, 3)
    ...     _ = s.add_operation("filter", "reduction", [a.id], out.id, [mask])
    >>> co_dependents(s, b.id, [1], c.id)
    array([1])
    """
    _check_dataset(store, other)
    roots = [d for d in _topo(ds_id, lambda d: _up(store, d)) if store.producer(d) is None]
    return _round_trip(store, ds_id, rows, roots, backward, forward, other)


def _round_trip(
    store: Store,
    ds_id: int,
    rows: ArrayLike,
    points: list[int],
    there: Callable[..., LineageResult],
    back: Callable[..., LineageResult],
    other: int,
) -> np.ndarray:
    """The rows of ``other`` reached from ``rows`` of ``ds_id`` by lineage one way
    (``there``) to each of ``points``, then the other way (``back``) from what was
    reached there (sorted, unique)."""
    if not points:
        return np.zeros(0, dtype=np.int64)
    reached = there(store, ds_id, rows, to=points).rows
    parts = [np.zeros(0, dtype=np.int64)]
    for p in points:
        met = reached.get(p)
        if met is None or not met.size:
            continue
        got = back(store, p, met, to=other).rows.get(other)
        if got is not None:
            parts.append(got)
    return unique(np.concatenate(parts))
