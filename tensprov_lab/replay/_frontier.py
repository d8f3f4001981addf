"""Where a replay starts, and what it reads there: shared by both engines.

A replay of some records of a dataset starts at its *frontier* -- sources, opaque
outputs and (on a classic session) materialized datasets upstream of it -- and reads
there only the records their backward lineage names, except upstream of a contextual
operation (a window), which needs every record of its input.  The classic engine
(:mod:`._replay`) and the Spark Connect engine (:mod:`._connect`) differ only in how
they express that as a Spark plan.

Examples
--------
>>> import pandas as pd, numpy as np
>>> pdf = pd.DataFrame({"x": ["a", "b", "c"]})
>>> rows_of(pdf, np.array([2, 0, 1]), np.array([0, 2]))["_row"].tolist()
[0, 2]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from tensprov_lab.capture.plan._keys import IN_LIST
from tensprov_lab.capture.plan._nodes import persisted
from tensprov_lab.query import backward

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "IN_LIST", "KEEP_WHOLE", "WHOLE", "Inputs", "NotPreviewable", "frontier", "inputs",
    "rows_of", "whole",
]  # fmt: skip

#: share of a source's records above which a replay reads it whole (the rest is
#: excluded by key, if anything): a filter listing millions of keys costs more than
#: reading the rest
WHOLE = 0.1
#: records of a dataset a replay keeps in the driver once read whole (at most)
KEEP_WHOLE = 100_000

#: where a replay starts, the rows it needs of each of those datasets, the datasets it
#: reads whole
Inputs = tuple[list[int], dict[int, np.ndarray], set[int]]


class NotPreviewable(ValueError):
    """The change cannot be previewed by replaying lineage-related records."""


def _cached(tracker: Any, ds_id: int) -> bool:
    """A materialized derived dataset (a classic replay reads it whole from Spark's
    cache); sources and opaque outputs cached for recomputation are still read by key."""
    node = tracker.by_ds.get(ds_id)
    op = tracker.store.producer(ds_id)
    if node is None or node.cached is None or op is None or op.opaque:
        return False
    persisted(node.cached)  # a persist still running: the replay is to read its cache
    return True


def frontier(tracker: Any, ds_id: int, stop_at_cached: bool = True) -> list[int]:
    """Datasets where a replay of ``ds_id`` starts: sources, opaque outputs and (with
    ``stop_at_cached``) materialized datasets upstream of it."""

    def starts(d: int) -> bool:
        op = tracker.store.producer(d)
        return op is None or op.opaque or (stop_at_cached and d != ds_id and _cached(tracker, d))

    return [d for d in tracker.store.upstream(ds_id, stop=starts) if starts(d)]


def whole(tracker: Any, ds_id: int) -> set[int]:
    """Datasets upstream of the input of a contextual operation on the way to ``ds_id``:
    a replay must not cut them down."""
    store = tracker.store
    seen: set[tuple[int, bool]] = set()
    out: set[int] = set()
    stack = [(ds_id, False)]
    while stack:
        d, under = stack.pop()
        if (d, under) in seen:
            continue
        seen.add((d, under))
        if under:
            out.add(d)
        op = store.producer(d)
        if op is not None:
            stack.extend((i, under or op.contextual) for i in op.inputs)
    return out


def inputs(tracker: Any, ds_id: int, rows: np.ndarray, stop_at_cached: bool = True) -> Inputs:
    """Where a replay of ``rows`` of ``ds_id`` starts (see :func:`frontier`), the rows it
    needs of each of those datasets, and the datasets it must read whole."""
    front = frontier(tracker, ds_id, stop_at_cached=stop_at_cached)
    if front == [ds_id]:
        return front, {}, set()
    back = backward(tracker.store, ds_id, rows, to=front).rows
    return front, back, whole(tracker, ds_id)


def rows_of(
    pdf: pd.DataFrame, idx: np.ndarray, rows: np.ndarray, recomputed: bool = True
) -> pd.DataFrame:
    """The records ``rows`` of a replay's answer, in canonical order, with ``_row``."""
    from tensprov_lab.capture.plan._nodes import ROW

    pdf.insert(0, ROW, idx)
    pdf = pdf[np.isin(idx, rows)]
    pdf = pdf.sort_values(ROW, kind="stable").reset_index(drop=True)
    pdf.attrs["recomputed"] = recomputed
    return pdf
