"""A global sort of a fused aggregate's groups, without reading keys back.

The unfused capture of ``ORDER BY`` over a grouping reads the sorted groups' keys back:
one job that runs everything below it again with keys riding along (a statement's
joins included), a count of the result first, and the sources' partitions counted to
translate the keys.  When the groups come from a fused read (:mod:`._fused`), their
grouping values are known in canonical group order, and distinct: a group *is* its
values.  A sort by grouping values only is then sorted without a job; otherwise one job
of the user's own plan below the sort, without keys, returns each group's grouping
values with its sort values; the values name the group.  A stable sort of the groups,
in canonical order, by their sort values gives the permutation with ties in canonical
order (DESIGN.md §3), as the unfused capture orders them.

Only sort values whose order Arrow's sort reproduces exactly are sorted here (Spark's
order: NaN above every number, -0.0 equal to 0.0, strings by their bytes); anything
else, or values that do not name one group each, leaves the sort to its own job.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tensprov_lab.capture.plan._equijoin import value_codes
from tensprov_lab.capture.plan._keys import KeyError_
from tensprov_lab.capture.spark._jvm import Jvm
from tensprov_lab.capture.spark._versions import to_arrow

__all__ = [
    "first_members", "group_rows", "group_values", "sort_permutation", "sortable",
    "sorted_records",
]  # fmt: skip

JObject = Any

#: sort value types Arrow orders as Spark does
_EXACT_SORT_TYPES = {
    "byte", "short", "integer", "long", "float", "double", "decimal", "date", "boolean",
    "string", "timestamp", "timestamp_ntz",
}  # fmt: skip


def sortable(jvm: Jvm, sort: JObject) -> bool:
    """Whether every order of the global sort ``sort`` is over values of an exact type
    (a string of another collation than the default one is not)."""
    for o in jvm.lst(sort.order()):
        dt = o.child().dataType()
        name = str(dt.typeName()).split("(")[0]  # (a decimal's is "decimal(p,s)")
        if name not in _EXACT_SORT_TYPES:
            return False
        if name == "string" and str(dt.simpleString()) != "string":
            return False
    return True


def first_members(parent: np.ndarray, n_groups: int) -> np.ndarray:
    """The smallest member of each group, given every record's group.

    >>> first_members(np.array([0, 1, 0, 2, 1]), 3).tolist()
    [0, 1, 3]
    """
    first = np.zeros(n_groups, dtype=np.int64)
    first[parent[::-1]] = np.arange(len(parent) - 1, -1, -1)
    return first


def group_values(columns: list[Any], rows: list[np.ndarray | None], first: np.ndarray) -> list[Any]:
    """Each group's grouping values: column ``i`` (Arrow, over some records) taken at
    the group's first member's record ``rows[i]`` (None: the member itself; -1: an outer
    join has none there, a null)."""
    import pyarrow as pa

    out = []
    for col, at in zip(columns, rows):
        pick = first if at is None else at[first]
        out.append(col.take(pa.array(pick, mask=pick < 0)))
    return out


def sort_permutation(
    jvm: Jvm, below: JObject, grouping: list[JObject], sort: JObject, values: list[Any]
) -> np.ndarray:
    """The canonical group behind each record of the sorted output.

    Parameters
    ----------
    jvm : Jvm
    below : JObject
        The plan the sort sorts (the groups, their grouping attributes among its output).
    grouping : list of JObject
        The grouping attributes.
    sort : JObject
        The ``Sort`` node (its orders over ``below``'s output).
    values : list of Arrow arrays
        Each grouping attribute's value per group, groups in canonical order.

    Raises
    ------
    KeyError_
        When the values read do not name one group each (then the sort is captured by
        its own job).
    """
    import pyarrow as pa

    orders = jvm.lst(sort.order())
    by_id = {int(g.exprId().id()): i for i, g in enumerate(grouping)}
    picked = [_grouping_position(jvm, o.child(), by_id) for o in orders]
    if all(i is not None for i in picked):
        # sorted by grouping values only: known already, in canonical order (no job)
        return sorted_records(orders, [values[i] for i in picked if i is not None])
    names = [f"g{i}" for i in range(len(grouping))]
    ties = [f"s{i}" for i in range(len(orders))]
    exprs = [jvm.alias(g, name) for g, name in zip(grouping, names)]
    exprs += [jvm.alias(o.child(), t) for o, t in zip(orders, ties)]
    table = to_arrow(jvm.to_df(jvm.project(exprs, below)))
    row_of = pa.array(group_rows(values, [table.column(name) for name in names]))
    return sorted_records(orders, [table.column(t).take(row_of) for t in ties])


def group_rows(values: list[Any], read: list[Any]) -> np.ndarray:
    """The record of a read of groups (``read``: its grouping columns) that is each
    group of ``values`` (its grouping values, groups in canonical order); a group is its
    values.  :class:`KeyError_` when the read's values do not name one group each.

    >>> import pyarrow as pa
    >>> group_rows([pa.array(["a", None, "c"])], [pa.array(["c", "a", None])]).tolist()
    [1, 2, 0]
    """
    import pandas as pd
    import pyarrow as pa

    n = len(values[0]) if values else 0
    if (len(read[0]) if read else 0) != n:
        raise KeyError_(f"a read of {n} groups has {len(read[0])} records")
    combined = []
    for can, got in zip(values, read):
        chunks = [*_chunks(can), *_chunks(got.cast(can.type))]
        combined.append(pa.chunked_array(chunks, type=can.type))
    codes, _ = value_codes(combined)
    index = pd.Index(codes[:n])
    where = index.get_indexer(codes[n:]) if index.is_unique else np.full(n, -1)
    if n and (int(where.min()) < 0 or len(np.unique(where)) != n):
        raise KeyError_("the groups' values read do not name one group each")
    at = np.empty(n, dtype=np.int64)
    at[where] = np.arange(n)  # the row read of each group, groups in canonical order
    return at


def _grouping_position(jvm: Jvm, expr: JObject, by_id: dict[int, int]) -> int | None:
    """Which grouping attribute ``expr`` is (None: another expression)."""
    if jvm.cls(expr) != "AttributeReference":
        return None
    return by_id.get(int(expr.exprId().id()))


def sorted_records(orders: list[JObject], columns: list[Any]) -> np.ndarray:
    """The stable sort of records (in canonical order) by ``columns``, one per order
    of the sort, as Spark sorts them: the record at each sorted position."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(columns[0]) if columns else 0
    keys, arrays = [], {}
    for i, (o, col) in enumerate(zip(orders, columns)):
        t = f"s{i}"
        nulls_first = str(o.nullOrdering().sql()) == "NULLS FIRST"
        # null placement per sort value: its own key before the value's (a stable sort
        # keeps each order's ties as they come)
        arrays[f"n{i}"] = pc.is_valid(col) if nulls_first else pc.is_null(col)
        arrays[t] = col
        keys += [(f"n{i}", "ascending"), (t, "descending" if _descending(o) else "ascending")]
    if not keys:
        return np.arange(n, dtype=np.int64)  # (a sort by nothing keeps the order)
    order = pc.sort_indices(pa.table(arrays), sort_keys=keys)
    return np.asarray(order.to_numpy(zero_copy_only=False), dtype=np.int64)


def _descending(order: JObject) -> bool:
    return str(order.direction().sql()) == "DESC"


def _chunks(col: Any) -> list[Any]:
    return list(col.chunks) if hasattr(col, "chunks") else [col]
