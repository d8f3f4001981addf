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
        # count(lit(1)) over (partition by c): the frame is the whole partition, so a
        # record comes from every record of its partition (DESIGN.md §10, windows)
        _, c = step
        members: dict[Any, list[int]] = {}
        for i, r in enumerate(t.rows):
            members.setdefault(t.get(r, c), []).append(i)
        rows = [(*r, len(members[t.get(r, c)])) for r in t.rows]
        lin = [merge(*(t.lin[j] for j in members[t.get(r, c)])) for r in t.rows]
        return Table([*t.cols, "wc"], {**t.types, "wc": "int"}, rows, lin)
    if kind == "pivot":
        # groupBy(g).pivot(p, values).agg(sum(x)): a record per group (from every member),
        # a column per pivot value (the sum over the members with that value)
        _, g, p, x, values = step
        groups: dict[Any, list[int]] = {}
        for i, r in enumerate(t.rows):
            groups.setdefault(t.get(r, g), []).append(i)
        ordered = sorted(groups.items(), key=lambda kv: kv[1][0])
        rows = []
        for key, members in ordered:
            cells = []
            for v in values:
                vals = [
                    t.get(t.rows[i], x)
                    for i in members
                    if t.get(t.rows[i], p) == v and t.get(t.rows[i], x) is not None
                ]
                cells.append(sum(vals) if vals else None)
            rows.append((key, *cells))
        names = [str(v) for v in values]
        return Table(
            [g, *names],
            {g: t.types[g], **{n: "int" for n in names}},
            rows,
            [merge(*(t.lin[i] for i in m)) for _, m in ordered],
        )
    if kind in ("window_running", "window_rank"):
        # sum(x) over (partition by c order by x): the default frame, RANGE unbounded
        # preceding .. current row, holds the rows sorting before and the peers (nulls
        # first); rank() over the same order: the whole partition decides it
        _, c, x = step
        parts: dict[Any, list[int]] = {}
        for i, r in enumerate(t.rows):
            parts.setdefault(t.get(r, c), []).append(i)
        new_rows, lin = [], []
        for r in t.rows:
            members = parts[t.get(r, c)]
            mine = _sort_key_asc(t.get(r, x))
            if kind == "window_running":
                frame = [j for j in members if _sort_key_asc(t.get(t.rows[j], x)) <= mine]
                vals = [t.get(t.rows[j], x) for j in frame if t.get(t.rows[j], x) is not None]
                new_rows.append((*r, sum(vals) if vals else None))
            else:
                frame = members
                below = [j for j in members if _sort_key_asc(t.get(t.rows[j], x)) < mine]
                new_rows.append((*r, len(below) + 1))
            lin.append(merge(*(t.lin[j] for j in frame)))
        name = "ws" if kind == "window_running" else "wr"
        return Table([*t.cols, name], {**t.types, name: "int"}, new_rows, lin)
    if kind in ("pandas_hop", "rdd_hop"):
        # toPandas(), a pandas filter (c not null) and sort (every column, nulls first),
        # createDataFrame; or df.rdd.filter(c not null).toDF(), in the input's order:
        # records are matched back by value, each to every upstream record equal to it
        _, c = step
        keep = [i for i, r in enumerate(t.rows) if t.get(r, c) is not None]
        if kind == "pandas_hop":
            keep.sort(key=lambda i: (tuple(_sort_key_asc(v) for v in t.rows[i]), i))
        lin = [merge(*(t.lin[j] for j, r in enumerate(t.rows) if r == t.rows[i])) for i in keep]
        return Table(list(t.cols), dict(t.types), [t.rows[i] for i in keep], lin)
    if kind in ("window_lag", "window_lead"):
        # lag(x) / lead(x) over (partition by c order by x, then every other column):
        # the record itself and the one before / after it in its partition (ties: by
        # input record)
        _, c, x = step
        prev = lag_rows(t, c, x, -1 if kind == "window_lag" else 1)
        rows = [(*r, None if p is None else t.get(t.rows[p], x)) for r, p in zip(t.rows, prev)]
        lin = [merge(t.lin[i], *([] if p is None else [t.lin[p]])) for i, p in enumerate(prev)]
        return Table([*t.cols, "wl"], {**t.types, "wl": t.types[x]}, rows, lin)
    raise ValueError(kind)


