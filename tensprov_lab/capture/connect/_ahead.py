"""The server's reads of a block's sources, started at once when the block ends.

Each source the server reads is a job of its own, mostly waiting on the server (a small
source's read costs about as much as a large one's: at 5M orders over Connect, 0.18 s
for the 100k customers beside 0.5 s for the orders), so :func:`read_ahead` starts them
all in threads (:class:`Prefetch`) and the
tracker takes each in turn.  :func:`source_read` is the relation one such read runs.

The other round trips of a capture are asked at once too (:class:`Prefetch`).

A capture asks the server for the schema of most datasets of the block (an analysis of
each plan: ~20-50 ms on loopback, a network round trip more to a remote server) and, for
sources it reads itself, for the session's file-layout settings.  Asked one after the
other they add up (0.2 s of a 1.1 s capture at 5M orders with the server reading the
sources); :class:`Prefetch` asks them at once, in a few threads, while the capture goes
on with what it has, and waits only for an answer it needs and does not have yet.

An answer is what the plain call gives: the same schema, or the same exception raised
where the capture asks for it.

Examples
--------
>>> class Frame:
...     def __init__(self, name):
...         self.name = name
...     @property
...     def schema(self):
...         return f"schema of {self.name}"
>>> a, b = Frame("a"), Frame("b")
>>> with Prefetch([a]) as ahead:
...     ahead.schema(a), ahead.schema(b)
('schema of a', 'schema of b')
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

from tensprov_lab.capture.connect._arrow import python_code, read_arrow, read_pieces
from tensprov_lab.capture.connect._direct import local_files
from tensprov_lab.capture.connect._index import PARTITION
from tensprov_lab.capture.plan import _proto as P
from tensprov_lab.capture.plan._connect import stable

__all__ = ["Prefetch", "read_ahead", "read_source", "source_read"]


#: concurrent round trips: a block has a few datasets; the server analyses each plan on
#: its driver, so more threads would only queue there
_THREADS = 4


def _schema_of(df: Any) -> Any:
    return df.schema


class Prefetch:
    """Schemas of ``frames`` (DataFrames) and any ``calls`` asked at once; answers taken
    with :meth:`schema` and :meth:`result`, each waited for only when needed."""

    def __init__(
        self, frames: Iterable[Any] = (), calls: dict[str, Callable[[], Any]] | None = None
    ) -> None:
        self._pool: ThreadPoolExecutor | None = None
        #: set by :meth:`close`: a read in pieces under way asks for no more
        self.stopped = threading.Event()
        self._schemas: dict[int, Future[Any]] = {}
        self._calls: dict[str, Future[Any]] = {}
        for df in frames:
            if id(df) not in self._schemas:
                self._schemas[id(df)] = self._submit(functools.partial(_schema_of, df))
        for name, call in (calls or {}).items():
            self.ask(name, call)

    def ask(self, name: str, call: Callable[[], Any]) -> None:
        """Ask ``call`` now, its answer taken with :meth:`result` under ``name``."""
        self._calls[name] = self._submit(call)

    def _submit(self, call: Callable[[], Any]) -> Future[Any]:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(_THREADS, thread_name_prefix="tensprov-prefetch")
        return self._pool.submit(call)

    def schema(self, df: Any) -> Any:
        """``df.schema``: the answer asked ahead when there is one (its exception, if it
        failed, raised here), else asked now."""
        ahead = self._schemas.get(id(df))
        return df.schema if ahead is None else ahead.result()

    def result(self, name: str, call: Callable[[], Any]) -> Any:
        """What ``call`` returns: the answer asked ahead under ``name`` (taken once),
        else asked now."""
        ahead = self._calls.pop(name, None)
        return call() if ahead is None else ahead.result()

    def settle(self) -> None:
        """Wait until every call asked ahead has ended (their answers kept)."""
        wait(list(self._calls.values()))

    def close(self) -> None:
        """Stop asking: round trips not started are dropped, those under way end on
        their own (the capture does not wait for answers it no longer needs)."""
        self.stopped.set()
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def __enter__(self) -> Prefetch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def source_read(source: Any, rel: Any, keys: list[str], reads: dict[str, Any]) -> tuple[Any, bool]:
    """The relation that reads a source's keys (``keys`` of its keyed relation ``rel``;
    ``source``: the relation keyed) and the columns its filters and joins need
    (``reads``: :mod:`._fused`) in one job, and whether the keys come compact: the
    scan-order key (one) as the partition of each record (see ``_index.scan_keys``)."""
    wanted = [P.alias(e, n) for n, e in reads.items()]
    # (only over files: a local relation may be served by the cache of an equal one
    # whose ids were numbered in other partitions than its scan gives)
    compact = len(keys) == 1 and P.kind(source) == "read"
    lead = [P.alias(P.fn("spark_partition_id"), PARTITION)] if compact else \
        [P.col(k) for k in keys]  # fmt: skip
    return P.select(rel, lead + wanted), compact


def read_source(
    spark: Any,
    source: Any,
    rel: Any,
    keys: list[str],
    reads: dict[str, Any],
    stop: threading.Event | None = None,
) -> tuple[Any, bool]:
    """The table :func:`source_read` gives, and whether its keys come compact (then
    read in pieces of scan positions, see :func:`~._arrow.read_pieces`, none asked
    for once ``stop`` is set)."""
    read, compact = source_read(source, rel, keys, reads)
    if not compact:
        return read_arrow(spark, read), False
    # a partition number and the columns read: a filter's or a key's flag (f, w), a
    # join key (j) and a value that rides along (v), see ._fused.plan
    flag = (P.KEY_PREFIX + "f", P.KEY_PREFIX + "w")
    row = 4 + sum(1 if name.startswith(flag) else 8 for name in reads)
    table = read_pieces(
        spark, rel, keys[0], lambda piece: source_read(source, piece, keys, reads)[0], row,
        partition=PARTITION, stop=stop,
    )  # fmt: skip
    return table, True


def read_ahead(tracker: Any, pending: list[Any], annotator: Any, tag: str) -> None:
    """Start the server's reads of the block's sources (``pending``: its items), all
    at once, each asked of the block's prefetch as ``"read <ident>"``.  Only reads that
    run no Python code, of sources whose order is stable and that the client does not
    read from their files itself.  They hold large Arrow batches (``_batches``): the
    tracker lets all end before it captures any operation (whose read may run Python,
    which must see the session's batch size)."""
    fusion = tracker._fusion
    if fusion is None:
        return
    for item in pending:
        if hasattr(item, "out"):  # an operation
            continue
        reads = fusion.reads.get(item.ident)
        rel = P.relation(item.df)
        if not reads or not stable(rel):
            continue
        if tracker.direct_reads and local_files(tracker.spark, item.df):
            continue  # read on the client (._direct)
        tracker._key_source(item, annotator)
        keyed = annotator.annotate(rel)
        read, _ = source_read(item.source, keyed.rel, keyed.keys, reads)
        if python_code(read) is not False:
            continue
        call = functools.partial(
            read_source, tracker.spark, item.source, keyed.rel, keyed.keys, reads,
            fusion.prefetch.stopped,
        )  # fmt: skip
        fusion.prefetch.ask(
            f"read {item.ident}", functools.partial(_tagged, tracker.spark, tag, call)
        )


def _tagged(spark: Any, tag: str, call: Any) -> Any:
    """``call()`` in a thread whose jobs carry the capture's ``tag`` (tags belong to
    the thread that adds them: Ctrl-C interrupts the capture's jobs by it)."""
    with contextlib.suppress(Exception):
        spark.addTag(tag)
    try:
        return call()
    finally:
        with contextlib.suppress(Exception):
            spark.removeTag(tag)
