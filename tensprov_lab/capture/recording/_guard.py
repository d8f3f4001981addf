"""Capture never fails the user's block: what it cannot read, or fails on, becomes opaque.

A tracked block's code has run by the time capture starts; whatever capture then meets
(a streaming DataFrame, a source whose files the block removed, a Spark error in one of
its own jobs) must not reach the user's cell, change what the block returned or fill
the console with Spark's errors.  Three pieces see to it:

- :func:`screen`, before any of capture's jobs run: the items of the block capture must
  not read at all (a streaming DataFrame cannot run as a batch job; a source whose files
  are gone fails every task of every job that reads it, each logging an error page),
  with why.  Their operations, and those downstream, are recorded without reading them;
- :func:`opaque`: an operation recorded with coarse lineage only (its records read
  anew when they can be);
- :func:`degrade`: the item a failure of capture stopped, recorded as far as it got,
  with one warning per kind of failure in a block.

>>> from types import SimpleNamespace
>>> tracker = SimpleNamespace(_said=set())
>>> first_time(tracker, "capture failed (boom)"), first_time(tracker, "capture failed (boom)")
(True, False)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tensprov_lab.capture.plan._files import is_local, stamp_files
from tensprov_lab.capture.plan._keys import KeyIndex
from tensprov_lab.capture.plan._nodes import Node, Pending, RunLog, _short_error
from tensprov_lab.capture.recording._columns import column_maps
from tensprov_lab.capture.rewrite._annotate import annotate_source

__all__ = ["STREAMING", "degrade", "first_time", "opaque", "screen", "unread_source"]

#: why a streaming DataFrame has no record-level provenance
STREAMING = (
    "a streaming DataFrame: capture reads batches only, so the records of its "
    "micro-batches are not traced"
)


def first_time(tracker: Any, message: str) -> bool:
    """Whether ``message`` is new in this block (said once, however many items it hits)."""
    if message in tracker._said:
        return False
    tracker._said.add(message)
    return True


def _streaming(df: Any) -> bool:
    try:
        return bool(df.isStreaming)
    except Exception:  # noqa: BLE001 - a DataFrame Spark cannot plan is not a stream
        return False


def _gone(node: Node) -> str | None:
    """Why source ``node`` cannot be read (its files were removed), or None.  The stamps
    taken are kept on the node: its capture checks them again when it reads it."""
    stamps = stamp_files(node.df)
    node.files = stamps
    # local files only: a remote file system that cannot be asked (credentials, network)
    # stamps a file as gone too, and its reads may still work
    gone = [s.path for s in stamps or () if s.size is None and is_local(s.path)]
    if not gone:
        return None
    more = f" and {len(gone) - 1} more" if len(gone) > 1 else ""
    return f"its files were removed before the block ended: {gone[0]}{more}"


def screen(pending: list[Pending | Node]) -> dict[int, str]:
    """Why items of a block (by node ident) are not to be read at all: a streaming
    source, one whose files were removed, or an operation over either (an input of this
    block or of an earlier one).  Only sources are asked of Spark: a stream's results
    all come from a streaming source."""
    reasons: dict[int, str] = {}
    for item in pending:
        if isinstance(item, Pending):
            why = next((r for n in item.inputs if (r := reasons.get(n.ident, n.unread))), None)
            if why is not None:
                reasons[item.out.ident] = why
            continue
        why = STREAMING if _streaming(item.df) else _gone(item)
        if why is not None:
            reasons[item.ident] = why
    return reasons


def unread_source(tracker: Any, node: Node, run: RunLog, why: str) -> None:
    """Record source ``node`` without reading it: a dataset of unknown size that no
    consumer can trace records through, and one warning saying why."""
    cols, types = tracker.jvm.columns(node.df)
    if node.ds_id is None:
        ds = tracker.store.add_dataset(
            node.name, columns=cols, dtypes=types, n_rows=None, role="source", run=run.id,
            origin=f"not read: {why}",
        )  # fmt: skip
        node.ds_id = ds.id
        tracker.by_ds[ds.id] = node
        run.datasets.append(ds.id)
    node.ann, node.ki, node.n, node.deferred, node.cacheable = None, None, None, False, False
    if first_time(tracker, why):
        tracker._note(f"record-level provenance not captured ({why})")


def opaque(
    tracker: Any,
    p: Pending,
    run: RunLog,
    why: str,
    cols: list[str],
    types: list[str],
    seconds: float,
    read: bool = True,
    say: bool = True,
) -> None:
    """Record an operation capture cannot trace: coarse lineage only, its output keyed
    anew (with ``read``: its records are read to count them; a streaming result or one
    over removed files is not).  ``say`` warns; without it the note is kept on the
    operation only (its cause was said already)."""
    message = (
        f"{p.expression}: record-level provenance not captured ({why}); kept as an opaque operation"
    )
    ann, ki, n = None, None, None
    if read:
        try:
            ann = annotate_source(tracker.jvm, p.out.plan, pin=True)
            ki_: KeyIndex = tracker._scan_index(ann)
            ki, n = ki_, ki_.n
        except Exception as exc:  # noqa: BLE001 - coarse lineage all the same
            ann, ki, n = None, None, None
            message += f"; its records cannot be read either ({_short_error(exc)})"
    in_cols = [tracker._dataset(i).columns for i in p.inputs]
    if p.out.opaque_reason is not None or not read:
        # no plan linking its input that capture may read (a hop through pandas, a
        # stream): every input column may have contributed, as far as capture knows
        attrs: dict[str, Any] = {
            "contributing": [np.ones((len(cols), len(c)), dtype=bool) for c in in_cols],
            "influencing": [np.zeros((len(cols), len(c)), dtype=bool) for c in in_cols],
            "attributes_exact": False,
        }
    else:
        unknown: list[str] = []
        attrs = column_maps(tracker, p, list(range(len(p.inputs))), len(cols), in_cols, unknown)
        if unknown:  # (in this one warning, not a second)
            message += f"; nor its column lineage ({unknown[0]})"
    ds = tracker.store.add_dataset(p.out.name, columns=cols, dtypes=types, n_rows=n, run=run.id)
    op = tracker._add_operation(
        ds.id, p.method, "opaque", [i.ds_id for i in p.inputs], None,
        expression=p.expression, opaque=True, warnings=[message], seconds=seconds, run=run.id,
        **attrs,
    )  # fmt: skip
    p.out.ann, p.out.ki, p.out.n, p.out.ds_id = ann, ki, n, ds.id
    p.out.pinned = ann is not None
    p.out.cacheable = tracker.materialize != "none" and ann is not None
    tracker._recorded(run, p.out, op.id, [message] if say else [])


def degrade(tracker: Any, item: Pending | Node, run: RunLog, exc: Exception) -> None:
    """After capture itself failed on ``item`` (``exc``): keep what was recorded of it,
    record the rest coarse, and warn once per kind of failure in the block."""
    why = f"capture failed: {_short_error(exc)}"
    node = item.out if isinstance(item, Pending) else item
    try:
        if isinstance(item, Node) and node.ds_id is None:
            unread_source(tracker, node, run, why)
            return
        if isinstance(item, Pending) and node.ds_id is None:
            if all(n.ds_id is not None for n in item.inputs):
                cols, types = tracker.jvm.columns(node.df)
                say = first_time(tracker, why)
                opaque(tracker, item, run, why, cols, types, 0.0, read=False, say=say)
                return
    except Exception as again:  # noqa: BLE001 - not even coarse: the item is left out
        why = f"{why}; not recorded ({_short_error(again)})"
    # recorded already (or left out): what it lacks is said, and nothing reads through it
    node.ann, node.ki, node.deferred = None, None, False
    if first_time(tracker, why):
        tracker._note(why)
