"""Capture's large reads over Spark Connect, in large Arrow batches.

Over gRPC every Arrow batch is a message of its own: a 5M-record source read in
Spark's default batches of 10,000 records takes 1.22 s, in batches of a million 0.72 s
(the engine bench's orders: ``spark_partition_id``, a flag and an int key; medians of 5
on 2 cores).  The session's batch size is kept for a plan that runs
Python code (see :mod:`tensprov_lab.capture._batches`); telling costs one plan analysis
(25-50 ms), so only reads that may be large (a source's fused read) ask.
"""

from __future__ import annotations

from typing import Any

from tensprov_lab.capture._batches import large_batches
from tensprov_lab.capture.connect import _proto as P

__all__ = ["read_arrow", "runs_python"]

#: physical plan nodes that run Python code: ArrowEvalPython, BatchEvalPython(UDTF),
#: MapInPandas, (Python)MapInArrow, FlatMap(Co)GroupsIn{Pandas,Arrow}, AggregateInPandas,
#: WindowInPandas / ArrowWindowPython, Python data sources
_PYTHON_NODES = ("Python", "Pandas", "InArrow")


def runs_python(df: Any) -> bool:
    """Whether ``df``'s physical plan runs Python code (True when it cannot be told).

    A word of a file path may say so too: then the read only keeps the session's
    batches, which is never wrong.
    """
    try:
        text = df._explain_string(mode="simple")
    except Exception:  # noqa: BLE001 - another Spark build, a plan Spark refuses
        return True
    return any(marker in text for marker in _PYTHON_NODES)


def read_arrow(spark: Any, rel: Any) -> Any:
    """The records of relation ``rel`` as an Arrow table, in batches of a million
    records unless its plan runs Python code.

    Examples
    --------
    >>> table = read_arrow(spark, P.relation(df))  # doctest: +SKIP
    """
    df = P.dataframe(spark, rel)
    if runs_python(df):
        return df.toArrow()
    with large_batches(spark):
        return df.toArrow()
