"""A source's columns read straight from its Parquet files, without a Spark job.

Capture's fused read of a source (:mod:`._fused`) costs about as much as the user's whole
pipeline when it goes through Spark: the scan's column batches are turned into rows, the
rows projected, and Arrow's writers read them back one by one (a JFR profile of the
engine bench's 5M orders).  pyarrow reads the same two columns of the same files about
ten times faster (5M orders: 0.13 s against 1.4 s, medians of 6 in one process, ad hoc
``/tmp/prof/pa_vs_spark.py``).

The read is the same records in the same order only when the source is read as Spark
reads it, so :func:`direct_read` answers None (read through Spark) unless all of this
holds:

- the source's plan is a bare Parquet relation (or a catalog table of one), in a local
  session (the driver sees the files the executors read), not split into directories
  of partition values;
- the records come part after part in the order of Spark's partitions, each part's in
  its order: a whole file, or of a file Spark splits the row groups Spark's Parquet
  reader picks for that part's byte range (asked of the JVM, see
  ``TensProvHelper.scanFiles``);
- every column asked for is a plain column of a type whose values pyarrow gives exactly
  as Spark does (integers, floats, booleans, strings without a collation), found in each
  file by its exact name and Arrow type;
- every expression asked for over them is a comparison, ``AND``/``OR``/``NOT``,
  ``IS [NOT] NULL`` or ``IN`` over such columns and constants, evaluated with Spark's
  three-valued logic; a float column compared with anything must hold no NaN (Spark
  orders NaN above every number, Arrow does not), which is checked when the files are
  read.

A read that finds anything else when it runs (a file changed size since Spark listed it,
a type that differs in one file, a NaN) raises :class:`Unreadable`, and the caller reads
through Spark instead.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tensprov_lab.capture._jvm import Jvm

__all__ = ["DirectRead", "Unreadable", "direct_read"]

JObject = Any

#: Spark types whose Parquet values pyarrow reads exactly as Spark does, and their type
#: in the files (a string column may also come as a large string)
_ARROW_TYPES: dict[str, pa.DataType] = {
    "bigint": pa.int64(),
    "int": pa.int32(),
    "smallint": pa.int16(),
    "tinyint": pa.int8(),
    "double": pa.float64(),
    "float": pa.float32(),
    "boolean": pa.bool_(),
    "string": pa.string(),
}
_FLOATS = {"double", "float"}
_COMPARISONS = {
    "EqualTo": "equal",
    "GreaterThan": "greater",
    "GreaterThanOrEqual": "greater_equal",
    "LessThan": "less",
    "LessThanOrEqual": "less_equal",
}
_LOGIC = {"And": "and_kleene", "Or": "or_kleene"}

#: a part of a file a scan reads: its local path, its size when Spark listed it, and the
#: row groups Spark reads of it, each with its starting position in the file (None: all
#: of it)
FilePart = tuple[str, int, "tuple[tuple[int, int], ...] | None"]
#: an expression, compiled: ("col", name, type), ("lit", value, type), ("cmp", op, a, b),
#: ("and_kleene"|"or_kleene", a, b), ("not", a), ("isnull"|"isnotnull", a), ("in", a, values, type)
Node = tuple[Any, ...]


class Unreadable(Exception):
    """The files cannot be read here as Spark reads them: read through Spark."""


@dataclass(frozen=True)
class DirectRead:
    """The columns of one read over a source's records, to be read from its files; call
    it to read them (:class:`Unreadable`: read through Spark).

    Examples
    --------
    >>> read = direct_read(jvm, plan, {"f1": condition})  # doctest: +SKIP
    >>> table = read() if read is not None else None  # doctest: +SKIP
    """

    jvm: Jvm
    #: the source's plan (its files are listed when the read runs: planning the scan
    #: takes tens of ms, which then overlap the block's other reads)
    plan: JObject
    #: the file columns to read, with their type in the files
    columns: tuple[tuple[str, pa.DataType], ...]
    #: what to compute from them, by the name of the read's column
    reads: tuple[tuple[str, Node], ...]
    #: the string type Spark's own read would give (``useLargeVarTypes``)
    string_type: pa.DataType

    def files(self) -> tuple[FilePart, ...]:
        """The parts of the source's files in Spark's order (:class:`Unreadable` when one
        is not local)."""
        files = _files(self.jvm, self.plan)
        if files is None:
            raise Unreadable("the scan is not of local files")
        return files

    def __call__(self) -> pa.Table:
        table = read_files(self.files(), self.columns)
        names, arrays = [], []
        for name, node in self.reads:
            value = evaluate(node, table)
            if isinstance(value, pa.Scalar):
                value = pa.repeat(value, table.num_rows)
            if pa.types.is_string(value.type) or pa.types.is_large_string(value.type):
                value = value.cast(self.string_type)
            names.append(name)
            arrays.append(value)
        return pa.table(arrays, names=names)


def direct_read(jvm: Jvm, plan: JObject, exprs: dict[str, JObject]) -> DirectRead | None:
    """A reader of ``exprs`` (by the name of each read column) over the records of the
    source ``plan`` straight from its Parquet files, or None when they must be read
    through Spark (see the module's text for when)."""
    try:
        spark = jvm.spark
        if not str(spark.sparkContext.master).startswith("local"):
            return None
        scan = plan
        while jvm.cls(scan) == "SubqueryAlias":  # a catalog table: the same attributes
            scan = scan.child()
        if jvm.cls(scan) != "LogicalRelation":
            return None
        relation = scan.relation()
        if jvm.cls(relation) != "HadoopFsRelation":
            return None
        if jvm.cls(relation.fileFormat()) != "ParquetFileFormat":
            return None
        if int(relation.partitionSchema().length()) != 0:
            return None
        if str(spark.conf.get("spark.sql.parquet.fieldId.read.enabled", "false")) != "false":
            return None
        large = str(spark.conf.get("spark.sql.execution.arrow.useLargeVarTypes", "false"))
        columns: dict[int, tuple[str, str]] = {}
        for attr in jvm.output(scan):
            type_name = str(attr.dataType().simpleString())
            if type_name in _ARROW_TYPES:
                columns[int(attr.exprId().id())] = (str(attr.name()), type_name)
        reads = tuple((name, compile_expr(jvm, expr, columns)) for name, expr in exprs.items())
        used: dict[str, pa.DataType] = {}
        for _, node in reads:
            _columns_of(node, used)
        if jvm.helper is None:
            return None
    except Unreadable:
        return None
    except Exception:  # noqa: BLE001 - another Spark build or plan: read through Spark
        return None
    return DirectRead(
        jvm,
        plan,
        tuple(used.items()),
        reads,
        pa.large_string() if large.lower() == "true" else pa.string(),
    )


def _files(jvm: Jvm, plan: JObject) -> tuple[FilePart, ...] | None:
    """The parts of local files a source's scan reads, in Spark's order; None when a file
    is not local or the scan is not of files."""
    helper = jvm.helper
    if helper is None:
        return None
    try:
        reply = helper.scanFiles(jvm.to_df(plan)._jdf)
    except Exception:  # noqa: BLE001 - another Spark build: read through Spark
        return None
    if reply is None:
        return None
    files: list[FilePart] = []
    for line in Jvm._whole(helper, str(reply)).splitlines():
        scheme, raw, _start, _length, size, groups = line.split("\t")
        if scheme != "file":
            return None
        picked = None
        if groups != "*":
            picked = tuple(
                (int(g), int(pos))
                for g, _, pos in (x.partition(":") for x in groups.split(",") if x)
            )
        files.append((unquote(raw), int(size), picked))
    return tuple(files)


def compile_expr(jvm: Jvm, expr: JObject, columns: dict[int, tuple[str, str]]) -> Node:
    """``expr`` as a tree this module evaluates (see :data:`Node`), over the source's
    ``columns`` (name and Spark type by expression id); :class:`Unreadable` when it holds
    anything else."""
    cls = jvm.cls(expr)
    if cls == "AttributeReference":
        known = columns.get(int(expr.exprId().id()))
        if known is None:
            raise Unreadable(f"column {expr.name()} of a type read through Spark")
        return ("col", known[0], known[1])
    if cls == "Alias":
        return compile_expr(jvm, expr.child(), columns)
    if bool(expr.foldable()):
        return _constant(expr)
    if cls == "Cast" and str(expr.dataType().simpleString()) == str(
        expr.child().dataType().simpleString()
    ):  # the analyzer's cast of a value to its own type (e.g. in IN) changes nothing
        return compile_expr(jvm, expr.child(), columns)
    kids = [compile_expr(jvm, k, columns) for k in jvm.lst(expr.children())]
    if cls in _COMPARISONS:
        left, right = kids
        if _type(left) != _type(right):
            raise Unreadable("a comparison of two types")
        return ("cmp", _COMPARISONS[cls], left, right)
    if cls in _LOGIC:
        return (_LOGIC[cls], kids[0], kids[1])
    if cls == "Not":
        return ("not", kids[0])
    if cls in ("IsNull", "IsNotNull"):
        return (cls.lower(), kids[0])
    if cls == "In":
        value, *items = kids
        if any(k[0] != "lit" or (k[1] is not None and k[2] != _type(value)) for k in items):
            raise Unreadable("IN over a list that is not constants of its type")
        return ("in", value, tuple(k[1] for k in items), _type(value))
    raise Unreadable(f"{cls} is evaluated by Spark")


def _constant(expr: JObject) -> Node:
    """A constant expression (a literal, a cast of one) as Spark evaluates it."""
    type_name = str(expr.dataType().simpleString())
    if type_name == "void":  # a bare NULL: only an IN list takes it as it is
        return ("lit", None, type_name)
    if type_name not in _ARROW_TYPES:
        raise Unreadable(f"a constant of type {type_name}")
    value = expr.eval(None)
    if value is not None and type_name == "string":
        value = str(value.toString())
    elif value is not None and type_name in _FLOATS:
        value = float(value)
        if value != value:
            raise Unreadable("a NaN constant (Spark orders NaN above every number)")
    return ("lit", value, type_name)


def _type(node: Node) -> str:
    """The Spark type of a compiled value (a column or a constant)."""
    if node[0] in ("col", "lit"):
        return str(node[2])
    return "boolean"


def _columns_of(node: Node, used: dict[str, pa.DataType]) -> None:
    """Note the file columns a compiled expression reads, with their type in the files."""
    kind = node[0]
    if kind == "col":
        used[node[1]] = _ARROW_TYPES[node[2]]
    elif kind == "cmp":
        _columns_of(node[2], used)
        _columns_of(node[3], used)
    elif kind in ("and_kleene", "or_kleene"):
        _columns_of(node[1], used)
        _columns_of(node[2], used)
    elif kind in ("not", "isnull", "isnotnull", "in"):
        _columns_of(node[1], used)


def read_files(
    files: tuple[FilePart, ...], columns: tuple[tuple[str, pa.DataType], ...]
) -> pa.Table:
    """The ``columns`` of the parts of ``files`` one after another (:class:`Unreadable`
    when a file changed size, lacks a column or holds it as another type)."""
    names = [name for name, _ in columns]
    wanted = dict(columns)
    parts = []
    for path, size, groups in files:
        try:
            if os.path.getsize(path) != size:
                raise Unreadable(f"{path} changed since Spark listed it")
            handle = pq.ParquetFile(path, memory_map=True)
        except OSError as exc:
            raise Unreadable(str(exc)) from exc
        schema = handle.schema_arrow
        folded: dict[str, int] = {}
        for field in schema:
            folded[field.name.lower()] = folded.get(field.name.lower(), 0) + 1
        for name, kind in columns:
            index = schema.get_field_index(name)
            if index < 0 or folded.get(name.lower(), 0) != 1:
                # Spark matches names regardless of case: let it decide
                raise Unreadable(f"{path} has no single column {name!r}")
            found = schema.field(index).type
            if found != kind and not (kind == pa.string() and found == pa.large_string()):
                raise Unreadable(f"{path} holds {name!r} as {found}")
        if groups is None:
            table = handle.read(columns=names, use_threads=True)
        else:
            for group, position in groups:
                if group >= handle.num_row_groups or _start(handle, group) != position:
                    raise Unreadable(f"{path}: row group {group} is not the one Spark reads")
            table = handle.read_row_groups([g for g, _ in groups], columns=names, use_threads=True)
        parts.append(table.cast(pa.schema([(n, wanted[n]) for n in names])))
    if not parts:
        return pa.table([pa.array([], type=t) for t in wanted.values()], names=names)
    return pa.concat_tables(parts)


def _start(handle: pq.ParquetFile, group: int) -> int:
    """Where row group ``group`` starts in the file, as parquet-mr counts it: its first
    column's dictionary page when that comes before its first data page."""
    first = handle.metadata.row_group(group).column(0)
    data = int(first.data_page_offset)
    if first.has_dictionary_page:
        dictionary = int(first.dictionary_page_offset)
        if 0 < dictionary < data:
            return dictionary
    return data


def evaluate(node: Node, table: pa.Table) -> Any:
    """A compiled expression's value over ``table``'s records (an Arrow array or, for a
    constant, a scalar), nulls where Spark's would be null."""
    kind = node[0]
    if kind == "col":
        return table.column(node[1])
    if kind == "lit":
        return pa.scalar(node[1], type=_ARROW_TYPES[node[2]])
    if kind == "cmp":
        left, right = (_no_nan(evaluate(k, table), k) for k in node[2:])
        compare: Callable[..., Any] = getattr(pc, node[1])
        return compare(left, right)
    if kind in ("and_kleene", "or_kleene"):
        combine: Callable[..., Any] = getattr(pc, kind)
        return combine(evaluate(node[1], table), evaluate(node[2], table))
    if kind == "not":
        return pc.invert(evaluate(node[1], table))
    if kind == "isnull":
        return pc.is_null(evaluate(node[1], table))
    if kind == "isnotnull":
        return pc.is_valid(evaluate(node[1], table))
    if kind == "in":
        return _in(_no_nan(evaluate(node[1], table), node[1]), node[2], node[3])
    raise Unreadable(f"cannot evaluate {kind}")


def _no_nan(value: Any, node: Node) -> Any:
    """``value``, after making sure a float column holds no NaN."""
    if node[0] == "col" and node[2] in _FLOATS and pc.any(pc.is_nan(value)).as_py():
        raise Unreadable(f"column {node[1]} holds NaN (Spark orders it above every number)")
    return value


def _in(value: Any, items: tuple[Any, ...], type_name: str) -> Any:
    """Spark's ``value IN (items)``: null for a null value, and for a value matching no
    item when an item is null."""
    kind = _ARROW_TYPES[type_name]
    known = [x for x in items if x is not None]
    found = pc.is_in(value, value_set=pa.array(known, type=kind), skip_nulls=True)
    unknown = pa.scalar(None, type=pa.bool_())
    found = pc.if_else(pc.is_null(value), unknown, found)
    if len(known) < len(items):
        found = pc.if_else(found, True, unknown)
    return found
