"""The files a source reads, stamped at capture and checked whenever its records are read.

A source read from files keeps only its record keys in the store: its records are read
from the files again when a query shows them, a replay recomputes from them or a what-if
previews a change. A file rewritten in between would give other records under the same
row numbers, silently. Capture therefore stamps every file a source's scans read (path,
size, modification time) and each read checks the stamps first: a changed, added or
removed file is a clear error naming the file and what changed.

Local files are stamped by ``os.stat``; other file systems (HDFS, S3, ...) through the
Hadoop file system Spark reads them with.

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "o.csv")
>>> _ = open(path, "w").write("a\\n1\\n")
>>> stamps = (stamp_local(path),)
>>> changes(stamps, None) is None
True
>>> _ = open(path, "a").write("2\\n")
>>> print(changes(stamps, None))  # doctest: +ELLIPSIS
file .../o.csv changed since capture: 4 bytes then, 6 now...
"""

from __future__ import annotations

import datetime as dt
import os
from typing import Any, NamedTuple
from urllib.parse import unquote, urlparse

__all__ = ["FileStamp", "changes", "is_local", "stamp_files", "stamp_local"]

#: a source over more files than this is not stamped (listing them at every read would
#: cost more than the reads); its reads say nothing about changes, as before
MAX_FILES = 20_000


class FileStamp(NamedTuple):
    """One file a source read: its path as Spark names it, size in bytes and
    modification time (nanoseconds since the epoch; None: gone)."""

    path: str
    size: int | None
    mtime_ns: int | None


def _local_path(path: str) -> str | None:
    """The local path of a Spark file path (``file:`` or no scheme), else None."""
    parsed = urlparse(path)
    if parsed.scheme in ("", "file"):
        return unquote(parsed.path) if parsed.scheme else path
    return None


def is_local(path: str) -> bool:
    """Whether Spark file path ``path`` is on the local file system.

    >>> is_local("file:///tmp/o.csv"), is_local("/tmp/o.csv"), is_local("s3a://b/o.csv")
    (True, True, False)
    """
    return _local_path(path) is not None


def stamp_local(path: str) -> FileStamp:
    """The stamp of a local file (size and time None when it does not exist)."""
    local = _local_path(path)
    try:
        st = os.stat(local if local is not None else path)
    except OSError:
        return FileStamp(path, None, None)
    return FileStamp(path, int(st.st_size), int(st.st_mtime_ns))


def _stamp_remote(spark: Any, path: str) -> FileStamp:
    jvm = spark._jvm
    try:
        hpath = jvm.org.apache.hadoop.fs.Path(path)
        fs = hpath.getFileSystem(spark._jsc.hadoopConfiguration())
        status = fs.getFileStatus(hpath)
    except Exception:  # noqa: BLE001 - gone (FileNotFoundException) or unreadable
        return FileStamp(path, None, None)
    return FileStamp(path, int(status.getLen()), int(status.getModificationTime()) * 1_000_000)


def _stamp(spark: Any, path: str) -> FileStamp:
    return stamp_local(path) if _local_path(path) is not None else _stamp_remote(spark, path)


def stamp_files(df: Any) -> tuple[FileStamp, ...] | None:
    """Stamps of the files ``df``'s scans read (empty: none, e.g. ``createDataFrame``);
    None when they cannot be listed or are too many to check (see :data:`MAX_FILES`)."""
    try:
        files = sorted(str(f) for f in df.inputFiles())
    except Exception:  # noqa: BLE001 - a plan Spark cannot list files of: not checked
        return None
    if len(files) > MAX_FILES:
        return None
    spark = df.sparkSession
    return tuple(_stamp(spark, f) for f in files)


def _when(ns: int) -> str:
    return dt.datetime.fromtimestamp(ns / 1e9).strftime("%Y-%m-%d %H:%M:%S")


def _what(then: FileStamp, now: FileStamp) -> str | None:
    if now.size is None:
        return f"file {then.path} was removed since capture"
    if then.size != now.size:
        return (
            f"file {then.path} changed since capture: {then.size:,} bytes then, "
            f"{now.size:,} now (modified {_when(now.mtime_ns or 0)})"
        )
    if then.mtime_ns != now.mtime_ns:
        return (
            f"file {then.path} changed since capture: modified "
            f"{_when(then.mtime_ns or 0)} then, {_when(now.mtime_ns or 0)} now"
        )
    return None


def changes(stamps: tuple[FileStamp, ...], spark: Any) -> str | None:
    """What changed in the files ``stamps`` took at capture (the first change found),
    or None. (A file added to a source's directory is not read: the source's plan keeps
    the listing Spark made when it was built.)"""
    for then in stamps:
        now = _stamp(spark, then.path) if spark is not None else stamp_local(then.path)
        what = _what(then, now)
        if what is not None:
            return what
    return None
