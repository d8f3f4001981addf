"""Grouping values that ride along an earlier read (capture over Spark Connect).

An aggregate by plain columns is traced from each input record's grouping values read
with its keys (``ConnectTracker._members_by_values``): a job that runs the aggregate's
whole input plan again, a join included.  When the aggregate's input holds the very
records of a dataset the capture reads keys of anyway (through projections that keep
records and leave the grouping columns alone, e.g. ``joined.withColumn(...)``), the
values are read in that job instead, and the aggregate takes none.

Examples
--------
>>> from pyspark.sql.connect import proto
>>> renamed = P.wrap("with_columns_renamed", proto.Relation())
>>> renamed.with_columns_renamed.rename_columns_map["region"] = "r"
>>> untouched(renamed, ["region"]), untouched(renamed, ["segment"])
(False, True)
"""

from __future__ import annotations

from typing import Any

from tensprov_lab.capture.plan import _proto as P

__all__ = ["Ride", "plan_rides", "untouched"]

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
    columns ``names`` as they are (same name, same values)."""
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
