"""A source's columns read straight from its Parquet or CSV files, without a Spark job.

Capture's fused read of a source (:mod:`._fused`) costs about as much as the user's whole
pipeline when it goes through Spark: the scan's column batches are turned into rows, the
rows projected, and Arrow's writers read them back one by one (a JFR profile of the
engine bench's 5M orders).  pyarrow reads the same two columns of the same files about
ten times faster (5M orders: 0.13 s against 1.4 s, medians of 6 in one process, ad hoc
``/tmp/prof/pa_vs_spark.py``).  On a small pipeline (COMPAS) the Spark job of the read
was most of what tracking added.

The read is the same records in the same order only when the source is read as Spark
reads it, so :func:`direct_read` answers None (read through Spark) unless all of this
holds:

- the source's plan is a Parquet or CSV relation (or a catalog table of one), under
  projections at most, not split into directories of partition values, of ``file:``
  paths this process reads with the size Spark listed them at.  Spark lists a source's
  files in the driver, so on a cluster (a standalone one on this machine, or one whose
  executors share the driver's mount) these are the files the executors read; a file
  the driver cannot read, or not at that size, is read through Spark;
- the records come part after part in the order of Spark's partitions, each part's in
  its order: a whole file, or of a Parquet file Spark splits the row groups Spark's
  Parquet reader picks for that part's byte range (asked of the JVM, see
  ``TensProvHelper.scanFiles``);
- every column asked for is a plain column of a type whose values pyarrow gives exactly
  as Spark does (integers, floats, booleans, strings without a collation), found in each
  Parquet file by its exact name and Arrow type; a CSV file must be one whose every
  token has one reading (:mod:`._direct_csv`);
- every expression asked for over them (and every projection's expression they read) is
  a comparison, ``AND``/``OR``/``NOT``, ``IS [NOT] NULL``, ``IN`` or ``dropna``'s
  ``AtLeastNNonNulls`` over such columns and constants, a date's ``year`` or a
  ``substring`` at constant bounds of one (grouping values), or ``+ - *`` of integers
  and decimals (Arrow's checked kernels, then a safe cast to the type Spark's analyzer
  gave the result: an overflow or a rounding is :class:`Unreadable`, left to Spark;
  :mod:`._direct_arith`), evaluated with Spark's three-valued logic; a float column
  compared with anything must hold no NaN (Spark orders NaN above every number, Arrow
  does not), which is checked when the files are read.

A read that finds anything else when it runs (a file changed size since Spark listed it,
a type that differs in one file, a NaN, a CSV token with two readings) raises
:class:`Unreadable`, and the caller reads through Spark instead.
"""

from __future__ import annotations

import decimal
import os
import re
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tensprov_lab.capture.sources._direct_arith import arith_node, evaluate_arith, round_decimal
from tensprov_lab.capture.sources._direct_csv import (
    CSV_TYPES,
    CheckedFiles,
    CsvLayout,
    csv_layout,
    read_csv_files,
)
from tensprov_lab.capture.sources._direct_files import (
    FilePart,
    ParquetTypes,
    Unreadable,
    arrow_type,
    before_gregorian,
    read_parquet_files,
    readable_type,
)
from tensprov_lab.capture.sources._direct_nodes import Node
from tensprov_lab.capture.sources._direct_nodes import columns_of as _columns_of
from tensprov_lab.capture.sources._direct_nodes import node_type as _type
from tensprov_lab.capture.sources._direct_sql import coerce
from tensprov_lab.capture.spark._jvm import FileRelation, Jvm

__all__ = [
    "DirectRead", "Unreadable", "direct_count", "direct_read", "partition_rows", "read_columns",
]  # fmt: skip

JObject = Any

_FLOATS = {"double", "float"}

