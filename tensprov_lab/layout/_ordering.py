"""Steps 3 and 4 of the layout: the layered graph with dummy nodes, and crossing
minimisation (initial orders, barycenter sweeps, transpose, sifting).
"""

from __future__ import annotations

from bisect import bisect_right, insort
from collections import deque
from dataclasses import dataclass
from typing import Literal

import numpy as np

from tensprov_lab.layout._ranking import (
    _balance_ranks,
    _longest_path_ranks,
    _network_simplex_ranks,
)

Ranking = Literal["network-simplex", "longest-path"]

_FIRST_ITERATIONS = 4  # sweeps from every initial order before picking the best


_KEEP = 2  # initial orders refined further


_TIE_MOVES = 2.0  # sideways exchanges per node in every other transpose call


_CONVERGENCE = 0.995  # a sweep must gain 0.5% to reset the stall counter


_SIFT_ROUNDS = 3


_MAX_PAIRS = 400_000  # above this many same-gap segment pairs, count by sorting


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
    work_budget: int,
) -> _Drawing:
    """Layers, dummy nodes and orders for a DAG on nodes ``0..n-1``."""
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
        orderer = _Orderer(members, layer, up, down, work_budget)
        for i, part in enumerate(orderer.run(max_iterations, min_quit, use_transpose)):
            layers[i].extend(part)
        # Components share one budget; the first ones (by node order) come first.
        work_budget = max(work_budget - orderer.spent, 0)
    return _Drawing(n, layer, layers, up, down, chains)


def _initial_orders(
    members: list[int], layer: list[int], up: list[list[int]], down: list[list[int]]
) -> list[list[list[int]]]:
    """Deterministic starting orders, best first on our corpus.

    Breadth-first from the sources along out-edges and from the sinks along
    in-edges (as Graphviz does), then depth- and breadth-first from the sources
    along edges of both directions. Trees come out without crossings.
    """
    lo = min(layer[v] for v in members)
    hi = max(layer[v] for v in members)
    sources = [v for v in members if not up[v]]
    sinks = [v for v in members if not down[v]]
    plans: list[tuple[list[int], list[list[int]], list[list[int]] | None, bool]] = [
        (sources, down, None, True),
        (sinks, up, None, True),
        (sources, down, up, False),
        (sources, down, up, True),
    ]
    result = []
    for starts, fwd, bwd, breadth_first in plans:
        seen: set[int] = set()
        rows: list[list[int]] = [[] for _ in range(hi - lo + 1)]
        for s in starts:
            if s in seen:
                continue
            seen.add(s)
            work: deque[int] = deque([s])
            while work:
                v = work.popleft() if breadth_first else work.pop()
                rows[layer[v] - lo].append(v)
                nxt = fwd[v] if bwd is None else fwd[v] + bwd[v]
                # A stack pops the last pushed: push in reverse to visit in order.
                for w in nxt if breadth_first else reversed(nxt):
                    if w not in seen:
                        seen.add(w)
                        work.append(w)
        result.append(rows)
    return result


