"""Sugiyama-style layered layout for directed graphs, drawn left to right.

The lineage views draw operator DAGs; this module places them without Graphviz so
the front end needs no native dependency. The pipeline is the classic one:

1. **Cycle removal** (only if the graph has cycles): inside every strongly
   connected component an Eades--Lin--Smyth greedy ordering is computed and the
   edges pointing backwards in it are reversed for the layout. Self-loops are
   ignored by the layout (they get no bend points).
2. **Layer assignment**: longest path, then network simplex (Gansner et al.,
   1993) which minimises the total edge span, as Graphviz ``dot`` does; this
   keeps long edges (and so dummy nodes) few.
3. **Dummy nodes** split every edge spanning ``k > 1`` layers into ``k`` unit
   edges.
4. **Crossing minimisation**: from several deterministic initial orders (DFS
   and BFS from sources and from sinks) alternating down/up layer sweeps with
   the weighted median and the barycenter heuristics, each followed by
   adjacent-exchange ("transpose") improvement; the best order seen wins.
   Crossings are counted with the Barth--Jünger--Mutzel reduction to an
   inversion count, ``O(E log V)`` per layer pair. Ties are broken by the
   current position, so the result depends only on the node and edge
   insertion order of the input graph, never on randomness or hashing.
5. **Coordinate assignment**: Brandes--Köpf (four alignments, balanced), which
   keeps long edges straight when it is cheap to do so.

The drawing direction is left to right: ``x = layer * layer_gap`` and ``y`` is
the position inside the layer (distinct for every node of a layer).

Crossing metric
---------------
:func:`count_crossings` measures any layered left-to-right drawing by the
objective the Sugiyama framework optimises: the *layered crossing number*.
The layers (ranks) are the distinct ``x`` coordinates of the nodes. Every edge
is read as a polyline from its tail's centre through its bend points to its
head's centre; where it passes an intermediate rank its ``y`` there is
interpolated (that is the position of the dummy node it implies). For each pair
of adjacent ranks, two edge segments spanning that gap cross iff their ``y``
orders at the two ranks are strictly opposite; segments that share an end
(equal ``y`` at a rank) never count. The count is the sum over all gaps.

This applies equally to our layout (whose bend points lie exactly on the ranks)
and to Graphviz ``dot`` (node centres from ``-Tplain``, and edge splines sampled
into polylines). For straight segments between adjacent ranks, as we draw, the
metric equals the number of geometric crossings. For curves it is a lower bound
on geometric crossings (two curves with opposite orders on both sides cross an
odd number of times, two with equal orders an even number, possibly two), so
it never favours us over a spline router. Edges whose ends share a rank
("flat" edges, never produced here for a DAG) are not counted.

Examples
--------
>>> import networkx as nx
>>> G = nx.DiGraph([("src", "filter"), ("filter", "join"), ("src", "join")])
>>> pos, bends = sugiyama_layout_with_edges(G)
>>> [pos[n][0] for n in ("src", "filter", "join")]
[0.0, 1.0, 2.0]
>>> len(bends[("src", "join")])  # one dummy on the layer of "filter"
1
>>> count_crossings(G, pos, bends)
0
"""

from __future__ import annotations

from bisect import bisect_right, insort
from collections import deque
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import networkx as nx
import numpy as np

__all__ = [
    "count_crossings",
    "count_order_crossings",
    "sugiyama_layout",
    "sugiyama_layout_with_edges",
]

Point = tuple[float, float]
Ranking = Literal["network-simplex", "longest-path"]


# ---------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------


def sugiyama_layout(
    G: nx.DiGraph,
    *,
    layer_gap: float = 1.0,
    node_gap: float = 1.0,
    dummy_gap: float | None = None,
    ranking: Ranking = "network-simplex",
    max_iterations: int = 24,
    min_quit: int = 8,
    transpose: bool = True,
) -> dict[Hashable, Point]:
    """Lay out a directed graph in layers from left to right.

    Parameters
    ----------
    G : networkx.DiGraph
        The graph. Ideally a DAG; if it has cycles, a small feedback arc set
        (greedy Eades--Lin--Smyth inside each strongly connected component) is
        reversed for the layout only, so those edges point right to left.
        Self-loops are ignored.
    layer_gap : float, default 1.0
        Horizontal distance between consecutive layers.
    node_gap : float, default 1.0
        Minimum vertical distance between two real nodes of a layer.
    dummy_gap : float, optional
        Vertical room taken by a long edge passing through a layer; defaults
        to ``node_gap / 2``.
    ranking : {"network-simplex", "longest-path"}, default "network-simplex"
        Layer assignment. Network simplex minimises total edge span.
    max_iterations : int, default 24
        Maximum number of layer sweeps per initial order.
    min_quit : int, default 8
        Stop sweeping an initial order after this many sweeps without
        improvement.
    transpose : bool, default True
        Apply adjacent-exchange improvement after every sweep.

    Returns
    -------
    dict
        Node -> ``(x, y)``. ``x = layer * layer_gap``; ``y >= 0``.

    Examples
    --------
    >>> import networkx as nx
    >>> pos = sugiyama_layout(nx.DiGraph([("a", "b"), ("a", "c")]))
    >>> pos["a"][0] < pos["b"][0] == pos["c"][0]
    True
    >>> pos["b"][1] != pos["c"][1]
    True
    """
    pos, _ = sugiyama_layout_with_edges(
        G,
        layer_gap=layer_gap,
        node_gap=node_gap,
        dummy_gap=dummy_gap,
        ranking=ranking,
        max_iterations=max_iterations,
        min_quit=min_quit,
        transpose=transpose,
    )
    return pos