_COMPARISONS = {
    "EqualTo": "equal",
    "GreaterThan": "greater",
    "GreaterThanOrEqual": "greater_equal",
    "LessThan": "less",
    "LessThanOrEqual": "less_equal",
}
_LOGIC = {"And": "and_kleene", "Or": "or_kleene"}


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
    #: the source's relation of files (listed when the read runs: planning the scan
    #: takes tens of ms, which then overlap the block's other reads)
    scan: JObject
    #: the file columns to read, with their Spark type
    columns: tuple[tuple[str, str], ...]
    #: what to compute from them, by the name of the read's column
    reads: tuple[tuple[str, Node], ...]
    #: the string type Spark's own read would give (``useLargeVarTypes``)
    string_type: pa.DataType
    #: how the files are laid out when they are CSV (None: Parquet)
    csv: CsvLayout | None = None
    #: the relation's one file, when Spark reads it whole (None: ask the planned scan)
    whole: tuple[str, str, int] | None = None
    #: the CSV files found plain earlier in the capture
    checked: CheckedFiles | None = None

    def files(self) -> tuple[FilePart, ...]:
        """The parts of the source's files in Spark's order (:class:`Unreadable` when one
        is not local)."""
        if self.whole is not None:
            scheme, path, size = self.whole
            if scheme != "file":
                raise Unreadable("the file is not local")
            return ((unquote(path), size, None),)
        files = _files(self.jvm, self.scan)
        if files is None:
            raise Unreadable("the scan is not of local files")
        return files

    def __call__(self) -> pa.Table:
        if self.csv is not None:
            table = read_csv_files(self.files(), self.columns, self.csv, self.checked)
        else:
            wanted = tuple((name, readable_type(kind)) for name, kind in self.columns)
            table = read_parquet_files(self.files(), wanted, dictionaries=True)
            for name, kind in self.columns:
                if kind == "date" and before_gregorian(table.column(name)):
                    raise Unreadable(f"{name} holds a date before 1582-10-15")
        return read_columns(table, self.reads, self.string_type)


def read_columns(
    table: pa.Table,
    reads: tuple[tuple[str, Node], ...],
    string_type: pa.DataType,
    value_of: Callable[[Node, pa.Table], Any] | None = None,
) -> pa.Table:
    """The ``reads`` (name, compiled expression) over ``table``'s records, as Spark's read
    of them gives them: a constant repeated, strings as ``string_type``; ``value_of``
    evaluates (:func:`evaluate` by default)."""
    names, arrays = [], []
    for name, node in reads:
        value = (value_of or evaluate)(node, table)
        if isinstance(value, pa.Scalar):
            value = pa.repeat(value, table.num_rows)
        if pa.types.is_string(value.type) or pa.types.is_large_string(value.type):
            value = value.cast(string_type)
        names.append(name)
        arrays.append(value)
    return pa.table(arrays, names=names)


def direct_read(
    jvm: Jvm, plan: JObject, exprs: dict[str, JObject], checked: CheckedFiles | None = None
) -> DirectRead | None:
    """A reader of ``exprs`` (by the name of each read column) over the records of the
    source ``plan`` straight from its Parquet or CSV files, or None when they must be read
    through Spark (see the module's text for when); ``checked`` holds the CSV files
    found plain earlier in the capture."""
    try:
        spark = jvm.spark
        # down projections (a select or renaming of the files' columns) and catalog
        # table aliases, which keep the relation's records and order
        scan, projects = plan, []
        while (cls := jvm.cls(scan)) in ("SubqueryAlias", "View", "Project"):
            if cls == "Project":
                projects.append(scan)
            scan = jvm.children(scan)[0]
        source = _file_source(jvm, scan)
        if source is None:
            return None
        relation, layout = source
        readable: Any = CSV_TYPES if layout is not None else ParquetTypes()
        large = str(spark.conf.get("spark.sql.execution.arrow.useLargeVarTypes", "false"))
        scope = _Scope(
            jvm,
            {i: ("col", name, kind) for i, name, kind in relation.columns if kind in readable},
        )
        for project in reversed(projects):
            scope = _Scope(jvm, scope, project)
        reads = tuple((name, compile_expr(jvm, expr, scope)) for name, expr in exprs.items())
        used: dict[str, str] = {}
        for _, node in reads:
            _columns_of(node, used)
    except Unreadable:
        return None
    except Exception:  # noqa: BLE001 - another Spark build or plan: read through Spark
        return None
    return DirectRead(
        jvm,
        scan,
        tuple(used.items()),
        reads,
        pa.large_string() if large.lower() == "true" else pa.string(),
        layout,
        relation.whole,
        checked,
    )


