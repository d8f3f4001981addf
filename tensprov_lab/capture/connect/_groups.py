"""Aggregates and deduplications over Spark Connect: every group with its members.

A group's members come from their grouping values read back with their keys, when the
values are plain columns whose equality Arrow reproduces exactly as Spark's grouping
does (or from an earlier read they rode along, :mod:`._rides`); else the server groups
the records itself and lists each group's member keys.  Groups are numbered by their
smallest member (DESIGN.md §3).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tensprov_lab.capture._equijoin import value_codes
from tensprov_lab.capture.connect import _proto as P
from tensprov_lab.capture.connect._index import GroupIndex, KeyIndex, key_array
from tensprov_lab.capture.connect._rewrite import Annotator, Unsupported, plain_groups
from tensprov_lab.store import AllTensor, tensor_from_pairs

__all__ = ["EXACT_GROUP_TYPES", "plain_grouping", "trace_groups"]

#: grouping value types whose equality Arrow's dictionary encoding reproduces exactly
EXACT_GROUP_TYPES = {"int", "bigint", "smallint", "tinyint", "string", "boolean", "date"}


def plain_grouping(rel: Any) -> list[str] | None:
    """The columns an aggregate relation groups by when each is a plain column by name
    (None: an expression, a nested field)."""
    names = []
    for e in rel.aggregate.grouping_expressions:
        if e.WhichOneof("expr_type") != "unresolved_attribute":
            return None
        name = e.unresolved_attribute.unparsed_identifier
        if "." in name or "`" in name or e.unresolved_attribute.HasField("plan_id"):
            return None
        names.append(name)
    return names or None


def _group_columns(tracker: Any, rel: Any, node: Any) -> list[str] | None:
    """The input columns an aggregate or deduplication groups by, when they are plain
    columns whose values Arrow tells apart exactly as Spark's grouping does (the
    classic fused capture's rule); else None (the server groups)."""
    ds = tracker.store.datasets[node.ds_id]  # type: ignore[index]
    lower = [c.lower() for c in ds.columns]
    if P.kind(rel) == "aggregate":
        names = []
        for e in rel.aggregate.grouping_expressions:
            if e.WhichOneof("expr_type") != "unresolved_attribute":
                return None
            names.append(e.unresolved_attribute.unparsed_identifier)
    else:
        d = rel.deduplicate
        names = list(d.column_names) if len(d.column_names) and not d.all_columns_as_keys \
            else list(ds.columns)  # fmt: skip
    found = []
    for name in names:
        if lower.count(name.lower()) != 1:
            return None  # not one plain column (nested, quoted, ambiguous)
        at = lower.index(name.lower())
        if ds.dtypes[at] not in EXACT_GROUP_TYPES:
            return None
        found.append(ds.columns[at])
    return found or None


def _members_by_values(
    tracker: Any, rel: Any, by: list[str], node: Any, annotator: Annotator
) -> tuple[np.ndarray, np.ndarray, int]:
    """Each input record's group, from its grouping values read with its keys."""
    import pandas as pd

    kid = annotator.annotate(P.children(rel)[0])
    cols = kid.ids.get(node.ident)
    if cols is None:
        raise Unsupported("an input whose records the plan does not carry")
    values = [P.alias(P.col(c), f"{P.KEY_PREFIX}v{i}") for i, c in enumerate(by)]
    read = P.wrap("project", kid.rel, expressions=[*values, *[P.col(k) for k in cols]])
    P.with_id(read, None)
    table = P.dataframe(tracker.spark, read).toArrow()
    combined, _ = value_codes([table.column(f"{P.KEY_PREFIX}v{i}") for i in range(len(by))])
    group, uniq = pd.factorize(combined)
    keys = key_array(table, cols)
    return node.index.lookup(keys), group.astype(np.int64), len(uniq)  # type: ignore[union-attr]


def _members_by_lists(
    tracker: Any, rel: Any, node: Any, annotator: Annotator
) -> tuple[np.ndarray, np.ndarray, int]:
    """Each input record's group, grouped by the server as the user's relation
    groups: one row per group with the list of its members' keys."""
    members_rel, kid = annotator.members(rel)
    table = P.dataframe(tracker.spark, members_rel).toArrow()
    lists = table.column(f"{P.KEY_PREFIX}m").combine_chunks()
    n_groups = len(lists)
    offsets = np.asarray(lists.offsets.to_numpy(), dtype=np.int64)
    flat = lists.flatten()
    cols = kid.ids.get(node.ident)
    if cols is None:
        raise Unsupported("an input whose records the plan does not carry")
    if cols:
        tuples = np.column_stack([
            np.asarray(flat.field(c).fill_null(-1).to_numpy(), dtype=np.int64) for c in cols
        ])  # fmt: skip
    else:
        tuples = np.zeros((len(flat), 0), dtype=np.int64)
    group = np.repeat(np.arange(n_groups), np.diff(offsets))
    return node.index.lookup(tuples), group, n_groups  # type: ignore[union-attr]


def trace_groups(
    tracker: Any, p: Any, rel: Any, annotator: Annotator, run: Any
) -> tuple[int, list[Any], KeyIndex | GroupIndex, str]:
    """An aggregate or a deduplication: every group with its members, grouped as the
    user's relation groups (by plain values read back with the keys when Arrow tells
    them apart as Spark does, else by the server itself)."""
    (node,) = p.inputs
    assert node.index is not None
    plain_groups(rel)  # a rollup's subtotals are not groups of distinct values
    by = _group_columns(tracker, rel, node)
    import pandas as pd

    ride = next((r for r in tracker._rides if r.aggregate is p and r.index is node.index), None)
    if (
        by
        and ride is not None
        and ride.values is not None
        and ([b.lower() for b in by] == [n.lower() for n in ride.names])
    ):
        # the values came with the keys of the records this aggregate groups
        combined, _ = value_codes(ride.values)
        group, uniq = pd.factorize(combined)
        member, group, n_groups = np.arange(node.index.n), group.astype(np.int64), len(uniq)
    elif by:
        member, group, n_groups = _members_by_values(tracker, rel, by, node, annotator)
        run.jobs += 1
    else:
        member, group, n_groups = _members_by_lists(tracker, rel, node, annotator)
        run.jobs += 1
    if len(member) != node.index.n or np.any(member < 0):
        raise Unsupported("groups that do not hold every input record once")
    seen = np.zeros(node.index.n, dtype=bool)
    seen[member] = True
    if not seen.all():
        raise Unsupported("groups that do not hold every input record once")
    smallest = np.full(n_groups, np.iinfo(np.int64).max)
    if len(member):
        # the smallest member of each group: members sorted within their group
        first = np.lexsort((member, group))
        starts = np.flatnonzero(np.r_[True, group[first][1:] != group[first][:-1]])
        smallest[group[first][starts]] = member[first][starts]
    order = np.argsort(smallest, kind="stable")
    rank = np.empty(n_groups, dtype=np.int64)
    rank[order] = np.arange(n_groups)
    group_of = np.empty(node.index.n, dtype=np.int64)
    group_of[member] = rank[group]
    category = "aggregate" if P.kind(rel) == "aggregate" else "dedup"
    grouped = P.kind(rel) == "deduplicate" or len(rel.aggregate.grouping_expressions)
    if not grouped:
        return 1, [AllTensor(1, node.index.n)], KeyIndex(np.zeros((1, 0), np.int64)), category
    tensor = tensor_from_pairs(rank[group], member, n_groups, node.index.n)
    return n_groups, [tensor], GroupIndex(node.index, group_of, n_groups), category
