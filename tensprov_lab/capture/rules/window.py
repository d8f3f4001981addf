"""Window functions: ``F.lag(...).over(w)``, ``F.sum(...).over(w)``, ``row_number()``.

Record rule: every output record is its input record, and each window function's value
comes from the records of its *frame*: ``lag``/``lead`` the offset row, an aggregate the
rows between its frame's bounds (a running sum: the partition's start up to the record),
a ranking function (``row_number``, ``rank``, ``ntile``, ...) the whole partition, whose
order decides the rank, except a ``row_number()`` over all records in the order
``monotonically_increasing_id()`` gives (the pandas API's "sequence" index): a position,
made from no value, like :mod:`.sequence`'s, whose frame is the record alone.
:meth:`Window.tensors` reads, in one Spark job over the window's input, each record's
partition, its position in the partition's order (ties broken by input record) and, per
function, its frame's bounds as two counts (rows up to the frame's end, rows in the
frame), and keeps every frame as a range of sorted positions
(:class:`~tensprov_lab.store.WindowTensor`: two ints a record and function).
``localized=True`` in a query gives the record alone (the paper's localized view).  A
frame it cannot read exactly (a range over an interval, ``lag`` skipping nulls, an
unknown function) is taken as the whole partition (a superset), with a note.
Attribute rule: the function's arguments contribute, the partition and order columns
influence.  Replay: the operation is *contextual*; replays read its input whole.  Over
Spark Connect a window function is an expression in a ``project`` or ``with_columns``
relation (:mod:`.project` passes the keys on and maps its columns); its frames are read
the same way by :mod:`tensprov_lab.capture.connect._windows`.

Examples
--------
>>> from tensprov_lab.capture.rules import rule_for
>>> rule_for("Window").contextual
True
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tensprov_lab.capture.plan._exprs import Lin, exprs, ids
from tensprov_lab.capture.plan._keyed import Rewrite, key_name
from tensprov_lab.capture.plan._keys import arrow_keys
from tensprov_lab.capture.plan._pieces import read_whole
from tensprov_lab.capture.rules._base import Captured, Rule, attrs
from tensprov_lab.capture.rules._classic import PlanNode, Reading, Rewriting, Walked, Walking

__all__ = ["Window", "frame_tensors"]

JObject = Any
#: functions whose value depends on the order of every row of the partition
_RANKING = {"RowNumber", "Rank", "DenseRank", "PercentRank", "CumeDist", "NTile"}
#: the frame of a window function that numbers records by position: the record alone
_SELF = "self"
#: a frame bound: an int offset, or one of these
_UNBOUNDED_PRECEDING = "unbounded preceding"
_UNBOUNDED_FOLLOWING = "unbounded following"


class Window(Rule):
    nodes = ("Window",)
    keeps_records = True
    contextual = True

    def annotate(self, rw: Rewriting, node: Any, kids: list[Any], results: list[Walked]) -> Walked:
        plan, blocks = super().annotate(rw, node, kids, results)
        # the window's rewritten input and its keys: what tensors() reads frames over
        rw.info.windows.append((node, results[0][0], attrs(results[0][1])))
        return plan, blocks

    def tensors(self, reader: Reading, rw: Rewrite, occ: list[Any]) -> Captured | None:
        from tensprov_lab.store import IdentityTensor, MaskTensor, WindowTensor

        node = occ[0] if len(occ) == 1 else None
        if node is None or node.ki is None or node.n is None:
            return None
        # the frames are over the step's input records: every node up to the last
        # window keeps them all; above it, nodes may drop records (a filter on a rank:
        # the usual "latest row per key") but not group, sort, join or explode them
        last = max(i for i, name in enumerate(rw.nodes) if name == "Window")
        below = all(r.keeps_records for r in rw.rules[: last + 1])
        above = all(r.keeps_records for r in rw.rules[last + 1 :])
        shaped = (
            below and rw.group is None and not rw.sort and rw.semi is None
            and not rw.n_branches and all(b.kind == "input" for b in rw.blocks)
        )  # fmt: skip
        if not shaped:
            # e.g. a SQL statement grouping or joining in the same call: the records'
            # lineage stays their own, and the user is told so
            reader._note(
                "window: its frames are not traced when the same call also groups, "
                "sorts or joins; each record's lineage is its own record (localized)"
            )
            return None
        reader._index_deferred(occ)
        n = node.n
        jvm = reader.jvm
        in_ids = set(jvm.expr_ids(node.plan))
        out_ids = jvm.expr_ids(rw.plan)[: len(jvm.output(rw.plan)) - len(rw.keys)]
        frames: list[Any] = []
        by_alias: dict[int, int] = {}
        for win, child, keys in rw.windows:
            got = _frames(reader, win, child, keys, node)
            for alias_id, frame in got:
                by_alias[alias_id] = len(frames)
                frames.append(frame)
        kept: MaskTensor | None = None
        m, ki = n, node.ki
        if not above:
            # which records survive: the step's keys read back (one more job)
            names = [str(a.name()) for a in rw.keys]
            m, (picked,), ki = reader._functional(rw, occ, reader._collect_keys(rw.plan, names))
            if isinstance(picked, MaskTensor):
                kept = picked  # the survivors in canonical order: their input records
            elif not isinstance(picked, IdentityTensor):
                raise ValueError("a record the window step keeps is not one of its input's")
        if not frames:
            return m, [kept if kept is not None else IdentityTensor(n)], ki
        columns: dict[int, list[int]] = {}
        for col, ident in enumerate(out_ids):
            if ident in by_alias:
                columns[col] = [by_alias[ident]]
            elif ident not in in_ids:
                # made in this operation from window columns (or not): every frame and
                # the record itself, a superset
                columns[col] = [-1, *range(len(frames))]
        return m, [WindowTensor(n, frames, columns, kept=kept)], ki

    def output_ids(self, d: dict[str, Any], kid_ids: list[list[int]]) -> list[int] | None:
        return kid_ids[0] + ids(d["windowExpressions"])

    def attributes(self, w: Walking, n: PlanNode) -> dict[int, Lin]:
        spec = Lin()
        for key in ("partitionSpec", "orderSpec"):
            for e in exprs(n.d[key]):
                got = w.lin(n.env, e.refs())
                spec = Lin(spec.contrib | got.contrib, spec.infl | got.infl)
        new = {}
        for e in exprs(n.d["windowExpressions"]):
            fn = Lin()
            for we in e.find("WindowExpression"):
                got = w.lin(n.env, we.kids[0].refs())
                if we.kids[0].cls in _RANKING:
                    # rank() reads the order values: they decide the rank, no value
                    # flows into it
                    got = Lin(frozenset(), got.all())
                fn = Lin(fn.contrib | got.contrib, fn.infl | got.infl)
            ident = e.named_id()
            if ident is not None:
                new[ident] = Lin(fn.contrib, fn.infl | spec.all())
        return new


def _bound(jvm: Any, expr: JObject) -> int | str | None:
    """A frame bound as an int offset or an unbounded side; None when not an int."""
    cls = jvm.cls(expr)
    if cls == "UnboundedPreceding$":
        return _UNBOUNDED_PRECEDING
    if cls == "UnboundedFollowing$":
        return _UNBOUNDED_FOLLOWING
    if cls == "CurrentRow$":
        return 0
    try:
        value = expr.eval(None) if bool(expr.foldable()) else None
    except Exception:  # noqa: BLE001 - not evaluable alone: not an offset we can use
        return None
    return int(value) if isinstance(value, int) else None


def _spark_bound(b: int | str) -> int:
    from pyspark.sql import Window as W

    if b == _UNBOUNDED_PRECEDING:
        return W.unboundedPreceding
    if b == _UNBOUNDED_FOLLOWING:
        return W.unboundedFollowing
    return int(b)


def _sort_col(name: str, order: JObject) -> Any:
    from pyspark.sql import functions as F

    asc = str(order.direction().sql()) == "ASC"
    first = str(order.nullOrdering().sql()) == "NULLS FIRST"
    c = F.col(name)
    if asc:
        return c.asc_nulls_first() if first else c.asc_nulls_last()
    return c.desc_nulls_first() if first else c.desc_nulls_last()


def _frame_of(jvm: Any, fn_expr: JObject) -> tuple[str, int | str, int | str] | None:
    """``(kind, lower, upper)`` of a window expression's frame, kind ``"rows"`` or
    ``"range"``; None: the whole partition (a ranking function, or a frame not read)."""
    fn = fn_expr.windowFunction()
    name = jvm.cls(fn)
    if name in _RANKING:
        return None
    if name in ("Lag", "Lead") and bool(fn.ignoreNulls()):
        # the value may come from any row before (after) the record
        return ("rows", _UNBOUNDED_PRECEDING, -1) if name == "Lag" else (
            "rows", 1, _UNBOUNDED_FOLLOWING)  # fmt: skip
    frame = fn_expr.windowSpec().frameSpecification()
    if jvm.cls(frame) != "SpecifiedWindowFrame":
        return None
    kind = "rows" if jvm.cls(frame.frameType()) == "RowFrame$" else "range"
    lower, upper = _bound(jvm, frame.lower()), _bound(jvm, frame.upper())
    if lower is None or upper is None:
        return None
    return kind, lower, upper


def _position_number(jvm: Any, win: JObject, fn_expr: JObject) -> bool:
    """Whether ``fn_expr`` of window node ``win`` numbers records by their position:
    ``row_number()`` over all records ordered by ``monotonically_increasing_id()``,
    the pandas API on Spark's "sequence" default index.  Like its
    "distributed-sequence" index (:mod:`.sequence`), the number is made from no value:
    its frame is the record alone, where a rank's would be its whole partition."""
    if jvm.lst(win.partitionSpec()) or jvm.cls(fn_expr.windowFunction()) != "RowNumber":
        return False
    orders = jvm.lst(win.orderSpec())
    if len(orders) != 1:
        return False
    by = orders[0].child()
    if jvm.cls(by) == "MonotonicallyIncreasingID":
        return True
    child = win.child()
    if jvm.cls(by) != "AttributeReference" or jvm.cls(child) != "Project":
        return False
    # (the analyzer pulls the non-deterministic order out into a projection below)
    target = int(by.exprId().id())
    return any(
        jvm.cls(e) == "Alias"
        and int(e.exprId().id()) == target
        and jvm.cls(e.child()) == "MonotonicallyIncreasingID"
        for e in jvm.lst(child.projectList())
    )