def direct_count(
    jvm: Jvm, plan: JObject, checked: CheckedFiles | None = None
) -> Callable[[], np.ndarray] | None:
    """A function counting the records of each of Spark's partitions of the source
    ``plan`` from its files, for a source of local Parquet files or of one CSV file
    Spark reads whole (one partition); None otherwise.  The function raises
    :class:`Unreadable` where Spark might count otherwise (a CSV file not plain, see
    :mod:`._direct_csv`), or where Spark is to say what a file is.

    A Parquet file's count is in its footer (of a file Spark splits, the row groups its
    reader picks for each part: :func:`partition_rows`); a plain CSV file's takes a
    parse of one column: milliseconds where Spark's count is a job (COMPAS: 0.1-0.2 s on
    two cores; TPC-H Q6 at SF 1, a job over lineitem beside the user's own action,
    which then took 0.9-1.4 s instead of 0.5).  A CSV file found plain is noted in
    ``checked``, for the fused read of the same file at the block's end.
    """
    try:
        scan = plan
        while jvm.cls(scan) == "SubqueryAlias":
            scan = jvm.children(scan)[0]
        source = _file_source(jvm, scan)
        if source is None:
            return None
        if source[0].whole is None:
            if source[1] is not None:
                return None  # CSV files Spark splits: its own count
            return lambda: _footer_rows(jvm, plan)
        (scheme, raw, size), layout = source[0].whole, source[1]
        if scheme != "file":
            return None
        path = unquote(raw)
        if layout is None:
            return lambda: np.array([_parquet_rows(path, size)], dtype=np.int64)
        first = ((layout.names[0], "string"),)
        return lambda: np.array(
            [read_csv_files(((path, size, None),), first, layout, checked).num_rows],
            dtype=np.int64,
        )
    except Exception:  # noqa: BLE001 - another Spark build or plan: Spark counts
        return None


def partition_rows(jvm: Jvm, plan: JObject) -> np.ndarray | None:
    """The number of records in each of Spark's partitions of ``plan``, a scan of
    Parquet files under projections, from the files' footers without a job
    (``TensProvHelper.partitionRows``); None for another plan, or where a footer cannot
    be read (Spark's count then says what it does with that file)."""
    helper = jvm.helper
    if helper is None:
        return None
    try:
        reply = helper.partitionRows(jvm.to_df(plan)._jdf)
    except Exception:  # noqa: BLE001 - another Spark build, a file gone: Spark counts
        return None
    if reply is None:
        return None
    text = Jvm._whole(helper, str(reply))
    return np.array([int(x) for x in text.split(",") if x], dtype=np.int64)


def _footer_rows(jvm: Jvm, plan: JObject) -> np.ndarray:
    rows = partition_rows(jvm, plan)
    if rows is None:
        raise Unreadable("the scan's footers were not read")
    return rows


def _file_source(jvm: Jvm, scan: JObject) -> tuple[FileRelation, CsvLayout | None] | None:
    """A relation of Parquet or CSV files read here as Spark reads them (the CSV files'
    layout, None for Parquet), or None: partitioned, another format, or options that
    change how Spark reads the files (whether each file is local is asked when the
    read runs)."""
    spark = jvm.spark
    relation = jvm.file_relation(scan)
    if relation is None or relation.partition_columns:
        return None
    if relation.format == "ParquetFileFormat":
        if str(spark.conf.get("spark.sql.parquet.fieldId.read.enabled", "false")) != "false":
            return None
        return relation, None
    if relation.format == "CSVFileFormat":
        names = [name for _, name, _ in relation.columns]
        layout = csv_layout(relation.options, names)
        if layout is None or str(spark.conf.get("spark.sql.columnNameOfCorruptRecord")) in names:
            return None
        return relation, layout
    return None


