"""Steps 1 and 2 of the layout: cycle removal (Eades--Lin--Smyth) and layer
assignment (longest path, network simplex, balancing).
"""

from __future__ import annotations

from collections import deque

import networkx as nx


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
            # tight edges out of v (to their heads), then into v (from their tails)
            for edges, ends, sign in ((out_e[v], heads, 1), (in_e[v], tails, -1)):
                for e in edges:
                    w = ends[e]
                    if not in_tree[w] and sign * (rank[w] - rv) == 1:
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

    def dfs_range(root: int, start: int, incremental: bool = False) -> list[int]:
        """Number the subtree at ``root`` from ``start``; return it in postorder.

        ``incremental`` skips the subtrees whose numbering cannot change: one that
        hangs from the same edge and starts at the same index keeps its numbers (nodes
        whose subtree did change were invalidated, ``low = -1``, beforehand), as in
        Graphviz's incremental ``dfs_range``.
        """
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
                if incremental and par[w] == e and low[w] == cur:
                    cur = lim[w] + 1
                    continue
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

    def invalidate_path(v: int, lca: int) -> None:
        while v != lca:
            low[v] = -1
            e = par[v]
            t, h = tails[e], heads[e]
            v = t if lim[t] > lim[h] else h

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

    for v in dfs_range(0, 1):
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
        # the out-search follows out-edges to their heads (tree in-edges back to their
        # tails); the in-search is its mirror image
        ahead, back = (out_e, in_e) if outsearch else (in_e, out_e)
        far, near = (heads, tails) if outsearch else (tails, heads)
        sign = 1 if outsearch else -1
        stack = [v]
        while stack and slack > 0:
            x = stack.pop()
            lx = lim[x]
            for g in ahead[x]:
                y = far[g]
                if not tree_edge[g]:
                    if not (lo <= lim[y] <= li):
                        s = sign * (rank[y] - rank[x]) - 1
                        if s < slack:
                            enter, slack = g, s
                elif lim[y] < lx:
                    stack.append(y)
            for g in back[x]:
                if tree_edge[g] and lim[near[g]] < lx:
                    stack.append(near[g])
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
        invalidate_path(tails[f], lca)
        invalidate_path(heads[f], lca)
        cut[f] = -cv
        cut[e] = 0
        tree_edge[e] = False
        tree_edge[f] = True
        tree_adj[tails[e]].remove(e)
        tree_adj[heads[e]].remove(e)
        tree_adj[tails[f]].append(f)
        tree_adj[heads[f]].append(f)
        tree_list[tree_list.index(e)] = f
        dfs_range(lca, low[lca], incremental=True)

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
    top = max(rank)
    in_nb: list[list[int]] = [[] for _ in range(n)]
    out_nb: list[list[int]] = [[] for _ in range(n)]
    for t, h in zip(tails, heads, strict=True):
        out_nb[t].append(h)
        in_nb[h].append(t)
    width = [0] * (top + 1)
    for r in rank:
        width[r] += 1
    for v in range(n):
        if not in_nb[v] or len(in_nb[v]) != len(out_nb[v]):
            continue
        # Bounds from the neighbours' current ranks: earlier moves may have shifted them.
        lo = max(rank[u] for u in in_nb[v]) + 1
        hi = min(rank[w] for w in out_nb[v]) - 1
        choice = lo
        for r in range(lo + 1, hi + 1):
            if width[r] < width[choice]:
                choice = r
        if choice != rank[v]:
            width[rank[v]] -= 1
            width[choice] += 1
            rank[v] = choice
