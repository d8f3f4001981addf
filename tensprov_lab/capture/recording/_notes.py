"""What an operation says about its own determinism, and when it says it.

An operation whose records may differ between executions is kept whole for
recomputation (``Tracker._materialize``) and warns.  One that only numbers records by
position over an order that is not stable (pandas-on-Spark's ``__natural_order__`` and
default index after a shuffle) keeps the same records and provenance: it notes that its
numbers may differ, and says so once a block, however many such steps the block has.
"""

from __future__ import annotations

from typing import Any

from tensprov_lab.capture.plan._keyed import Rewrite
from tensprov_lab.capture.plan._nodes import Node, Pending
from tensprov_lab.capture.recording._guard import first_time

__all__ = ["determinism", "unordered_limit"]


#: plan nodes that never make more records than they read: an operation of these only
#: whose output has as many records as its input kept every one
_AT_MOST = {"GlobalLimit", "LocalLimit", "Project", "Filter", "SubqueryAlias", "ResolvedHint"}


#: categories of steps that keep their input's records in their order (projections)
_KEEP_ORDER = {"transformation", "vertical_reduction", "vertical_augmentation"}


def unordered_limit(tracker: Any, rw: Rewrite, occ: list[Node], n_out: int | None = None) -> bool:
    """Whether ``rw`` limits (or offsets) records in no defined order, so that which
    records it keeps may differ between executions; a limit that kept all ``n_out``
    records of its one input (``limit(1001)`` over 3 records: pandas-on-Spark's
    ``repr``) keeps the same ones in any order."""
    if not ({"GlobalLimit", "Offset"} & set(rw.nodes)) or rw.sort:
        return False
    if n_out is not None and len(occ) == 1 and occ[0].n == n_out and set(rw.nodes) <= _AT_MOST:
        return False
    producer = tracker.store.producer(occ[0].ds_id) if occ[0].ds_id is not None else None
    # a sort's order survives the projections after it (narrow: no shuffle), such as
    # the ones pandas-on-Spark adds between ``sort_values`` and ``head``
    seen = 0
    while producer is not None and producer.category in _KEEP_ORDER and seen < 64:
        if len(producer.inputs) != 1:
            return True
        producer, seen = tracker.store.producer(producer.inputs[0]), seen + 1
    return producer is None or producer.category != "sort"


def determinism(
    tracker: Any,
    p: Pending,
    rw: Rewrite,
    occ: list[Node],
    n_cols: int,
    in_cols: list[list[str]],
    n_out: int | None = None,
) -> tuple[bool, list[str], list[str]]:
    """Whether operation ``p`` (of ``n_out`` records) is kept as not deterministic, the
    notes it keeps, and those of them to say now."""
    nondet = rw.nondeterministic or unordered_limit(tracker, rw, occ, n_out)
    notes = []
    # named by the user's own call when a front end's call made it (``head: limit(3)``)
    what = p.expression if p.out.call is None else f"{p.out.call[1]}: {p.expression}"
    if nondet:
        notes.append(
            f"{what} is not deterministic: its records may differ between "
            "executions, and so may their provenance"
        )
    if rw.group is not None and rw.group.kind == "dedup" and p.method != "distinct":
        if n_cols != len(in_cols[0]):
            nondet = True
            notes.append(
                f"{what} keeps an arbitrary record of each group; the "
                "provenance lists every record of the group"
            )
    said = list(notes)
    if rw.renumbers and not nondet:
        # kept for recomputation like a non-deterministic result (its numbers as the
        # block saw them), and said once a block: pandas-on-Spark does it often
        nondet = True
        notes.append(
            f"{p.expression} numbers records by their position in an order that is not "
            "stable (after a shuffle): the numbers may differ between executions (the "
            "records and their provenance do not; a later step that matches or orders "
            "records by them may)"
        )
        # (not said inside a pandas-on-Spark call: its index and ``__natural_order__``
        # are the pandas API's own columns, renumbered as its documentation says)
        if p.out.call is None and first_time(tracker, "renumbers"):
            said.append(notes[-1])
    return nondet, notes, said
