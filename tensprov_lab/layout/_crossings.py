"""The layered crossing number of a left-to-right drawing (see the package
docstring's "Crossing metric").
"""

from __future__ import annotations

from bisect import bisect_right, insort
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import networkx as nx

__all__ = ["Point", "count_crossings", "count_order_crossings"]

Point = tuple[float, float]


def count_crossings(
    G: nx.DiGraph,
    pos: Mapping[Any, Sequence[float]],
    edge_points: Mapping[Any, Sequence[Sequence[float]]] | None = None,
    *,
    tol: float = 1e-6,
) -> int:
    """Count the layered crossings of a left-to-right drawing.

    See the module docstring for the exact metric. It works for any layout
    whose layers are columns of equal ``x`` (ours, Graphviz ``dot -Grankdir=LR``).

    Parameters
    ----------
    G : networkx.DiGraph
        The drawn graph.
    pos : mapping
        Node -> ``(x, y)`` centre.
    edge_points : mapping, optional
        Edge -> interior points of its polyline (bend points, or a sampled
        spline), from tail to head. Missing edges are straight lines.
    tol : float, default 1e-6
        Node ``x`` values closer than this are the same rank.

    Returns
    -------
    int
        Number of pairs of edge segments crossing between adjacent ranks.

    Examples
    --------
    >>> import networkx as nx
    >>> G = nx.DiGraph([("a", "d"), ("b", "c")])
    >>> count_crossings(G, {"a": (0, 0), "b": (0, 1), "c": (1, 0), "d": (1, 1)})
    1
    """
    xs = sorted({float(pos[v][0]) for v in G.nodes})
    ranks: list[float] = []
    for x in xs:
        if not ranks or x - ranks[-1] > tol:
            ranks.append(x)
    gaps: list[list[tuple[float, float]]] = [[] for _ in range(max(len(ranks) - 1, 0))]

    def rank_of(x: float) -> int:
        i = bisect_right(ranks, x + tol) - 1
        return max(i, 0)

    for u, v in G.edges:
        if u == v:
            continue
        ru, rv = rank_of(float(pos[u][0])), rank_of(float(pos[v][0]))
        if ru == rv:
            continue
        inner = list(edge_points.get((u, v), ())) if edge_points is not None else []
        line = [_pt(pos[u]), *(_pt(p) for p in inner), _pt(pos[v])]
        if ru > rv:
            ru, rv = rv, ru
            line.reverse()
        ys = [line[0][1]]
        ys.extend(_y_at(line, ranks[r]) for r in range(ru + 1, rv))
        ys.append(line[-1][1])
        for k in range(rv - ru):
            gaps[ru + k].append((ys[k], ys[k + 1]))
    return sum(_inversions(pairs) for pairs in gaps)


def count_order_crossings(
    layers: Sequence[Sequence[Hashable]],
    edges: Sequence[tuple[Hashable, Hashable]],
) -> int:
    """Count crossings of a layered ordering between adjacent layers.

    Parameters
    ----------
    layers : sequence of sequences
        ``layers[i]`` lists the nodes of layer ``i`` in order (dummies included).
    edges : sequence of pairs
        Edges between nodes of adjacent layers (either direction).

    Returns
    -------
    int
        Number of crossing pairs of edges.

    Examples
    --------
    >>> count_order_crossings([["a", "b"], ["c", "d"]], [("a", "d"), ("b", "c")])
    1
    >>> count_order_crossings([["a", "b"], ["d", "c"]], [("a", "d"), ("b", "c")])
    0
    """
    where = {v: (i, k) for i, layer in enumerate(layers) for k, v in enumerate(layer)}
    gaps: list[list[tuple[float, float]]] = [[] for _ in range(max(len(layers) - 1, 0))]
    for u, v in edges:
        (lu, pu), (lv, pv) = where[u], where[v]
        if lu > lv:
            (lu, pu), (lv, pv) = (lv, pv), (lu, pu)
        if lv - lu != 1:
            raise ValueError(f"edge {(u, v)!r} does not join adjacent layers")
        gaps[lu].append((pu, pv))
    return sum(_inversions(pairs) for pairs in gaps)


def _pt(p: Sequence[float]) -> Point:
    return (float(p[0]), float(p[1]))


def _y_at(line: Sequence[Point], x: float) -> float:
    """``y`` where the polyline first reaches abscissa ``x``."""
    for (x0, y0), (x1, y1) in zip(line, line[1:], strict=False):
        lo, hi = (x0, x1) if x0 <= x1 else (x1, x0)
        if lo <= x <= hi:
            if x1 == x0:
                return y0
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    # Polyline never reaches x (bad input); the nearest end is the best guess.
    return line[0][1] if abs(line[0][0] - x) <= abs(line[-1][0] - x) else line[-1][1]


def _inversions(pairs: list[tuple[float, float]]) -> int:
    """Pairs ``i, j`` with strictly opposite orders in both coordinates.

    Barth--Jünger--Mutzel: sorting by (left, right) leaves exactly the
    crossings as inversions of the right-hand sequence; equal left ends sort
    by right end, so edges sharing a node are never counted. The accumulator
    is a sorted list (``bisect``): its insertions move memory in C, which at
    the layer widths of a drawing is faster than a tree walked in Python.
    """
    pairs.sort()
    seen: list[float] = []
    count = 0
    for _, b in pairs:
        count += len(seen) - bisect_right(seen, b)
        insort(seen, b)
    return count
