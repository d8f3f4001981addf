"""Capture's reads in large Arrow batches, on a classic session and over Spark Connect.

Spark sends a query's result to Python in Arrow batches of
``spark.sql.execution.arrow.maxRecordsPerBatch`` records (10,000 by default), each with a
cost of its own: a 5M-record read is 500 batches, over Spark Connect 500 gRPC messages
(the engine bench's orders over Connect, reads taken in turns: 1.27 s in the default
batches, 1.13 s in batches of a million; medians of 8).  Capture's own reads therefore
ask for batches of a million records, the session's setting restored after.  A plan that
runs Python code keeps the session's batches: a pandas UDF sees its input in them, so its
results could depend on them.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

__all__ = ["BATCH_CONF", "READ_BATCH_ROWS", "large_batches"]

#: records per Arrow batch of capture's reads
READ_BATCH_ROWS = 1 << 20
BATCH_CONF = "spark.sql.execution.arrow.maxRecordsPerBatch"


@contextlib.contextmanager
def large_batches(spark: Any) -> Iterator[None]:
    """Reads inside take Arrow batches of a million records (the session's setting
    restored after; kept when it cannot be read).

    The setting belongs to the session: reads of it in several threads at once share
    one change of it (the last to end restores it).  A caller makes sure that what
    reads inside, or beside it, runs no Python code (see ``Jvm.runs_python``,
    ``connect._arrow.runs_python``).

    Examples
    --------
    >>> with large_batches(spark):  # doctest: +SKIP
    ...     table = df.toArrow()
    """
    key = id(spark)
    with _HELD:  # reads of one capture may run in threads at once (connect read-ahead)
        held = _holders.get(key)
        if held is None:
            conf = spark.conf
            try:
                previous = conf.get(BATCH_CONF)
            except Exception:  # noqa: BLE001 - another Spark build: keep its setting
                previous = None
            else:
                conf.set(BATCH_CONF, str(READ_BATCH_ROWS))
            held = _holders[key] = [0, previous]
        held[0] += 1
    try:
        yield
    finally:
        with _HELD:
            held[0] -= 1
            if held[0] == 0:
                del _holders[key]
                if held[1] is not None:
                    spark.conf.set(BATCH_CONF, held[1])


#: per session (by ``id``) while reads hold large batches: [reads inside, the setting
#: to restore when the last ends]; the first sets it, the last restores it
_holders: dict[int, list[Any]] = {}
_HELD = threading.Lock()
