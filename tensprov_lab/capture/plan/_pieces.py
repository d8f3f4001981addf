"""Reading a source's records in pieces of scan positions, so the driver never holds
too much of a Spark job's result.

A read of a source is one Spark job whose every task returns its whole partition at
once, and the driver (over Spark Connect, the server's) holds a task's result, and the
job's up to ``spark.driver.maxResultSize`` (1 GB by default), as it takes it: a source
of tens of millions of records a partition ran a small Connect server out of memory,
and one of ~80M records or more failed capture ("Total size of serialized results ...
is bigger than spark.driver.maxResultSize").  :func:`read_in_pieces` asks for one range
of scan positions (the low 33 bits of ``monotonically_increasing_id``) within every
partition at a time: one request, as before, for a partition of fewer records than
:func:`positions_per_piece` gives (about 4.5M of 14 bytes on a driver of 1 GB).

:func:`read_whole` reads any result so (an operation's keys read by a job of its own):
at once, and only when the driver refuses that, in pieces of the result cached for the
purpose.

:func:`read_in_pieces` is pure Python and numpy (the reads are the caller's), testable
without a JVM; :func:`read_frame_in_pieces` and :func:`read_whole` build the requests
of a DataFrame, classic or Connect.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from tensprov_lab.capture.plan._bound import rows_at_most
from tensprov_lab.capture.plan._keyed import Unsupported, key_name
from tensprov_lab.capture.plan._keys import POSITION_MASK
from tensprov_lab.capture.plan._nodes import result_limit

__all__ = [
    "PIECE_SHARE", "Stopped", "driver_limits", "positions_per_piece", "read_frame_in_pieces",
    "read_in_pieces", "read_result_in_pieces", "read_whole", "row_bytes",
]  # fmt: skip

#: the share of the driver's memory one partition's records of a request may take
#: (1 GB, Spark's default: 64 MB; the driver holds a few tasks' results at once, each
#: copied as it is sent on)
PIECE_SHARE = 16
#: fewest positions of every partition a request asks for, however small the limits
FEWEST = 1 << 10
#: Spark's defaults of spark.driver.memory and spark.driver.maxResultSize
_DEFAULTS = {"spark.driver.memory": "1g", "spark.driver.maxResultSize": "1g"}
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
#: the limits of each Connect session asked (settings of the server's start)
_LIMITS: dict[str, tuple[int, int]] = {}


class Stopped(Exception):
    """A read given up between two of its pieces (its capture was interrupted)."""


def read_in_pieces(
    read: Callable[[int, int], Any],
    partitions: Callable[[Any], np.ndarray],
    per: int,
    stop: threading.Event | None = None,
) -> Any:
    """The Arrow table of a source's records in scan order, from requests
    ``read(lo, hi)`` of the records at positions ``lo <= p < hi`` within every
    partition, ``per`` positions a request at first; ``partitions(table)``: each
    record's partition.  A request the driver refuses as too large
    (``spark.driver.maxResultSize``) is asked again with a quarter of the positions.
    Once ``stop`` is set no more requests are made (:class:`Stopped` is raised):
    cancelling a capture's jobs stops only those that run, and a read in another
    thread would go on with its next piece.

    >>> import pyarrow as pa
    >>> source = {0: [10, 11, 12, 13, 14], 1: [20, 21]}  # partition -> records
    >>> def read(lo, hi):
    ...     rows = [(p, r) for p, rs in source.items() for r in rs[lo:hi]]
    ...     return pa.table({"p": [p for p, _ in rows], "r": [r for _, r in rows]})
    >>> read_in_pieces(read, lambda t: t.column("p").to_numpy(), 2)["r"].to_pylist()
    [10, 11, 12, 13, 14, 20, 21]
    """
    import pyarrow as pa

    lo, tables, parts = 0, [], []
    while True:
        if stop is not None and stop.is_set():
            raise Stopped
        try:
            table = read(lo, lo + per)
        except Exception as exc:
            if result_limit(exc) is None or per <= FEWEST:
                raise
            per = max(FEWEST, per // 4)
            continue
        part = np.asarray(partitions(table), dtype=np.int64)
        tables.append(table)
        parts.append(part)
        # (bincount: one pass over the partition numbers)
        if not len(part) or int(np.bincount(part).max()) < per:
            break  # no partition has records past this range
        lo += per
    if len(tables) == 1:
        return tables[0]
    # each piece gives its partitions in order: by partition, stably, is scan order
    order = np.argsort(np.concatenate(parts), kind="stable")
    return pa.concat_tables(tables).take(pa.array(order))


def read_frame_in_pieces(
    keyed: Any,
    key: str,
    names: list[str],
    to_arrow: Callable[[Any], Any],
    per: int,
    stop: threading.Event | None = None,
) -> Any:
    """Columns ``names`` of a DataFrame ``keyed`` (classic or Connect) whose column
    ``key`` is each record's ``monotonically_increasing_id``, as one Arrow table in
    scan order, read with :func:`read_in_pieces` (each record with its partition;
    ``to_arrow`` reads a DataFrame).

    >>> read_frame_in_pieces(keyed, "__tp_s3", ["a"], to_arrow, 1 << 20)  # doctest: +SKIP
    """
    from pyspark.sql import functions as F

    part = key_name("p")
    within = F.col(key).bitwiseAND(F.lit(POSITION_MASK))

    def read(lo: int, hi: int) -> Any:
        below = within < F.lit(hi)
        piece = keyed.where(below if lo == 0 else (within >= F.lit(lo)) & below)
        return to_arrow(piece.select(*_cols(names), F.spark_partition_id().alias(part)))

    table = read_in_pieces(read, lambda t: t.column(part).to_numpy(), per, stop)
    return table.drop_columns([part])


def read_whole(
    df: Any,
    to_arrow: Callable[[Any], Any],
    spark: Any,
    cached: bool = False,
    first: Callable[[Any], Any] | None = None,
) -> Any:
    """All of DataFrame ``df``'s records as one Arrow table: ``to_arrow(df)`` (or
    ``first(df)``), or, when the driver refuses that many at once
    (``spark.driver.maxResultSize``), :func:`read_result_in_pieces` (``cached``: ``df``
    is cached already).

    >>> read_whole(df, to_arrow, spark)  # doctest: +SKIP
    """
    names = list(df.columns)
    if _fits_at_once(df, spark, len(names)):
        try:
            return (first or to_arrow)(df)
        except Exception as exc:
            if result_limit(exc) is None:
                raise
    per = positions_per_piece(spark, row_bytes(["bigint"] * len(names), 4))
    return read_result_in_pieces(df, names, to_arrow, per, cached=cached)


#: the share of the driver's memory a result read at once may take, by Spark's estimate
#: or by count (a job's task results all sit in the driver's heap as it collects them)
AT_ONCE_SHARE = 4


def _fits_at_once(df: Any, spark: Any, width: int) -> bool:
    """Whether ``df``'s records (``width`` key columns) may be read in one job: Spark's
    size estimate of its plan says so, or the most records its plan can return
    (:func:`~tensprov_lab.capture.plan._bound.rows_at_most`), or else its count
    does.  Past what this process can hold at all, :class:`Unsupported` says what to
    set (the operation stays coarse): capture must never take a driver down where the
    user's own job did not.  Over Spark Connect (no estimate here) the one job is
    tried as before."""
    jdf = getattr(df, "_jdf", None)
    if jdf is None:
        return True
    memory, limit = driver_limits(spark)
    at_once = min(memory // AT_ONCE_SHARE, limit // 2)
    try:
        plan = jdf.queryExecution().optimizedPlan()
        estimate = int(str(plan.stats().sizeInBytes()))
    except Exception:  # noqa: BLE001 - no estimate: count
        plan, estimate = None, at_once + 1
    if estimate <= at_once:
        return True
    per_row = row_bytes(["bigint"] * width, 8)
    most = rows_at_most(plan) if plan is not None else None
    if most is not None and most * per_row <= at_once:
        return True
    need = int(df.count()) * per_row
    if need > _process_budget():
        raise Unsupported(
            f"the keys of its records ({need / 2**20:,.0f} MB) are more than this process "
            f"can hold beside the driver ({memory / 2**20:,.0f} MB, spark.driver.memory): "
            "run it on fewer records, or with more memory"
        )
    return need <= at_once


def _process_budget() -> int:
    """Bytes of keys this process may hold: a quarter of the memory free now."""
    import os

    try:
        free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 1 << 40
    return int(free) // 4


def read_result_in_pieces(
    df: Any, names: list[str], to_arrow: Callable[[Any], Any], per: int, cached: bool = False
) -> Any:
    """Columns ``names`` of DataFrame ``df``'s records (classic or Connect), as one
    Arrow table in the order one job collects them, read in pieces
    (:func:`read_frame_in_pieces`) of ``df`` cached for the purpose (unless ``cached``:
    it is already), so that ``df`` is computed once for all the pieces.

    >>> read_result_in_pieces(df, ["__tp_k1"], to_arrow, 1 << 20)  # doctest: +SKIP
    """
    from pyspark.sql import functions as F

    whole = df if cached else df.persist()
    try:
        key = key_name("s")
        keyed = whole.select(*_cols(names), F.monotonically_increasing_id().alias(key))
        return read_frame_in_pieces(keyed, key, names, to_arrow, per)
    finally:
        if not cached:
            whole.unpersist()


def _cols(names: list[str]) -> list[Any]:
    """Columns of these names, whatever they hold (dots, backticks)."""
    from pyspark.sql import functions as F

    return [F.col("`" + n.replace("`", "``") + "`") for n in names]


def positions_per_piece(spark: Any, row_bytes: int) -> int:
    """Positions of every partition one request asks for: at most a
    :data:`PIECE_SHARE` th of the driver's memory of a partition's records
    (``row_bytes`` each), and half its result limit (a first guess: the limit holds
    for the records of all partitions together, whose number is not known yet)."""
    memory, limit = driver_limits(spark)
    return max(FEWEST, min(memory // PIECE_SHARE, limit // 2) // max(1, row_bytes))


#: bytes of a value of these Spark types (``simpleString``) in Arrow, about
_WIDTHS = {"boolean": 1, "tinyint": 1, "smallint": 2, "int": 4, "date": 4, "float": 4,
           "bigint": 8, "double": 8}  # fmt: skip


def row_bytes(types: Iterable[str], fixed: int) -> int:
    """Bytes a record of values of Spark ``types`` takes in Arrow, about (strings and
    other variable widths counted at 24), with ``fixed`` bytes more (its key).

    >>> row_bytes(["bigint", "string", "boolean"], 4)
    37
    """
    return fixed + sum(_WIDTHS.get(t, 24) for t in types)


def driver_limits(spark: Any) -> tuple[int, int]:
    """The driver's memory and the most bytes of task results one job may return to it
    (``spark.driver.maxResultSize``; 0, no limit, read as a terabyte); of a Connect
    session, its server's, asked once."""
    session = getattr(spark, "session_id", None)
    if isinstance(session, str) and session in _LIMITS:
        return _LIMITS[session]
    memory, limit = (_setting(spark, key) for key in _DEFAULTS)
    found = (memory, limit if limit > 0 else _UNITS["t"])
    if isinstance(session, str):
        _LIMITS[session] = found
    return found


def _setting(spark: Any, key: str) -> int:
    """A size setting of the driver in bytes (Spark's default when it does not say).

    >>> class Conf:
    ...     def get(self, key, default): return {"spark.driver.memory": "4g"}.get(key, default)
    >>> class Session:
    ...     conf = Conf()
    >>> [_setting(Session(), key) >> 20 for key in _DEFAULTS]  # in MB
    [4096, 1024]
    """
    default = _DEFAULTS[key]
    try:
        text = str(spark.conf.get(key, default))
    except Exception:  # noqa: BLE001 - a session that does not say
        text = default
    m = re.fullmatch(r"\s*(\d+)\s*([bkmgt]?)b?\s*", text.lower())
    if m is None:
        m = re.fullmatch(r"(\d+)([bkmgt])", default)
        assert m is not None
    return int(m.group(1)) * _UNITS[m.group(2)]