def _window_expression(jvm: Any, expr: JObject) -> JObject | None:
    """The ``WindowExpression`` inside a window node's named expression."""
    stack = [expr]
    while stack:
        e = stack.pop()
        if jvm.cls(e) == "WindowExpression":
            return e
        stack.extend(jvm.lst(e.children()))
    return None


def frame_tensors(
    rows: np.ndarray,
    part_of: np.ndarray,
    pos: np.ndarray,
    n: int,
    bounds: list[tuple[np.ndarray, np.ndarray] | None],
) -> list[Any]:
    """The frame tensor of each window function over ``n`` records, from what one job
    read per record (aligned arrays): ``rows`` the record, ``part_of`` the smallest
    record of its partition, ``pos`` its 1-based position in the partition's order
    (ties broken by record), and per function ``bounds``: the rows counted up to its
    frame's end and in its frame (None: the whole partition).

    Examples
    --------
    ``lag`` over one partition of records 2, 0, 1 in that order:

    >>> hi, size = np.array([1, 2, 0]), np.array([1, 1, 0])  # record 2 has no row before
    >>> (t,) = frame_tensors(np.array([0, 1, 2]), np.array([0, 0, 0]), np.array([2, 3, 1]),
    ...                      3, [(hi, size)])
    >>> t.backward([0]).tolist(), t.backward([2]).tolist()
    ([2], [])
    """
    from tensprov_lab.store import FrameTensor

    # partitions laid out by their smallest record, each in its sort order
    size_of = np.bincount(part_of, minlength=n)
    first = np.full(n, n, dtype=np.int64)
    np.minimum.at(first, part_of, rows)
    present = np.flatnonzero(size_of)
    laid = present[np.argsort(first[present], kind="stable")]
    start = np.zeros(n, dtype=np.int64)
    start[laid] = np.concatenate([[0], np.cumsum(size_of[laid])[:-1]]) if len(laid) else laid
    begin = start[part_of]
    at = begin + pos - 1
    perm = np.empty(n, dtype=np.int64)
    perm[at] = rows
    out = []
    for bound in bounds:
        lo_at = np.empty(n, dtype=np.int64)
        hi_at = np.empty(n, dtype=np.int64)
        if bound is None:
            lo_at[at], hi_at[at] = begin, begin + size_of[part_of]
        else:
            h, c = bound
            lo_at[at], hi_at[at] = begin + h - c, begin + h
        out.append(FrameTensor(perm, lo_at, hi_at))
    return out