def sugiyama_layout_with_edges(
    G: nx.DiGraph,
    *,
    layer_gap: float = 1.0,
    node_gap: float = 1.0,
    dummy_gap: float | None = None,
    ranking: Ranking = "network-simplex",
    max_iterations: int = 24,
    min_quit: int = 8,
    transpose: bool = True,
) -> tuple[dict[Hashable, Point], dict[tuple[Hashable, Hashable], list[Point]]]:
    """Lay out ``G`` like :func:`sugiyama_layout` and also route its edges.

    Parameters are those of :func:`sugiyama_layout`.

    Returns
    -------
    pos : dict
        Node -> ``(x, y)``.
    edge_points : dict
        Every edge ``(u, v)`` of ``G`` -> the bend points (dummy node
        positions) to draw between ``pos[u]`` and ``pos[v]``, in order from
        ``u`` to ``v``. Empty for edges between adjacent layers and self-loops.

    Examples
    --------
    >>> import networkx as nx
    >>> G = nx.DiGraph([(0, 1), (1, 2), (2, 3), (0, 3)])
    >>> pos, bends = sugiyama_layout_with_edges(G)
    >>> [x for x, _ in bends[(0, 3)]]
    [1.0, 2.0]
    >>> bends[(0, 1)]
    []
    """
    if dummy_gap is None:
        dummy_gap = node_gap / 2.0
    nodes = list(G.nodes)
    index = {v: i for i, v in enumerate(nodes)}
    raw_edges = [(index[u], index[v]) for u, v in G.edges if u != v]
    reversed_flags = _feedback_reversals(len(nodes), raw_edges)
    dag_edges = [
        (v, u) if rev else (u, v) for (u, v), rev in zip(raw_edges, reversed_flags, strict=True)
    ]

    drawing = _layout_int(
        len(nodes),
        dag_edges,
        ranking=ranking,
        max_iterations=max_iterations,
        min_quit=min_quit,
        use_transpose=transpose,
    )
    ys = _brandes_koepf(drawing, node_gap / 2.0, dummy_gap / 2.0)
    y0 = min(ys) if ys else 0.0

    def point(i: int) -> Point:
        return (float(drawing.layer[i] * layer_gap), float(ys[i] - y0))

    pos: dict[Hashable, Point] = {v: point(i) for i, v in enumerate(nodes)}
    edge_points: dict[tuple[Hashable, Hashable], list[Point]] = {}
    k = 0  # index into the self-loop-free edge lists
    for u, v in G.edges:
        if u == v:
            edge_points[(u, v)] = []
            continue
        bends = [point(d) for d in drawing.chains[k]]
        if reversed_flags[k]:
            bends.reverse()
        edge_points[(u, v)] = bends
        k += 1
    return pos, edge_points


