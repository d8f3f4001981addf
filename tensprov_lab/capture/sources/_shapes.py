"""The plan shapes a fused read covers (:mod:`._fused`): which nodes keep their
input's records, and which plans Spark returns in scan order.

>>> sorted(KEEPS_ROWS)
['Project', 'ResolvedHint', 'SubqueryAlias', 'View']
"""

from __future__ import annotations

from typing import Any

from tensprov_lab.capture.plan._stable import STABLE_LEAVES
from tensprov_lab.capture.spark._jvm import Jvm

__all__ = [
    "KEEPS_ROWS", "below", "copy_of", "has_subquery", "renames_of", "reordering_subquery",
    "scan_ordered", "under_projections",
]  # fmt: skip

JObject = Any

#: nodes between an operation's root and its input that keep the input's records and
#: their order (a repartition would not)
KEEPS_ROWS = {"Project", "SubqueryAlias", "View", "ResolvedHint"}
#: inner nodes of a plan whose output comes back from Spark in scan order
_SCAN_INNER = {"Project", "Filter", "SubqueryAlias", "View", "ResolvedHint"}


def below(jvm: Jvm, plan: JObject, ident: int) -> list[str] | None:
    """The classes of the row-keeping nodes from ``plan`` down to the node ``ident``
    (excluded); None when another kind of node, or a non-deterministic one, is on the
    way."""
    seen: list[str] = []
    node = plan
    while jvm.ident(node) != ident:
        cls = jvm.cls(node)
        kids = jvm.children(node)
        if cls not in KEEPS_ROWS or len(kids) != 1 or not jvm.deterministic(node):
            return None
        seen.append(cls)
        node = kids[0]
    return seen


def renames_of(jvm: Jvm, plan: JObject, ident: int) -> bool:
    """Whether ``plan`` is the node ``ident`` under aliases, views and hints only: its
    records and its attributes (a projection between could compute new ones)."""
    seen = below(jvm, plan, ident)
    return seen is not None and "Project" not in seen


def copy_of(jvm: Jvm, plan: JObject, source: JObject) -> bool:
    """Whether ``plan`` is the plan ``source`` again with new attribute ids (under
    aliases, views and hints): a table a statement reads twice (a self-join, a
    subquery over the same table), which Spark's analyzer makes anew for each reference.
    The same records in the same order, when ``source`` is scan-ordered."""

    def bare(node: JObject) -> JObject:
        while jvm.cls(node) in ("SubqueryAlias", "View", "ResolvedHint"):
            node = jvm.children(node)[0]
        return node

    try:
        return bool(bare(plan).sameResult(bare(source)))
    except Exception:  # noqa: BLE001 - another Spark build: not taken for a copy
        return False


def under_projections(jvm: Jvm, plan: JObject) -> JObject:
    """The node below the projections at the top of ``plan`` (and the aliases: a CTE
    that a statement reads twice, TPC-H Q15's, is an alias of its plan the second time)."""
    node = plan
    while jvm.cls(node) in ("Project", "SubqueryAlias"):
        kids = jvm.children(node)
        if len(kids) != 1:
            break
        node = kids[0]
    return node


def has_subquery(jvm: Jvm, plan: JObject) -> bool:
    """Whether an expression of ``plan`` (or of its subtree) holds a subquery: Spark
    rewrites it into a join, which need not keep the records' order (an ``IN``
    subquery in a projection is an existence join).  One round trip: Catalyst's tree
    pattern bits; True (not fused) when they cannot be read."""
    try:
        return bool(plan.containsPattern(jvm.plan_expression))
    except Exception:  # noqa: BLE001 - another Spark build: assume the worst
        return True


def reordering_subquery(jvm: Jvm, plan: JObject) -> bool:
    """Whether an expression of ``plan`` (or of its subtree) holds a subquery other than
    an uncorrelated scalar one (:func:`has_subquery`, but a scalar subquery's value, which
    Spark computes before the query and reads as a constant, keeps the records' order:
    TPC-H Q11's, Q15's and Q22's filters).  One round trip with the helper; without it,
    :func:`has_subquery`."""
    helper = jvm.helper
    if helper is None:
        return has_subquery(jvm, plan)
    try:
        return bool(helper.reorderingSubquery(plan))
    except Exception:  # noqa: BLE001 - another Spark build: assume the worst
        return True


def scan_ordered(jvm: Jvm, plan: JObject) -> bool:
    """Whether Spark returns ``plan``'s records in scan order every time."""
    if has_subquery(jvm, plan):
        return False
    stack = [plan]
    while stack:
        node = stack.pop()
        cls = jvm.cls(node)
        kids = jvm.children(node)
        if cls not in STABLE_LEAVES and cls not in _SCAN_INNER:
            return False
        if not jvm.deterministic(node) or len(kids) > 1:
            return False
        stack.extend(kids)
    return True
