"""Why-not provenance: where a source record's lineage stops before it reaches an output.

"Why is customer 42 not in ``totals``?" Forward lineage of the record, followed towards
the output: the operations where some of its derived records go in and nothing comes out
dropped it (a filter whose condition failed, a join that found no partner, ...).  Pure
numpy: which values failed the condition is read by the caller (it needs the records).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tensprov_lab.query._lineage import forward
from tensprov_lab.store import Store

__all__ = ["Drop", "WhyNot", "why_not"]


@dataclass
class Drop:
    """An operation that received records derived from the source record and produced
    none: ``rows`` of its input ``input`` went in."""

    operation: int
    input: int
    rows: np.ndarray


@dataclass
class WhyNot:
    """The fate of one source record with respect to an output dataset."""

    source: int
    row: int
    #: rows of the output it reaches (empty: it does not)
    reaches: np.ndarray
    #: where its lineage stopped, nearest the source first
    drops: list[Drop] = field(default_factory=list)
    #: opaque operations on the way (lineage unknown past them)
    blocked: list[int] = field(default_factory=list)


def _ancestors(store: Store, ds: int) -> set[int]:
    """``ds`` and every dataset upstream of it."""
    seen, todo = {ds}, [ds]
    while todo:
        op = store.producer(todo.pop())
        for d in op.inputs if op is not None else []:
            if d not in seen:
                seen.add(d)
                todo.append(d)
    return seen


def why_not(store: Store, out: int, source: int, rows: list[int] | np.ndarray) -> list[WhyNot]:
    """For each of ``rows`` of ``source``: the rows of ``out`` it reaches, or the
    operations on the way to ``out`` where its lineage stopped.

    Examples
    --------
    A filter keeps row 2 of ``a`` alone: row 1 stops at it (operation 2).

    >>> from tensprov_lab.store import MaskTensor, Store
    >>> s = Store()
    >>> a, b = s.add_dataset("a", n_rows=3, role="source"), s.add_dataset("b", n_rows=1)
    >>> op = s.add_operation("filter", "horizontal_reduction", [a.id], b.id,
    ...                      [MaskTensor.from_kept([2], 3)])
    >>> [(w.row, w.reaches.tolist(), [d.operation for d in w.drops]) for w in
    ...  why_not(s, b.id, a.id, [1, 2])]
    [(1, [], [2]), (2, [0], [])]
    """
    on_path = _ancestors(store, out)
    if source not in on_path:
        raise ValueError(
            f"{store.datasets[out].label} does not derive from {store.datasets[source].label}"
        )
    answers = []
    for r in np.asarray(rows, dtype=np.int64).tolist():
        lin = forward(store, source, [r])
        got = WhyNot(source, r, lin.rows.get(out, np.zeros(0, dtype=np.int64)))
        got.blocked = [b for b in lin.blocked if store.operations[b].output in on_path]
        if len(got.reaches) == 0:
            for op in store.operations.values():
                if op.output not in on_path or op.tensors is None:
                    continue
                produced = lin.rows.get(op.output)
                if produced is None or len(produced):
                    continue
                for d in dict.fromkeys(op.inputs):
                    fed = lin.rows.get(d)
                    if fed is not None and len(fed):
                        got.drops.append(Drop(op.id, d, fed))
            got.drops.sort(key=lambda x: x.operation)
        answers.append(got)
    return answers