def _parquet_rows(path: str, size: int) -> int:
    try:
        if os.path.getsize(path) != size:
            raise Unreadable(f"{path} changed since Spark listed it")
        return int(pq.ParquetFile(path).metadata.num_rows)
    except OSError as exc:
        raise Unreadable(str(exc)) from exc


class _Scope:
    """The columns a plan's expressions may read, compiled, by expression id: a relation's
    readable columns, or a projection's over the scope below it (its added expressions
    compiled when first asked for: most are not)."""

    def __init__(
        self, jvm: Jvm, below: _Scope | dict[int, Node], project: JObject | None = None
    ) -> None:
        self.jvm = jvm
        self.below = below
        self.project = project
        self.known: dict[int, Node | None] = {}
        self.out: list[int] = []
        self.added: set[int] = set()
        if project is not None:
            info = jvm.project_info(project)
            if info is None:
                raise Unreadable("a projection the helper cannot read")
            self.out = info[0]
            self.added = {refs[0] for refs in info[1]}

    def get(self, ident: int) -> Node | None:
        if self.project is None:
            assert isinstance(self.below, dict)
            return self.below.get(ident)
        if ident not in self.known:
            node: Node | None = None
            if ident in self.added:
                try:
                    node = self._compile_entry(self.out.index(ident))
                except Unreadable:
                    node = None
            elif ident in self.out:
                node = self.below.get(ident)
            self.known[ident] = node
        return self.known[ident]

    def _compile_entry(self, i: int) -> Node:
        """The projection's ``i``-th expression, compiled over the scope below."""
        assert self.project is not None
        helper = self.jvm.helper
        if helper is None:
            entry = self.jvm.lst(self.project.projectList())[i]
            return compile_expr(self.jvm, entry, self.below)
        reply = Jvm._whole(helper, str(helper.projectEntryTree(self.project, i)))
        return compile_tree(reply, self.below)


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
        if groups != "*":  # "-": a part of a file not in row groups (CSV)
            picked = tuple(
                (int(g), int(pos))
                for g, _, pos in (x.partition(":") for x in groups.split(",") if x and x != "-")
            )
        files.append((unquote(raw), int(size), picked))
    return tuple(files)


def compile_expr(jvm: Jvm, expr: JObject, columns: _Scope | dict[int, Node]) -> Node:
    """``expr`` as a tree this module evaluates (see :data:`Node`), over ``columns``
    (compiled, by expression id); :class:`Unreadable` when it holds anything else.

    With the helper the expression is read in one round trip (:func:`compile_tree`),
    else node by node (three to five round trips each)."""
    helper = jvm.helper
    if helper is None:
        return _compile_walk(jvm, expr, columns)
    return compile_tree(Jvm._whole(helper, str(helper.exprTree(expr))), columns)


def compile_tree(reply: str, columns: _Scope | dict[int, Node]) -> Node:
    """:func:`compile_expr` of an expression as ``TensProvHelper.exprTree`` spells it.

    Examples
    --------
    >>> scope = {7: ("col", "x", "double")}
    >>> compile_tree(" E GreaterThan 2 0 A 7 L double D3ff8000000000000", scope)
    ('cmp', 'greater', ('col', 'x', 'double'), ('lit', 1.5, 'double'))
    >>> compile_tree(" E In 3 0 A 7 L double N L double D0", scope)[:3]
    ('in', ('col', 'x', 'double'), (None, 0.0))
    """
    tokens = iter(reply.split())
    node = _from_tokens(tokens, columns)
    if next(tokens, None) is not None:
        raise Unreadable("more than one expression")
    return node


def _from_tokens(tokens: Iterator[str], columns: _Scope | dict[int, Node]) -> Node:
    tag = next(tokens)
    if tag == "A":
        ident = int(next(tokens))
        known = columns.get(ident)
        if known is None:
            raise Unreadable(f"column #{ident} is read through Spark")
        return known
    if tag == "L":
        type_name, raw = next(tokens), next(tokens)
        return _literal(type_name, _decode(raw, type_name))
    if tag == "C":  # a cast to another type
        target = next(tokens)
        return _cast(_from_tokens(tokens, columns), target)
    if tag == "O":  # + - * with the type Spark's analyzer gave it
        out, cls = next(tokens), next(tokens)
        left, right = _from_tokens(tokens, columns), _from_tokens(tokens, columns)
        return arith_node(cls, left, right, (_type(left), _type(right), out))
    if tag == "E":
        cls, n, count = next(tokens), int(next(tokens)), int(next(tokens))
        kids = [_from_tokens(tokens, columns) for _ in range(n)]
        return _combine(cls, kids, count)
    raise Unreadable("a constant that does not evaluate")  # "X"


