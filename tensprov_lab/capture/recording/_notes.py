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


def unordered_limit(tracker: Any, rw: Rewrite, occ: list[Node]) -> bool:
    """Whether ``rw`` limits (or offsets) records in no defined order."""
    if not ({"GlobalLimit", "Offset"} & set(rw.nodes)) or rw.sort:
        return False
    producer = tracker.store.producer(occ[0].ds_id) if occ[0].ds_id is not None else None
    return producer is None or producer.category != "sort"


def determinism(
    tracker: Any, p: Pending, rw: Rewrite, occ: list[Node], n_cols: int, in_cols: list[list[str]]
) -> tuple[bool, list[str], list[str]]:
    """Whether operation ``p`` is kept as not deterministic, the notes it keeps, and
    those of them to say now."""
    nondet = rw.nondeterministic or unordered_limit(tracker, rw, occ)
    notes = []
    if nondet:
        notes.append(
            f"{p.expression} is not deterministic: its records may differ between "
            "executions, and so may their provenance"
        )
    if rw.group is not None and rw.group.kind == "dedup" and p.method != "distinct":
        if n_cols != len(in_cols[0]):
            nondet = True
            notes.append(
                f"{p.expression} keeps an arbitrary record of each group; the "
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
        if first_time(tracker, "renumbers"):
            said.append(notes[-1])
    return nondet, notes, said
