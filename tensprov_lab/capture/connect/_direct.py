"""A Spark Connect source's keys and fused reads computed on the client, from its Parquet
files, without a Spark job.

Over Connect a source's fused read (:mod:`._fused`) is a job whose rows come back
through gRPC: at 5M orders it was 0.90 s of a 1.55 s capture, where pyarrow reads the
same columns of the same two files in 0.15 s (medians of 5, ad hoc
``/tmp/cw/probe_layout.py``).  The keys of a source are ``monotonically_increasing_id``
(:func:`~._index.scan_keys`): a record's partition of the scan and its place in it.
Spark lays a scan of whole files out by rule (``FilePartition``): with

- ``maxSplit = min(maxPartitionBytes, max(openCostInBytes, Σ(size + openCost) //
  minPartitionNum))`` (``minPartitionNum`` the session's
  ``spark.sql.files.minPartitionNum``, else its default leaf parallelism),

the files are taken largest first and packed next-fit into partitions of at most
``maxSplit`` bytes (each file counting ``openCostInBytes`` more), packed again with
``ceil(total / maxPartitionNum)`` when that makes more partitions than
``spark.sql.files.maxPartitionNum``.  :func:`file_partitions` follows that rule.

:func:`direct_source` answers None (read through Spark, as before) unless the client can
be sure to read what Spark would:

- the Connect server runs on this machine (``sc://localhost``, loopback), so a ``file:``
  path Spark lists names the file read here;
- the source is a plain ``spark.read.parquet(paths)``: no options, no schema given, no
  glob, each file directly in a directory given or given itself (no partition
  directories), field ids not read;
- no file is larger than ``maxSplit`` (Spark would split it) and no two files have the
  same size (their order would be Spark's listing order, which the client does not see:
  ``inputFiles`` comes from a set);
- every read compiles (:mod:`tensprov_lab.capture.sources._direct_sql`) and every
  column is of a type pyarrow reads as Spark does; a file that changed size, or holds a
  column as another type, or a NaN compared, raises ``Unreadable`` when read: then Spark
  reads it.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlparse

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tensprov_lab.capture.plan import _proto as P
from tensprov_lab.capture.plan._files import stamp_local
from tensprov_lab.capture.sources._direct import (
    Node,
    _columns_of,
    _parquet_rows,
    evaluate,
    read_columns,
)
from tensprov_lab.capture.sources._direct_files import ARROW_TYPES as _ARROW_TYPES
from tensprov_lab.capture.sources._direct_files import FilePart, Unreadable, read_parquet_files
from tensprov_lab.capture.sources._direct_sql import boolean, compare, in_list, parse_condition

__all__ = [
    "DirectSource",
    "LayoutConf",
    "direct_source",
    "file_partitions",
    "file_schema",
    "layout_conf",
    "local_files",
    "read_direct",
]

_LOOPBACK = {"localhost", "127.0.0.1", "::1", "[::1]"}
_GLOB = re.compile(r"[*?\[\]{}]")
_UNITS = {"": 1, "b": 1, "k": 2**10, "kb": 2**10, "m": 2**20, "mb": 2**20, "g": 2**30,
          "gb": 2**30, "t": 2**40, "tb": 2**40, "p": 2**50, "pb": 2**50}  # fmt: skip
_COMPARE = {"==": "equal", "<": "less", "<=": "less_equal", ">": "greater",
            ">=": "greater_equal"}  # fmt: skip
_INT = (-(2**31), 2**31 - 1)


@dataclass(frozen=True)
class LayoutConf:
    """The settings that lay out a scan of files (see the module's text)."""

    max_bytes: int
    open_cost: int
    min_num: int
    max_num: int | None
    string_type: pa.DataType


def _bytes(text: str) -> int:
    """A size as Spark's configuration writes it (``134217728b``, ``128m``)."""
    m = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", text)
    if m is None or m.group(2).lower() not in _UNITS:
        raise Unreadable(f"a size the client does not read: {text!r}")
    return int(m.group(1)) * _UNITS[m.group(2).lower()]


def layout_conf(spark: Any, cache: dict[str, Any]) -> LayoutConf:
    """The session's :class:`LayoutConf` (``cache`` keeps the default parallelism, which
    takes a plan's explain to learn)."""
    conf = spark.conf

    def get(key: str) -> str | None:
        value = conf.get(key, None)
        return None if value is None else str(value)

    if (get("spark.sql.parquet.fieldId.read.enabled") or "false").lower() != "false":
        raise Unreadable("Parquet field ids are read")
    low = get("spark.sql.files.minPartitionNum") or get("spark.sql.leafNodeDefaultParallelism")
    if low is None:
        if "parallelism" not in cache:
            # a range with no partitions given is split in the leaf parallelism
            text = spark.range(1)._explain_string(mode="simple")
            found = re.search(r"splits=(\d+)", text)
            if found is None:
                raise Unreadable("the default parallelism is unknown")
            cache["parallelism"] = int(found.group(1))
        low = str(cache["parallelism"])
    high = get("spark.sql.files.maxPartitionNum")
    large = (get("spark.sql.execution.arrow.useLargeVarTypes") or "false").lower() == "true"
    return LayoutConf(
        _bytes(get("spark.sql.files.maxPartitionBytes") or "128m"),
        _bytes(get("spark.sql.files.openCostInBytes") or "4m"),
        int(low),
        None if high is None else int(high),
        pa.large_string() if large else pa.string(),
    )


def file_partitions(sizes: list[int], conf: LayoutConf) -> tuple[list[int], list[int]] | None:
    """Spark's partitions of a scan reading files of ``sizes`` whole: the files' indices
    in scan order and each one's partition; None when Spark would split a file or the
    order of two files is its listing's.

    >>> conf = LayoutConf(100, 10, 2, None, pa.string())
    >>> file_partitions([30, 50, 20, 60], conf)
    ([3, 1, 0, 2], [0, 1, 1, 2])
    """
    if len(set(sizes)) != len(sizes):
        return None
    total = sum(s + conf.open_cost for s in sizes)
    split = min(conf.max_bytes, max(conf.open_cost, total // max(conf.min_num, 1)))
    if any(s > split for s in sizes):
        return None
    order = sorted(range(len(sizes)), key=lambda i: -sizes[i])
    parts = _pack([sizes[i] for i in order], split, conf.open_cost)
    if conf.max_num is not None and conf.max_num > 0 and parts and parts[-1] + 1 > conf.max_num:
        split = math.ceil(total / conf.max_num)
        parts = _pack([sizes[i] for i in order], split, conf.open_cost)
    return order, parts


def _pack(sizes: list[int], split: int, open_cost: int) -> list[int]:
    """Next-fit packing of ``FilePartition.getFilePartitions``: each file's partition."""
    parts, part, current, count = [], 0, 0, 0
    for size in sizes:
        if current + size > split and count:
            part, current, count = part + 1, 0, 0
        current += size + open_cost
        count += 1
        parts.append(part)
    return parts


@dataclass(frozen=True)
class DirectSource:
    """A source's keys and reads, to be read from its files: call it for its keys (one
    column, scan order) and the read's table (None when nothing is read but keys)."""

    files: tuple[FilePart, ...]
    partitions: tuple[int, ...]
    columns: tuple[tuple[str, str], ...]
    reads: tuple[tuple[str, Node], ...]
    string_type: pa.DataType

    def __call__(self) -> tuple[np.ndarray, pa.Table | None]:
        wanted = tuple((name, _ARROW_TYPES[kind]) for name, kind in self.columns)
        rows, tables = [], []
        for part in self.files:
            if not self.reads:
                rows.append(_parquet_rows(part[0], part[1]))
                continue
            table = read_parquet_files((part,), wanted)
            rows.append(table.num_rows)
            tables.append(table)
        keys = _ids(self.partitions, rows)
        if not self.reads:
            return keys, None
        return keys, read_columns(pa.concat_tables(tables), self.reads, self.string_type, _value)


def _ids(partitions: tuple[int, ...], rows: list[int]) -> np.ndarray:
    """The ``monotonically_increasing_id`` of each record of files read one after another,
    file ``i`` of ``rows[i]`` records in partition ``partitions[i]`` (as
    :func:`~._index.scan_keys` of their partitions, without a pass over them).

    >>> _ids((0, 1, 1), [2, 1, 2])[:, 0].tolist()
    [0, 1, 8589934592, 8589934593, 8589934594]
    """
    ids = np.arange(sum(rows), dtype=np.int64)
    start, first = 0, 0  # where the file starts, and where its partition did
    for i, (part, n) in enumerate(zip(partitions, rows)):
        if i and part != partitions[i - 1]:
            first = start
        ids[start : start + n] += (part << 33) - first
        start += n
    return ids.reshape(-1, 1)


def _value(node: Node, table: pa.Table) -> Any:
    """:func:`evaluate`, and the join keys narrowed to int as :mod:`._fused` reads them."""
    if node[0] in ("narrow", "wide"):
        key = table.column(node[1][1])
        low, high = pc.min_max(key).values()
        if low.as_py() is None or (low.as_py() >= _INT[0] and high.as_py() <= _INT[1]):
            # every key fits (the common case): one cast, no pass per comparison
            if node[0] == "wide":
                return pa.array(np.zeros(len(key), dtype=bool))
            return pc.cast(key, pa.int32())
        fits = pc.and_(pc.greater_equal(key, _INT[0]), pc.less_equal(key, _INT[1]))
        if node[0] == "wide":
            return pc.and_(pc.is_valid(key), pc.invert(pc.fill_null(fits, True)))
        null = pa.scalar(None, type=pa.int32())
        return pc.if_else(fits, pc.cast(key, pa.int32(), safe=False), null)
    return evaluate(node, table)


def _local(spark: Any) -> bool:
    client = getattr(spark, "client", None) or getattr(spark, "_client", None)
    host = getattr(client, "host", None)
    return isinstance(host, str) and host.lower() in _LOOPBACK


def _files(paths: list[str]) -> list[tuple[str, int]] | None:
    """The source's files as Spark lists them (local path, size): the files given, and
    the data files of the directories given, when those hold no directory (Spark's
    listing would recurse, or find partition values).  Read here rather than asked
    (``inputFiles`` is a round trip, ~60 ms); Spark leaves out the names starting with
    ``_`` (without ``=``) or ``.``, and the files being copied."""
    found: list[tuple[str, int]] = []
    try:
        for raw in paths:
            parsed = urlparse(raw)
            if parsed.scheme not in ("", "file") or _GLOB.search(raw):
                return None
            path = unquote(parsed.path) if parsed.scheme else raw
            if not os.path.isabs(path):
                return None  # (the server resolves it in its own directory)
            if os.path.isfile(path):
                found.append((os.path.normpath(path), os.path.getsize(path)))
                continue
            with os.scandir(path) as entries:
                for entry in entries:
                    name = entry.name
                    if (name.startswith("_") and "=" not in name) or name.startswith(".") \
                            or name.endswith("._COPYING_"):  # fmt: skip
                        continue
                    if not entry.is_file():
                        return None
                    found.append((os.path.normpath(entry.path), entry.stat().st_size))
    except OSError:
        return None
    if len({path for path, _ in found}) != len(found):
        return None  # a file given twice
    return found


#: Parquet columns (as pyarrow reads them) whose Spark type is plain, when the file holds
#: no schema of Spark's
_SPARK_OF_ARROW = {
    pa.int8(): "byte", pa.int16(): "short", pa.int32(): "integer", pa.int64(): "long",
    pa.float32(): "float", pa.float64(): "double", pa.bool_(): "boolean",
    pa.string(): "string", pa.large_string(): "string", pa.date32(): "date",
}  # fmt: skip
_SPARK_ROW = b"org.apache.spark.sql.parquet.row.metadata"


def file_schema(spark: Any, df: Any) -> list[Any] | None:
    """The schema fields of source ``df``, a plain local Parquet read (see
    :func:`direct_source`), from its files' footers, when every file gives the same one:
    Spark's own schema stored in the file, else one of plain types.  None: ask Spark (a
    round trip that also reads the footers on the server, ~0.1 s for a source's first).
    """
    from pyspark.sql.types import StructField, StructType, _parse_datatype_json_string

    files = _plain_files(spark, df)
    if not files:
        return None
    found = None
    for path, _ in files:
        try:
            meta = pq.read_metadata(path)
        except OSError:
            return None
        stored = (meta.metadata or {}).get(_SPARK_ROW)
        if stored is not None:
            text = stored.decode("utf-8")
        else:
            arrow = meta.schema.to_arrow_schema()
            kinds = [_SPARK_OF_ARROW.get(f.type) for f in arrow]
            if None in kinds:
                return None
            fields = [
                {"name": f.name, "type": k, "nullable": True, "metadata": {}}
                for f, k in zip(arrow, kinds)
            ]  # fmt: skip
            text = json.dumps({"type": "struct", "fields": fields})
        if found is not None and text != found:
            return None
        found = text
    assert found is not None
    try:
        schema = _parse_datatype_json_string(found)
    except Exception:  # noqa: BLE001 - a type this client does not know: ask Spark
        return None
    if not isinstance(schema, StructType) or any(f.metadata for f in schema.fields):
        return None  # (a char or varchar column, say: Spark's to describe)
    names = [f.name.lower() for f in schema.fields]
    if len(set(names)) != len(names):
        return None
    return [StructField(f.name, f.dataType, True) for f in schema.fields]


def local_files(spark: Any, df: Any) -> bool:
    """Whether source ``df`` is a plain Parquet read of files the client reads itself."""
    return _plain_files(spark, df) is not None


def _plain_files(spark: Any, df: Any) -> list[tuple[str, int]] | None:
    """The files of ``df`` when it is a plain Parquet read of local files (else None)."""
    rel = P.relation(df)
    if not _local(spark) or rel.WhichOneof("rel_type") != "read":
        return None
    read = rel.read
    if read.is_streaming or read.WhichOneof("read_type") != "data_source":
        return None
    source = read.data_source
    if (source.format or "").lower() != "parquet" or source.schema or len(source.options):
        return None
    if not len(source.paths) or len(source.predicates):
        return None
    return _files(list(source.paths))


def direct_source(
    spark: Any,
    df: Any,
    reads: dict[str, Any],
    schema: list[tuple[str, str]],
    conf: LayoutConf,
) -> DirectSource | None:
    """A reader of source ``df``'s keys and of ``reads`` (by name: a Connect expression,
    or ``("narrow"|"wide", column)`` for a bigint join key read as int) from its files,
    or None when Spark must read them (see the module's text); ``schema`` is its
    columns' (name, Spark type)."""
    files = _plain_files(spark, df)
    if files is None:
        return None
    laid = file_partitions([size for _, size in files], conf)
    if laid is None:
        return None
    order, parts = laid
    columns = {}
    for name, kind in schema:
        if name.lower() in columns:
            return None
        columns[name.lower()] = (name, kind)
    readable = {k: v for k, v in columns.items() if v[1] in _ARROW_TYPES}
    try:
        compiled = []
        for name, expr in reads.items():
            if isinstance(expr, tuple):
                column = _column(expr[1], readable)
                if column[2] != "bigint":
                    return None
                compiled.append((name, (expr[0], column)))
            else:
                compiled.append((name, compile_expression(expr, readable)))
    except Unreadable:
        return None
    used: dict[str, str] = {}
    for _, node in compiled:
        _columns_of(node[1] if node[0] in ("narrow", "wide") else node, used)
    return DirectSource(
        tuple((files[i][0], files[i][1], None) for i in order),
        tuple(parts),
        tuple(used.items()),
        tuple(compiled),
        conf.string_type,
    )


def read_direct(
    tracker: Any, node: Any, reads: dict[str, Any], schema: list[tuple[str, str]]
) -> tuple[np.ndarray | None, pa.Table | None]:
    """Source ``node``'s keys and ``reads`` read from its files on the client, or
    (None, None) when Spark must read them.  The files read, and their stamps, are
    noted in ``node.files`` (replays on the client read records from them, and refuse
    files that changed since)."""
    fusion = tracker._fusion
    if not tracker.direct_reads or fusion is None or node.cached is not None:
        return None, None
    try:
        if fusion.layout is None:
            fusion.layout = fusion.prefetch.result(
                "layout", lambda: layout_conf(tracker.spark, tracker._layout_cache)
            )
        narrowed = fusion.narrowed.get(node.ident, {})
        wanted = {n: narrowed.get(n, e) for n, e in reads.items()}
        direct = direct_source(tracker.spark, node.df, wanted, schema, fusion.layout)
        if direct is not None:
            # (noted before the read: one that fails, a NaN compared say, still laid
            # the files out as Spark does)
            node.files = (direct, tuple(stamp_local(path) for path, _, _ in direct.files))
            return direct()
    except Unreadable:
        pass
    except Exception:  # noqa: BLE001 - another client or plan: Spark reads it
        tracker._stop_point()
    return None, None


def _column(name: str, columns: dict[str, tuple[str, str]]) -> Node:
    found = columns.get(name.lower())
    if found is None:
        raise Unreadable(f"column {name!r} is read through Spark")
    return ("col", found[0], found[1])


def compile_expression(e: Any, columns: dict[str, tuple[str, str]]) -> Node:
    """A Connect expression over a source's ``columns`` (lower-case name -> (name, Spark
    type)) as a tree :func:`evaluate` computes; :class:`Unreadable` for anything else."""
    which = e.WhichOneof("expr_type")
    if which == "unresolved_attribute":
        ua = e.unresolved_attribute
        name = ua.unparsed_identifier
        if ua.HasField("plan_id") or ua.is_metadata_column:
            raise Unreadable("a column of a named DataFrame")
        if name.startswith("`") and name.endswith("`") and name.count("`") == 2:
            name = name[1:-1]
        elif "." in name or "`" in name:
            raise Unreadable("a nested field")
        return _column(name, columns)
    if which == "literal":
        return _literal(e.literal)
    if which == "expression_string":
        return parse_condition(e.expression_string.expression, columns, condition=False)
    if which != "unresolved_function":
        raise Unreadable(f"a {which} expression")
    f = e.unresolved_function
    if f.is_distinct or f.is_user_defined_function:
        raise Unreadable("a function the client does not evaluate")
    name = f.function_name.lower()
    args = [compile_expression(a, columns) for a in f.arguments]
    if name in _COMPARE and len(args) == 2:
        return compare(_COMPARE[name], args[0], args[1])
    if name in ("!=", "<>") and len(args) == 2:
        return ("not", compare("equal", args[0], args[1]))
    if name in ("and", "or") and len(args) == 2:
        return (f"{name}_kleene", boolean(args[0]), boolean(args[1]))
    if name == "not" and len(args) == 1:
        return ("not", boolean(args[0]))
    if name in ("isnull", "isnotnull") and len(args) == 1 and args[0][0] != "lit":
        return (name, args[0])
    if name == "in" and len(args) >= 2:
        return in_list(args[0], args[1:])
    raise Unreadable(f"{f.function_name} is evaluated by Spark")


_LITERALS = {
    "boolean": "boolean", "byte": "tinyint", "short": "smallint", "integer": "int",
    "long": "bigint", "float": "float", "double": "double", "string": "string",
}  # fmt: skip


def _literal(lit: Any) -> Node:
    which = lit.WhichOneof("literal_type")
    if which == "null":
        return ("lit", None, "void")
    if which in _LITERALS:
        value = getattr(lit, which)
        if which in ("float", "double") and value != value:
            raise Unreadable("a NaN constant (Spark orders NaN above every number)")
        return ("lit", value, _LITERALS[which])
    raise Unreadable(f"a {which} constant")