def _decode(raw: str, type_name: str) -> Any:
    """A constant's value as ``TensProvHelper.exprTree`` writes it."""
    kind, text = raw[0], raw[1:]
    if kind == "N":
        return None
    if kind == "B":
        return text == "1"
    if kind == "I":
        return int(text)
    if kind == "D":
        return struct.unpack("<d", struct.pack("<Q", int(text, 16)))[0]
    if kind == "M":
        return decimal.Decimal(text)
    if kind == "S":
        return bytes.fromhex(text).decode("utf-8")
    raise Unreadable(f"a constant of type {type_name}")


def _compile_walk(jvm: Jvm, expr: JObject, columns: _Scope | dict[int, Node]) -> Node:
    """:func:`compile_expr` asking for each node of ``expr`` (without the helper)."""
    cls = jvm.cls(expr)
    if cls == "AttributeReference":
        known = columns.get(int(expr.exprId().id()))
        if known is None:
            raise Unreadable(f"column {expr.name()} is read through Spark")
        return known
    if cls in ("AggregateExpression", "ScalarSubquery"):
        # (a value the caller may know by its id, as the helper spells it)
        at = expr.resultId() if cls == "AggregateExpression" else expr.exprId()
        known = columns.get(int(at.id()))
        if known is None:
            raise Unreadable(f"{cls} is read through Spark")
        return known
    if cls == "Alias":
        return _compile_walk(jvm, expr.child(), columns)
    if bool(expr.foldable()):
        return _constant(expr)
    if cls == "Cast":
        target = str(expr.dataType().simpleString())
        kid = _compile_walk(jvm, expr.child(), columns)
        # (the analyzer's cast of a value to its own type, e.g. in IN, changes nothing)
        return kid if target == str(expr.child().dataType().simpleString()) else _cast(kid, target)
    if cls == "Between":  # (Spark 4's: lower <= input AND input <= upper, as the helper)
        value, low, high = (
            _compile_walk(jvm, k, columns) for k in (expr.input(), expr.lower(), expr.upper())
        )
        above = _combine("GreaterThanOrEqual", [value, low], 0)
        return _combine("And", [above, _combine("LessThanOrEqual", [value, high], 0)], 0)
    if cls == "Like" and str(expr.escapeChar()) != "\\":
        raise Unreadable("LIKE with an escape of its own")
    kids = [_compile_walk(jvm, k, columns) for k in jvm.lst(expr.children())]
    if cls in ("Add", "Subtract", "Multiply"):
        out = str(expr.dataType().simpleString())
        return arith_node(cls, kids[0], kids[1], (_type(kids[0]), _type(kids[1]), out))
    return _combine(cls, kids, int(expr.n()) if cls == "AtLeastNNonNulls" else 0)


def _combine(cls: str, kids: list[Node], count: int) -> Node:
    """An expression of class ``cls`` over its compiled children (``count``: an
    ``AtLeastNNonNulls``'s n)."""
    if cls in _COMPARISONS:
        left, right = _same_decimals(*kids)
        if _type(left) != _type(right):
            raise Unreadable("a comparison of two types")
        return ("cmp", _COMPARISONS[cls], left, right)
    if cls in _LOGIC:
        return (_LOGIC[cls], kids[0], kids[1])
    if cls == "Not":
        return ("not", kids[0])
    if cls in ("IsNull", "IsNotNull"):
        return (cls.lower(), kids[0])
    if cls == "AtLeastNNonNulls":  # dropna
        return ("atleast", count, tuple(kids))
    if cls == "In":
        value, *items = kids
        if any(k[0] != "lit" or (k[1] is not None and k[2] != _type(value)) for k in items):
            raise Unreadable("IN over a list that is not constants of its type")
        return ("in", value, tuple(k[1] for k in items), _type(value))
    if cls == "Extract" and len(kids) == 1:  # EXTRACT(YEAR FROM d): its replacement
        return kids[0]
    if cls == "Year" and _type(kids[0]) == "date":
        return ("year", kids[0], "int")
    if cls == "Substring":
        return _substring(*kids)
    if cls == "Like":
        return _like(*kids)
    raise Unreadable(f"{cls} is evaluated by Spark")


