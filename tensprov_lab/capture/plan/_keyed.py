"""Key-carrying plans: what the record rules of :mod:`.rules` build and read.

An *annotated* plan is a user's plan with hidden record-key columns carried through
(:class:`Annotated`); rewriting an operation's plan over its inputs' annotated plans gives
a :class:`Rewrite`: the new plan, the :class:`Block` s of key columns its output carries,
and what the plan nodes on the way told the record rules (a grouping step, a global
sort, a semi join, a union's branches).  No rule logic here: the data the rules share.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from tensprov_lab.capture.spark._jvm import Jvm

__all__ = [
    "Annotated", "Block", "Group", "Pivot", "Rewrite", "Semi", "Unsupported", "key_name",
    "literals",
]  # fmt: skip

JObject = Any
_names = itertools.count()


def key_name(prefix: str = "k") -> str:
    return f"__tp_{prefix}{next(_names)}"


class Unsupported(Exception):
    """The plan has a node capture cannot trace record by record."""


@dataclass
class Annotated:
    """An annotated plan: ``plan.output == user attributes ++ keys``."""

    plan: JObject
    keys: list[JObject]
    width: int
    _names: list[str] | None = field(default=None, init=False, repr=False, compare=False)

    def key_names(self) -> list[str]:
        # asked on every read: a py4j round trip per key the first time only
        if self._names is None:
            self._names = [str(k.name()) for k in self.keys]
        return list(self._names)


@dataclass
class Block:
    """Key columns of the output that carry one thing: an input occurrence's keys,
    the union branch, or the position of an exploded element."""

    kind: str  # "input" | "branch" | "genpos"
    pos: int  # input occurrence for kind == "input"
    attrs: list[JObject]
    width: int


@dataclass
class Group:
    """A grouping node on the path: the plan that lists every group's members."""

    kind: str  # "aggregate" | "dedup"
    members_plan: JObject
    members: str  # column of the list of member keys
    pos: int
    #: every member's key next to its grouping values, when those compare exactly in
    #: pandas (no shuffle in Spark); ``None`` falls back to ``members_plan``
    flat_plan: JObject | None = None
    group_cols: list[str] = field(default_factory=list)
    key_cols: list[str] = field(default_factory=list)
    #: grouping-set id column of ``flat_plan`` (rollup, cube)
    gid_col: str | None = None


@dataclass
class Pivot:
    """A pivot's second grouping step: which members each pivot column comes from."""

    #: the column of the group's flat plan holding each member's pivot value
    value_col: str
    #: the pivot values, as Python values read back from Arrow compare
    values: list[Any]
    #: expression ids of the pivot aggregates (arrays, one item per value)
    array_ids: set[int]


@dataclass
class Semi:
    pairs_plan: JObject | None  # inner version of a semi join; None for an anti join
    left: list[Block]
    right: list[Block]


@dataclass
class Rewrite:
    plan: JObject
    blocks: list[Block]
    occurrences: list[int]  # input index of each occurrence
    nodes: list[str] = field(default_factory=list)
    group: Group | None = None
    sort: bool = False
    #: a global sort at the root of the plan, and its user-given order expressions: what
    #: a caller reads to find ties when the input's keys are not in its canonical order
    sort_node: JObject = None
    sort_exprs: list[JObject] = field(default_factory=list)
    #: a key of that sort is unique among its records: the sort has no ties
    sort_total: bool = False
    semi: Semi | None = None
    #: the last (for a plan with one join at its top: the top) join rewritten, and how
    #: many of the output's blocks come from its left side
    join_node: JObject = None
    join_left_blocks: int = 0
    n_branches: int = 0
    contextual: bool = False
    nondeterministic: bool = False
    #: a node numbers records by position over an order that is not stable (the numbers
    #: differ between executions; the records, and their provenance, do not)
    renumbers: bool = False
    #: the rule (:class:`.rules.Rule`) of each node in ``nodes`` (root last; asked for
    #: the operation's tensors root first), and why replaying a change through a node
    #: cannot preview it
    rules: list[Any] = field(default_factory=list)
    replay_blockers: list[str] = field(default_factory=list)
    #: a node whose rule says drops vanish does not this time (an outer join)
    drops_change_others: bool = False
    #: each window node met: (the node, its rewritten input, that input's key
    #: attributes), what the window rule reads frames over
    windows: list[tuple[JObject, JObject, list[JObject]]] = field(default_factory=list)
    #: a pivot (two grouping steps: by group and pivot value, then by group)
    pivot: Pivot | None = None
    #: a set operation (intersect, except): each side's rewritten plan, value columns
    #: and key blocks, which its rule may read whole to match the values in NumPy
    set_sides: list[tuple[JObject, list[JObject], list[Block]]] = field(default_factory=list)

    @property
    def keys(self) -> list[JObject]:
        return [a for b in self.blocks for a in b.attrs]

    @property
    def width(self) -> int:
        return sum(b.width for b in self.blocks)


def literals(jvm: Jvm, items: list[tuple[str, str | None, str]]) -> list[JObject]:
    """Named literal expressions without references, one fresh expression id each.

    ``items`` are ``(sql literal, cast type or None, name)``.
    """
    from pyspark.sql import functions as F

    cols = []
    for lit, typ, name in items:
        c = F.expr(lit)
        cols.append((c.cast(typ) if typ else c).alias(name))
    return jvm.expressions_of(jvm.spark.range(1).select(*cols))