def count_crossings(
    G: nx.DiGraph,
    pos: Mapping[Hashable, Sequence[float]],
    edge_points: Mapping[tuple[Hashable, Hashable], Sequence[Sequence[float]]] | None = None,
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


# ---------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------


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
    is a sorted list (``bisect``), which in CPython beats an explicit tree.
    """
    pairs.sort()
    seen: list[float] = []
    count = 0
    for _, b in pairs:
        count += len(seen) - bisect_right(seen, b)
        insort(seen, b)
    return count


# ---------------------------------------------------------------------------
# Cycle removal
# ---------------------------------------------------------------------------


def _feedback_reversals(n: int, edges: list[tuple[int, int]]) -> list[bool]:
    """Which edges to reverse so that the graph becomes acyclic."""
    flags = [False] * len(edges)
    if not edges:
        return flags
    H = nx.DiGraph()
    H.add_nodes_from(range(n))
    H.add_edges_from(edges)
    if nx.is_directed_acyclic_graph(H):
        return flags
    comp_of = [0] * n
    for c, comp in enumerate(nx.strongly_connected_components(H)):
        for v in comp:
            comp_of[v] = c
    # Only edges inside a strongly connected component can lie on a cycle.
    inner: dict[int, list[int]] = {}
    for k, (u, v) in enumerate(edges):
        if comp_of[u] == comp_of[v]:
            inner.setdefault(comp_of[u], []).append(k)
    for ks in inner.values():
        order = _eades_lin_smyth([edges[k] for k in ks])
        for k in ks:
            u, v = edges[k]
            if order[u] > order[v]:
                flags[k] = True
    return flags


def _eades_lin_smyth(edges: list[tuple[int, int]]) -> dict[int, int]:
    """Greedy linear order with few backward edges (Eades, Lin, Smyth 1993)."""
    out: dict[int, list[int]] = {}
    inn: dict[int, list[int]] = {}
    for u, v in edges:
        out.setdefault(u, []).append(v)
        inn.setdefault(v, []).append(u)
        out.setdefault(v, [])
        inn.setdefault(u, [])
    alive = dict.fromkeys(sorted(out), True)
    outdeg = {v: len(out[v]) for v in out}
    indeg = {v: len(inn[v]) for v in inn}
    left: list[int] = []
    right: list[int] = []

    def remove(v: int) -> None:
        del alive[v]
        for w in out[v]:
            if w in alive:
                indeg[w] -= 1
        for w in inn[v]:
            if w in alive:
                outdeg[w] -= 1

    while alive:
        changed = True
        while changed:
            changed = False
            for v in list(alive):
                if v not in alive:
                    continue
                if outdeg[v] == 0:
                    right.append(v)
                    remove(v)
                    changed = True
                elif indeg[v] == 0:
                    left.append(v)
                    remove(v)
                    changed = True
        if alive:
            best = max(alive, key=lambda v: (outdeg[v] - indeg[v], -v))
            left.append(best)
            remove(best)
    seq = left + right[::-1]
    return {v: i for i, v in enumerate(seq)}


# ---------------------------------------------------------------------------
# Layer assignment
# ---------------------------------------------------------------------------


def _longest_path_ranks(n: int, tails: list[int], heads: list[int]) -> list[int]:
    out_e: list[list[int]] = [[] for _ in range(n)]
    indeg = [0] * n
    for e, t in enumerate(tails):
        out_e[t].append(e)
        indeg[heads[e]] += 1
    rank = [0] * n
    queue = deque(v for v in range(n) if indeg[v] == 0)
    while queue:
        v = queue.popleft()
        for e in out_e[v]:
            w = heads[e]
            if rank[v] + 1 > rank[w]:
                rank[w] = rank[v] + 1
            indeg[w] -= 1
            if indeg[w] == 0:
                queue.append(w)
    return rank


def _network_simplex_ranks(
    n: int, tails: list[int], heads: list[int], max_iter: int = 10_000
) -> list[int]:
    """Optimal ranks (min total edge span, span >= 1) of a connected DAG.

    Follows Graphviz's ``ns.c``: tight spanning tree, low/lim numbering,
    incremental cut value updates along the tree path of the entering edge.
    """
    m = len(tails)
    rank = _longest_path_ranks(n, tails, heads)
    if n <= 1 or m == 0:
        return rank
    out_e: list[list[int]] = [[] for _ in range(n)]
    in_e: list[list[int]] = [[] for _ in range(n)]
    for e in range(m):
        out_e[tails[e]].append(e)
        in_e[heads[e]].append(e)

    # Feasible tight tree, grown incrementally.
    in_tree = [False] * n
    tree_edge = [False] * m
    tree_adj: list[list[int]] = [[] for _ in range(n)]
    tree_list: list[int] = []
    tree_nodes = [0]
    in_tree[0] = True

    def grow(stack: list[int]) -> None:
        while stack:
            v = stack.pop()
            rv = rank[v]
            for e in out_e[v]:
                w = heads[e]
                if not in_tree[w] and rank[w] - rv == 1:
                    in_tree[w] = True
                    tree_edge[e] = True
                    tree_adj[v].append(e)
                    tree_adj[w].append(e)
                    tree_list.append(e)
                    tree_nodes.append(w)
                    stack.append(w)
            for e in in_e[v]:
                w = tails[e]
                if not in_tree[w] and rv - rank[w] == 1:
                    in_tree[w] = True
                    tree_edge[e] = True
                    tree_adj[v].append(e)
                    tree_adj[w].append(e)
                    tree_list.append(e)
                    tree_nodes.append(w)
                    stack.append(w)

    grow([0])
    while len(tree_nodes) < n:
        best_e, best_slack = -1, 1 << 60
        for e in range(m):
            t, h = tails[e], heads[e]
            if in_tree[t] != in_tree[h]:
                s = rank[h] - rank[t] - 1
                if s < best_slack:
                    best_e, best_slack = e, s
        if best_e < 0:  # disconnected input; callers pass one component
            raise ValueError("network simplex needs a connected graph")
        delta = -best_slack if in_tree[heads[best_e]] else best_slack
        for v in tree_nodes:
            rank[v] += delta
        grow(list(tree_nodes))

    low = [0] * n
    lim = [0] * n
    par = [-1] * n
    cut = [0] * m

    def dfs_range(root: int, root_par: int, start: int) -> list[int]:
        """Number the subtree at ``root``; return it in postorder."""
        par[root] = root_par
        low[root] = start
        cur = start
        post: list[int] = []
        stack = [root]
        idx = [0]
        while stack:
            v = stack[-1]
            i = idx[-1]
            adj = tree_adj[v]
            if i < len(adj):
                idx[-1] = i + 1
                e = adj[i]
                if e == par[v]:
                    continue
                w = heads[e] if tails[e] == v else tails[e]
                par[w] = e
                low[w] = cur
                stack.append(w)
                idx.append(0)
            else:
                lim[v] = cur
                cur += 1
                post.append(v)
                stack.pop()
                idx.pop()
        return post

    def x_cutval(f: int) -> None:
        if par[tails[f]] == f:
            v, direction = tails[f], 1
        else:
            v, direction = heads[f], -1
        lo, li = low[v], lim[v]
        total = 0
        for edge_list in (out_e[v], in_e[v]):
            for e in edge_list:
                is_tail = tails[e] == v
                other = heads[e] if is_tail else tails[e]
                if not (lo <= lim[other] <= li):
                    outside = True
                    rv = 1
                else:
                    outside = False
                    rv = (cut[e] if tree_edge[e] else 0) - 1
                if direction > 0:
                    d = -1 if is_tail else 1
                else:
                    d = 1 if is_tail else -1
                if outside:
                    d = -d
                total += rv if d > 0 else -rv
        cut[f] = total

    for v in dfs_range(0, -1, 1):
        if par[v] >= 0:
            x_cutval(par[v])

    search_size = 30
    s_i = 0

    def leave_edge() -> int:
        nonlocal s_i
        best, cnt = -1, 0
        size = len(tree_list)
        start = s_i
        for step in range(size):
            j = (start + step) % size
            f = tree_list[j]
            if cut[f] < 0:
                if best < 0 or cut[f] < cut[best]:
                    best = f
                cnt += 1
                if cnt >= search_size:
                    s_i = j
                    return best
        s_i = start
        return best

    def enter_edge(e: int) -> int:
        t, h = tails[e], heads[e]
        if lim[t] < lim[h]:
            v, outsearch = t, False
        else:
            v, outsearch = h, True
        lo, li = low[v], lim[v]
        enter, slack = -1, 1 << 60
        stack = [v]
        while stack and slack > 0:
            x = stack.pop()
            lx = lim[x]
            if outsearch:
                for g in out_e[x]:
                    y = heads[g]
                    if not tree_edge[g]:
                        if not (lo <= lim[y] <= li):
                            s = rank[y] - rank[x] - 1
                            if s < slack:
                                enter, slack = g, s
                    elif lim[y] < lx:
                        stack.append(y)
                for g in in_e[x]:
                    if tree_edge[g] and lim[tails[g]] < lx:
                        stack.append(tails[g])
            else:
                for g in in_e[x]:
                    y = tails[g]
                    if not tree_edge[g]:
                        if not (lo <= lim[y] <= li):
                            s = rank[x] - rank[y] - 1
                            if s < slack:
                                enter, slack = g, s
                    elif lim[y] < lx:
                        stack.append(y)
                for g in out_e[x]:
                    if tree_edge[g] and lim[heads[g]] < lx:
                        stack.append(heads[g])
        return enter

    def shift_subtree(root: int, delta: int) -> None:
        stack = [root]
        while stack:
            v = stack.pop()
            rank[v] += delta
            for e in tree_adj[v]:
                if e != par[v]:
                    stack.append(heads[e] if tails[e] == v else tails[e])

    def tree_update(v: int, w: int, cutvalue: int, forward: bool) -> int:
        lw = lim[w]
        while not (low[v] <= lw <= lim[v]):
            e = par[v]
            d = forward if v == tails[e] else not forward
            cut[e] += cutvalue if d else -cutvalue
            t, h = tails[e], heads[e]
            v = t if lim[t] > lim[h] else h
        return v

    for _ in range(max_iter):
        e = leave_edge()
        if e < 0:
            break
        f = enter_edge(e)
        if f < 0:  # cannot happen for a connected graph; stay feasible anyway
            break
        delta = rank[heads[f]] - rank[tails[f]] - 1
        if delta > 0:
            t, h = tails[e], heads[e]
            # The tail side of e moves down (or, equivalently, the head side up).
            if lim[t] < lim[h]:
                shift_subtree(t, -delta)
            else:
                shift_subtree(h, delta)
        cv = cut[e]
        lca = tree_update(tails[f], heads[f], cv, True)
        tree_update(heads[f], tails[f], cv, False)
        cut[f] = -cv
        cut[e] = 0
        tree_edge[e] = False
        tree_edge[f] = True
        tree_adj[tails[e]].remove(e)
        tree_adj[heads[e]].remove(e)
        tree_adj[tails[f]].append(f)
        tree_adj[heads[f]].append(f)
        tree_list[tree_list.index(e)] = f
        dfs_range(lca, par[lca], low[lca])

    base = min(rank)
    return [r - base for r in rank]


def _balance_ranks(rank: list[int], tails: list[int], heads: list[int]) -> None:
    """Move nodes whose in- and out-degree agree to the least crowded rank they fit.

    Such moves keep the total edge span (and so optimality) unchanged but make
    layers narrower, as Graphviz's ``TB_balance`` does.
    """
    n = len(rank)
    if n == 0:
        return
    indeg = [0] * n
    outdeg = [0] * n
    low = [0] * n
    high_rank = max(rank)
    high = [high_rank] * n
    for t, h in zip(tails, heads, strict=True):
        outdeg[t] += 1
        indeg[h] += 1
    for t, h in zip(tails, heads, strict=True):
        if rank[t] + 1 > low[h]:
            low[h] = rank[t] + 1
        if rank[h] - 1 < high[t]:
            high[t] = rank[h] - 1
    width = [0] * (high_rank + 1)
    for r in rank:
        width[r] += 1
    in_nb: list[list[int]] = [[] for _ in range(n)]
    out_nb: list[list[int]] = [[] for _ in range(n)]
    for t, h in zip(tails, heads, strict=True):
        out_nb[t].append(h)
        in_nb[h].append(t)
    for v in range(n):
        if indeg[v] != outdeg[v] or indeg[v] == 0:
            continue
        # Bounds from neighbours' current ranks: earlier moves may have shifted them.
        lo = max((rank[u] + 1 for u in in_nb[v]), default=0)
        hi = min((rank[w] - 1 for w in out_nb[v]), default=high_rank)
        choice = lo
        for r in range(lo + 1, hi + 1):
            if width[r] < width[choice]:
                choice = r
        if choice != rank[v]:
            width[rank[v]] -= 1
            width[choice] += 1
            rank[v] = choice


# ---------------------------------------------------------------------------
# Layered graph and crossing minimisation
# ---------------------------------------------------------------------------


@dataclass
class _Drawing:
    """Proper layered graph: nodes ``0..n_real-1`` real, the rest dummies."""

    n_real: int
    layer: list[int]
    layers: list[list[int]]
    up: list[list[int]]
    down: list[list[int]]
    chains: list[list[int]]  # per input edge: its dummy nodes, tail to head


def _layout_int(
    n: int,
    edges: list[tuple[int, int]],
    *,
    ranking: Ranking,
    max_iterations: int,
    min_quit: int,
    use_transpose: bool,
) -> _Drawing:
    # Components are laid out independently and stacked, so they never cross.
    comp = list(range(n))

    def find(a: int) -> int:
        while comp[a] != a:
            comp[a] = comp[comp[a]]
            a = comp[a]
        return a

    for u, v in edges:
        ru, rv = find(u), find(v)
        if ru != rv:
            if ru < rv:
                comp[rv] = ru
            else:
                comp[ru] = rv
    groups: dict[int, list[int]] = {}
    for v in range(n):
        groups.setdefault(find(v), []).append(v)
    edges_of: dict[int, list[int]] = {}
    for k, (u, _) in enumerate(edges):
        edges_of.setdefault(find(u), []).append(k)

    layer = [0] * n
    for root, members in groups.items():
        ks = edges_of.get(root, [])
        if not ks:
            continue
        local = {v: i for i, v in enumerate(members)}
        tails = [local[edges[k][0]] for k in ks]
        heads = [local[edges[k][1]] for k in ks]
        if ranking == "network-simplex":
            ranks = _network_simplex_ranks(len(members), tails, heads)
        elif ranking == "longest-path":
            ranks = _longest_path_ranks(len(members), tails, heads)
        else:
            raise ValueError(f"unknown ranking {ranking!r}")
        if _os.environ.get("BAL", "1") == "1":
            _balance_ranks(ranks, tails, heads)
        for v, r in zip(members, ranks, strict=True):
            layer[v] = r

    up: list[list[int]] = [[] for _ in range(n)]
    down: list[list[int]] = [[] for _ in range(n)]
    chains: list[list[int]] = []
    total = n
    for u, v in edges:
        chain: list[int] = []
        prev = u
        for r in range(layer[u] + 1, layer[v]):
            d = total
            total += 1
            layer.append(r)
            up.append([prev])
            down.append([])
            down[prev].append(d)
            chain.append(d)
            prev = d
        down[prev].append(v)
        up[v].append(prev)
        chains.append(chain)

    comp_nodes: dict[int, list[int]] = {root: list(members) for root, members in groups.items()}
    for k, chain in enumerate(chains):
        comp_nodes[find(edges[k][0])].extend(chain)

    n_layers = max(layer, default=-1) + 1
    layers: list[list[int]] = [[] for _ in range(n_layers)]
    for root in sorted(comp_nodes):
        members = comp_nodes[root]
        if len(members) == 1:
            layers[layer[members[0]]].append(members[0])
            continue
        for i, part in enumerate(
            _order_component(members, layer, up, down, max_iterations, min_quit, use_transpose)
        ):
            layers[i].extend(part)
    return _Drawing(n, layer, layers, up, down, chains)


def _initial_orders(
    members: list[int], layer: list[int], up: list[list[int]], down: list[list[int]]
) -> list[list[list[int]]]:
    lo = min(layer[v] for v in members)
    hi = max(layer[v] for v in members)
    sources = [v for v in members if not up[v]]
    sinks = [v for v in members if not down[v]]
    result = []
    for starts, fwd, bwd in ((sources, down, up), (sinks, up, down)):
        for breadth_first in (False, True):
            seen = set()
            layers: list[list[int]] = [[] for _ in range(hi - lo + 1)]
            for s in starts:
                if s in seen:
                    continue
                seen.add(s)
                work: deque[int] = deque([s])
                while work:
                    v = work.popleft() if breadth_first else work.pop()
                    layers[layer[v] - lo].append(v)
                    nxt = fwd[v] + bwd[v]
                    # Reverse for DFS so that the first neighbour is visited first.
                    for w in nxt if breadth_first else reversed(nxt):
                        if w not in seen:
                            seen.add(w)
                            work.append(w)
            result.append(layers)
    return result


def _order_component(
    members: list[int],
    layer: list[int],
    up: list[list[int]],
    down: list[list[int]],
    max_iterations: int,
    min_quit: int,
    use_transpose: bool,
) -> list[list[int]]:
    """Best layer orders found for one connected component (layers rebased to 0)."""
    return _Orderer(members, layer, up, down).run(max_iterations, min_quit, use_transpose)


class _Orderer:
    """Crossing minimisation state of one component."""

    def __init__(
        self, members: list[int], layer: list[int], up: list[list[int]], down: list[list[int]]
    ) -> None:
        self.members = members
        self.layer = layer
        self.up = up
        self.down = down
        self.pos = {v: 0 for v in members}
        self.n_layers = len({layer[v] for v in members})
        self.rows: list[list[int]] = []

    # -- bookkeeping -------------------------------------------------------

    def set_rows(self, rows: list[list[int]]) -> None:
        self.rows = [list(r) for r in rows]
        pos = self.pos
        for row in self.rows:
            for i, v in enumerate(row):
                pos[v] = i

    def snapshot(self) -> list[list[int]]:
        return [list(r) for r in self.rows]

    def count(self) -> int:
        pos, down = self.pos, self.down
        total = 0
        for row in self.rows[:-1]:
            seq: list[int] = []
            for v in row:
                ns = down[v]
                if len(ns) == 1:
                    seq.append(pos[ns[0]])
                else:
                    seq.extend(sorted([pos[w] for w in ns]))
            seen: list[int] = []
            for b in seq:
                total += len(seen) - bisect_right(seen, b)
                insort(seen, b)
        return total

    # -- one-sided sweeps --------------------------------------------------

    def sweep(self, downward: bool, median: bool, reverse_ties: bool, sift: bool) -> None:
        n_layers, pos = self.n_layers, self.pos
        rng = range(1, n_layers) if downward else range(n_layers - 2, -1, -1)
        nbrs = self.up if downward else self.down
        for i in rng:
            row = self.rows[i]
            keyed: list[tuple[float, int, int]] = []
            for idx, v in enumerate(row):
                ns = nbrs[v]
                if not ns:
                    continue
                if len(ns) == 1:
                    key = float(pos[ns[0]])
                else:
                    ps = sorted([pos[w] for w in ns])
                    key = _median_value(ps) if median else sum(ps) / len(ps)
                keyed.append((key, -idx if reverse_ties else idx, v))
            if keyed:
                keyed.sort()
                # Nodes without neighbours on the fixed side keep their slot.
                it = iter(keyed)
                row = [v if not nbrs[v] else next(it)[2] for v in row]
                self.rows[i] = row
                for k, v in enumerate(row):
                    pos[v] = k
            if sift and len(row) > 2:
                self.improve_layer(i, downward, not downward, sift=True)

    # -- layer-local search on crossing matrices ---------------------------

    def matrix(
        self, i: int, use_up: bool, use_down: bool
    ) -> tuple[list[list[float]], list[list[float]]] | None:
        """``D[x][y]``: change in crossings when ``y`` moves from right to left of ``x``.

        Indices are positions in ``rows[i]``; only the named sides count.
        """
        row = self.rows[i]
        k = len(row)
        pos = self.pos
        total = None
        for side, flag, j in ((self.up, use_up, i - 1), (self.down, use_down, i + 1)):
            if not flag or j < 0 or j >= self.n_layers:
                continue
            m = len(self.rows[j])
            src: list[int] = []
            dst: list[int] = []
            for s, v in enumerate(row):
                for w in side[v]:
                    src.append(s * m + pos[w])
            if not src:
                continue
            N = np.bincount(np.asarray(src), minlength=k * m).reshape(k, m).astype(np.float64)
            less = np.cumsum(N, axis=1) - N
            C = N @ less.T
            total = C if total is None else total + C
        if total is None:
            return None
        return (total.T - total).tolist(), total.tolist()

    def improve_layer(
        self, i: int, use_up: bool, use_down: bool, sift: bool, reverse: bool = False
    ) -> float:
        """Sifting (or adjacent exchange) in layer ``i``; returns the gain."""
        mats = self.matrix(i, use_up, use_down)
        if mats is None:
            return 0.0
        D, C = mats
        swapped_ties = False
        row = self.rows[i]
        order = list(range(len(row)))
        gain = 0.0
        if sift:
            for x in range(len(row)):
                idx = order.index(x)
                del order[idx]
                Dx = D[x]
                acc = 0.0
                best = 0.0
                best_j = 0
                cur = 0.0
                for j, y in enumerate(order):
                    if j == idx:
                        cur = acc
                    acc += Dx[y]
                    if acc < best:
                        best, best_j = acc, j + 1
                if idx == len(order):
                    cur = acc
                if best < cur:
                    order.insert(best_j, x)
                    gain += cur - best
                else:
                    order.insert(idx, x)
        else:
            # One pass, as in dot: with ``reverse`` equal-cost swaps are taken too,
            # which moves the search off plateaus.
            for j in range(len(order) - 1):
                x, y = order[j], order[j + 1]
                d = D[x][y]
                if d < 0:
                    order[j], order[j + 1] = y, x
                    gain -= d
                elif reverse and d == 0 and C[x][y] > 0:
                    order[j], order[j + 1] = y, x
                    swapped_ties = True
        if gain > 0 or swapped_ties:
            new_row = [row[s] for s in order]
            self.rows[i] = new_row
            pos = self.pos
            for k, v in enumerate(new_row):
                pos[v] = k
        return gain

    def transpose(self, reverse: bool, max_passes: int) -> None:
        """Adjacent exchange until no pass gains (Gansner et al.'s ``transpose``).

        With ``reverse``, equal-cost swaps of crossing pairs are also made once
        per visit; that perturbation measurably helps later sweeps escape
        plateaus.
        """
        n_layers, pos, up, down, rows = self.n_layers, self.pos, self.up, self.down, self.rows
        candidate = [True] * n_layers
        for _ in range(max_passes):
            delta = 0
            for i in range(n_layers):
                if not candidate[i]:
                    continue
                candidate[i] = False
                row = rows[i]
                k = len(row)
                if k < 2:
                    continue
                ups = [[pos[x] for x in up[v]] for v in row]
                dns = [[pos[x] for x in down[v]] for v in row]
                swapped = False
                for j in range(k - 1):
                    c0 = c1 = 0
                    for a, b in ((ups[j], ups[j + 1]), (dns[j], dns[j + 1])):
                        if not a or not b:
                            continue
                        if len(a) == 1 and len(b) == 1:
                            p, q = a[0], b[0]
                            if p > q:
                                c0 += 1
                            elif p < q:
                                c1 += 1
                            continue
                        for p in a:
                            for q in b:
                                if p > q:
                                    c0 += 1
                                elif p < q:
                                    c1 += 1
                    if c1 < c0 or (reverse and c0 > 0 and c1 == c0):
                        row[j], row[j + 1] = row[j + 1], row[j]
                        ups[j], ups[j + 1] = ups[j + 1], ups[j]
                        dns[j], dns[j + 1] = dns[j + 1], dns[j]
                        swapped = True
                        if c1 < c0:
                            delta += c0 - c1
                            candidate[i] = True
                            if i > 0:
                                candidate[i - 1] = True
                            if i + 1 < n_layers:
                                candidate[i + 1] = True
                if swapped:
                    for idx, v in enumerate(row):
                        pos[v] = idx
            if delta < 1:
                break

    def sift_all(self, max_rounds: int) -> None:
        """Two-sided sifting of every node until a round gains nothing."""
        n_layers = self.n_layers
        dirty = [True] * n_layers
        for _ in range(max_rounds):
            total = 0.0
            for i in range(n_layers):
                if not dirty[i]:
                    continue
                dirty[i] = False
                if len(self.rows[i]) < 2:
                    continue
                g = self.improve_layer(i, True, True, sift=True)
                if g > 0:
                    total += g
                    if i > 0:
                        dirty[i - 1] = True
                    if i + 1 < n_layers:
                        dirty[i + 1] = True
            if total < 1:
                break

    # -- driver ------------------------------------------------------------

    def iterate(self, start: int, iterations: int, min_quit: int, use_transpose: bool) -> int:
        """Sweeps from the current order; leaves the best order found in place."""
        cfg = _CFG
        best = self.count()
        best_rows = self.snapshot()
        stall = 0
        for it in range(start, start + iterations):
            if best == 0:
                break
            self.sweep(
                downward=it % 2 == 0,
                median=cfg["median"](it),
                reverse_ties=it % 4 >= 2,
                sift=cfg["sweep_sift"],
            )
            if use_transpose:
                self.transpose(reverse=cfg["rev"] and it % 4 >= 2, max_passes=cfg["tp"])
            c = self.count()
            if c < best:
                best, best_rows, stall = c, self.snapshot(), 0
            else:
                stall += 1
                if stall >= min_quit:
                    break
        self.set_rows(best_rows)
        return best

    def run(self, max_iterations: int, min_quit: int, use_transpose: bool) -> list[list[int]]:
        cfg = _CFG
        candidates: list[tuple[int, int, list[list[int]]]] = []
        inits = _initial_orders(self.members, self.layer, self.up, self.down)[: cfg["inits"]]
        for k, init in enumerate(inits):
            self.set_rows(init)
            c = self.iterate(0, cfg["p1"], min_quit, use_transpose)
            candidates.append((c, k, self.snapshot()))
            if c == 0:
                break
        candidates.sort(key=lambda t: (t[0], t[1]))
        best_count, _, best_rows = candidates[0]
        for c0, _k, rows in candidates[: cfg["keep"]]:
            if best_count == 0:
                break
            self.set_rows(rows)
            c = self.iterate(cfg["p1"], max_iterations, min_quit, use_transpose)
            if c < best_count:
                best_count, best_rows = c, self.snapshot()
        if best_count > 0 and cfg["final_sift"]:
            self.set_rows(best_rows)
            self.sift_all(cfg["final_sift"])
            if use_transpose:
                self.transpose(reverse=False, max_passes=cfg["tp"])
            c = self.count()
            if c < best_count:
                best_rows, best_count = self.snapshot(), c
        return best_rows


def _env_cfg() -> dict:
    import os

    med = os.environ.get("MED", "mix")
    return {
        "inits": int(os.environ.get("INITS", "4")),
        "median": (lambda it: it % 4 < 2) if med == "mix" else (lambda it: med == "med"),
        "sweep_sift": os.environ.get("SWSIFT", "0") == "1",
        "final_sift": int(os.environ.get("FSIFT", "0")),
        "rev": os.environ.get("REV", "1") == "1",
        "tp": int(os.environ.get("TP", "50")),
        "p1": int(os.environ.get("P1", "4")),
        "keep": int(os.environ.get("KEEP", "1")),
    }


_CFG = _env_cfg()


def _median_value(ps: list[int]) -> float:
    """Weighted median of sorted neighbour positions (Gansner et al. 1993)."""
    k = len(ps)
    mid = k // 2
    if k % 2:
        return float(ps[mid])
    if k == 2:
        return (ps[0] + ps[1]) / 2.0
    left = ps[mid - 1] - ps[0]
    right = ps[-1] - ps[mid]
    if left + right == 0:
        return (ps[mid - 1] + ps[mid]) / 2.0
    return (ps[mid - 1] * right + ps[mid] * left) / (left + right)


# ---------------------------------------------------------------------------
# Coordinate assignment (Brandes--Köpf)
# ---------------------------------------------------------------------------


def _brandes_koepf(d: _Drawing, half_real: float, half_dummy: float) -> list[float]:
    """In-layer coordinates; four alignments combined by the median rule."""
    n = len(d.layer)
    if n == 0:
        return []
    half = [half_real if v < d.n_real else half_dummy for v in range(n)]
    order = [0] * n
    for row in d.layers:
        for i, v in enumerate(row):
            order[v] = i

    # Type-1 conflicts: a non-inner segment crossing an inner (dummy-dummy)
    # segment loses, so that long edges stay straight.
    conflicts: set[tuple[int, int]] = set()
    for i in range(1, len(d.layers)):
        prev_len = len(d.layers[i - 1])
        row = d.layers[i]
        k0 = 0
        scan = 0
        for j, v in enumerate(row):
            w = d.up[v][0] if v >= d.n_real and d.up[v][0] >= d.n_real else -1
            k1 = order[w] if w >= 0 else prev_len
            if w >= 0 or j == len(row) - 1:
                for s in row[scan : j + 1]:
                    for u in d.up[s]:
                        pu = order[u]
                        if (pu < k0 or k1 < pu) and not (u >= d.n_real and s >= d.n_real):
                            conflicts.add((u, s))
                scan = j + 1
                k0 = k1

    xss: list[list[float]] = []
    for vert_up in (True, False):
        for left in (True, False):
            rows = d.layers if vert_up else d.layers[::-1]
            if not left:
                rows = [r[::-1] for r in rows]
            nbrs = d.up if vert_up else d.down
            xs = _bk_single(n, rows, nbrs, conflicts, half, vert_up)
            if xs is None:
                return _fallback_coords(d, half)
            if not left:
                xs = [-x for x in xs]
            xss.append(xs)

    widths = [
        max(x + half[v] for v, x in enumerate(xs)) - min(x - half[v] for v, x in enumerate(xs))
        for xs in xss
    ]
    ref = xss[widths.index(min(widths))]
    ref_min, ref_max = min(ref), max(ref)
    for k, xs in enumerate(xss):
        shift = ref_min - min(xs) if k % 2 == 0 else ref_max - max(xs)
        if shift:
            xss[k] = [x + shift for x in xs]
    result = []
    for v in range(n):
        vals = sorted(xs[v] for xs in xss)
        result.append((vals[1] + vals[2]) / 2.0)
    return result


def _bk_single(
    n: int,
    rows: list[list[int]],
    nbrs: list[list[int]],
    conflicts: set[tuple[int, int]],
    half: list[float],
    vert_up: bool,
) -> list[float] | None:
    p = [0] * n
    for row in rows:
        for i, v in enumerate(row):
            p[v] = i
    root = list(range(n))
    align = list(range(n))
    for row in rows:
        prev_idx = -1
        for v in row:
            ws = nbrs[v]
            if not ws:
                continue
            if len(ws) > 1:
                ws = sorted(ws, key=p.__getitem__)
            mp = (len(ws) - 1) / 2.0
            for i in range(int(mp), int(mp + 0.5) + 1):
                w = ws[i]
                pair = (w, v) if vert_up else (v, w)
                if align[v] == v and prev_idx < p[w] and pair not in conflicts:
                    align[w] = v
                    root[v] = root[w]
                    align[v] = root[v]
                    prev_idx = p[w]

    # Block graph: an edge between the blocks of in-layer neighbours.
    succ: dict[int, dict[int, float]] = {}
    pred_count: dict[int, int] = {}
    for row in rows:
        for a, b in zip(row, row[1:], strict=False):
            ra, rb = root[a], root[b]
            sep = half[a] + half[b]
            targets = succ.setdefault(ra, {})
            if rb not in targets:
                pred_count[rb] = pred_count.get(rb, 0) + 1
                targets[rb] = sep
            elif sep > targets[rb]:
                targets[rb] = sep
    blocks = [v for v in range(n) if root[v] == v]
    indeg = {b: pred_count.get(b, 0) for b in blocks}
    topo: list[int] = []
    ready = deque(b for b in blocks if indeg[b] == 0)
    while ready:
        b = ready.popleft()
        topo.append(b)
        for c in succ.get(b, {}):
            indeg[c] -= 1
            if indeg[c] == 0:
                ready.append(c)
    if len(topo) != len(blocks):
        return None
    xs = dict.fromkeys(blocks, 0.0)
    for b in topo:
        xb = xs[b]
        for c, sep in succ.get(b, {}).items():
            if xb + sep > xs[c]:
                xs[c] = xb + sep
    # Pull blocks with room towards their successors to close gaps.
    for b in reversed(topo):
        outs = succ.get(b)
        if outs:
            limit = min(xs[c] - sep for c, sep in outs.items())
            if limit > xs[b]:
                xs[b] = limit
    return [xs[root[v]] for v in range(n)]


def _fallback_coords(d: _Drawing, half: list[float]) -> list[float]:
    ys = [0.0] * len(d.layer)
    for row in d.layers:
        y = 0.0
        for a, b in zip(row, row[1:], strict=False):
            y += half[a] + half[b]
            ys[b] = y
    return ys


import os as _os

_MODE = _os.environ.get("MED", "mix")


def _MED(it: int) -> bool:
    if _MODE == "mix":
        return it % 4 < 2
    return _MODE == "med"
