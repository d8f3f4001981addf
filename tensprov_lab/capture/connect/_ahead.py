"""The server's reads of a block's sources, started at once when the block ends.

Each source the server reads is a job of its own, mostly waiting on the server (a small
source's read costs about as much as a large one's: at 5M orders over Connect, 0.18 s
for the 100k customers beside 0.5 s for the orders), so :func:`read_ahead` starts them
all in threads (:class:`~tensprov_lab.capture.connect._prefetch.Prefetch`) and the
tracker takes each in turn.  :func:`source_read` is the relation one such read runs.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any

from tensprov_lab.capture.connect._arrow import python_code, read_arrow
from tensprov_lab.capture.connect._direct import local_files
from tensprov_lab.capture.connect._index import PARTITION
from tensprov_lab.capture.plan import _proto as P
from tensprov_lab.capture.plan._connect import stable

__all__ = ["read_ahead", "source_read"]


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
        call = functools.partial(read_arrow, tracker.spark, read)
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