def lag_rows(t: Table, c: str, x: str, offset: int = -1) -> list[int | None]:
    """Per record, the record ``offset`` places from it (-1: the one before) in its
    partition by ``c`` ordered by ``x`` then every other column (nulls first), ties by
    input record; None where there is none."""
    order = [x, *(y for y in t.cols if y != x)]
    parts: dict[Any, list[int]] = {}
    for i, r in enumerate(t.rows):
        parts.setdefault(t.get(r, c), []).append(i)
    prev: list[int | None] = [None] * len(t.rows)
    for members in parts.values():
        ranked = sorted(
            members, key=lambda i: (tuple(_sort_key_asc(t.get(t.rows[i], y)) for y in order), i)
        )
        for a, b in zip(ranked, ranked[1:]):
            if offset < 0:
                prev[b] = a
            else:
                prev[a] = b
    return prev


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


#: inner joins on k written without a join condition: ``a.join(b).where(...)``,
#: ``a.crossJoin(b).filter(...)`` and a SQL comma join (``FROM a, b WHERE a.k = b.k``)
COMMA_JOINS = ("join_where", "cross_filter", "sql_comma")


def _join(t: Table, b: Table, how: str) -> Table:
    how = "inner" if how in COMMA_JOINS else how
    tk, bk = t.cols.index("k"), b.cols.index("k")
    match = {
        i: [j for j, s in enumerate(b.rows) if r[tk] is not None and r[tk] == s[bk]]
        for i, r in enumerate(t.rows)
    }
    t_other = [c for c in t.cols if c != "k"]
    b_other = [c for c in b.cols if c != "k"]
    if how in ("semi", "anti"):
        # a USING join puts the key first, then the left's other columns (Spark's
        # analyzer: leftKeys ++ the rest of the left output)
        keep = [i for i in range(len(t.rows)) if bool(match[i]) == (how == "semi")]
        order = [tk, *(t.cols.index(c) for c in t_other)]
        rows = [tuple(t.rows[i][j] for j in order) for i in keep]
        lin = [t.lin[i] for i in keep]
        if how == "semi":
            lin = [merge(t.lin[i], *(b.lin[j] for j in match[i])) for i in keep]
        return Table(["k", *t_other], dict(t.types), rows, lin)
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


# ---------------------------------------------------------------------------------------------
# column dependencies and brute-force cell lineage
#
# The maps below are written from the step definitions (what the step reads and what it
# computes), never from a Spark plan.  Per input of a step: ``out column -> input columns``
# whose values flow into it (contributing) and ``out column -> input columns`` that decide
# whether, where or in which group its record exists (influencing).

Cols = dict[str, frozenset[str]]
Cell = tuple[int, str]  # (row, column name)


def _same(cols: list[str]) -> Cols:
    return {c: frozenset([c]) for c in cols}


def _every(cols: list[str], keys: list[str] | tuple[str, ...] | set[str]) -> Cols:
    return {c: frozenset(keys) for c in cols}


