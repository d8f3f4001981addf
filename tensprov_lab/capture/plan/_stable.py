"""Whether a plan gives the same records in the same order each time it runs.

A source whose plan does not is pinned (read once) before its records are numbered
(DESIGN.md §3); an operation that numbers records by position over such a plan
(``rules.sequence``) gives other numbers each time.
"""

from __future__ import annotations

from typing import Any

from tensprov_lab.capture.spark._jvm import Jvm

__all__ = ["STABLE_LEAVES", "plan_is_stable", "positional"]

JObject = Any

STABLE_LEAVES = {
    "LogicalRDD",
    "LocalRelation",
    "LogicalRelation",
    "Range",
    "DataSourceV2Relation",
    "HiveTableRelation",
    "OneRowRelation",
    "InMemoryRelation",
}
_STABLE_INNER = {
    "Project", "Filter", "SubqueryAlias", "View", "ResolvedHint", "Generate",
    "AttachDistributedSequence",
}  # fmt: skip


def plan_is_stable(jvm: Jvm, plan: JObject) -> bool:
    """Does re-executing ``plan`` give the same rows in the same order?"""
    stack = [plan]
    while stack:
        node = stack.pop()
        if not jvm.fact("stable node", node, lambda n: _stable_node(jvm, n)):
            return False
        stack.extend(jvm.children(node))
    return True


def _stable_node(jvm: Jvm, node: JObject) -> bool:
    """Whether ``node`` itself keeps its child's records and order, and computes the
    same values each time over a child that does."""
    cls = jvm.cls(node)
    if cls not in STABLE_LEAVES and cls not in _STABLE_INNER:
        return False
    if not jvm.deterministic(node) and not positional(jvm, node):
        return False
    return not (cls == "LogicalRelation" and _drops_malformed(jvm, node))


def positional(jvm: Jvm, node: JObject) -> bool:
    """Whether ``node`` is a projection whose only non-deterministic columns number its
    records by position: ``monotonically_increasing_id()`` (the partition's number and
    the record's place in it), as pandas-on-Spark's ``__natural_order__`` column.  Over
    a child of stable order they are the same numbers each time."""
    if jvm.cls(node) != "Project":
        return False

    def numbers_only(project: JObject) -> bool:
        for e in jvm.lst(project.projectList()):
            if e.deterministic():
                continue
            inner = e.child() if jvm.cls(e) == "Alias" else e
            if jvm.cls(inner) != "MonotonicallyIncreasingID":
                return False
        return True

    return bool(jvm.fact("positional", node, numbers_only))


def _drops_malformed(jvm: Jvm, node: JObject) -> bool:
    """Whether a file relation drops the records its schema does not fit (CSV or JSON
    ``mode=DROPMALFORMED``): which records exist then depends on the columns a query
    reads (a count parses none and drops none), so scan positions differ between
    queries; capture pins such a source (reads it whole once)."""
    rel = jvm.file_relation(node)
    return rel is not None and rel.options.get("mode", "").upper() == "DROPMALFORMED"
