"""Record keys carried through a Spark Connect plan, and the plan facts a rule's Connect
side reads.

Over Connect a DataFrame is the client's protobuf tree of relations (:mod:`._proto`);
capture rewrites it so that every record also carries the keys of the records it comes
from, relation by relation: each rule's :meth:`~tensprov_lab.capture.rules.Rule.keyed`
returns the rewritten relation as a :class:`Keyed`.

Examples
--------
>>> source_key(7)
'__tp_k7'
>>> k = Keyed(rel=None, keys=[source_key(7)], ids={7: [source_key(7)]})
>>> k.passed("filtered").keys, k.passed("filtered").rel
(['__tp_k7'], 'filtered')
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tensprov_lab.capture.plan import _proto as P
from tensprov_lab.capture.plan._keyed import Unsupported

__all__ = [
    "STABLE_KINDS",
    "Keyed",
    "Unsupported",
    "global_aggregate",
    "grouping_sets",
    "keeps_order",
    "keyed_source",
    "member_fields",
    "pb_aggregate",
    "pivot_of",
    "plain_names",
    "smallest_member",
    "sorted_input",
    "source_key",
    "stable",
]

#: relation kinds whose records Spark returns in the same order every time (over
#: stable leaves, with deterministic expressions)
STABLE_KINDS = {
    "read", "range", "local_relation", "cached_local_relation", "cached_remote_relation",
    "chunked_cached_local_relation", "project", "filter", "with_columns",
    "with_columns_renamed", "drop", "to_df", "subquery_alias", "hint", "drop_na",
    "fill_na", "replace",
}  # fmt: skip
#: relation kinds that give their input's records in the order they come (a window
#: function in a projection sorts them by its partitions: checked apart)
_ORDER_KEEPING = {"filter", "subquery_alias", "hint", "with_columns_renamed", "drop",
                  "with_columns", "project", "to_df", "drop_na", "fill_na", "replace"}  # fmt: skip


@dataclass
class Keyed:
    """A rewritten relation and the key columns its records carry."""

    rel: Any
    #: the key columns, in order: together they tell its records apart
    keys: list[str]
    #: per dataset (plan id) whose records' identity it carries: the key columns
    ids: dict[int, list[str]] = field(default_factory=dict)
    #: its records in canonical order are its key tuples in ascending order
    monotone: bool = True
    #: a union's column saying which side (0 left, 1 right) a record comes from
    tag: str | None = None
    #: the plan ids of its relation's sides (join, union), as the rule met them
    sides: list[int | None] = field(default_factory=list)
    #: an explode's key column: each generated record's position in its input's array
    pos: str | None = None
    #: a semi or anti join: whether it is anti, and the same join as an inner join
    #: whose rows are the (left, right) pairs that matched, with both sides' keys
    semi: tuple[bool, Any, Keyed, Keyed] | None = None
    #: Spark gives its records in canonical order (a sort's output, and filters or
    #: projections of it): what a later sort needs when the keys do not tell that order
    returned: bool = False
    #: a join: each side's key columns per dataset (a self-join carries one dataset's
    #: identity on both sides, under other names on the right)
    side_ids: list[dict[int, list[str]]] = field(default_factory=list)

    def passed(self, rel: Any, returned: bool | None = None) -> Keyed:
        """The keys of this (a child's rewrite) passed on unchanged by ``rel``, Spark
        giving its records in canonical order when ``returned`` (default: as this)."""
        back = self.returned if returned is None else returned
        return Keyed(rel, list(self.keys), dict(self.ids), self.monotone, returned=back)


def source_key(pid: int) -> str:
    """The key column of the source (or opaque output) of plan id ``pid``: its records'
    ``monotonically_increasing_id()``."""
    return f"{P.KEY_PREFIX}k{pid}"


def keyed_source(pid: int, rel: Any) -> Keyed:
    """The relation ``rel`` of plan id ``pid`` keyed as a source: its records with their
    ``monotonically_increasing_id()`` (increasing in scan order) as :func:`source_key`."""
    key = source_key(pid)
    mid = P.alias(P.fn("monotonically_increasing_id"), key)
    return Keyed(P.with_id(P.wrap("project", rel, expressions=[P.star(), mid]), pid), [key])


def stable(rel: Any) -> bool:
    """Whether Spark gives ``rel``'s records in the same order, in the same partitions,
    every time: only relations of :data:`STABLE_KINDS` with deterministic expressions
    down to its leaves."""
    stack = [rel]
    while stack:
        r = stack.pop()
        if P.kind(r) not in STABLE_KINDS or any(
            P.nondeterministic(e) for e in P.own_expressions(r)
        ):
            return False
        stack.extend(P.children(r))
    return True


def keeps_order(rel: Any) -> bool:
    """Whether ``rel`` gives its input's records in the order they come."""
    if P.kind(rel) not in _ORDER_KEEPING:
        return False
    for e in P.own_expressions(rel):
        which = e.WhichOneof("expr_type")
        if which == "window":
            return False
        if which == "expression_string" and "over" in e.expression_string.expression.lower():
            return False
    return True


def global_aggregate(rel: Any) -> bool:
    """Whether ``rel`` is a select of aggregate functions (``df.select(F.sum("x"))``):
    one record made of every input record."""
    if P.kind(rel) != "project":
        return False
    names, readable = P.calls(*rel.project.expressions)
    return readable and bool(names & P.AGGREGATES) and not names & P.GENERATORS


def sorted_input(rel: Any) -> bool:
    """Whether a limit's input is a global sort's output (it keeps the first records in
    that order)."""
    child = rel.limit.input
    return P.kind(child) == "sort" and bool(child.sort.is_global)


def grouping_sets(rel: Any) -> bool:
    """Whether an aggregate relation groups by several grouping sets (a rollup, a cube,
    grouping sets): one input record is then a member of one group per set, and a
    group is told apart by its smallest member together with its set's
    ``grouping_id()``."""
    from pyspark.sql.connect import proto

    if P.kind(rel) != "aggregate":
        return False
    return rel.aggregate.group_type not in (
        proto.Aggregate.GroupType.GROUP_TYPE_GROUPBY,
        proto.Aggregate.GroupType.GROUP_TYPE_PIVOT,
    )


def pivot_of(rel: Any) -> Any:
    """An aggregate relation's pivot (its column and listed values), None if it has
    none."""
    from pyspark.sql.connect import proto

    if P.kind(rel) != "aggregate":
        return None
    if rel.aggregate.group_type != proto.Aggregate.GroupType.GROUP_TYPE_PIVOT:
        return None
    return rel.aggregate.pivot


def plain_names(exprs: Any) -> list[str] | None:
    """The names of plain columns (None: an expression, a nested field, a column of a
    named plan)."""
    names = []
    for e in exprs:
        if e.WhichOneof("expr_type") != "unresolved_attribute":
            return None
        name = e.unresolved_attribute.unparsed_identifier
        if "." in name or "`" in name or e.unresolved_attribute.HasField("plan_id"):
            return None
        names.append(name)
    return names


def pb_aggregate(child: Any, grouping: list[Any], aggs: list[Any]) -> Any:
    """A group-by relation over ``child``."""
    from pyspark.sql.connect import proto

    out = proto.Relation()
    out.aggregate.input.CopyFrom(child)
    out.aggregate.group_type = proto.Aggregate.GroupType.GROUP_TYPE_GROUPBY
    for g in grouping:
        out.aggregate.grouping_expressions.add().CopyFrom(g)
    for a in aggs:
        out.aggregate.aggregate_expressions.add().CopyFrom(a)
    return P.with_id(out, None)


def smallest_member(keys: list[str], rep: str) -> Any:
    """An aggregate expression: the smallest of a group's key tuples, as ``rep``."""
    return P.alias(P.fn("min", P.fn("struct", *[P.col(k) for k in keys])), rep)


def member_fields(keys: list[str], rep: str, names: list[str]) -> list[Any]:
    """The fields of ``rep`` (:func:`smallest_member`) as columns ``names``."""
    from pyspark.sql.connect import proto

    fields = []
    for k, name in zip(keys, names):
        e = proto.Expression()
        e.unresolved_attribute.unparsed_identifier = f"{rep}.{k}"
        fields.append(P.alias(e, name))
    return fields
