"""An independent, pure-Python model of the covered DataFrame operations with explicit
why-provenance, used as the oracle in property-based tests.

Each table row carries ``lin``: source name → set of source row indices.  The model
applies the canonical record order of DESIGN.md §3 directly (it never looks at keys).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

ANY = object()  # a value the oracle cannot predict (e.g. the kept row of dropDuplicates)


@dataclass
class Table:
    cols: list[str]
    types: dict[str, str]  # col -> "int" | "str"
    rows: list[tuple]
    lin: list[dict[str, frozenset[int]]] = field(default_factory=list)

    @staticmethod
    def source(name: str, cols: list[str], types: dict[str, str], rows: list[tuple]) -> Table:
        return Table(cols, types, list(rows), [{name: frozenset([i])} for i in range(len(rows))])

    def get(self, row: tuple, col: str) -> Any:
        return row[self.cols.index(col)]


def merge(*lins: dict[str, frozenset[int]]) -> dict[str, frozenset[int]]:
    out: dict[str, frozenset[int]] = {}
    for lin in lins:
        for k, v in lin.items():
            out[k] = out.get(k, frozenset()) | v
    return out


def _sort_key_asc(v: Any) -> tuple:
    return (0,) if v is None else (1, v)


def _sort_key_desc(v: Any) -> tuple:
    # Spark's desc(): nulls last; only used on integer columns
    return (1,) if v is None else (0, -v)


def apply(step: tuple, t: Table, b: Table) -> Table:
    kind = step[0]
    if kind == "filter_gt":
        _, c, v = step
        keep = [i for i, r in enumerate(t.rows) if t.get(r, c) is not None and t.get(r, c) > v]
        return _subset(t, keep)
    if kind == "filter_eq":
        _, c, v = step
        keep = [i for i, r in enumerate(t.rows) if t.get(r, c) == v]
        return _subset(t, keep)
    if kind == "filter_notnull":
        _, c = step
        return _subset(t, [i for i, r in enumerate(t.rows) if t.get(r, c) is not None])
    if kind == "with":
        _, c, new = step
        rows = [
            (*r, None if t.get(r, c) is None else t.get(r, c) + 1)
            if new not in t.cols
            else tuple(
                (None if t.get(r, c) is None else t.get(r, c) + 1) if x == new else r[j]
                for j, x in enumerate(t.cols)
            )
            for r in t.rows
        ]
        cols = t.cols if new in t.cols else [*t.cols, new]
        return Table(cols, {**t.types, new: "int"}, rows, list(t.lin))
    if kind == "select":
        _, cols = step
        idx = [t.cols.index(c) for c in cols]
        return Table(
            list(cols),
            {c: t.types[c] for c in cols},
            [tuple(r[j] for j in idx) for r in t.rows],
            list(t.lin),
        )
    if kind == "dropna":
        return _subset(t, [i for i, r in enumerate(t.rows) if all(x is not None for x in r)])
    if kind == "fillna":
        ints = [j for j, c in enumerate(t.cols) if t.types[c] == "int"]
        rows = [
            tuple(0 if (x is None and j in ints) else x for j, x in enumerate(r)) for r in t.rows
        ]
        return Table(list(t.cols), dict(t.types), rows, list(t.lin))
    if kind == "orderBy":
        _, c, asc = step
        keyf = _sort_key_asc if asc else _sort_key_desc
        order = sorted(range(len(t.rows)), key=lambda i: (keyf(t.get(t.rows[i], c)), i))
        return _subset(t, order)
    if kind == "limit":
        _, n = step
        return _subset(t, list(range(min(n, len(t.rows)))))
    if kind == "distinct":
        return _group(t, list(t.cols), None)
    if kind == "dropDuplicates":
        _, subset = step
        return apply(("select", subset), _group(t, list(subset), None), b)
    if kind == "groupBy":
        _, c, s = step
        return _group(t, [c], s)
    if kind == "union_self":
        return Table(list(t.cols), dict(t.types), t.rows + t.rows, t.lin + t.lin)
    if kind == "union_b":
        # t.unionByName(b.select(cols)) : b has the same columns here
        cols = t.cols
        bi = [b.cols.index(c) for c in cols]
        return Table(
            list(cols),
            dict(t.types),
            t.rows + [tuple(r[j] for j in bi) for r in b.rows],
            t.lin + b.lin,
        )
    if kind == "join":
        return _join(t, b, step[1])
    if kind == "explode":
        _, x, y = step
        rows, lin = [], []
        for r, li in zip(t.rows, t.lin):
            for v in (t.get(r, x), t.get(r, y)):
                rows.append((*r, v))
                lin.append(li)
        return Table([*t.cols, "e"], {**t.types, "e": "int"}, rows, lin)
    if kind == "window_count":
        _, c = step
        counts: dict[Any, int] = {}
        for r in t.rows:
            counts[t.get(r, c)] = counts.get(t.get(r, c), 0) + 1
        rows = [(*r, counts[t.get(r, c)]) for r in t.rows]
        return Table([*t.cols, "wc"], {**t.types, "wc": "int"}, rows, list(t.lin))
    raise ValueError(kind)


def _subset(t: Table, idx: list[int]) -> Table:
    return Table(list(t.cols), dict(t.types), [t.rows[i] for i in idx], [t.lin[i] for i in idx])


def _group(t: Table, keys: list[str], sum_col: str | None) -> Table:
    groups: dict[tuple, list[int]] = {}
    for i, r in enumerate(t.rows):
        groups.setdefault(tuple(t.get(r, k) for k in keys), []).append(i)
    ordered = sorted(groups.items(), key=lambda kv: kv[1][0])
    if sum_col is None and set(keys) == set(t.cols):
        rows = [t.rows[m[0]] for _, m in ordered]
        return Table(
            list(t.cols), dict(t.types), rows, [merge(*(t.lin[i] for i in m)) for _, m in ordered]
        )
    if sum_col is None:
        # dropDuplicates(subset): other columns come from an arbitrary member
        rows = [
            tuple(t.rows[m[0]][j] if c in keys else ANY for j, c in enumerate(t.cols))
            for _, m in ordered
        ]
        return Table(
            list(t.cols), dict(t.types), rows, [merge(*(t.lin[i] for i in m)) for _, m in ordered]
        )
    rows = []
    for key, m in ordered:
        vals = [t.get(t.rows[i], sum_col) for i in m if t.get(t.rows[i], sum_col) is not None]
        rows.append((*key, len(m), sum(vals) if vals else None))
    cols = [*keys, "n", "t"]
    types = {**{k: t.types[k] for k in keys}, "n": "int", "t": "int"}
    return Table(cols, types, rows, [merge(*(t.lin[i] for i in m)) for _, m in ordered])


def _join(t: Table, b: Table, how: str) -> Table:
    tk, bk = t.cols.index("k"), b.cols.index("k")
    match = {
        i: [j for j, s in enumerate(b.rows) if r[tk] is not None and r[tk] == s[bk]]
        for i, r in enumerate(t.rows)
    }
    t_other = [c for c in t.cols if c != "k"]
    b_other = [c for c in b.cols if c != "k"]
    if how in ("semi", "anti"):
        keep = [i for i in range(len(t.rows)) if bool(match[i]) == (how == "semi")]
        out = _subset(t, keep)
        if how == "semi":
            out.lin = [merge(t.lin[i], *(b.lin[j] for j in match[i])) for i in keep]
        return out
    pairs = [(i, j) for i in range(len(t.rows)) for j in match[i]]
    if how in ("left", "full"):
        pairs += [(i, -1) for i in range(len(t.rows)) if not match[i]]
    if how in ("right", "full"):
        matched_b = {j for i in match for j in match[i]}
        pairs += [(-1, j) for j in range(len(b.rows)) if j not in matched_b]
    pairs.sort()
    rows, lin = [], []
    for i, j in pairs:
        tr = t.rows[i] if i >= 0 else None
        br = b.rows[j] if j >= 0 else None
        if how == "right":
            k = br[bk] if br is not None else None
        elif how == "full":
            k = tr[tk] if tr is not None else br[bk]
        else:
            k = tr[tk]
        rows.append(
            (
                k,
                *[(t.get(tr, c) if tr else None) for c in t_other],
                *[(b.get(br, c) if br else None) for c in b_other],
            )
        )
        lin.append(merge(t.lin[i] if i >= 0 else {}, b.lin[j] if j >= 0 else {}))
    cols = ["k", *t_other, *b_other]
    return Table(cols, {**t.types, **b.types}, rows, lin)
