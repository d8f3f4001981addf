"""The pandas API on Spark as a front end: which captured DataFrame a pandas-on-Spark
frame is.

A pandas-on-Spark DataFrame (or Series) is a Spark DataFrame, its *spark frame*, plus
the columns that make its index and data.  After most of its calls (filters, merges,
groupings, sorts) those columns are plain columns of the spark frame, which is the
DataFrame capture recorded; after a few (``where``, ``assign``, ``fillna``, ``mask``,
arithmetic) they are expressions over it that pandas-on-Spark applies only with its
next call, so no recorded DataFrame holds its values yet, and a query must say so
rather than answer for the frame below.

Its default index is attached by ``InternalFrame.attach_distributed_sequence_column``:
on pyspark 4 a ``select`` capture sees anyway, on pyspark 3.5 a call into the JVM no
DataFrame method makes, so the call itself is wrapped (:func:`targets`) to link the
indexed frame to the DataFrame it numbers, from the moment that module is imported (a
block's first ``pandas_api()`` imports it).
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["MODULE", "spark_frame_of", "targets"]

#: where the default index is attached (imported by the block itself on first use)
MODULE = "pyspark.pandas.internal"

#: how a column that only names a column of its frame is held (classic, Connect)
_PLAIN = {"UnresolvedAttribute", "AttributeReference", "ColumnReference"}


def targets() -> list[tuple[type, list[str], Any]]:
    """The calls wrapped during a block: the default index's, when the pandas API on
    Spark is in use (it is not imported for this: importing it costs a second)."""
    internal = sys.modules.get(MODULE)
    frame = getattr(internal, "InternalFrame", None)
    if frame is None or not hasattr(frame, "attach_distributed_sequence_column"):
        return []
    return [(frame, ["attach_distributed_sequence_column"], None)]


def _plain(column: Any) -> bool:
    """Whether ``column`` only names a column of its frame (renamed or not)."""
    jc = getattr(column, "_jc", None)
    if jc is None:  # Spark Connect
        expr: Any = getattr(column, "_expr", None)
        while type(expr).__name__ == "ColumnAlias":
            expr = expr._child
        return type(expr).__name__ in _PLAIN
    try:
        held = jc.node()  # Spark 4: the column's node
    except Exception:  # noqa: BLE001 - Spark 3.5: its Catalyst expression
        held = jc.expr()
    for _ in range(64):
        kind = str(held.getClass().getSimpleName())
        if kind == "ExpressionColumnNode":  # Spark 4: a Catalyst expression held as is
            held = held.expression()
        elif kind == "Alias":  # a rename (rename, set_index, ...) keeps the values
            held = held.child()
        else:
            return kind in _PLAIN
    return False


def spark_frame_of(ref: Any) -> Any:
    """The Spark DataFrame behind pandas-on-Spark frame ``ref`` (its index and ordering
    columns included); anything else as it is.

    Raises
    ------
    ValueError
        when ``ref``'s last calls are column expressions not applied yet.
    """
    if not type(ref).__module__.startswith("pyspark.pandas"):
        # (a Spark DataFrame's attributes are its columns: ``df._internal`` is one)
        return ref
    internal: Any = getattr(ref, "_internal", None)
    frame = getattr(internal, "spark_frame", None)
    if frame is None:
        return ref
    columns = [*internal.index_spark_columns, *internal.data_spark_columns]
    if not all(_plain(c) for c in columns):
        raise ValueError(
            "this pandas-on-Spark DataFrame ends with column expressions (where, assign, "
            "fillna, mask, arithmetic, ...) that pandas-on-Spark applies only with its "
            "next call, so no captured dataset holds its values yet; query the frame a "
            "later call makes, or make `df.spark.frame()` inside the tracked block and "
            "query that"
        )
    return frame
