"""Aggregates and deduplications over Spark Connect: every group with its members.

A group's members come from their grouping values read back with their keys, when the
values are plain columns whose equality Arrow reproduces exactly as Spark's grouping
does (or from an earlier read they rode along, :class:`Ride`); else the server groups
the records itself and lists each group's member keys.  Groups are numbered by their
smallest member (DESIGN.md §3).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tensprov_lab.capture.connect._arrow import read_all
from tensprov_lab.capture.connect._index import GroupIndex, Index, KeyIndex, SetsIndex, key_array
from tensprov_lab.capture.connect._rewrite import Annotator
from tensprov_lab.capture.plan import _proto as P
from tensprov_lab.capture.plan._connect import Unsupported, grouping_sets, pivot_of, plain_names
from tensprov_lab.capture.plan._equijoin import EXACT_TYPES, value_codes
from tensprov_lab.store import AllTensor, tensor_from_groups, tensor_from_pairs

__all__ = ["EXACT_GROUP_TYPES", "Ride", "plain_grouping", "plan_rides", "trace_groups", "untouched"]

#: grouping value types whose equality Arrow's dictionary encoding reproduces exactly
EXACT_GROUP_TYPES = EXACT_TYPES


def plain_grouping(rel: Any) -> list[str] | None:
    """The columns an aggregate relation groups by when each is a plain column by name
    (None: an expression, a nested field, grouping sets)."""
    if grouping_sets(rel):
        return None  # a record is in one group per set: its values do not say which
    return plain_names(rel.aggregate.grouping_expressions) or None


def _group_columns(tracker: Any, rel: Any, node: Any) -> list[str] | None:
    """The input columns an aggregate or deduplication groups by, when they are plain
    columns whose values Arrow tells apart exactly as Spark's grouping does (the
    classic fused capture's rule); else None (the server groups)."""
    ds = tracker.store.datasets[node.ds_id]  # type: ignore[index]
    lower = [c.lower() for c in ds.columns]
    if grouping_sets(rel):
        return None  # a record is in one group per set: the server groups
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
    table = read_all(tracker.spark, read)
    combined, _ = value_codes([table.column(f"{P.KEY_PREFIX}v{i}") for i in range(len(by))])
    group, uniq = pd.factorize(combined)
    keys = key_array(table, cols)
    return node.index.lookup(keys), group.astype(np.int64), len(uniq)  # type: ignore[union-attr]


def _members_by_lists(
    tracker: Any, rel: Any, node: Any, annotator: Annotator
) -> tuple[np.ndarray, np.ndarray, int, np.ndarray | None]:
    """Each input record's group, grouped by the server as the user's relation
    groups: one row per group with the list of its members' keys (and, for grouping
    sets, each group's ``grouping_id()``)."""
    members_rel, kid = annotator.members(rel)
    table = read_all(tracker.spark, members_rel, batches=False)
    gid = None
    if f"{P.KEY_PREFIX}s" in table.column_names:
        gid = np.asarray(table.column(f"{P.KEY_PREFIX}s").to_numpy(), dtype=np.int64)
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
    return node.index.lookup(tuples), group, n_groups, gid  # type: ignore[union-attr]


def trace_groups(
    tracker: Any, p: Any, rel: Any, annotator: Annotator, run: Any
) -> tuple[int, list[Any], Index, str]:
    """An aggregate or a deduplication: every group with its members, grouped as the
    user's relation groups (by plain values read back with the keys when Arrow tells
    them apart as Spark does, else by the server itself).  A rollup, cube or grouping
    sets has one group per set for each record; groups are numbered by smallest member,
    then by set (``grouping_id()``), as on a classic session."""
    (node,) = p.inputs
    assert node.index is not None
    sets = grouping_sets(rel)
    if pivot_of(rel) is not None and not plain_names(rel.aggregate.grouping_expressions):
        raise Unsupported("a pivot grouped by computed values")
    by = _group_columns(tracker, rel, node)
    import pandas as pd

    ride = next((r for r in tracker._rides if r.aggregate is p and r.index is node.index), None)
    gid: np.ndarray | None = None
    if (
        by
        and ride is not None
        and (ride.values is not None or ride.groups is not None)
        and ([b.lower() for b in by] == [n.lower() for n in ride.names])
    ):
        # the values (or their groups) came with the keys of the records this
        # aggregate groups, numbered by first appearance
        if ride.groups is not None:
            group, n_groups = ride.groups
        else:
            combined, _ = value_codes(ride.values)
            group, uniq = pd.factorize(combined)
            n_groups = len(uniq)
        if len(group) == node.index.n and not sets and pivot_of(rel) is None:
            # every record once, groups numbered in order of first member already
            return _partition(node, group, n_groups, rel)
        member, group = np.arange(node.index.n), group.astype(np.int64)
    elif by:
        member, group, n_groups = _members_by_values(tracker, rel, by, node, annotator)
        run.jobs += 1
    else:
        member, group, n_groups, gid = _members_by_lists(tracker, rel, node, annotator)
        run.jobs += 1
    if sets and gid is None:
        raise Unsupported("grouping sets whose groups came back without their set")
    _check_members(member, group, gid, node.index.n)
    smallest = np.full(n_groups, np.iinfo(np.int64).max)
    np.minimum.at(smallest, group, member)  # each group's smallest member
    order = np.lexsort((gid if gid is not None else np.zeros(n_groups), smallest))
    rank = np.empty(n_groups, dtype=np.int64)
    rank[order] = np.arange(n_groups)
    category = "aggregate" if P.kind(rel) == "aggregate" else "dedup"
    grouped = P.kind(rel) == "deduplicate" or len(rel.aggregate.grouping_expressions)
    if not grouped and not sets:
        return 1, [AllTensor(1, node.index.n)], KeyIndex(np.zeros((1, 0), np.int64)), category
    tensor = tensor_from_pairs(rank[group], member, n_groups, node.index.n)
    if pivot_of(rel) is not None:
        tensor = _pivot_tensor(tracker, p, rel, annotator, tensor, rank[group], member)
        run.jobs += 1
    if gid is not None:
        index = SetsIndex(node.index, member, gid[group], rank[group], n_groups)
        return n_groups, [tensor], index, category
    group_of = np.empty(node.index.n, dtype=np.int64)
    group_of[member] = rank[group]
    return n_groups, [tensor], GroupIndex(node.index, group_of, n_groups), category


