"""Hops through pandas inside a tracked block: ``df.toPandas()`` … ``spark.createDataFrame(pdf)``.

The rule of this operation family (record, attribute and replay rule in one place):

- **record**: ``toPandas`` marks the pandas frame it returns with the DataFrame it came
  from (in ``DataFrame.attrs``, which pandas carries through filters, ``assign``,
  ``merge`` with it on the left, copies ...); ``createDataFrame`` of a marked frame
  records ``toPandas/createDataFrame`` from that DataFrame to the new one.
- **tensors**: none. A ``toPandas`` gives records in Spark's collect order, which is not
  the dataset's canonical order once a shuffle is involved, and the pandas code in
  between is opaque to capture, so no record-level mapping is claimed: the operation is
  an explicit *opaque* one (DESIGN.md §7), with a warning that says what was lost. The new
  DataFrame is numbered as a source of its own, so lineage below it is exact again, and
  lineage above it is kept at dataset level.
- **attributes**: every column of the upstream dataset may contribute (a superset).
- **replay**: none (records past the hop are read from the new DataFrame itself).

A ``createDataFrame`` of anything else is an ordinary source (registered at once).
The mark is the one visible trace capture leaves on the user's objects: an entry of the
pandas frame's ``attrs``, which pandas ignores in comparisons, printing and computing.
"""

from __future__ import annotations

from typing import Any

from tensprov_lab.capture._nodes import Capturing, Node

__all__ = ["MARK", "REASON", "record_call", "targets"]

#: the key of ``DataFrame.attrs`` naming the tracked DataFrame a pandas frame came from
MARK = "tensprov_lab.from"


def targets(session_cls: type) -> list[tuple[type, list[str], Any]]:
    """The methods wrapped during a block for this rule."""
    from pyspark.sql.classic.dataframe import DataFrame as ClassicDataFrame

    return [(ClassicDataFrame, ["toPandas"], None), (session_cls, ["createDataFrame"], None)]


def record_call(
    tracker: Capturing, method: str, obj: Any, args: tuple, kwargs: dict, out: Any
) -> bool:
    """Record a ``toPandas`` or ``createDataFrame`` call; False for any other method."""
    if method == "toPandas":
        import pandas as pd

        if isinstance(out, pd.DataFrame):
            # the node's identity in this tracker: kept by pandas through most operations
            out.attrs[MARK] = tracker.register(obj).ident
        return True
    if method != "createDataFrame":
        return False
    data = args[0] if args else kwargs.get("data")
    ident = getattr(data, "attrs", {}).get(MARK) if data is not None else None
    upstream: Node | None = tracker.nodes.get(ident) if isinstance(ident, int) else None
    if upstream is None:
        # an ordinary source, registered now: a DataFrame made in a block is never "not
        # captured", even when nothing in the block reads it
        tracker.register(out)
        return True
    made = tracker.record_operation("toPandas/createDataFrame", [upstream.df], out)
    if made is not None and made.ds_id is None:  # not captured already
        made.opaque_reason = REASON
    return True


#: why a hop through pandas is opaque (``{upstream}``: the dataset it came from)
REASON = (
    "its records went through pandas (toPandas of {upstream}, then createDataFrame): "
    "which record came from which is not known to capture, so lineage across the hop is "
    "kept at dataset level, and records are numbered anew after it"
)
