"""Window functions over Spark Connect: each record's frame, as on a classic session.

The classic window rule (:mod:`tensprov_lab.capture.rules.window`) reads, in one job
over the window's input, each record's partition, its position in the partition's
order and, per function, its frame's bounds as two counts; the arrays become
:class:`~tensprov_lab.store.FrameTensor` s there (``frame_tensors``).  Here the same
job is a rewrite of the client's plan: the window's input carrying its records' keys,
projected to the keys and to window expressions built from the user's own partition
and order specs (one job per distinct specification).

A frame is read from the client's expression as Spark's analyzer fills it in: ``lag``
/ ``lead`` the offset row (every earlier / later row when it skips nulls), a ranking
function the whole partition, an aggregate its ``rowsBetween`` / ``rangeBetween``, or
by default the rows up to the record's last peer when ordered, else the whole
partition.  A frame the client cannot read (a SQL string, a UDF, a bound that is not
an integer) is taken as the whole partition, a superset, with a note.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tensprov_lab.capture.connect._arrow import read_all
from tensprov_lab.capture.connect._index import Index, key_array
from tensprov_lab.capture.plan import _proto as P

__all__ = ["Unframed", "frame_of", "split", "trace_windows", "windows_in"]

#: functions whose value depends on the order of every row of the partition
_RANKING = {"row_number", "rank", "dense_rank", "percent_rank", "cume_dist", "ntile"}
_PRECEDING = "unbounded preceding"
_FOLLOWING = "unbounded following"

#: (kind, lower, upper): ``"rows"`` / ``"range"``, each bound an offset, an unbounded
#: side or the user's own boundary message
Frame = tuple[str, Any, Any]


class Unframed(Exception):
    """The window operation's frames cannot be read from the client's plan."""


def windows_in(expr: Any) -> list[Any]:
    """The window expressions in ``expr``, outermost ones (not those inside a window)."""
    from pyspark.sql.connect import proto

    found: list[Any] = []
    stack = [expr]
    while stack:
        m = stack.pop()
        if isinstance(m, proto.Expression) and m.WhichOneof("expr_type") == "window":
            found.append(m)
            continue
        for field, value in m.ListFields():
            if field.message_type is not None and not field.message_type.GetOptions().map_entry:
                stack.extend(value if P._repeated(field) else [value])
    return found


def split(expr: Any) -> tuple[Any, list[Any], list[Any]]:
    """``expr`` with each window in it replaced by a null, the window functions'
    arguments (what flows into the values) and their partition and order expressions
    and a ranking function's arguments (what decides which rows and how they rank).

    >>> e = P.fn("+", P.col("a"), P.col("b"))
    >>> rest, args, specs = split(e)
    >>> rest == e, args, specs
    (True, [], [])
    """
    from pyspark.sql.connect import proto

    rest = proto.Expression()
    rest.CopyFrom(expr)
    args: list[Any] = []
    specs: list[Any] = []

    def take(w: Any) -> None:
        win = w.window
        fn = win.window_function
        which = fn.WhichOneof("expr_type")
        ranking = which == "unresolved_function" and (
            fn.unresolved_function.function_name.lower() in _RANKING
        )
        (specs if ranking else args).append(fn)
        specs.extend(win.partition_spec)
        specs.extend(o.child for o in win.order_spec)

    if rest.WhichOneof("expr_type") == "window":
        take(rest)
        return P.null_long(), args, specs
    stack = [rest]
    while stack:
        m = stack.pop()
        for field, value in m.ListFields():
            if field.message_type is None or field.message_type.GetOptions().map_entry:
                continue
            items = list(value) if P._repeated(field) else [value]
            for item in items:
                if isinstance(item, proto.Expression) and item.WhichOneof("expr_type") == "window":
                    take(item)
                    item.CopyFrom(P.null_long())
                else:
                    stack.append(item)
    return rest, args, specs


def _int(e: Any) -> int | None:
    """The integer a literal expression holds (None: not an integer literal)."""
    if e.WhichOneof("expr_type") != "literal":
        return None
    lit = e.literal
    which = lit.WhichOneof("literal_type")
    if which in ("integer", "long", "short", "byte"):
        return int(getattr(lit, which))
    return None


def _bound(b: Any, side: str) -> int | str | None:
    which = b.WhichOneof("boundary")
    if which == "current_row":
        return 0
    if which == "unbounded":
        return _PRECEDING if side == "lower" else _FOLLOWING
    if which == "value":
        return _int(b.value)
    return None


def frame_of(w: Any) -> tuple[Frame | None, str | None]:
    """``((kind, lower, upper), None)`` for the frame of the window expression ``w``;
    ``(None, None)`` for the whole partition (a ranking function, an unordered
    aggregate); ``(None, note)`` when the frame cannot be read (then the whole
    partition too, a superset)."""
    from pyspark.sql.connect import proto

    win = w.window
    fn = win.window_function
    if fn.WhichOneof("expr_type") != "unresolved_function":
        return None, "the frame of a function the client cannot read is its whole partition"
    name = fn.unresolved_function.function_name.lower()
    args = list(fn.unresolved_function.arguments)
    if name in _RANKING:
        return None, None
    if name in ("lag", "lead"):
        offset = _int(args[1]) if len(args) > 1 else 1
        skips = len(args) > 3 and args[3].literal.boolean
        if offset is None:
            return None, f"the offset of {name} is not an integer: its whole partition"
        if skips:  # the value may come from any row before (after) the record
            return (("rows", _PRECEDING, -1) if name == "lag" else ("rows", 1, _FOLLOWING)), None
        at = -offset if name == "lag" else offset
        return ("rows", at, at), None
    types = proto.Expression.Window.WindowFrame.FrameType
    if win.HasField("frame_spec") and win.frame_spec.frame_type != types.FRAME_TYPE_UNDEFINED:
        spec = win.frame_spec
        kind = "rows" if spec.frame_type == types.FRAME_TYPE_ROW else "range"
        if _bound(spec.lower, "lower") is None or _bound(spec.upper, "upper") is None:
            return None, f"the frame bounds of {name} are not integers: its whole partition"
        # the user's own bounds: Spark wants a range's of the order column's type
        return (kind, spec.lower, spec.upper), None
    if len(win.order_spec):
        return ("range", _PRECEDING, 0), None  # Spark's default with an order
    return None, None


def _boundary(b: Any) -> Any:
    """A frame boundary: an unbounded side, 0 (the current row), a row offset (an INT
    literal, as Spark wants for rows), or a boundary of the user's frame as it is."""
    from pyspark.sql.connect import proto

    out = proto.Expression.Window.WindowFrame.FrameBoundary()
    if isinstance(b, proto.Expression.Window.WindowFrame.FrameBoundary):
        out.CopyFrom(b)
    elif b in (_PRECEDING, _FOLLOWING):
        out.unbounded = True
    elif b == 0:
        out.current_row = True
    else:
        out.value.literal.integer = int(b)
    return out