class _Orderer:
    """Crossing minimisation of one connected component.

    ``spent`` counts elementary steps (node visits, pair evaluations); the
    search stops once it exceeds ``budget``, which bounds the running time on
    large graphs without making the result depend on the machine's speed.
    """

    def __init__(
        self,
        members: list[int],
        layer: list[int],
        up: list[list[int]],
        down: list[list[int]],
        budget: int,
    ) -> None:
        self.members = members
        self.layer = layer
        self.up = up
        self.down = down
        self.pos = [0] * len(layer)
        self.n_layers = len({layer[v] for v in members})
        self.rows: list[list[int]] = []
        self.budget = budget
        self.spent = 0
        self.n_nodes = len(members)
        self.n_edges = sum(len(down[v]) for v in members)
        # The single neighbour on each side, or -1 for none and -2 for several.
        self.up1 = [0] * len(layer)
        self.down1 = [0] * len(layer)
        for v in members:
            for nb, one in ((up[v], self.up1), (down[v], self.down1)):
                one[v] = nb[0] if len(nb) == 1 else (-1 if not nb else -2)
        self._pairs = self._segment_pairs()

    def _segment_pairs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
        """Every pair of edge segments in the same gap, for a vectorised count.

        The pairs never change, only the positions do, so counting becomes a
        few array operations. Worth it unless the gaps are very wide.
        """
        by_gap: dict[int, list[tuple[int, int]]] = {}
        for v in self.members:
            for w in self.down[v]:
                by_gap.setdefault(self.layer[v], []).append((v, w))
        n_pairs = sum(len(s) * (len(s) - 1) // 2 for s in by_gap.values())
        if n_pairs > _MAX_PAIRS:
            return None
        tops: list[int] = []
        bots: list[int] = []
        firsts: list[np.ndarray] = []
        seconds: list[np.ndarray] = []
        for segs in by_gap.values():
            i, j = np.triu_indices(len(segs), 1)
            firsts.append(i + len(tops))
            seconds.append(j + len(tops))
            tops.extend(t for t, _ in segs)
            bots.extend(b for _, b in segs)
        first = np.concatenate(firsts) if firsts else np.zeros(0, dtype=np.intp)
        second = np.concatenate(seconds) if seconds else np.zeros(0, dtype=np.intp)
        return np.asarray(tops), np.asarray(bots), first, second

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
        """Total crossings of the current order."""
        pos, down = self.pos, self.down
        if self._pairs is not None:
            self.spent += self.n_edges // 4
            tops, bots, first, second = self._pairs
            p = np.asarray(pos)
            a = p[tops]
            b = p[bots]
            return int(np.count_nonzero((a[first] - a[second]) * (b[first] - b[second]) < 0))
        # Barth--Jünger--Mutzel, see :func:`_inversions`.
        self.spent += self.n_edges
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

    # -- layer sweeps --------------------------------------------------------

    def sweep(self, downward: bool, reverse_ties: bool) -> None:
        """One barycenter sweep; nodes without fixed neighbours keep their slot.

        (The weighted median, Graphviz's choice, measured no better here.)
        """
        n_layers, pos = self.n_layers, self.pos
        self.spent += self.n_nodes
        rng = range(1, n_layers) if downward else range(n_layers - 2, -1, -1)
        nbrs = self.up if downward else self.down
        for i in rng:
            row = self.rows[i]
            keyed: list[tuple[float, int, int]] = []
            for idx, v in enumerate(row):
                ns = nbrs[v]
                if not ns:
                    continue
                key = pos[ns[0]] if len(ns) == 1 else sum([pos[w] for w in ns]) / len(ns)
                keyed.append((key, -idx if reverse_ties else idx, v))
            if not keyed:
                continue
            keyed.sort()
            it = iter(keyed)
            row = [v if not nbrs[v] else next(it)[2] for v in row]
            self.rows[i] = row
            for k, v in enumerate(row):
                pos[v] = k

    # -- adjacent exchange -------------------------------------------------

    def transpose(self, tie_moves: int) -> None:
        """Swap adjacent nodes while that removes crossings (Gansner et al.).

        Only pairs whose cost a swap may have changed are re-evaluated: the
        neighbouring pairs in the same layer and the pairs around the swapped
        nodes' neighbours in the adjacent layers. Up to ``tie_moves`` swaps of
        crossing pairs that neither gain nor lose are also made; such
        sideways moves let the search walk across plateaus, which in our
        measurements is worth more than extra sweeps.
        """
        n_layers, pos, up, down, rows = self.n_layers, self.pos, self.up, self.down, self.rows
        up1, down1 = self.up1, self.down1
        dirty = [bytearray(b"\x01") * max(len(r) - 1, 0) for r in rows]
        layer_dirty = [len(r) > 1 for r in rows]
        evaluations = 0
        progress = True
        while progress:
            progress = False
            for i in range(n_layers):
                if not layer_dirty[i]:
                    continue
                layer_dirty[i] = False
                row = rows[i]
                width = len(row)
                flags = dirty[i]
                find = flags.find
                above = dirty[i - 1] if i > 0 else None
                below = dirty[i + 1] if i + 1 < n_layers else None
                j = find(1)
                while j >= 0:
                    flags[j] = 0
                    evaluations += 1
                    v = row[j]
                    w = row[j + 1]
                    c0 = c1 = 0
                    for single, nbrs in ((up1, up), (down1, down)):
                        # Dummy nodes (one neighbour per side) dominate: fast path.
                        x = single[v]
                        y = single[w]
                        if x >= 0 and y >= 0:
                            d = pos[x] - pos[y]
                            if d > 0:
                                c0 += 1
                            elif d < 0:
                                c1 += 1
                        elif x != -1 and y != -1:
                            a = nbrs[v]
                            b = nbrs[w]
                            # A comparison costs about an eighth of an evaluation.
                            evaluations += (len(a) * len(b)) >> 3
                            for x in a:
                                p = pos[x]
                                for y in b:
                                    q = pos[y]
                                    if p > q:
                                        c0 += 1
                                    elif p < q:
                                        c1 += 1
                    if c1 < c0 or (c0 and c0 == c1 and tie_moves > 0):
                        if c1 == c0:
                            tie_moves -= 1
                        row[j] = w
                        row[j + 1] = v
                        pos[v] = j + 1
                        pos[w] = j
                        progress = True
                        if j:
                            flags[j - 1] = 1
                        if j + 2 < width:
                            flags[j + 1] = 1
                            layer_dirty[i] = True
                        # the swap may change crossings next to v's and w's neighbours
                        for nbrs, marks, k in ((up, above, i - 1), (down, below, i + 1)):
                            if not marks:
                                continue
                            last = len(marks)
                            for x in (*nbrs[v], *nbrs[w]):
                                p = pos[x]
                                if p:
                                    marks[p - 1] = 1
                                if p < last:
                                    marks[p] = 1
                            layer_dirty[k] = True
                    j = find(1, j + 1)
        self.spent += evaluations

    # -- sifting -----------------------------------------------------------

    def _matrix(self, i: int) -> list[list[float]] | None:
        """``D[x][y]``: change in crossings when ``y`` moves from the right of ``x`` to its left.

        Indices are positions in ``rows[i]``; edges to both adjacent layers count.
        """
        row = self.rows[i]
        k = len(row)
        pos = self.pos
        total = None
        for side, j in ((self.up, i - 1), (self.down, i + 1)):
            if j < 0 or j >= self.n_layers:
                continue
            m = len(self.rows[j])
            cells = [s * m + pos[w] for s, v in enumerate(row) for w in side[v]]
            if not cells:
                continue
            # N[x, p]: edges from x to slot p; below[y, p]: edges of y to slots < p.
            N = np.bincount(np.asarray(cells), minlength=k * m).reshape(k, m).astype(np.float64)
            below = np.cumsum(N, axis=1) - N
            C = N @ below.T  # C[x, y]: crossings between x and y when x is left of y
            total = C if total is None else total + C
        if total is None:
            return None
        result: list[list[float]] = (total.T - total).tolist()
        return result

    def sift_layer(self, i: int) -> float:
        """Move every node of layer ``i`` to its best slot; return the gain."""
        D = self._matrix(i)
        row = self.rows[i]
        k = len(row)
        self.spent += k * k
        if D is None:
            return 0.0
        order = list(range(k))
        gain = 0.0
        for x in range(k):
            idx = order.index(x)
            del order[idx]
            dx = D[x]
            acc = best = cur = 0.0
            best_j = 0
            for j, y in enumerate(order):
                if j == idx:
                    cur = acc
                acc += dx[y]
                if acc < best:
                    best, best_j = acc, j + 1
            if idx == len(order):
                cur = acc
            if best < cur:
                order.insert(best_j, x)
                gain += cur - best
            else:
                order.insert(idx, x)
        if gain > 0:
            new_row = [row[s] for s in order]
            self.rows[i] = new_row
            pos = self.pos
            for p, v in enumerate(new_row):
                pos[v] = p
        return gain

    def sift(self, max_rounds: int) -> None:
        """Sifting (Matuszewski et al. 1999) of all layers, both sides fixed."""
        n_layers = self.n_layers
        dirty = [len(r) > 1 for r in self.rows]
        for _ in range(max_rounds):
            total = 0.0
            for i in range(n_layers):
                if not dirty[i] or self.spent > self.budget:
                    continue
                dirty[i] = False
                g = self.sift_layer(i)
                if g > 0:
                    total += g
                    if i > 0:
                        dirty[i - 1] = len(self.rows[i - 1]) > 1
                    if i + 1 < n_layers:
                        dirty[i + 1] = len(self.rows[i + 1]) > 1
            if total < 1:
                break

    # -- driver ------------------------------------------------------------

    def iterate(
        self, start: int, iterations: int, min_quit: int, use_transpose: bool, ties: float
    ) -> int:
        """Sweeps from the current order; leaves the best order found in place."""
        best = self.count()
        best_rows = self.snapshot()
        stall = 0
        tie_moves = int(ties * self.n_nodes)
        for it in range(start, start + iterations):
            if best == 0 or stall >= min_quit or self.spent > self.budget:
                break
            # Graphviz's schedule: alternate down and up sweeps, and flip the
            # tie-breaking of the sort (and of the exchanges) every two sweeps.
            self.sweep(downward=it % 2 == 0, reverse_ties=it % 4 < 2)
            if use_transpose:
                self.transpose(tie_moves if it % 4 >= 2 else 0)
            c = self.count()
            stall = 0 if c < best * _CONVERGENCE else stall + 1
            if c <= best:
                best, best_rows = c, self.snapshot()
        self.set_rows(best_rows)
        return best

    def run(self, max_iterations: int, min_quit: int, use_transpose: bool) -> list[list[int]]:
        """Search from every initial order, refine the best few, then sift.

        Returns the best order seen, one list per layer of the component.
        """
        inits = _initial_orders(self.members, self.layer, self.up, self.down)
        first = min(_FIRST_ITERATIONS, max_iterations)
        candidates: list[tuple[int, int, list[list[int]]]] = []
        for k, init in enumerate(inits):
            if candidates and (candidates[-1][0] == 0 or self.spent > self.budget):
                break
            self.set_rows(init)
            c = self.iterate(0, first, min_quit, use_transpose, _TIE_MOVES)
            candidates.append((c, k, self.snapshot()))
        candidates.sort(key=lambda t: (t[0], t[1]))
        best_count, _, best_rows = candidates[0]
        for _c, _k, rows in candidates[:_KEEP]:
            if best_count == 0 or self.spent > self.budget:
                break
            self.set_rows(rows)
            c = self.iterate(first, max_iterations - first, min_quit, use_transpose, _TIE_MOVES)
            if c < best_count:
                best_count, best_rows = c, self.snapshot()
        if best_count > 0 and use_transpose and self.spent <= self.budget:
            self.set_rows(best_rows)
            self.sift(_SIFT_ROUNDS)
            self.transpose(0)
            c = self.count()
            if c < best_count:
                best_rows, best_count = self.snapshot(), c
        return best_rows