def step_columns(step: tuple, t: Table, out: Table) -> list[tuple[Cols, Cols]]:
    """(contributing, influencing) per input of ``step``: input 0 is ``t``, input 1 the
    other table (``b`` of a join or a union, or ``t`` again for a self-union)."""
    kind = step[0]
    if kind in ("filter_gt", "filter_eq", "filter_notnull", "orderBy"):
        # the condition / sort key decides whether and where every output record exists
        return [(_same(t.cols), _every(t.cols, [step[1]]))]
    if kind == "with":
        _, c, new = step
        return [({**_same(t.cols), new: frozenset([c])}, {})]
    if kind in ("pandas_hop", "rdd_hop"):
        # a column comes from the upstream column of its name; what pandas did with the
        # records is not seen, so nothing is said to influence
        return [(_same(t.cols), {})]
    if kind in ("select", "fillna", "limit"):
        # fillna(0) reads only the column it fills; limit keeps a prefix by position
        return [(_same(out.cols), {})]
    if kind == "dropna":  # dropna() without a subset tests every column
        return [(_same(t.cols), _every(t.cols, t.cols))]
    if kind == "distinct":  # the whole record is the dedup key
        return [(_same(t.cols), _every(t.cols, t.cols))]
    if kind == "dropDuplicates":  # followed by select(subset) in the Spark pipeline
        _, subset = step
        return [(_same(list(subset)), _every(list(subset), subset))]
    if kind == "groupBy":
        _, c, s = step
        # count(lit(1)) reads no column: n has no contributing column
        return [({c: frozenset([c]), "n": frozenset(), "t": frozenset([s])}, _every(out.cols, [c]))]
    if kind == "union_self":
        return [(_same(t.cols), {}), (_same(t.cols), {})]
    if kind == "union_b":  # unionByName(other.select(*cols)): matched by name
        return [(_same(t.cols), {}), (_same(out.cols), {})]
    if kind == "join":
        how = "inner" if step[1] in COMMA_JOINS else step[1]
        if how in ("semi", "anti"):
            # only the left columns come out; both keys decide which left rows survive
            return [(_same(t.cols), _every(t.cols, ["k"])), ({}, _every(t.cols, ["k"]))]
        t_c = {c: frozenset([c]) for c in t.cols if c != "k"}
        b_c = {c: frozenset([c]) for c in out.cols if c not in t.cols}
        # USING join: k is the left key (inner, left), the right key (right), or
        # coalesce(left k, right k) (full outer), so both contribute there
        t_c["k"] = frozenset(["k"]) if how in ("inner", "left", "full") else frozenset()
        b_c["k"] = frozenset(["k"]) if how in ("right", "full") else frozenset()
        return [(t_c, _every(out.cols, ["k"])), (b_c, _every(out.cols, ["k"]))]
    if kind == "explode":
        # explode(array(x, y)) always yields two records: x and y decide no existence
        _, x, y = step
        return [({**_same(t.cols), "e": frozenset([x, y])}, {})]
    if kind == "window_count":
        # count(lit(1)) over (partition by c): c places the record in its window, which
        # decides only the new column
        _, c = step
        return [({**_same(t.cols), "wc": frozenset()}, {"wc": frozenset([c])})]
    if kind == "pivot":
        # a pivot column's cell: the summed x contributes, the group and pivot columns
        # decide which cell.  The group column is also influenced by the pivot column: the
        # first grouping step groups by both (a superset capture documents)
        _, g, p, x, values = step
        names = [str(v) for v in values]
        contributing = {g: frozenset([g]), **{n: frozenset([x]) for n in names}}
        return [(contributing, {c: frozenset([g, p]) for c in [g, *names]})]
    if kind in ("window_running", "window_rank"):
        # the summed x contributes; the partition and order columns decide the frame
        # (a rank's order column decides it: influencing only)
        _, c, x = step
        name = "ws" if kind == "window_running" else "wr"
        values = frozenset([x]) if kind == "window_running" else frozenset()
        return [({**_same(t.cols), name: values}, {name: frozenset([c, x])})]
    if kind in ("window_lag", "window_lead"):
        # the lagged x flows in; the partition and every order column place the row
        _, c, x = step
        return [({**_same(t.cols), "wl": frozenset([x])}, {"wl": frozenset([c, *t.cols])})]
    raise ValueError(kind)


def _relabel(t: Table, name: str) -> Table:
    return Table(
        list(t.cols),
        dict(t.types),
        list(t.rows),
        [{name: frozenset([i])} for i in range(len(t.rows))],
    )


def step_rows(step: tuple, t: Table, b: Table) -> list[list[frozenset[int]]]:
    """Per input of ``step``, per output row: the input rows it comes from.

    The step is applied to its inputs relabelled as fresh sources, so these are the
    model's own one-step why-provenance pairs."""
    out = apply(step, _relabel(t, "@0"), _relabel(b, "@1"))
    n_inputs = 2 if step[0] in ("union_self", "union_b", "join") else 1
    # a self-union reads t twice: both blocks come back labelled @0, which is the
    # same dataset as its second input
    return [[li.get(f"@{k}", frozenset()) for li in out.lin] for k in range(n_inputs)]


def step_column_rows(step: tuple, t: Table, rows: list[list[frozenset[int]]]) -> list[dict]:
    """Per input of ``step``: output column -> per output row, the input rows that
    column's values come from, where that differs from the record's ``rows`` (a window
    operation: the columns it keeps come from the record itself, the window column from
    its frame)."""
    if step[0] in ("window_count", "window_running", "window_rank", "window_lag", "window_lead"):
        own = [frozenset([i]) for i in range(len(t.rows))]
        if step[0] in ("window_lag", "window_lead"):
            # the lagged value: from the record before (after) only
            offset = -1 if step[0] == "window_lag" else 1
            rows = lag_rows(t, step[1], step[2], offset)
            before = [frozenset() if p is None else frozenset([p]) for p in rows]
            return [{**{c: own for c in t.cols}, "wl": before}]
        return [{c: own for c in t.cols}]
    if step[0] == "pivot":
        # the column of pivot value v: the group's members with that value
        _, g, p, _x, values = step
        by_value = {}
        for v in values:
            by_value[str(v)] = [
                frozenset(i for i in members if t.get(t.rows[i], p) == v) for members in rows[0]
            ]
        return [by_value]
    return [{} for _ in rows]


@dataclass
class Step:
    """One step of a linear pipeline: ``out = step(t, other)``.

    ``other_source`` names the source the second input reads (``"a"``/``"b"``) when that
    input is a source (or a projection of one, matched by column name); ``None`` when the
    second input is ``t`` itself (self-union) or the step has one input.
    """

    step: tuple
    t: Table
    other: Table
    other_source: str | None
    out: Table
    rows: list[list[frozenset[int]]] = field(init=False)
    cols: list[tuple[Cols, Cols]] = field(init=False)
    #: per input: output column -> per output row, its own input rows (see
    #: :func:`step_column_rows`)
    col_rows: list[dict] = field(init=False)

    def __post_init__(self) -> None:
        self.rows = step_rows(self.step, self.t, self.other)
        self.cols = step_columns(self.step, self.t, self.out)
        self.col_rows = step_column_rows(self.step, self.t, self.rows)