def _partition(
    node: Any, group: np.ndarray, n_groups: int, rel: Any
) -> tuple[int, list[Any], Index, str]:
    """A grouping of every record of ``node`` in which record ``i`` is in group
    ``group[i]``, groups numbered by smallest member already (``pd.factorize`` numbers
    them by first appearance): its tensor without (group, member) pairs."""
    category = "aggregate" if P.kind(rel) == "aggregate" else "dedup"
    tensor = tensor_from_groups(group, n_groups)
    return n_groups, [tensor], GroupIndex(node.index, group, n_groups), category


def _check_members(member: np.ndarray, group: np.ndarray, gid: np.ndarray | None, n: int) -> None:
    """Every input record is a member of one group (of one group per grouping set).

    Raises
    ------
    Unsupported
        When the groups read back do not hold every input record that way.
    """
    bad = Unsupported("groups that do not hold every input record once")
    if np.any(member < 0):
        raise bad
    if gid is None:
        if len(member) != n or not np.all(np.bincount(member, minlength=n) == 1):
            raise bad
        return
    sets = np.unique(gid)
    set_of = np.searchsorted(sets, gid[group])
    pairs = set_of * max(n, 1) + member
    if len(pairs) != len(sets) * n or len(np.unique(pairs)) != len(pairs):
        raise bad


def _pivot_tensor(
    tracker: Any, p: Any, rel: Any, annotator: Annotator, whole: Any, out: np.ndarray,
    member: np.ndarray,
) -> Any:  # fmt: skip
    """A pivot's tensor: each record from every member of its group, each pivot column
    from the members with its pivot value (as on a classic session).  Spark names the
    columns value by value, an aggregate each, after the grouping columns."""
    import pandas as pd

    from tensprov_lab.store import ColumnsTensor

    (node,) = p.inputs
    pivot = pivot_of(rel)
    kid = annotator.annotate(P.children(rel)[0])
    cols = kid.ids.get(node.ident)
    if cols is None:
        raise Unsupported("an input whose records the plan does not carry")
    at = f"{P.KEY_PREFIX}pv"
    # (not a wrapper taking the input's plan id: the pivot column may name that plan)
    read = P.select(kid.rel, [P.alias(pivot.col, at), *[P.col(k) for k in cols]])
    table = read_all(tracker.spark, read)
    if str(table.schema.field(at).type) not in _PIVOT_TYPES:
        raise Unsupported(f"a pivot over {table.schema.field(at).type} values")
    values = table.column(at).to_pandas()
    listed = [_literal(v) for v in pivot.values]
    if not listed:  # Spark pivots on the distinct values, in order (nulls first)
        listed = [None] * bool(values.isna().any()) + sorted(values.dropna().unique().tolist())
    which = np.asarray(pd.Index(listed).get_indexer(values), dtype=np.int64)
    # each member's pivot value, in the order of ``member``
    by_record = np.full(node.index.n, -1, dtype=np.int64)
    by_record[node.index.lookup(key_array(table, cols))] = which
    picked_of = by_record[member]
    n_groups, n_in = whole.shape
    parts = [tensor_from_pairs(out[picked_of == v], member[picked_of == v], n_groups, n_in)
             for v in range(len(listed))]  # fmt: skip
    n_by, n_aggs = len(rel.aggregate.grouping_expressions), len(rel.aggregate.aggregate_expressions)
    width = len(p.out.df.columns)
    if width != n_by + len(listed) * n_aggs:
        raise Unsupported("a pivot whose columns are not one per value and aggregate")
    columns = {n_by + v * n_aggs + a: v for v in range(len(listed)) for a in range(n_aggs)}
    return ColumnsTensor(whole, parts, columns)


