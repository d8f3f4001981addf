"""The most records a logical plan can return, read from its tree without running it.

Before capture reads an operation's keys in one job it must know they fit in the
driver (``_pieces.read_whole``).  Spark's own size estimate cannot say: without
cost-based statistics a join's estimate is the product of its sides' sizes in bytes
(10^30 for a plan of a few thousand records), so every read with a join under it was
counted first, a second job that computed the whole plan again.  This bound counts
records instead: a leaf's own row count (a local relation's rows, a cached relation's
once computed, a statistics' ``rowCount``), carried up through the nodes that never
make more records than they read (filters, projections, aggregates, windows, sorts),
added for a union and multiplied for a join.  A node that may make more (``Generate``,
a Python UDF's ``MapInPandas``, ...) or a leaf of unknown size gives no bound, and
the caller counts as before.

:func:`rows_at_most` walks a py4j plan; :func:`combine` is the rule for one node,
pure Python and testable without a JVM.
"""

from __future__ import annotations

from typing import Any

__all__ = ["combine", "remember", "rows_at_most"]

#: nodes whose records are at most those of their (first) child
_NOT_MORE = frozenset(
    {
        "Project", "Filter", "Sort", "Window", "Aggregate", "Deduplicate", "Distinct",
        "GlobalLimit", "LocalLimit", "Limit", "Tail", "Offset", "SubqueryAlias", "CollectMetrics",
        "View", "ResolvedHint", "Repartition", "RepartitionByExpression",
        "RebalancePartitions", "Intersect", "Except", "WithWatermark", "Coalesce",
        "WindowGroupLimit", "DeserializeToObject", "SerializeFromObject",
    }
)  # fmt: skip
#: join types whose records are the left side's at most
_LEFT_ONLY = ("LeftSemi", "LeftAnti", "ExistenceJoin")
#: plans deeper than this are not walked (no bound: the caller counts)
_DEEPEST = 200
#: the records of leaves capture counted (a tracked source read from files or made by
#: ``createDataFrame``: Spark knows no row count of its own), by node name and output
#: attributes, whose ids one JVM never gives twice; the newest ``_KEPT`` kept
_KNOWN: dict[str, int] = {}
_KEPT = 4096


def combine(name: str, children: list[int | None], join_type: str = "") -> int | None:
    """The most records of a node ``name`` whose children return at most ``children``
    records (``None``: unknown), or ``None`` when it cannot say.

    >>> combine("Filter", [10])
    10
    >>> combine("Union", [10, 5])
    15
    >>> combine("Join", [10, 5], "Inner"), combine("Join", [10, 5], "FullOuter")
    (50, 65)
    >>> combine("Join", [10, None], "LeftSemi"), combine("Generate", [10]) is None
    (10, True)
    """
    if not children:
        return None
    if name == "Join" and join_type.startswith(_LEFT_ONLY):
        return children[0]
    if any(c is None for c in children):
        return None
    known = [int(c) for c in children if c is not None]
    if name == "Join":
        left, right = known[0], known[1]
        return left * right + (left + right if "Outer" in join_type else 0)
    if name == "Union":
        return sum(known)
    if name == "Aggregate":
        return max(known[0], 1)  # (an aggregate of no records without groups is one)
    if name in _NOT_MORE:
        return known[0]
    return None


def remember(leaf: Any, rows: int) -> None:
    """Note that py4j leaf plan ``leaf`` returns ``rows`` records (capture counted them).

    >>> remember(source._jdf.queryExecution().analyzed(), 3000)  # doctest: +SKIP
    """
    try:
        key = _leaf_key(leaf)
    except Exception:  # noqa: BLE001 - not noted: a later read counts
        return
    _KNOWN.pop(key, None)
    _KNOWN[key] = int(rows)
    while len(_KNOWN) > _KEPT:
        del _KNOWN[next(iter(_KNOWN))]


def rows_at_most(plan: Any) -> int | None:
    """The most records py4j logical plan ``plan`` can return, or ``None``.

    >>> rows_at_most(df._jdf.queryExecution().optimizedPlan())  # doctest: +SKIP
    3000
    """
    try:
        return _walk(plan, 0)
    except Exception:  # noqa: BLE001 - a plan this walk does not know: no bound
        return None


def _walk(plan: Any, depth: int) -> int | None:
    if depth > _DEEPEST:
        return None
    name = str(plan.nodeName())
    kids = plan.children()
    n = int(kids.size())
    if n == 0:
        return _leaf_rows(plan, name)
    join_type = str(plan.joinType().toString()) if name == "Join" else ""
    if name == "Sample":
        if bool(plan.withReplacement()):
            return None  # records repeat
        name = "Filter"  # a subset of its child's records
    if name not in _NOT_MORE and name not in ("Union", "Join"):
        return None  # (not walked: no bound whatever its children return)
    # which children bound it (combine's rule): a semi or anti join's left side only
    every = name == "Union" or (name == "Join" and not join_type.startswith(_LEFT_ONLY))
    found: list[int | None] = []
    for i in range(n if every else 1):
        found.append(_walk(kids.apply(i), depth + 1))
        if found[-1] is None:
            return None
    return combine(name, found, join_type)


def _leaf_rows(plan: Any, name: str) -> int | None:
    if name == "LocalRelation":
        return int(plan.data().size())
    count = plan.stats().rowCount()
    if count.isDefined():
        return int(str(count.get()))
    return _KNOWN.get(_leaf_key(plan)) if _KNOWN else None


def _leaf_key(leaf: Any) -> str:
    return f"{leaf.nodeName()} {leaf.output().toString()}"
