"""Reading a source's files for :mod:`._direct`: what it raises when it cannot read
them as Spark does, and the Parquet reader (CSV: :mod:`._direct_csv`)."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq

__all__ = ["FilePart", "Unreadable", "read_parquet_files"]

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
            if found != kind and not (kind == pa.string() and found in _STRINGS):
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