#: pivot value types whose equality pandas tells as Spark does
_PIVOT_TYPES = {"int8", "int16", "int32", "int64", "string", "large_string", "bool", "date32[day]"}


def _literal(e: Any) -> Any:
    """A pivot value listed by the client.

    Raises
    ------
    Unsupported
        For a value of a type pandas may not compare as Spark does.
    """
    lit = e.literal if hasattr(e, "literal") else e  # an Expression, or its Literal
    which = lit.WhichOneof("literal_type")
    if which in ("integer", "long", "short", "byte", "string", "boolean"):
        return getattr(lit, which)
    if which == "null":
        return None
    raise Unsupported(f"a pivot value of type {which}")


# --- grouping values that ride along an earlier read -------------------------------
# An aggregate by plain columns is traced from each input record's grouping values read
# with its keys (``ConnectTracker._members_by_values``): a job that runs the aggregate's
# whole input plan again, a join included.  When the aggregate's input holds the very
# records of a dataset the capture reads keys of anyway (through projections that keep
# records and leave the grouping columns alone, e.g. ``joined.withColumn(...)``), the
# values are read in that job instead, and the aggregate takes none.
#: relation kinds that keep their input's records and may leave columns as they are
_KEEPING = {"with_columns", "with_columns_renamed", "drop", "subquery_alias", "hint",
            "repartition", "repartition_by_expression"}  # fmt: skip


class Ride:
    """Columns of an aggregate's input to read with the keys of dataset ``root``."""

    def __init__(self, aggregate: Any, root: int, names: list[str]) -> None:
        self.aggregate = aggregate
        self.root = root
        self.names = names
        #: the values, one Arrow array a name in the root's record order, once read,
        #: and the root's record index they are in the order of
        self.values: list[Any] | None = None
        self.index: Any = None
        #: instead of the values, when they all come from one side of a fused join:
        #: each root record's group (numbered by first appearance) and the groups
        self.groups: tuple[Any, int] | None = None


def untouched(rel: Any, names: list[str]) -> bool:
    """Whether the one relation ``rel`` keeps its input's records and leaves the
    columns ``names`` as they are (same name, same values).

    Examples
    --------
    >>> from pyspark.sql.connect import proto
    >>> renamed = P.wrap("with_columns_renamed", proto.Relation())
    >>> renamed.with_columns_renamed.rename_columns_map["region"] = "r"
    >>> untouched(renamed, ["region"]), untouched(renamed, ["segment"])
    (False, True)
    """
    kind = P.kind(rel)
    if kind not in _KEEPING:
        return False
    low = {n.lower() for n in names}
    inner = P.body(rel)
    if kind == "with_columns":
        return not any(a.name[0].lower() in low for a in inner.aliases if len(a.name))
    if kind == "with_columns_renamed":
        moved = set(inner.rename_columns_map) | set(inner.rename_columns_map.values())
        moved |= {r.col_name for r in inner.renames} | {r.new_col_name for r in inner.renames}
        return not {m.lower() for m in moved} & low
    return True


def plan_rides(pending: list[Any], grouping: Any, chain: Any, generates: Any) -> list[Ride]:
    """The aggregates of ``pending`` whose grouping values can ride along the key read
    of an earlier dataset.

    ``grouping(rel)`` gives an aggregate relation's plain grouping column names (None:
    not plain columns); ``chain(rel, idents)`` the relations of one operation;
    ``generates(rel, p)`` whether an operation may change the records.
    """
    made = {p.out.ident: p for p in pending if hasattr(p, "out")}
    rides = []
    for p in pending:
        if not hasattr(p, "out") or len(p.inputs) != 1:
            continue
        rel = P.relation(p.out.df)
        if P.kind(rel) != "aggregate" or len(chain(rel, {p.inputs[0].ident})) != 1:
            continue
        names = grouping(rel)
        if not names:
            continue
        node = p.inputs[0]
        while True:
            before = made.get(node.ident)
            if before is None or len(before.inputs) != 1:
                break
            brel = P.relation(before.out.df)
            one = chain(brel, {before.inputs[0].ident})
            if len(one) != 1 or not untouched(brel, names) or generates(brel, before):
                break
            node = before.inputs[0]
        producer = made.get(node.ident)
        if producer is not None and producer is not p:
            rides.append(Ride(p, node.ident, names))
    return rides
