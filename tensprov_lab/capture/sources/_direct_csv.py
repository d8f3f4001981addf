"""A CSV source's columns read straight from its files, as Spark's CSV reader reads them.

Spark reads a CSV file line by line (``\\n``, ``\\r`` or ``\\r\\n``), drops blank lines
and, with ``header``, each file's first one, splits every line with univocity's parser
(quote ``"``, escape ``\\``, no trimming) and converts each token by the column's type:
the empty token is null, a number is Java's ``Integer.parseInt``/``Double.parseDouble``
of the token, a token that does not convert is null (``PERMISSIVE`` mode).  Where those
rules leave room for a difference with pyarrow's parser (an escape, a quote inside a
value, a blank line, a token that Java and Arrow might read differently, a row of
another width), :func:`read_csv_files` raises
:class:`~tensprov_lab.capture.sources._direct_files.Unreadable` and the caller reads through
Spark.  What it accepts is a subset where every token has one reading:

- the bytes hold no ``\\`` or NUL and no byte-order mark, lines end in ``\\n`` or
  ``\\r\\n``, and every ``"`` belongs to a whole quoted value of at least one
  character (between separators or line ends, without a line break);
- a quoted value with a doubled quote inside (``"a ""b"" c"``, which Spark's parser,
  whose escape is ``\\``, reads in its own way: quotes kept, or cut at a separator
  inside) holds no separator, so that its line splits as pyarrow splits it, and it is
  in no column read;
- every line has the schema's number of values (pyarrow checks it), and the first line
  is not blank (Spark would take the next one as the header);
- an integer token is ``-?[0-9]+`` within its type's range, a double one
  ``-?[0-9]+(.[0-9]+)?([eE][+-]?[0-9]+)?`` and finite (both correctly rounded), a
  boolean one ``true`` or ``false`` in any case, and a string any token; the empty
  token is null.

The options must be Spark's defaults but for ``header``, ``inferSchema``,
``samplingRatio``, ``enforceSchema`` (true), ``mode`` (``PERMISSIVE``) and a
one-character separator.  Property tests against Spark's own read of random files,
ambiguous tokens included, are in ``tests/test_direct_csv.py``.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from tensprov_lab.capture.sources._direct_files import FilePart, Unreadable

__all__ = ["CheckedFiles", "CsvLayout", "csv_layout", "read_csv_files"]

#: options that do not change how a file's tokens are read (the schema is given)
_HARMLESS = {"inferschema", "samplingratio", "path", "paths", "preferdate"}
#: Spark types read from CSV tokens here, with their Arrow type and integer range
_INTEGERS = {
    "bigint": (pa.int64(), -(2**63), 2**63 - 1),
    "int": (pa.int32(), -(2**31), 2**31 - 1),
    "smallint": (pa.int16(), -(2**15), 2**15 - 1),
    "tinyint": (pa.int8(), -(2**7), 2**7 - 1),
}
CSV_TYPES = {*_INTEGERS, "double", "boolean", "string"}
_INTEGER = r"^-?[0-9]+$"
_DOUBLE = r"^-?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?$"
_BOOLEAN = r"^([tT][rR][uU][eE]|[fF][aA][lL][sS][eE])$"
#: a quoted value as RFC 4180 writes it: no escape or line break, quotes doubled
_QUOTED = re.compile(rb'"(?:[^"\\\n\r]|"")*"')
#: an empty line inside the file
_BLANK_LINE = re.compile(rb"\n\r?\n")
#: what Java's String.trim() removes
_BLANK = bytes(range(33))


@dataclass(frozen=True)
class CsvLayout:
    """How a CSV source's files are laid out: every column of its schema in order, the
    separator, and whether each file starts with a header line."""

    names: tuple[str, ...]
    sep: str
    header: bool


def csv_layout(options: dict[str, str], names: list[str]) -> CsvLayout | None:
    """The layout of a CSV relation with ``options`` (keys in lower case) and data
    columns ``names``; None when an option may make Spark read a token otherwise than
    described in the module's text.

    >>> csv_layout({"header": "true", "path": "x.csv"}, ["a", "b"])
    CsvLayout(names=('a', 'b'), sep=',', header=True)
    >>> csv_layout({"quote": "'"}, ["a", "b"]) is None
    True
    """
    header = False
    sep = ","
    for key, value in options.items():
        if key in _HARMLESS:
            continue
        if key == "header" and value.lower() in ("true", "false"):
            header = value.lower() == "true"
        elif key == "enforceschema" and value.lower() == "true":
            continue
        elif key in ("sep", "delimiter") and len(value) == 1 and 32 < ord(value) < 127:
            sep = value
        elif key == "mode" and value.upper() == "PERMISSIVE":
            continue
        else:
            return None
    if sep in '"\\' or len(names) < 2 or len({n.lower() for n in names}) != len(names):
        # one column: a line of blanks is a value to pyarrow and nothing to Spark
        return None
    return CsvLayout(tuple(names), sep, header)


class CheckedFiles:
    """The bytes of the CSV files found plain during one capture, so that a file read
    twice (its early count while the block runs, then the block's fused read) is
    checked once: the check reads every byte in Python (COMPAS: 7-14 ms), where
    comparing the bytes read again with the ones checked is a ``memcmp``.

    A file's bytes are kept only while ``limit`` bytes in all are not exceeded; call
    :meth:`clear` when the capture ends.

    Examples
    --------
    >>> checked = CheckedFiles()
    >>> checked.check("t.csv", b"a,b\\n1,2\\n", b",")  # plain, no quote inside a value
    False
    >>> checked.known("t.csv", b"a,b\\n1,2\\n", b",")
    True
    >>> checked.known("t.csv", b"a,b\\n1,3\\n", b",")  # other bytes: checked anew
    False
    >>> checked.check("u.csv", b"a,b\\n\\\\,2\\n", b",")
    Traceback (most recent call last):
    ...
    tensprov_lab.capture.sources._direct_files.Unreadable: an escape in the file
    """

    def __init__(self, limit: int = 256 << 20) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        #: (path, separator) -> (bytes found plain, whether a value quotes a quote)
        self._bytes: dict[tuple[str, bytes], tuple[bytes, bool]] = {}

    def known(self, path: str, data: bytes, sep: bytes) -> bool:
        """Whether ``data`` are the bytes of ``path`` found plain (with ``sep``) before."""
        return self._seen(path, data, sep) is not None

    def _seen(self, path: str, data: bytes, sep: bytes) -> tuple[bytes, bool] | None:
        with self._lock:
            seen = self._bytes.get((path, sep))
        return seen if seen is not None and seen[0] == data else None

    def check(self, path: str, data: bytes, sep: bytes) -> bool:
        """Check ``data``, the bytes of ``path``, unless they were found plain before
        (:class:`Unreadable` where Spark might read them otherwise); whether a quoted
        value of theirs holds a doubled quote (see :func:`_check_plain`)."""
        seen = self._seen(path, data, sep)
        if seen is not None:
            return seen[1]
        doubled = _check_plain(data, sep)
        with self._lock:
            if sum(len(b) for b, _ in self._bytes.values()) + len(data) <= self.limit:
                self._bytes[(path, sep)] = (data, doubled)
        return doubled

    def clear(self) -> None:
        """Forget every file's bytes."""
        with self._lock:
            self._bytes.clear()


def read_csv_files(
    files: tuple[FilePart, ...],
    columns: tuple[tuple[str, str], ...],
    layout: CsvLayout,
    checked: CheckedFiles | None = None,
) -> pa.Table:
    """The ``columns`` (name, Spark type) of whole CSV ``files`` (path, size when Spark
    listed it, None for the whole file) one after another, as Spark reads them
    (:class:`Unreadable` where they might differ, see the module's text); ``checked``
    holds the files found plain earlier in the capture.

    Examples
    --------
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "t.csv")
    >>> _ = open(path, "w").write('a,b\\n1,"x, y"\\n,z\\n')
    >>> layout = CsvLayout(("a", "b"), ",", True)
    >>> files = ((path, os.path.getsize(path), None),)
    >>> read_csv_files(files, (("a", "int"), ("b", "string")), layout).to_pydict()
    {'a': [1, None], 'b': ['x, y', 'z']}
    """
    positions = {name: i for i, name in enumerate(layout.names)}
    parts = []
    for path, size, groups in files:
        if groups is not None:
            raise Unreadable(f"{path}: Spark reads a part of it")
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except OSError as exc:
            raise Unreadable(str(exc)) from exc
        if len(data) != size or os.path.getsize(path) != size:
            raise Unreadable(f"{path} changed since Spark listed it")
        try:
            sep = layout.sep.encode()
            doubled = _check_plain(data, sep) if checked is None else checked.check(path, data, sep)
            parts.append(_read_one(data, columns, positions, layout, doubled))
        except pa.ArrowException as exc:  # e.g. a line of another width
            raise Unreadable(f"{path}: {exc}") from exc
    schema = pa.schema([(name, _arrow_type(kind)) for name, kind in columns])
    if not parts:
        return schema.empty_table()
    return pa.concat_tables(parts)


def _arrow_type(kind: str) -> pa.DataType:
    if kind in _INTEGERS:
        return _INTEGERS[kind][0]
    return {"double": pa.float64(), "boolean": pa.bool_(), "string": pa.string()}[kind]


def _read_one(
    data: bytes,
    columns: tuple[tuple[str, str], ...],
    positions: dict[str, int],
    layout: CsvLayout,
    doubled: bool = True,
) -> pa.Table:
    """One file's columns, its bytes found plain (:class:`Unreadable`, or pyarrow's
    error, where Spark might read it otherwise); ``doubled``: whether a quoted value
    of the file holds a doubled quote (without one, no value read holds a quote)."""
    names = [name for name, _ in columns]
    if not names:
        raise Unreadable("no column to count the records by")
    body = data.partition(b"\n")[2] if layout.header else data
    if not body:  # no record (pyarrow wants at least a line)
        return pa.schema([(name, _arrow_type(kind)) for name, kind in columns]).empty_table()
    fields = [f"_{i}" for i in range(len(layout.names))]
    table = pacsv.read_csv(
        pa.py_buffer(data),
        read_options=pacsv.ReadOptions(
            column_names=fields, skip_rows=1 if layout.header else 0, use_threads=True
        ),
        parse_options=pacsv.ParseOptions(
            delimiter=layout.sep,
            quote_char='"',
            double_quote=True,
            escape_char=False,
            newlines_in_values=False,
            ignore_empty_lines=False,
        ),
        convert_options=pacsv.ConvertOptions(
            column_types={f"_{positions[n]}": pa.string() for n in names},
            include_columns=[f"_{positions[n]}" for n in names],
            # the empty token (unquoted: a quoted one is refused) is null, as Spark's
            strings_can_be_null=True,
            quoted_strings_can_be_null=False,
            null_values=[""],
        ),
    )
    arrays = [
        _convert(table.column(f"_{positions[name]}"), kind, name, doubled) for name, kind in columns
    ]
    return pa.table(arrays, names=names)


def _check_plain(data: bytes, sep: bytes) -> bool:
    """Refuse bytes whose tokens Spark's reader might split otherwise than pyarrow's;
    return whether a quoted value holds a doubled quote, which pyarrow reads as a quote
    inside the value (Spark's parser otherwise).  Without one no value holds a quote:
    every quote of accepted bytes is around a whole value."""
    for bad, what in ((b"\\", "an escape"), (b"\0", "a NUL")):
        if bad in data:
            raise Unreadable(f"{what} in the file")
    # (``in`` first: it is a memchr, where ``count`` reads the bytes a tenth as fast)
    if b"\r" in data and data.count(b"\r") != data.count(b"\r\n"):
        raise Unreadable("a line ended by a carriage return alone")
    if data.startswith(b"\xef\xbb\xbf"):
        raise Unreadable("a byte-order mark")
    end = data.find(b"\n")
    first = data if end < 0 else data[:end]
    if data and not first.strip(_BLANK):
        raise Unreadable("a blank first line")
    if _BLANK_LINE.search(data):
        # Spark drops it; pyarrow reads an empty line as a record of empty values
        raise Unreadable("a blank line")
    doubled = False
    if b'"' in data:
        quotes = data.count(b'"')
        whole = 0
        for found in _QUOTED.finditer(data):
            start, end = found.span()
            before = data[start - 1 : start] if start else b"\n"
            after = data[end : end + 1] or b"\n"
            if before not in (sep, b"\n", b"\r") or after not in (sep, b"\n", b"\r"):
                continue  # not a whole value
            if end - start < 3:
                continue  # an empty value: Spark's null or empty string?
            if b'""' in data[start + 1 : end - 1]:
                if sep in data[start:end]:
                    continue  # Spark's parser would end this value at its separator
                doubled = True
            whole += data.count(b'"', start, end)
        if whole != quotes:
            raise Unreadable("a quote that is not around a whole value")
    return doubled


def _convert(tokens: Any, kind: str, name: str, doubled: bool = True) -> Any:
    """A column's tokens as Spark converts them: the empty token null, every other one
    read by the column's type (:class:`Unreadable` for one with another reading);
    ``doubled``: whether the file has a quoted value with a doubled quote."""
    # (the empty token is null already: see the parse's options)
    values = tokens.combine_chunks() if isinstance(tokens, pa.ChunkedArray) else tokens
    if kind == "string":
        if doubled and pc.any(pc.match_substring(values, '"')).as_py():
            # a value with doubled quotes, which Spark's parser (escape \\) keeps in part
            raise Unreadable(f"a quote inside a value of column {name}")
        return values
    # (a token with a quote in it matches none of these patterns)
    pattern = _INTEGER if kind in _INTEGERS else _DOUBLE if kind == "double" else _BOOLEAN
    # digits alone match the number patterns, found in a tenth of a regex's time
    # (all() of nulls alone, the empty tokens, is None; any() of them is not true)
    plain = kind != "boolean" and pc.all(pc.ascii_is_decimal(values)).as_py() is True
    if not plain and pc.any(pc.invert(pc.match_substring_regex(values, pattern))).as_py():
        raise Unreadable(f"a token of column {name} that is not a plain {kind}")
    if kind == "boolean":
        return pc.equal(pc.utf8_lower(values), "true")
    if kind == "double":
        doubles = pc.cast(values, pa.float64())
        if pc.any(pc.is_inf(doubles)).as_py():
            raise Unreadable(f"a token of column {name} beyond a double's range")
        return doubles
    arrow, low, high = _INTEGERS[kind]
    longs = pc.cast(values, pa.int64())  # raises beyond a long's range
    if kind != "bigint" and len(longs) and longs.null_count < len(longs):
        bounds = pc.min_max(longs).as_py()
        if bounds["min"] < low or bounds["max"] > high:
            raise Unreadable(f"a token of column {name} beyond its type's range")
    return longs.cast(arrow)
