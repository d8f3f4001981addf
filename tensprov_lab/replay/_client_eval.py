"""A Spark Connect plan evaluated on the client, over a few records, with pyarrow.

A replay over Spark Connect sends a new plan to the server every time, and the server's
analysis and planning of it cost 150-400 ms however few records it reads (see
:mod:`._client`).  A replay of a few records through filters, projections and joins
needs none of that: :func:`evaluate` runs the same keyed plan (the one
:class:`~tensprov_lab.capture.connect._rewrite.Annotator` builds) on pyarrow tables
standing for its frontier.

It evaluates only what it can evaluate exactly as Spark does, and raises
:class:`Unsupported` for anything else (the caller then lets Spark run the plan):

- relations: filter, project, ``withColumns``, ``withColumnsRenamed``, drop, sort,
  ``toDF``, alias, hint and repartitions (which change no record), ``dropna``,
  ``fillna``, ``UNION ALL`` (by position, or by name), and inner, outer, semi and anti
  equi-joins on integer, string, boolean or date keys;
- expressions: columns (by name, case-insensitive, or by their DataFrame's plan id),
  literals, aliases, ``+ - * / %`` and negation on integer and floating-point columns
  with Spark's type widening (an integer overflow or a division by zero: Spark's to
  decide), comparisons, ``AND``/``OR``/``NOT`` in three-valued logic, ``IS [NOT]
  NULL``, ``IN``, ``coalesce``, ``CASE WHEN``, exact widening casts, and SQL text that
  :mod:`~tensprov_lab.capture.sources._direct_sql` compiles;
- a floating-point value compared, or a floating-point join key, must not be NaN
  (Spark orders NaN above every number and makes it equal to itself, IEEE does not).

Every column carries the plan ids it can be named by: a DataFrame's columns keep the id
of every relation they pass through unchanged, which is how Spark resolves ``df["x"]``.

Examples
--------
>>> import pyarrow as pa
>>> from tensprov_lab.capture.plan import _proto as P
>>> from pyspark.sql.connect import proto
>>> src = proto.Relation()  # a source keyed for a replay, by its key column "__tp_k7"
>>> key = P.alias(P.fn("monotonically_increasing_id"), "__tp_k7")
>>> src.project.expressions.extend([P.star(), key])
>>> rel = proto.Relation()
>>> rel.project.input.CopyFrom(src)
>>> rel.project.expressions.extend([P.col("x"), P.alias(P.fn("*", P.col("x"), P.literal(2)), "y")])
>>> evaluate(rel, {"__tp_k7": pa.table({"x": [1, None, 3], "__tp_k7": [0, 1, 2]})}).to_pydict()
{'x': [1, None, 3], 'y': [2, None, 6]}
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tensprov_lab.capture.connect._direct import _LITERALS as _SQL_OF_LITERAL
from tensprov_lab.capture.plan import _proto as P
from tensprov_lab.capture.sources._direct import _kleene
from tensprov_lab.capture.sources._direct_files import ARROW_TYPES as _ARROW_TYPES

__all__ = ["Col", "Unsupported", "evaluate", "frame_table"]


class Unsupported(Exception):
    """The plan holds something the client does not evaluate exactly as Spark does."""


@dataclass(frozen=True)
class Col:
    """A column of an evaluated relation: its name (None: Spark would make one up),
    values, and the plan ids it can be named by."""

    name: str | None
    values: pa.Array
    ids: frozenset[int] = frozenset()


Frame = list[Col]

#: widening order of Spark's numeric types (its ``findTightestCommonType``)
_NUMERIC = [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.float32(), pa.float64()]
_FLOAT = {pa.float32(), pa.float64()}
_STRING = {pa.string(), pa.large_string()}
_KEY_TYPES = {*_NUMERIC[:4], *_STRING, pa.bool_(), pa.date32()}
_COMPARE = {"==": "equal", "<": "less", "<=": "less_equal", ">": "greater",
            ">=": "greater_equal", "!=": "not_equal", "<>": "not_equal"}  # fmt: skip
_ARITH = {"+": "add_checked", "-": "subtract_checked", "*": "multiply_checked"}
#: the Arrow type of a Connect literal's kind (its SQL type name as capture reads it)
_LITERALS = {kind: _ARROW_TYPES[sql] for kind, sql in _SQL_OF_LITERAL.items()}
#: the SQL type name of an Arrow type, for SQL text (:func:`_sql`)
_SQL_OF_ARROW = {arrow: sql for sql, arrow in _ARROW_TYPES.items()} | {pa.large_string(): "string"}
_CAST_NAMES = {"byte": pa.int8(), "tinyint": pa.int8(), "short": pa.int16(),
               "smallint": pa.int16(), "integer": pa.int32(), "int": pa.int32(),
               "long": pa.int64(), "bigint": pa.int64(), "float": pa.float32(),
               "double": pa.float64(), "string": pa.string(), "boolean": pa.bool_()}  # fmt: skip
_PASS = {"sort", "hint", "repartition", "repartition_by_expression", "subquery_alias"}


def evaluate(rel: Any, frontier: dict[str, pa.Table]) -> pa.Table:
    """The records of relation ``rel`` over ``frontier`` (the key column of a keyed
    source -> its records, that column last), as a table (its columns named as Spark
    names them where that is known, else ``_c<i>``)."""
    return frame_table(_relation(rel, frontier))


def frame_table(frame: Frame) -> pa.Table:
    names = [c.name if c.name is not None else f"_c{i}" for i, c in enumerate(frame)]
    return pa.Table.from_arrays([c.values for c in frame], names=names)


def _rows(frame: Frame) -> int:
    return len(frame[0].values) if frame else 0


def _source_key(rel: Any) -> str | None:
    """The key column of ``rel`` when it is a source keyed as a replay's frontier
    (:func:`~tensprov_lab.capture.plan._connect.keyed_source`); a rewrite may have moved
    its plan id to a wrapper, so it is known by its key."""
    if P.kind(rel) != "project" or not rel.project.expressions:
        return None
    last = rel.project.expressions[-1]
    if last.WhichOneof("expr_type") != "alias" or len(last.alias.name) != 1:
        return None
    f = last.alias.expr
    if f.WhichOneof("expr_type") != "unresolved_function":
        return None
    if f.unresolved_function.function_name != "monotonically_increasing_id":
        return None
    return str(last.alias.name[0])


def _relation(rel: Any, frontier: dict[str, pa.Table]) -> Frame:
    pid = P.plan_id(rel)
    key = _source_key(rel)
    if key is not None and key in frontier:
        table = frontier[key]
        ids = frozenset() if pid is None else frozenset({pid})
        return [
            Col(n, table.column(i).combine_chunks(), ids)
            for i, n in enumerate(table.column_names)
        ]  # fmt: skip
    kind = P.kind(rel)
    kids = [_relation(k, frontier) for k in P.children(rel)]
    inner = P.body(rel)
    if kind in _PASS:
        out = kids[0]
    elif kind == "filter":
        out = _filter(kids[0], inner.condition)
    elif kind == "project":
        out = _project(kids[0], list(inner.expressions))
    elif kind == "with_columns":
        out = _with_columns(kids[0], list(inner.aliases))
    elif kind == "with_columns_renamed":
        out = _renamed(kids[0], inner)
    elif kind == "drop":
        out = _drop(kids[0], inner)
    elif kind == "to_df":
        names = list(inner.column_names)
        if len(names) != len(kids[0]):
            raise Unsupported("toDF with another number of names")
        out = [Col(n, c.values) for n, c in zip(names, kids[0])]
    elif kind == "drop_na":
        out = _drop_na(kids[0], inner)
    elif kind == "fill_na":
        out = _fill_na(kids[0], inner)
    elif kind == "join":
        out = _join(kids[0], kids[1], inner)
    elif kind == "set_op":
        out = _union(kids[0], kids[1], inner)
    else:
        raise Unsupported(f"a {kind} relation")
    if pid is not None:  # the relation's own id names each of its columns
        out = [replace(c, ids=c.ids | {pid}) for c in out]
    return out


def _has(msg: Any, name: str) -> bool:
    """Whether ``msg`` has field ``name`` set (pyspark 3.5's messages lack some)."""
    return name in msg.DESCRIPTOR.fields_by_name and msg.HasField(name)


# -- relations ----------------------------------------------------------------------------
def _take(frame: Frame, idx: pa.Array) -> Frame:
    return [replace(c, values=c.values.take(idx)) for c in frame]


def _filter(frame: Frame, condition: Any) -> Frame:
    mask = _boolean(_expr(condition, frame).values)
    return [replace(c, values=c.values.filter(mask)) for c in frame]


def _project(frame: Frame, exprs: list[Any]) -> Frame:
    out: Frame = []
    for e in exprs:
        if e.WhichOneof("expr_type") == "unresolved_star":
            star = e.unresolved_star
            if _has(star, "unparsed_target") or _has(star, "plan_id"):
                raise Unsupported("a select of `table.*`")
            out.extend(frame)
        else:
            out.append(_expr(e, frame))
    return out


def _with_columns(frame: Frame, aliases: list[Any]) -> Frame:
    out = list(frame)
    for a in aliases:
        if len(a.name) != 1 or _has(a, "metadata"):
            raise Unsupported("a column with metadata")
        name = a.name[0]
        new = Col(name, _expr(a.expr, frame).values)
        at = [i for i, c in enumerate(out) if _same_name(c.name, name)]
        for i in at:
            out[i] = new
        if not at:
            out.append(new)
    return out


def _renamed(frame: Frame, inner: Any) -> Frame:
    pairs = [(r.col_name, r.new_col_name) for r in getattr(inner, "renames", ())]
    pairs += list(inner.rename_columns_map.items())
    out = list(frame)
    for old, new in pairs:
        out = [Col(new, c.values) if _same_name(c.name, old) else c for c in out]
    return out


def _drop(frame: Frame, inner: Any) -> Frame:
    gone: set[int] = set()
    for name in inner.column_names:
        gone |= {i for i, c in enumerate(frame) if _same_name(c.name, name)}
    for e in inner.columns:
        if e.WhichOneof("expr_type") != "unresolved_attribute":
            raise Unsupported("a drop of an expression")
        try:
            gone.add(_resolve(e.unresolved_attribute, frame))
        except _Missing:
            pass  # (Spark ignores a column that is not there)
    return [c for i, c in enumerate(frame) if i not in gone]


def _missing(values: pa.Array) -> pa.Array:
    """Null, or NaN for floating point: what ``dropna`` and ``fillna`` treat as missing."""
    nulls = pc.is_null(values)
    if values.type in _FLOAT:
        nulls = pc.or_(nulls, pc.fill_null(pc.is_nan(values), False))
    return nulls


def _drop_na(frame: Frame, inner: Any) -> Frame:
    cols = [_by_name(frame, n) for n in inner.cols] if len(inner.cols) else range(len(frame))
    cols = list(cols)
    need = inner.min_non_nulls if _has(inner, "min_non_nulls") else len(cols)
    present = np.zeros(_rows(frame), dtype=np.int64)
    for i in cols:
        present += ~_missing(frame[i].values).to_numpy(zero_copy_only=False)
    return _take(frame, pa.array(np.flatnonzero(present >= need)))


def _fill_na(frame: Frame, inner: Any) -> Frame:
    values = [_literal(v) for v in inner.values]
    cols = [_by_name(frame, n) for n in inner.cols] if len(inner.cols) else range(len(frame))
    cols = list(cols)
    if len(values) == 1:
        pairs = [(i, values[0]) for i in cols]
        strict = False
    elif len(values) == len(cols):
        pairs, strict = list(zip(cols, values)), True
    else:
        raise Unsupported("fillna with these values")
    out = list(frame)
    for i, (value, vtype) in pairs:
        col = out[i].values
        if value is None:
            raise Unsupported("fillna with null")
        kind = col.type
        if vtype in _NUMERIC and kind in _NUMERIC:
            fill = _cast_value(value, kind)
        elif vtype == kind or (vtype in _STRING and kind in _STRING):
            fill = value
        elif strict:
            raise Unsupported(f"fillna of a {kind} column with a {vtype} value")
        else:
            continue  # (a value of another type leaves the column as it is)
        filled = pc.if_else(_missing(col), pa.scalar(fill, type=kind), col)
        out[i] = replace(out[i], values=filled)
    return out


def _cast_value(value: Any, kind: pa.DataType) -> Any:
    if kind in _FLOAT:
        return float(value)
    if isinstance(value, float):
        if value != value or abs(value) >= 2**63:
            raise Unsupported("fillna with a value out of the column's range")
        value = int(value)  # Spark casts the value to the column's type: toward zero
    info = np.iinfo(kind.to_pandas_dtype())
    if not info.min <= value <= info.max:
        raise Unsupported("fillna with a value out of the column's range")
    return int(value)


def _join(left: Frame, right: Frame, inner: Any) -> Frame:
    from pyspark.sql.connect import proto

    kinds = proto.Join.JoinType
    how = {kinds.JOIN_TYPE_INNER: "inner", kinds.JOIN_TYPE_LEFT_OUTER: "left",
           kinds.JOIN_TYPE_RIGHT_OUTER: "right", kinds.JOIN_TYPE_FULL_OUTER: "full",
           kinds.JOIN_TYPE_LEFT_SEMI: "semi", kinds.JOIN_TYPE_LEFT_ANTI: "anti",
           }.get(inner.join_type)  # fmt: skip
    if how is None or _has(inner, "join_data_type"):
        raise Unsupported("this kind of join")
    using = list(inner.using_columns)
    if using:
        pairs = [(_by_name(left, n), _by_name(right, n)) for n in using]
    elif _has(inner, "join_condition"):
        pairs = _equalities(inner.join_condition, left, right)
    else:
        raise Unsupported("a cross join")
    li, ri = _pairs(left, right, pairs, how)
    if how in ("semi", "anti"):  # (a USING join lists its columns first)
        kept = _take(left, pa.array(li))
        first = [lk for lk, _ in pairs] if using else []
        return [kept[i] for i in first] + [c for i, c in enumerate(kept) if i not in first]
    lt = pa.array(li, mask=li < 0)
    rt = pa.array(ri, mask=ri < 0)
    lcols, rcols = _take(left, lt), _take(right, rt)
    if not using:
        return lcols + rcols
    keys: Frame = []
    for lk, rk in pairs:
        a, b = lcols[lk], rcols[rk]
        if how == "inner":
            keys.append(Col(a.name, a.values, a.ids | b.ids))
        elif how == "left":
            keys.append(a)
        elif how == "right":
            keys.append(Col(a.name, b.values, b.ids))
        else:
            common = _common(a.values.type, b.values.type)
            keys.append(Col(a.name, pc.coalesce(_to(a.values, common), _to(b.values, common))))
    lkeys, rkeys = {lk for lk, _ in pairs}, {rk for _, rk in pairs}
    return (
        keys
        + [c for i, c in enumerate(lcols) if i not in lkeys]
        + [c for i, c in enumerate(rcols) if i not in rkeys]
    )


def _union(left: Frame, right: Frame, op: Any) -> Frame:
    """``UNION ALL`` by position or by name: the left's names, each column's values
    widened to a type both sides' fit."""
    from pyspark.sql.connect import proto

    if op.set_op_type != proto.SetOperation.SetOpType.SET_OP_TYPE_UNION or not op.is_all:
        raise Unsupported("intersect, except and union distinct")
    if op.by_name:
        if op.allow_missing_columns:
            raise Unsupported("a union by name of missing columns")
        right = [right[_by_name(right, c.name or "")] for c in left]
    if len(left) != len(right):
        raise Unsupported("a union of another number of columns")
    out = []
    for a, b in zip(left, right):
        common = _common(a.values.type, b.values.type)
        both = pa.concat_arrays([_to(a.values, common), _to(b.values, common)])
        out.append(Col(a.name, both, a.ids))  # (Spark's union outputs the left's columns)
    return out


def _equalities(cond: Any, left: Frame, right: Frame) -> list[tuple[int, int]]:
    """A join condition as pairs of (left column, right column) that must be equal."""
    if cond.WhichOneof("expr_type") != "unresolved_function":
        raise Unsupported("a join condition other than equalities")
    f = cond.unresolved_function
    name = f.function_name.lower()
    if name == "and" and len(f.arguments) == 2:
        return _equalities(f.arguments[0], left, right) + _equalities(f.arguments[1], left, right)
    if name != "==" or len(f.arguments) != 2:
        raise Unsupported("a join condition other than equalities")
    a, b = f.arguments
    if any(x.WhichOneof("expr_type") != "unresolved_attribute" for x in (a, b)):
        raise Unsupported("a join condition over expressions")
    found = []
    for x in (a, b):
        spots = []
        for side, frame in ((0, left), (1, right)):
            try:
                spots.append((side, _resolve(x.unresolved_attribute, frame)))
            except _Missing:
                pass
        if len(spots) != 1:
            raise Unsupported("a join condition column found on both sides or neither")
        found.append(spots[0])
    if {s for s, _ in found} != {0, 1}:
        raise Unsupported("a join condition within one side")
    found.sort()
    return [(found[0][1], found[1][1])]


def _pairs(
    left: Frame, right: Frame, pairs: list[tuple[int, int]], how: str
) -> tuple[np.ndarray, np.ndarray]:
    """Row pairs of an equi-join (-1: the missing side of an outer join's record); a
    semi or anti join: the left rows kept."""
    import pandas as pd

    nl, nr = _rows(left), _rows(right)
    lcodes, rcodes = [], []
    for lk, rk in pairs:
        a, b = left[lk].values, right[rk].values
        if a.type not in _KEY_TYPES or b.type not in _KEY_TYPES:
            raise Unsupported(f"a join on {a.type} and {b.type} keys")
        common = _common(a.type, b.type)
        both = pa.concat_arrays([_to(a, common), _to(b, common)]).dictionary_encode()
        codes = both.indices.to_numpy(zero_copy_only=False)
        codes = np.where(both.is_null().to_numpy(zero_copy_only=False), -1, codes)
        lcodes.append(codes[:nl])
        rcodes.append(codes[nl:])
    lk = pd.DataFrame({f"k{i}": c for i, c in enumerate(lcodes)})
    rk = pd.DataFrame({f"k{i}": c for i, c in enumerate(rcodes)})
    lk["__l"], rk["__r"] = np.arange(nl), np.arange(nr)
    names = [f"k{i}" for i in range(len(pairs))]
    lk = lk[(lk[names] >= 0).all(axis=1)]  # a null key matches nothing
    rk = rk[(rk[names] >= 0).all(axis=1)]
    m = lk.merge(rk, on=names, how="inner")
    li, ri = m["__l"].to_numpy(np.int64), m["__r"].to_numpy(np.int64)
    if how == "semi":
        return np.unique(li), np.zeros(0, np.int64)
    if how == "anti":
        return np.setdiff1d(np.arange(nl), li), np.zeros(0, np.int64)
    if how in ("left", "full"):
        alone = np.setdiff1d(np.arange(nl), li)
        li, ri = np.concatenate([li, alone]), np.concatenate([ri, np.full(len(alone), -1)])
    if how in ("right", "full"):
        alone = np.setdiff1d(np.arange(nr), ri)
        li, ri = np.concatenate([li, np.full(len(alone), -1)]), np.concatenate([ri, alone])
    return li, ri


# -- expressions --------------------------------------------------------------------------
class _Missing(Unsupported):
    """No column of that name here."""


def _same_name(a: str | None, b: str) -> bool:
    return a is not None and a.lower() == b.lower()


def _by_name(frame: Frame, name: str) -> int:
    at = [i for i, c in enumerate(frame) if _same_name(c.name, _unquoted(name))]
    if len(at) != 1:
        raise Unsupported(f"column {name!r} is found {len(at)} times")
    return at[0]


def _unquoted(name: str) -> str:
    if name.startswith("`") and name.endswith("`") and name.count("`") == 2:
        return name[1:-1]
    if "." in name or "`" in name:
        raise Unsupported("a qualified or nested column name")
    return name


def _resolve(ua: Any, frame: Frame) -> int:
    """The column an attribute names (by name, and by plan id when it has one)."""
    if getattr(ua, "is_metadata_column", False):
        raise Unsupported("a metadata column")
    name = _unquoted(ua.unparsed_identifier)
    at = [i for i, c in enumerate(frame) if _same_name(c.name, name)]
    if _has(ua, "plan_id"):
        at = [i for i in at if ua.plan_id in frame[i].ids]
    if not at:
        raise _Missing(f"no column {name!r}")
    if len(at) > 1:
        raise Unsupported(f"column {name!r} is ambiguous")
    return at[0]


def _const(value: Any, kind: pa.DataType, n: int) -> pa.Array:
    if value is None:
        return pa.nulls(n, type=kind)
    return pa.array([value] * n, type=kind)


def _literal(lit: Any) -> tuple[Any, pa.DataType]:
    which = lit.WhichOneof("literal_type")
    if which == "null":
        return None, pa.null()
    if which not in _LITERALS:
        raise Unsupported(f"a {which} constant")
    return getattr(lit, which), _LITERALS[which]


def _boolean(values: pa.Array) -> pa.Array:
    if values.type == pa.null():
        return pa.nulls(len(values), type=pa.bool_())
    if values.type != pa.bool_():
        raise Unsupported("a condition that is not boolean")
    return values


def _common(a: pa.DataType, b: pa.DataType) -> pa.DataType:
    """The type Spark brings two values to (a comparison, ``+``, ``coalesce``, a join's
    keys), when it is one the client computes with."""
    if a == pa.null():
        return b
    if b == pa.null() or a == b:
        return a
    if a in _NUMERIC and b in _NUMERIC:
        return _NUMERIC[max(_NUMERIC.index(a), _NUMERIC.index(b))]
    if a in _STRING and b in _STRING:
        return pa.string()
    raise Unsupported(f"values of types {a} and {b} together")


def _to(values: pa.Array, kind: pa.DataType) -> pa.Array:
    if values.type == kind:
        return values
    if values.type == pa.null():
        return pa.nulls(len(values), type=kind)
    # a widening: exact, or (a long made a double) rounded to nearest as Java rounds,
    # which pyarrow's checked cast refuses past 2**53
    return pc.cast(values, kind, safe=False)


def _no_nan(*arrays: pa.Array) -> None:
    for a in arrays:
        if a.type in _FLOAT and pc.any(pc.is_nan(a)).as_py():
            raise Unsupported("a NaN compared (Spark orders NaN above every number)")


def _expr(e: Any, frame: Frame) -> Col:
    n = _rows(frame)
    which = e.WhichOneof("expr_type")
    if which == "unresolved_attribute":
        return frame[_resolve(e.unresolved_attribute, frame)]
    if which == "alias":
        if len(e.alias.name) != 1 or _has(e.alias, "metadata"):
            raise Unsupported("an alias with metadata or many names")
        return Col(e.alias.name[0], _expr(e.alias.expr, frame).values)
    if which == "literal":
        value, kind = _literal(e.literal)
        return Col(None, _const(value, kind, n))
    if which == "cast":
        return Col(None, _cast(e.cast, frame))
    if which == "expression_string":
        return Col(None, _sql(e.expression_string.expression, frame))
    if which != "unresolved_function":
        raise Unsupported(f"a {which} expression")
    f = e.unresolved_function
    if f.is_distinct or f.is_user_defined_function:
        raise Unsupported("a user-defined or distinct function")
    name = f.function_name.lower()
    args = [_expr(a, frame).values for a in f.arguments]
    return Col(None, _call(name, args, n))


def _call(name: str, args: list[pa.Array], n: int) -> pa.Array:
    if name in _COMPARE and len(args) == 2:
        common = _common(args[0].type, args[1].type)
        a, b = _to(args[0], common), _to(args[1], common)
        if common == pa.null():
            return pa.nulls(n, type=pa.bool_())
        _no_nan(a, b)
        return getattr(pc, _COMPARE[name])(a, b)
    if name in _ARITH and len(args) == 2 or name == "/" and len(args) == 2:
        return _arithmetic(name, args[0], args[1])
    if name == "%" and len(args) == 2:
        return _remainder(args[0], args[1])
    if name == "negative" or name == "-" and len(args) == 1:
        if args[0].type not in _NUMERIC:
            raise Unsupported(f"negative of {args[0].type}")
        return _checked(pc.negate_checked, args[0])
    if name in ("and", "or") and len(args) == 2:
        # (not pc.and_kleene: pyarrow 22 errs on a null made by if_else, see _kleene)
        return _kleene(name == "and", _boolean(args[0]), _boolean(args[1]))
    if name == "not" and len(args) == 1:
        return pc.invert(_boolean(args[0]))
    if name in ("isnull", "isnotnull") and len(args) == 1:
        nulls = pc.is_null(args[0])
        return nulls if name == "isnull" else pc.invert(nulls)
    if name == "in" and len(args) >= 2:
        return _in(args[0], args[1:])
    if name == "coalesce" and args:
        common = args[0].type
        for a in args[1:]:
            common = _common(common, a.type)
        return pc.coalesce(*[_to(a, common) for a in args])
    if name == "when" and len(args) >= 2:
        return _case(args, n)
    raise Unsupported(f"{name} is evaluated by Spark")


def _checked(fn: Any, *args: pa.Array) -> pa.Array:
    try:
        return fn(*args)
    except pa.ArrowInvalid as exc:  # an overflow: Spark raises or wraps, as it is set
        raise Unsupported(str(exc)) from None


def _arithmetic(name: str, a: pa.Array, b: pa.Array) -> pa.Array:
    if a.type == pa.null() or b.type == pa.null():
        other = b.type if a.type == pa.null() else a.type
        if other not in _NUMERIC and other != pa.null():
            raise Unsupported(f"{name} of {other}")
        kind = pa.float64() if name == "/" or other == pa.null() else other
        return pa.nulls(len(a), type=kind)
    if a.type not in _NUMERIC or b.type not in _NUMERIC:
        raise Unsupported(f"{name} of {a.type} and {b.type}")
    if name == "/":  # Spark divides in double; by zero: null or an error, as it is set
        a, b = _to(a, pa.float64()), _to(b, pa.float64())
        if pc.any(pc.equal(b, 0.0)).as_py():
            raise Unsupported("a division by zero")
        return pc.divide(a, b)
    common = _common(a.type, b.type)
    a, b = _to(a, common), _to(b, common)
    if common in _FLOAT:
        return getattr(pc, _ARITH[name].removesuffix("_checked"))(a, b)
    return _checked(getattr(pc, _ARITH[name]), a, b)


def _remainder(a: pa.Array, b: pa.Array) -> pa.Array:
    """Spark's ``%``: Java's remainder, whose sign is the dividend's (C's ``fmod``)."""
    if a.type not in _NUMERIC or b.type not in _NUMERIC:
        raise Unsupported(f"% of {a.type} and {b.type}")
    common = _common(a.type, b.type)
    a, b = _to(a, common), _to(b, common)
    nulls = pc.or_(pc.is_null(a), pc.is_null(b)).to_numpy(zero_copy_only=False)
    x = pc.fill_null(a, 1).to_numpy(zero_copy_only=False)
    y = pc.fill_null(b, 1).to_numpy(zero_copy_only=False)
    if bool(np.any((y == 0) & ~nulls)):
        raise Unsupported("a remainder by zero")
    if common not in _FLOAT and bool(np.any((x == np.iinfo(x.dtype).min) & (y == -1))):
        raise Unsupported("the remainder of the smallest integer by -1")
    return pa.array(np.fmod(x, y), type=common, mask=nulls)


def _in(value: pa.Array, items: list[pa.Array]) -> pa.Array:
    common = value.type
    for item in items:
        common = _common(common, item.type)
    if common == pa.null():
        return pa.nulls(len(value), type=pa.bool_())
    value = _to(value, common)
    listed = [_to(item, common) for item in items]
    _no_nan(value, *listed)
    found = pa.array(np.zeros(len(value), dtype=bool))
    unknown = found
    for item in listed:
        eq = pc.equal(value, item)
        found = pc.or_(found, pc.fill_null(eq, False))
        unknown = pc.or_(unknown, pc.is_null(eq))
    # true when found; else null when something compared as null; else false
    null = pa.scalar(None, type=pa.bool_())
    return pc.if_else(found, True, pc.if_else(unknown, null, False))


def _case(args: list[pa.Array], n: int) -> pa.Array:
    pairs = [(args[i], args[i + 1]) for i in range(0, len(args) - 1, 2)]
    otherwise = args[-1] if len(args) % 2 else pa.nulls(n)
    common = otherwise.type
    for _, v in pairs:
        common = _common(common, v.type)
    out = _to(otherwise, common)
    for cond, v in reversed(pairs):
        out = pc.if_else(pc.fill_null(_boolean(cond), False), _to(v, common), out)
    return out


def _cast(c: Any, frame: Frame) -> pa.Array:
    values = _expr(c.expr, frame).values
    if _has(c, "type_str"):
        target = _CAST_NAMES.get(c.type_str.strip().lower())
    else:
        target = _CAST_NAMES.get(str(c.type.WhichOneof("kind")))
    if target is None:
        raise Unsupported("a cast to this type")
    if values.type == pa.null() or values.type == target:
        return _to(values, target)
    src = values.type
    if src in _NUMERIC and target in _NUMERIC and _NUMERIC.index(src) <= _NUMERIC.index(target):
        return _to(values, target)  # a widening: exact, or rounded as Java rounds
    raise Unsupported(f"a cast of {src} to {target}")


def _sql(text: str, frame: Frame) -> pa.Array:
    """SQL text (``filter("amount > 20")``) over columns named once each."""
    from tensprov_lab.capture.sources._direct import evaluate as evaluate_node
    from tensprov_lab.capture.sources._direct_files import Unreadable
    from tensprov_lab.capture.sources._direct_sql import parse_condition

    counts: dict[str, int] = {}
    for c in frame:
        if c.name is not None:
            counts[c.name.lower()] = counts.get(c.name.lower(), 0) + 1
    columns = {
        c.name.lower(): (c.name, _SQL_OF_ARROW[c.values.type])
        for c in frame
        if c.name is not None and counts[c.name.lower()] == 1 and c.values.type in _SQL_OF_ARROW
    }  # fmt: skip
    try:
        node = parse_condition(text, columns, condition=False)
        table = pa.table({c.name: c.values for c in frame if c.name is not None
                          and c.name.lower() in columns})  # fmt: skip
        out = evaluate_node(node, table)
    except Unreadable as exc:
        raise Unsupported(str(exc)) from None
    if isinstance(out, pa.ChunkedArray):
        out = out.combine_chunks()
    elif isinstance(out, pa.Scalar):
        out = pa.array([out.as_py()] * len(table), type=out.type)
    return out