def _over(fn: Any, parts: list[Any], orders: list[Any], frame: Frame | None = None) -> Any:
    """``fn OVER (PARTITION BY parts ORDER BY orders frame)`` as a client expression."""
    from pyspark.sql.connect import proto

    e = proto.Expression()
    w = e.window
    w.window_function.CopyFrom(fn)
    for p in parts:
        w.partition_spec.add().CopyFrom(p)
    for o in orders:
        w.order_spec.add().CopyFrom(o)
    if frame is not None:
        types = proto.Expression.Window.WindowFrame.FrameType
        kind, lower, upper = frame
        w.frame_spec.frame_type = types.FRAME_TYPE_ROW if kind == "rows" else types.FRAME_TYPE_RANGE
        w.frame_spec.lower.CopyFrom(_boundary(lower))
        w.frame_spec.upper.CopyFrom(_boundary(upper))
    return e


def trace_windows(
    spark: Any,
    rel: Any,
    kid: Any,
    keys: list[str],
    index: Index,
    out_cols: list[str],
) -> tuple[Any, list[str], int]:
    """The :class:`~tensprov_lab.store.WindowTensor` of the window operation ``rel``
    (a ``withColumn(s)`` or a select), over its input rewritten as ``kid`` whose
    records carry the key columns ``keys`` (``index`` numbers them), the notes to give
    the user, and the Spark jobs it ran: one per distinct window specification.

    Raises
    ------
    Unframed
        When an output column cannot be matched to its expression.
    """
    from tensprov_lab.store import IdentityTensor, WindowTensor

    made = _made_columns(rel, out_cols)
    n = index.n
    specs: dict[bytes, list[Any]] = {}
    for _, expr in made:
        for w in windows_in(expr):
            key = (
                b"".join(p.SerializeToString() for p in w.window.partition_spec)
                + b"|"
                + (b"".join(o.SerializeToString() for o in w.window.order_spec))
            )
            specs.setdefault(key, []).append(w)
    notes: list[str] = []
    frame_at: dict[int, int] = {}  # id of a window expression -> its frame
    frames: list[Any] = []
    for ws in specs.values():
        got, said = _read_frames(spark, kid, keys, index, ws)
        notes += said
        for w, f in zip(ws, got):
            frame_at[id(w)] = len(frames)
            frames.append(f)
    if not frames or n == 0:
        return IdentityTensor(n), notes, len(specs)
    columns: dict[int, list[int]] = {}
    for o, expr in made:
        inside = [frame_at[id(w)] for w in windows_in(expr)]
        if not inside:
            continue
        bare = expr.WhichOneof("expr_type") == "window"
        columns[o] = inside if bare else [-1, *inside]
    return WindowTensor(n, frames, columns), list(dict.fromkeys(notes)), len(specs)


