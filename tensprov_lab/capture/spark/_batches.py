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

    The setting belongs to the session: a caller makes sure that what reads inside
    runs no Python code (see ``Jvm.runs_python``, ``connect._arrow.runs_python``).

    Examples
    --------
    >>> with large_batches(spark):  # doctest: +SKIP
    ...     table = df.toArrow()
    """
    conf = spark.conf
    try:
        previous = conf.get(BATCH_CONF)
    except Exception:  # noqa: BLE001 - another Spark build: keep its setting
        yield
        return
    conf.set(BATCH_CONF, str(READ_BATCH_ROWS))
    try:
        yield
    finally:
        conf.set(BATCH_CONF, previous)