def _frames(
    reader: Reading, win: JObject, child: JObject, keys: list[JObject], node: Any
) -> list[tuple[int, Any]]:
    """The frame tensor of each window expression of ``win`` (over ``child``, the
    window's input carrying ``keys``), by the expression's id; one Spark job."""
    from pyspark.sql import Window as W
    from pyspark.sql import functions as F

    jvm = reader.jvm
    parts = jvm.lst(win.partitionSpec())
    orders = jvm.lst(win.orderSpec())
    pn = [key_name("wp") for _ in parts]
    on = [key_name("wo") for _ in orders]
    kn = [str(k.name()) for k in keys]
    named = [*(jvm.alias(p, n) for p, n in zip(parts, pn)),
             *(jvm.alias(o.child(), n) for o, n in zip(orders, on))]  # fmt: skip
    df = jvm.to_df(jvm.project([*keys, *named], child))
    part = W.partitionBy(*pn) if pn else W.partitionBy()
    ordered = part.orderBy(*(_sort_col(n, o) for n, o in zip(on, orders)))
    total = part.orderBy(
        *(_sort_col(n, o) for n, o in zip(on, orders)), *(F.col(k).asc_nulls_first() for k in kn)
    )
    one = F.lit(1)
    rep, pos = key_name("wr"), key_name("wn")
    cols = [*kn, F.min(F.struct(*kn)).over(part).alias(rep), F.row_number().over(total).alias(pos)]
    plans: list[tuple[int, str, str] | tuple[int, None, None]] = []
    notes: list[str] = []
    ties = None
    for we in jvm.lst(win.windowExpressions()):
        alias_id = int(we.exprId().id())
        w_expr = _window_expression(jvm, we)
        frame = _frame_of(jvm, w_expr) if w_expr is not None else None
        if w_expr is not None and _position_number(jvm, win, w_expr):
            plans.append((alias_id, _SELF, _SELF))
            continue
        if w_expr is not None and frame is None:
            fn = jvm.cls(w_expr.windowFunction())
            if fn not in _RANKING:
                notes.append(f"the frame of {fn} is taken as its whole partition")
        if frame is None:
            plans.append((alias_id, None, None))
            continue
        kind, lower, upper = frame
        base = total if kind == "rows" else ordered
        between = base.rowsBetween if kind == "rows" else base.rangeBetween
        hi, size = key_name("wh"), key_name("ws")
        cols.append(F.count(one).over(between(W.unboundedPreceding, _spark_bound(upper))).alias(hi))
        cols.append(
            F.count(one).over(between(_spark_bound(lower), _spark_bound(upper))).alias(size)
        )
        plans.append((alias_id, hi, size))
        if kind == "rows" and orders and ties is None:
            ties = key_name("wt")
            cols.append(F.count(one).over(ordered.rangeBetween(0, 0)).alias(ties))
    table = read_whole(df.select(*cols), jvm.to_arrow, jvm.spark)
    assert node.ki is not None and node.n is not None
    n = int(node.n)
    rows = node.ki.lookup(arrow_keys(table, kn))
    part_of = node.ki.lookup(arrow_keys(table, [rep]))
    if len(rows) != n or not (np.sort(rows) == np.arange(n)).all():
        raise ValueError("the window's input records were not read back one each")
    if ties is not None and bool((table.column(ties).to_numpy() > 1).any()):
        notes.append(
            "a frame counted in rows over tied sort values: Spark picks which tied row is in "
            "it; the lineage takes ties in input order"
        )
    pos_at = table.column(pos).to_numpy().astype(np.int64)
    bounds = [
        (pos_at, np.ones(n, dtype=np.int64)) if hi == _SELF  # the record alone
        else None if hi is None or size is None else (
            table.column(hi).to_numpy().astype(np.int64),
            table.column(size).to_numpy().astype(np.int64),
        )
        for _, hi, size in plans
    ]  # fmt: skip
    frames = frame_tensors(rows, part_of, pos_at, n, bounds)
    out = [(alias_id, f) for (alias_id, _, _), f in zip(plans, frames)]
    for note in dict.fromkeys(notes):
        reader._note(f"window: {note}")
    return out
