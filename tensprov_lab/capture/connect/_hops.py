"""Hops through pandas over Spark Connect: ``df.toPandas()`` … ``spark.createDataFrame(pdf)``.

The same rule as on a classic session (:mod:`tensprov_lab.capture.hops._pandas`): ``toPandas``
marks the pandas frame it returns with the DataFrame it came from; ``createDataFrame``
of a marked frame is an operation from that DataFrame.  Its records are matched back
*by value* to the upstream records (:func:`~tensprov_lab.capture.hops._pandas.hop_lineage`);
when one does not match (a value changed in pandas) the hop is opaque with a warning
that says so.  Either way the new DataFrame is keyed as a source of its own.  A
``createDataFrame`` of anything else is a source of the block from the start.

The mark names this tracker as well as the DataFrame (a classic session's tracker
numbers its DataFrames with other numbers).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from tensprov_lab.capture.connect._index import KeyIndex, key_array
from tensprov_lab.capture.connect._rewrite import Annotator
from tensprov_lab.capture.hops._pandas import (
    MARK,
    MATCH_LIMIT,
    REASON,
    REPLAY_BLOCKER,
    hop_lineage,
)
from tensprov_lab.capture.plan import _proto as P
from tensprov_lab.capture.recording._patching import stamp_call
from tensprov_lab.capture.spark._versions import to_arrow

__all__ = ["HOP", "REASON", "capture_hop", "record_hop"]

#: the method name of a hop's operation
HOP = "toPandas/createDataFrame"


def record_hop(tracker: Any, method: str, obj: Any, args: tuple, kwargs: dict, out: Any) -> bool:
    """Record a ``toPandas`` or ``createDataFrame`` call; False for any other method."""
    if method == "toPandas":
        import pandas as pd

        if isinstance(out, pd.DataFrame):
            out.attrs[MARK] = ("connect", id(tracker), tracker.register(obj).ident)
        return True
    if method != "createDataFrame":
        return False
    data = args[0] if args else kwargs.get("data")
    mark = getattr(data, "attrs", {}).get(MARK) if data is not None else None
    upstream = None
    if isinstance(mark, tuple) and len(mark) == 3 and mark[:2] == ("connect", id(tracker)):
        upstream = tracker.nodes.get(mark[2])
    if upstream is None:
        # an ordinary source, registered now: a DataFrame made in a block is never "not
        # captured", even when nothing in the block reads it
        tracker.register(out)
    else:
        tracker.add_pending(HOP, [upstream], out, f"{HOP}(toPandas of {_name(upstream)})")
    return True


def _name(node: Any) -> str:
    return node.name or "a DataFrame"


def capture_hop(
    tracker: Any, p: Any, run: Any, annotator: Annotator, cols: list[str], types: list[str],
    t0: float,
) -> bool:  # fmt: skip
    """A hop whose records all match upstream records by value: recorded exactly, the
    new DataFrame keyed as a source of its own.  False (nothing recorded) when they do
    not all match, or cannot be compared."""
    (up,) = p.inputs
    if up.ds_id is None or up.index is None or up.index.n > MATCH_LIMIT:
        return False
    in_cols = tracker.store.datasets[up.ds_id].columns
    if not any(c in in_cols for c in cols):
        return False
    note = tracker._key_source(p.out, annotator)
    keyed = annotator.annotate(P.relation(p.out.df))
    table = to_arrow(P.dataframe(tracker.spark, keyed.rel))
    run.jobs += 1
    keys = key_array(table, keyed.keys)
    order = np.argsort(keys[:, 0], kind="stable")
    index = KeyIndex(keys[order])
    user = [i for i, c in enumerate(table.column_names) if not c.startswith(P.KEY_PREFIX)]
    hop = table.select(user).to_pandas().take(order).reset_index(drop=True)
    upstream = tracker.records(up.ds_id, None, None)
    run.jobs += 1
    label = tracker.store.datasets[up.ds_id].label
    got = hop_lineage(hop, upstream, cols, in_cols, index.n, up.index.n, p.expression, label)
    if got is None:
        return False
    tensor, contributing, exact, notes = got
    for n in notes[1:]:
        tracker._note(n)
    p.out.index = index
    ds = tracker.store.add_dataset(p.out.name, columns=cols, dtypes=types, n_rows=index.n,
                                   run=run.id, origin=note.strip())  # fmt: skip
    p.out.ds_id = ds.id
    tracker.by_ds[ds.id] = p.out
    run.datasets.append(ds.id)
    op = tracker.store.add_operation(
        p.method, "transformation", [up.ds_id], ds.id, [tensor], expression=p.expression,
        run=run.id, seconds=time.perf_counter() - t0, contributing=[contributing],
        influencing=[np.zeros_like(contributing)], attributes_exact=exact, warnings=notes,
        jobs=2, replay_blocker=REPLAY_BLOCKER,
    )  # fmt: skip
    stamp_call(op, p.out.call)
    run.operations.append(op.id)
    return True