#: how many digits each integer type's values have at most
_DIGITS = {"tinyint": 3, "smallint": 5, "int": 10, "bigint": 19}


def _cast(value: Node, target: str) -> Node:
    """Spark's cast of ``value`` to ``target`` where it is exact and never fails: an
    integer or decimal to a decimal with room for every value (TPC-H Q17's
    ``cast(l_quantity as decimal(21,7))``), and the widenings of
    :func:`._direct_sql.coerce`.

    >>> _cast(("col", "q", "decimal(15,2)"), "decimal(21,7)")
    ('cast', ('col', 'q', 'decimal(15,2)'), 'decimal(21,7)')
    """
    source = _type(value)
    kind = arrow_type(target)
    if isinstance(kind, pa.Decimal128Type):
        was = arrow_type(source)
        if isinstance(was, pa.Decimal128Type):
            room = was.precision - was.scale <= kind.precision - kind.scale
            exact = room and was.scale <= kind.scale
        else:
            exact = source in _DIGITS and _DIGITS[source] <= kind.precision - kind.scale
        if exact:
            return ("cast", value, target)
        if room and isinstance(was, pa.Decimal128Type):
            # a smaller scale: rounded as Spark rounds (TPC-H Q11's comparison of
            # decimal(38,6) values as decimal(38,4))
            return ("round", value, target)
    return coerce(value, target)


def _like(value: Node, pattern: Node) -> Node:
    """Spark's ``value LIKE pattern`` with the default escape ``\\`` (Arrow's
    ``match_like`` reads ``%``, ``_`` and the escape as Spark does, ``%`` and ``_``
    across line breaks too) for a constant pattern whose every escape is one Spark
    takes (before ``%``, ``_`` or the escape itself)."""
    if _type(value) != "string" or pattern[0] != "lit" or not isinstance(pattern[1], str):
        raise Unreadable("LIKE of a value that is not a string, or a pattern that is not")
    if re.search(r"\\(?![%_\\])", pattern[1].replace("\\\\", "")):
        raise Unreadable("a LIKE pattern Spark refuses")
    return ("like", value, pattern[1])


def _substring(value: Node, pos: Node, length: Node) -> Node:
    """Spark's ``substring(s, pos, len)`` for a constant ``pos >= 1`` and ``len >= 0``:
    ``len`` characters (code points, as Arrow slices UTF-8) from the ``pos``-th."""
    if _type(value) != "string":
        raise Unreadable("substring of a value that is not a string")
    bounds = []
    for node in (pos, length):
        if node[0] != "lit" or node[2] != "int" or node[1] is None:
            raise Unreadable("substring at a position that is not a constant")
        bounds.append(int(node[1]))
    start, count = bounds
    if start < 1 or count < 0:
        raise Unreadable("substring from the end or of a negative length")
    return ("substr", value, "string", start - 1, start - 1 + count)


