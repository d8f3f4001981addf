"""Step 5 of the layout: coordinates by Brandes--Köpf (four alignments, balanced)."""

from __future__ import annotations

from collections import deque

from tensprov_lab.layout._ordering import _Drawing


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