def _made_columns(rel: Any, out_cols: list[str]) -> list[tuple[int, Any]]:
    """``(output column, expression)`` of each column the relation computes."""
    lower = [c.lower() for c in out_cols]

    def at(name: str) -> int:
        if lower.count(name.lower()) != 1:
            raise Unframed(f"the column {name!r} is not one output column")
        return lower.index(name.lower())

    kind = P.kind(rel)
    if kind == "with_columns":
        out = []
        for a in rel.with_columns.aliases:
            if len(a.name) != 1:
                raise Unframed("a column of several names")
            out.append((at(a.name[0]), a.expr))
        return out
    if kind == "project":
        out = []
        for e in rel.project.expressions:
            if not windows_in(e):
                continue
            if e.WhichOneof("expr_type") != "alias" or len(e.alias.name) != 1:
                raise Unframed("a window expression without a name of its own")
            out.append((at(e.alias.name[0]), e.alias.expr))
        return out
    raise Unframed(f"window functions in a {kind} relation")


def _read_frames(
    spark: Any, kid: Any, keys: list[str], index: Index, ws: list[Any]
) -> tuple[list[Any], list[str]]:
    """The frame tensor of each window expression of ``ws`` (one specification), read
    in one job over ``kid``."""
    import pyarrow.compute as pc

    from tensprov_lab.capture.rules.window import frame_tensors

    spec = ws[0].window
    parts = list(spec.partition_spec)
    orders = list(spec.order_spec)
    by_key = [P.sort_order(P.col(k)) for k in keys]
    one = P.literal(1)
    count = P.fn("count", one)
    rep, pos = f"{P.KEY_PREFIX}wr", f"{P.KEY_PREFIX}wn"
    exprs = [P.col(k) for k in keys]
    exprs.append(P.alias(_over(P.fn("min", P.fn("struct", *[P.col(k) for k in keys])),
                               parts, []), rep))  # fmt: skip
    exprs.append(P.alias(_over(P.fn("row_number"), parts, orders + by_key), pos))
    plans: list[tuple[str, str] | None] = []
    notes: list[str] = []
    ties = None
    for k, w in enumerate(ws):
        frame, note = frame_of(w)
        if note is not None:
            notes.append(note)
        if frame is None:
            plans.append(None)
            continue
        kind, lower, upper = frame
        base = orders + by_key if kind == "rows" else orders
        hi, size = f"{P.KEY_PREFIX}wh{k}", f"{P.KEY_PREFIX}ws{k}"
        exprs.append(P.alias(_over(count, parts, base, (kind, _PRECEDING, upper)), hi))
        exprs.append(P.alias(_over(count, parts, base, (kind, lower, upper)), size))
        plans.append((hi, size))
        if kind == "rows" and orders and ties is None:
            ties = f"{P.KEY_PREFIX}wt"
            exprs.append(P.alias(_over(count, parts, orders, ("range", 0, 0)), ties))
    read = P.wrap("project", kid.rel, expressions=exprs)
    P.with_id(read, None)
    table = read_all(spark, read, batches=False)
    rows = index.lookup(key_array(table, keys))
    struct = table.column(rep).combine_chunks()
    part_of = index.lookup(
        np.column_stack([
            np.asarray(pc.fill_null(struct.field(i), -1).to_numpy(), dtype=np.int64)
            for i in range(len(keys))
        ]).reshape(len(struct), len(keys))
    )  # fmt: skip
    n = index.n
    if len(rows) != n or not (np.sort(rows) == np.arange(n)).all():
        raise Unframed("the window's input records were not read back one each")
    if ties is not None and bool((table.column(ties).to_numpy() > 1).any()):
        notes.append(
            "a frame counted in rows over tied sort values: Spark picks which tied row is in "
            "it; the lineage takes ties in input order"
        )
    bounds = [
        None if plan is None else (
            table.column(plan[0]).to_numpy().astype(np.int64),
            table.column(plan[1]).to_numpy().astype(np.int64),
        )
        for plan in plans
    ]  # fmt: skip
    at = table.column(pos).to_numpy().astype(np.int64)
    return frame_tensors(rows, part_of, at, n, bounds), notes