def _same_decimals(left: Node, right: Node) -> tuple[Node, Node]:
    """A decimal constant compared with a decimal of another precision or scale, as a
    constant of the other's type when it holds the value exactly (Spark 4's BETWEEN
    keeps its bounds' own types: ``l_discount BETWEEN 0.05 AND 0.07`` compares a
    decimal(15,2) with decimal(2,2) constants); the values compare the same.

    >>> m, cents = ("col", "m", "decimal(15,2)"), decimal.Decimal("0.05")
    >>> _same_decimals(m, ("lit", cents, "decimal(2,2)"))[1]
    ('lit', Decimal('0.05'), 'decimal(15,2)')
    """
    types = _type(left), _type(right)
    if types[0] == types[1] or not all(t.startswith("decimal") for t in types):
        return left, right
    for a, b, flip in ((left, right, False), (right, left, True)):
        if b[0] != "lit" or b[1] is None:
            continue
        kind = arrow_type(_type(a))
        if not isinstance(kind, pa.Decimal128Type):
            continue
        precision, scale = kind.precision, kind.scale
        value = decimal.Decimal(b[1])
        exact = value.quantize(decimal.Decimal(1).scaleb(-scale)) == value
        if exact and abs(value) < 10 ** (precision - scale):
            retyped = ("lit", value, _type(a))
            return (retyped, a) if flip else (a, retyped)
    return left, right


def _constant(expr: JObject) -> Node:
    """A constant expression (a literal, a cast of one) as Spark evaluates it."""
    type_name = str(expr.dataType().simpleString())
    if type_name == "void" or arrow_type(type_name) is None:
        # nothing to evaluate: a bare NULL, or a type _literal refuses
        return _literal(type_name, None)
    try:
        value = expr.eval(None)
    except Exception as exc:  # noqa: BLE001 - e.g. 1 / 0 under ANSI: Spark's to raise
        raise Unreadable("a constant that does not evaluate") from exc
    if value is not None and type_name == "string":
        value = str(value.toString())
    elif value is not None and type_name.startswith("decimal"):
        value = decimal.Decimal(str(value.toJavaBigDecimal().toPlainString()))
    return _literal(type_name, value)


def _literal(type_name: str, value: Any) -> Node:
    """A constant of Spark type ``type_name``, its value evaluated."""
    if type_name == "void":  # a bare NULL: only an IN list takes it as it is
        return ("lit", None, type_name)
    if arrow_type(type_name) is None:
        raise Unreadable(f"a constant of type {type_name}")
    if value is not None and type_name in _FLOATS:
        value = float(value)
        if value != value:
            raise Unreadable("a NaN constant (Spark orders NaN above every number)")
    return ("lit", value, type_name)


def evaluate(node: Node, table: pa.Table) -> Any:
    """A compiled expression's value over ``table``'s records (an Arrow array or, for a
    constant, a scalar), nulls where Spark's would be null."""
    kind = node[0]
    if kind == "col":
        value = table.column(node[1])
        if pa.types.is_dictionary(value.type):
            return value.cast(value.type.value_type)
        return value
    if kind == "lit":
        return pa.scalar(node[1], type=readable_type(node[2]))
    coded = _coded_column(node, table)
    if coded is not None:
        return _over_dictionaries(node, table, coded)
    if kind == "cmp":
        left, right = (_no_nan(evaluate(k, table), k) for k in node[2:])
        compare: Callable[..., Any] = getattr(pc, node[1])
        return compare(left, right)
    if kind in ("and_kleene", "or_kleene"):
        return _kleene(kind == "and_kleene", evaluate(node[1], table), evaluate(node[2], table))
    if kind == "not":
        return pc.invert(evaluate(node[1], table))
    if kind == "cast":  # a widening without loss (see _direct_sql.coerce)
        return pc.cast(evaluate(node[1], table), readable_type(node[2]))
    if kind == "round":
        return round_decimal(evaluate(node[1], table), readable_type(node[2]))
    if kind == "isnull":
        return pc.is_null(evaluate(node[1], table))
    if kind == "isnotnull":
        return pc.is_valid(evaluate(node[1], table))
    if kind == "in":
        return _in(_no_nan(evaluate(node[1], table), node[1]), node[2], node[3])
    if kind == "atleast":
        return _at_least(node[1], node[2], table)
    if kind == "year":  # (proleptic Gregorian, as Spark's; see _before_gregorian)
        return pc.cast(pc.year(evaluate(node[1], table)), pa.int32())
    if kind == "substr":
        return pc.utf8_slice_codeunits(evaluate(node[1], table), node[3], node[4])
    if kind == "like":
        return pc.match_like(evaluate(node[1], table), pattern=node[2])
    if kind == "arith":
        left, right = evaluate(node[2], table), evaluate(node[3], table)
        return evaluate_arith(node, left, right, readable_type(node[4]))
    raise Unreadable(f"cannot evaluate {kind}")


