"""Context inputs of an operation: the result of an uncorrelated scalar subquery that a
filter (or ``HAVING``) compares, read by Spark within the operation's plan rather than
as a child of it (see :mod:`..hops._sql`).  Its one record decides which records pass,
so every output record comes from it: an :class:`~tensprov_lab.store.AllTensor`, and
every column of it influencing.

Examples
--------
>>> import numpy as np
>>> attrs = {"contributing": [], "influencing": [], "decomposition": None}
>>> context_maps(attrs, 2, [["avg(x)"]])
>>> attrs["influencing"][0].tolist(), attrs["contributing"][0].tolist()
([[True], [True]], [[False], [False]])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tensprov_lab.capture.plan._keyed import Unsupported
from tensprov_lab.store import AllTensor

__all__ = ["CONTEXT_BLOCKER", "context_maps", "context_positions", "context_tensors"]

#: why a what-if is not previewed through an operation with a context input
CONTEXT_BLOCKER = (
    "a scalar subquery's value decides which records it keeps: a change to the records "
    "behind that value is not previewed"
)


def context_positions(inputs: list[Any], occurrences: list[int], context: list[Any]) -> list[int]:
    """The inputs of a call that are context (a scalar subquery's value: Spark reads it
    within the plan, so the rewrite finds it in no child), by position.

    >>> a, b = object(), object()
    >>> context_positions([a, b], [0], [b])
    [1]
    """
    return [
        i for i, n in enumerate(inputs) if i not in occurrences and any(n is c for c in context)
    ]


def context_tensors(n_out: int, nodes: list[Any]) -> list[AllTensor]:
    """Every output record from every record of each context input (the one record of
    a scalar subquery's value, or none when the subquery found nothing); their record
    counts known (the caller indexes them first)."""
    for node in nodes:
        if node.n is None or node.n > 1:
            raise Unsupported("a scalar subquery of more than one record")
    return [AllTensor(n_out, int(node.n or 0)) for node in nodes]


def context_maps(attrs: dict[str, Any], n_out: int, ctx_cols: list[list[str]]) -> None:
    """Column lineage of context inputs, added to ``attrs`` (when it was read): a scalar
    subquery's value, compared by a filter, decides whether each record exists (every
    column influencing, none contributing)."""
    if not attrs:
        return
    for cols in ctx_cols:
        attrs["contributing"].append(np.zeros((n_out, len(cols)), dtype=bool))
        attrs["influencing"].append(np.ones((n_out, len(cols)), dtype=bool))
    attrs["decomposition"] = None