def _back(
    contrib: set[Cell],
    infl: set[Cell],
    rows: list[frozenset[int]],
    cm: Cols,
    im: Cols,
    col_rows: dict | None = None,
) -> tuple[set[Cell], set[Cell]]:
    """One input of one step, cell by cell: a contributing output cell passes its value
    on to the input cells of its contributing columns, and is placed by the cells of its
    influencing columns; an influencing output cell is decided by all of them.  An output
    column listed in ``col_rows`` takes its rows from there."""
    col_rows = col_rows or {}
    c_in: set[Cell] = set()
    i_in: set[Cell] = set()
    for o, col in contrib:
        for i in col_rows.get(col, rows)[o]:
            c_in.update((i, x) for x in cm.get(col, ()))
            i_in.update((i, x) for x in im.get(col, ()))
    for o, col in infl:
        for i in col_rows.get(col, rows)[o]:
            i_in.update((i, x) for x in cm.get(col, frozenset()) | im.get(col, frozenset()))
    return c_in, i_in


def backward_cells(
    chain: list[Step], row: int, col: str, head: str = "a"
) -> dict[str, tuple[set[Cell], set[Cell]]]:
    """Source cells (contributing, influencing) behind cell ``(row, col)`` of the last
    step's output, by explicit cell sets pushed back one step at a time.  The first
    step's ``t`` is source ``head``."""
    found: dict[str, tuple[set[Cell], set[Cell]]] = {}
    contrib: set[Cell] = {(row, col)}
    infl: set[Cell] = set()
    for st in reversed(chain):
        prev_c: set[Cell] = set()
        prev_i: set[Cell] = set()
        for k, (cm, im) in enumerate(st.cols):
            c, i = _back(contrib, infl, st.rows[k], cm, im, st.col_rows[k])
            if k == 0 or st.other_source is None:
                prev_c |= c
                prev_i |= i
            else:
                got = found.setdefault(st.other_source, (set(), set()))
                got[0].update(c)
                got[1].update(i)
        contrib, infl = prev_c, prev_i
    got = found.setdefault(head, (set(), set()))
    got[0].update(contrib)
    got[1].update(infl)
    return found


def _fwd(
    contrib: set[Cell],
    infl: set[Cell],
    rows: list[frozenset[int]],
    cm: Cols,
    im: Cols,
    out_cols: list[str],
    col_rows: dict | None = None,
) -> tuple[set[Cell], set[Cell]]:
    """:func:`_back` read the other way: from input cells to the output cells they reach."""
    col_rows = col_rows or {}
    c_out: set[Cell] = set()
    i_out: set[Cell] = set()
    for oc in out_cols:
        users: dict[int, list[int]] = {}
        for o, ins in enumerate(col_rows.get(oc, rows)):
            for i in ins:
                users.setdefault(i, []).append(o)
        for i, x in contrib:
            for o in users.get(i, ()):
                if x in cm.get(oc, ()):
                    c_out.add((o, oc))
                if x in im.get(oc, ()):
                    i_out.add((o, oc))
        for i, x in infl:
            for o in users.get(i, ()):
                if x in cm.get(oc, ()) or x in im.get(oc, ()):
                    i_out.add((o, oc))
    return c_out, i_out


def forward_cells(
    chain: list[Step], source: str, row: int, col: str, head: str = "a"
) -> tuple[set[Cell], set[Cell]]:
    """Cells (contributing, influencing) of the last step's output that source cell
    ``(row, col)`` flows into, by explicit cell sets pushed forward one step at a time."""
    start: set[Cell] = {(row, col)}
    contrib: set[Cell] = set(start) if source == head else set()
    infl: set[Cell] = set()
    for st in chain:
        nxt_c: set[Cell] = set()
        nxt_i: set[Cell] = set()
        for k, (cm, im) in enumerate(st.cols):
            if k == 0 or st.other_source is None:
                c_in, i_in = contrib, infl  # the previous step's output (t)
            elif st.other_source == source:
                c_in, i_in = start, set()  # the source itself, read again
            else:
                continue
            c, i = _fwd(c_in, i_in, st.rows[k], cm, im, st.out.cols, st.col_rows[k])
            nxt_c |= c
            nxt_i |= i
        contrib, infl = nxt_c, nxt_i
    return contrib, infl
