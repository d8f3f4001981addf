"""Reading a source's files for :mod:`._direct`: what it raises when it cannot read
them as Spark does, and the Parquet reader (CSV: :mod:`._direct_csv`)."""

from __future__ import annotations

import os
import re
import threading
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

__all__ = [
    "ARROW_TYPES", "FilePart", "ParquetTypes", "Unreadable", "arrow_ready", "arrow_type",
    "before_gregorian", "read_parquet_files", "readable_type", "ready_arrow",
]  # fmt: skip

#: a part of a file a scan reads: its local path, its size when Spark listed it, and the
#: row groups Spark reads of it, each with its starting position in the file (None: all
#: of it)
FilePart = tuple[str, int, "tuple[tuple[int, int], ...] | None"]


#: the Arrow types of a Parquet string column that Spark reads as a string (a string
#: view: files written by Arrow-based writers, tpchgen-cli's among them)
_STRINGS = tuple(
    kind() for kind in (pa.large_string, getattr(pa, "string_view", None)) if kind is not None
)


class Unreadable(Exception):
    """The files cannot be read here as Spark reads them: read through Spark."""


def read_parquet_files(
    files: tuple[FilePart, ...],
    columns: tuple[tuple[str, pa.DataType], ...],
    dictionaries: bool = False,
) -> pa.Table:
    """The ``columns`` of the parts of ``files`` one after another (:class:`Unreadable`
    when a file changed size, lacks a column or holds it as another type).

    With ``dictionaries``, a string column that a file holds in small dictionaries
    comes as an Arrow dictionary array of those strings (see :func:`_small_dictionaries`;
    the same column of every part, else none is)."""
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
            if found != kind and not (kind == pa.string() and found in _STRINGS):
                raise Unreadable(f"{path} holds {name!r} as {found}")
        strings = [n for n in names if wanted[n] == pa.string()] if dictionaries else []
        coded = _small_dictionaries(handle, strings, groups)
        if coded:
            try:
                handle = pq.ParquetFile(path, memory_map=True, read_dictionary=coded)
            except OSError as exc:
                raise Unreadable(str(exc)) from exc
        if groups is None:
            table = handle.read(columns=names, use_threads=True)
        else:
            for group, position in groups:
                if group >= handle.num_row_groups or _start(handle, group) != position:
                    raise Unreadable(f"{path}: row group {group} is not the one Spark reads")
            table = handle.read_row_groups([g for g, _ in groups], columns=names, use_threads=True)
        kinds = [pa.dictionary(pa.int32(), wanted[n]) if n in coded else wanted[n] for n in names]
        parts.append(table.cast(pa.schema(list(zip(names, kinds)))))
    if not parts:
        return pa.table([pa.array([], type=t) for t in wanted.values()], names=names)
    if any(part.schema != parts[0].schema for part in parts):
        plain = pa.schema([(n, wanted[n]) for n in names])
        parts = [part.cast(plain) for part in parts]
    return pa.concat_tables(parts)


def _small_dictionaries(
    handle: pq.ParquetFile, names: list[str], groups: tuple[tuple[int, int], ...] | None
) -> list[str]:
    """The ``names`` whose every column chunk read (of row ``groups``, None: all) starts
    with a dictionary page of under a byte for every four values: a few distinct
    strings (TPC-H's ship modes, brands, containers), which Arrow gives as a dictionary
    array about ten times faster than as strings.  A column of many distinct strings (a
    comment, a name) is slower read so, and is read as strings."""
    meta = handle.metadata
    # (a flat column's leaf in the Parquet schema: a nested one is never a string read)
    leaves = {meta.schema.column(i).path: i for i in range(meta.num_columns)}
    picked = []
    for name in names:
        index = leaves.get(name)
        if index is None:
            continue
        chunks = [meta.row_group(g).column(index) for g in _groups(meta, groups)]
        if chunks and all(_small(chunk) for chunk in chunks):
            picked.append(name)
    return picked


def _groups(meta: Any, groups: tuple[tuple[int, int], ...] | None) -> list[int]:
    every = range(meta.num_row_groups)
    return list(every) if groups is None else [g for g, _ in groups if g in every]


def _small(chunk: Any) -> bool:
    if not chunk.has_dictionary_page:
        return False
    start, data = int(chunk.dictionary_page_offset), int(chunk.data_page_offset)
    return 0 <= start < data and (data - start) * 4 < int(chunk.num_values)


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


#: set once Arrow's compute functions are registered in this process
arrow_ready = threading.Event()


def ready_arrow() -> None:
    """Call an Arrow compute function once: pyarrow registers them all on the first
    call of the process (0.2 s on this machine), which is then made while the first
    block runs rather than in its capture (TPC-H Q19's first gather took 0.22 s)."""
    import pyarrow.compute as pc

    pc.take(pa.array([0]), pa.array([0]))
    arrow_ready.set()


#: Spark types whose Parquet values pyarrow reads exactly as Spark does, and their type
#: in the files (a string column may also come as a large string)
ARROW_TYPES: dict[str, pa.DataType] = {
    "bigint": pa.int64(),
    "int": pa.int32(),
    "smallint": pa.int16(),
    "tinyint": pa.int8(),
    "double": pa.float64(),
    "float": pa.float32(),
    "boolean": pa.bool_(),
    "string": pa.string(),
}
_DECIMAL = re.compile(r"decimal\((\d+),(\d+)\)")
#: the first day of the Gregorian calendar (1582-10-15), in days since 1970: Spark
#: shifts the dates before it in a file written in its legacy hybrid calendar (the
#: dates from it on are the same in both), so a date column read here holds none
_GREGORIAN_DAY = -141427


def arrow_type(type_name: str) -> pa.DataType | None:
    """The Arrow type pyarrow reads a Parquet column of Spark type ``type_name`` as,
    when its values are exactly Spark's (None: read through Spark): the types of
    ``ARROW_TYPES``, dates (:data:`_GREGORIAN_DAY` on) and decimals.

    >>> arrow_type("decimal(15,2)"), arrow_type("date"), arrow_type("timestamp")
    (Decimal128Type(decimal128(15, 2)), DataType(date32[day]), None)
    """
    found = ARROW_TYPES.get(type_name)
    if found is not None:
        return found
    if type_name == "date":
        return pa.date32()
    decimal = _DECIMAL.fullmatch(type_name)
    if decimal is not None and int(decimal[1]) <= 38:
        return pa.decimal128(int(decimal[1]), int(decimal[2]))
    return None


def readable_type(type_name: str) -> pa.DataType:
    """:func:`arrow_type` of a type found readable already."""
    found = arrow_type(type_name)
    if found is None:
        raise Unreadable(f"a value of type {type_name}")
    return found


class ParquetTypes:
    """The Spark types a Parquet column is read here in (``in``: :func:`arrow_type`)."""

    def __contains__(self, type_name: object) -> bool:
        return isinstance(type_name, str) and arrow_type(type_name) is not None


def before_gregorian(column: Any) -> bool:
    low = pc.min(column.cast(pa.int32())).as_py()  # (a date32's days since 1970)
    return low is not None and low < _GREGORIAN_DAY