def _coded_column(node: Node, table: pa.Table) -> str | None:
    """The one column ``node`` reads when it is a dictionary array of strings (see
    :func:`~._direct_files.read_parquet_files`), else None."""
    used: dict[str, str] = {}
    _columns_of(node, used)
    if len(used) != 1:
        return None
    (name,) = used
    return name if pa.types.is_dictionary(table.column(name).type) else None


def _over_dictionaries(node: Node, table: pa.Table, name: str) -> Any:
    """``node``, a function of column ``name``'s strings only, evaluated once for each
    distinct string of each chunk's dictionary, and a null, then gathered by the
    chunk's indices (a null one: the null's value): a filter of 6M records on a few
    ship modes compares 8 strings, not 6M."""
    column = table.column(name)
    plain = column.type.value_type
    pieces = []
    for chunk in column.chunks:
        strings = pa.concat_arrays([chunk.dictionary.cast(plain), pa.nulls(1, plain)])
        values = evaluate(node, pa.table({name: strings}))
        if isinstance(values, pa.Scalar):
            return values
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks()
        at = chunk.indices
        if at.null_count:
            at = pc.fill_null(at, len(strings) - 1)
        pieces.append(pc.take(values, at))
    if not pieces:
        return evaluate(node, pa.table({name: pa.array([], type=plain)}))
    return pa.chunked_array(pieces)


def _kleene(conjunction: bool, a: Any, b: Any) -> Any:
    """SQL's three-valued AND (``conjunction``) or OR.  Not ``pc.and_kleene``: pyarrow 22
    (the newest for numpy < 2, as pyspark 3.5 pins) answers false for null AND null when
    a null came out of ``if_else``, as our IN does."""
    null = pa.scalar(None, type=pa.bool_())
    some_null = pc.or_(pc.is_null(a), pc.is_null(b))
    if conjunction:  # false decides, else null, else true
        decided = pc.or_(pc.fill_null(pc.invert(a), False), pc.fill_null(pc.invert(b), False))
        return pc.if_else(decided, False, pc.if_else(some_null, null, True))
    decided = pc.or_(pc.fill_null(a, False), pc.fill_null(b, False))
    return pc.if_else(decided, True, pc.if_else(some_null, null, False))


def _at_least(n: int, kids: tuple[Node, ...], table: pa.Table) -> Any:
    """Spark's ``AtLeastNNonNulls``: whether ``n`` of the values are neither null nor,
    for a float, NaN (never null itself)."""
    count = pa.repeat(pa.scalar(0, pa.int32()), table.num_rows)
    for kid in kids:
        value = evaluate(kid, table)
        if isinstance(value, pa.Scalar):
            value = pa.repeat(value, table.num_rows)
        present = pc.is_valid(value)
        if _type(kid) in _FLOATS:
            present = pc.and_(present, pc.invert(pc.fill_null(pc.is_nan(value), True)))
        count = pc.add(count, pc.cast(present, pa.int32()))
    return pc.greater_equal(count, n)


def _no_nan(value: Any, node: Node) -> Any:
    """``value``, after making sure a float column holds no NaN."""
    while node[0] == "cast":  # a widened float keeps its NaN
        node = node[1]
    if node[0] == "col" and node[2] in _FLOATS and pc.any(pc.is_nan(value)).as_py():
        raise Unreadable(f"column {node[1]} holds NaN (Spark orders it above every number)")
    return value


def _in(value: Any, items: tuple[Any, ...], type_name: str) -> Any:
    """Spark's ``value IN (items)``: null for a null value, and for a value matching no
    item when an item is null."""
    kind = readable_type(type_name)
    known = [x for x in items if x is not None]
    found = pc.is_in(value, value_set=pa.array(known, type=kind), skip_nulls=True)
    unknown = pa.scalar(None, type=pa.bool_())
    found = pc.if_else(pc.is_null(value), unknown, found)
    if len(known) < len(items):
        found = pc.if_else(found, True, unknown)
    return found
