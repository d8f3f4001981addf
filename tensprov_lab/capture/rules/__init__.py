"""One provenance rule per kind of logical-plan node: record, attribute and replay rule.

Capture reads each operation's analyzed plan from its root down to its inputs and asks,
for every node on the way, the :class:`Rule` registered for the node's class.  Rules
may import ``plan`` and ``spark`` (and the store), never the rooms above them:

==================  ==========================================================
module              Catalyst nodes (what the user wrote)
==================  ==========================================================
:mod:`.project`     Project (select, withColumn, drop, casts, UDFs)
:mod:`.filter`      Filter (filter, where, dropna)
:mod:`.limit`       GlobalLimit, LocalLimit, Offset, Sample
:mod:`.sort`        Sort (orderBy, sortWithinPartitions)
:mod:`.join`        Join (every join type)
:mod:`.union`       Union (union, unionByName)
:mod:`.aggregate`   Aggregate (groupBy().agg, rollup, cube, global aggregates)
:mod:`.dedup`       Deduplicate, Distinct, Intersect, Except (set operations)
:mod:`.generate`    Generate (explode, posexplode)
:mod:`.expand`      Expand (under rollup, cube, unpivot)
:mod:`.window`      Window (window functions)
:mod:`.passthrough` Repartition, aliases, hints, views, observe
:mod:`.sequence`    AttachDistributedSequence (pandas-on-Spark index, zipWithIndex)
==================  ==========================================================

A node kind without a rule is not traced record by record: its operation becomes an
explicit opaque operation with a warning (and its column lineage a superset).

**Over Spark Connect** the same rule traces the client's relations of the kinds it
names in ``relations`` (:data:`CONNECT`): the rewrite
(:class:`~tensprov_lab.capture.connect._rewrite.Annotator`) and the attribute maps
(:mod:`tensprov_lab.capture.connect._attributes`) dispatch to its :meth:`Rule.keyed`
and :meth:`Rule.maps`.  A relation kind a rule's operations make that Connect does not
trace is in the rule's ``connect_opaque`` with why (:data:`CONNECT_OPAQUE`): an opaque
operation with that warning, as is any other kind.

**Adding an operation** means one module here: a :class:`Rule` subclass naming its
``nodes`` (and the DataFrame ``methods`` that make them, and the Connect ``relations``)
and overriding what differs from the defaults (keys pass through, columns pass through,
distributive), added to ``_RULES`` below, and its tests (tests/test_rules.py runs
every method on both engines).  The tracker
(:mod:`.._tracker`) only orchestrates; the rewrite (:mod:`.._annotate`) and the
attribute walk (:mod:`.._attributes`) dispatch here.

Examples
--------
>>> from tensprov_lab.capture.rules import TRIVIAL, rule_for
>>> type(rule_for("Aggregate")).__module__
'tensprov_lab.capture.rules.aggregate'
>>> sorted(TRIVIAL)[:2]
['CollectMetrics', 'EventTimeWatermark']
>>> type(connect_rule_for("set_op")).__name__, CONNECT_OPAQUE["unpivot"]
('Union', 'an unpivot (melt)')
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tensprov_lab.capture.rules._base import Rule
from tensprov_lab.capture.rules._classic import Captured, Reading, Rewriting, Walking
from tensprov_lab.capture.rules.aggregate import Aggregate
from tensprov_lab.capture.rules.dedup import Deduplicate, Distinct, SetOperation
from tensprov_lab.capture.rules.expand import Expand
from tensprov_lab.capture.rules.filter import Filter
from tensprov_lab.capture.rules.generate import Generate
from tensprov_lab.capture.rules.join import Join
from tensprov_lab.capture.rules.limit import Limit, Sample
from tensprov_lab.capture.rules.passthrough import PassThrough
from tensprov_lab.capture.rules.project import Project
from tensprov_lab.capture.rules.sequence import Sequence
from tensprov_lab.capture.rules.sort import Sort
from tensprov_lab.capture.rules.union import Union
from tensprov_lab.capture.rules.window import Window

if TYPE_CHECKING:
    from tensprov_lab.capture.plan._keyed import Rewrite

__all__ = [
    "CONNECT",
    "CONNECT_OPAQUE",
    "KEEPS_RECORDS",
    "column_category",
    "METHODS",
    "RULES",
    "TRIVIAL",
    "Captured",
    "Reading",
    "Rewriting",
    "Rule",
    "Walking",
    "category_of",
    "connect_rule_for",
    "rule_for",
]

_RULES: list[Rule] = [
    Project(),
    Filter(),
    Limit(),
    Sample(),
    Sort(),
    Join(),
    Union(),
    Aggregate(),
    Deduplicate(),
    Distinct(),
    SetOperation(),
    Generate(),
    Expand(),
    Window(),
    PassThrough(),
    Sequence(),
]


def _one_rule_each(attr: str, what: str) -> dict[str, Rule]:
    """Each name the rules list in their ``attr``, and the one rule that lists it."""
    out: dict[str, Rule] = {}
    for rule in _RULES:
        for name in getattr(rule, attr):
            if name in out:
                raise RuntimeError(f"two rules for {what} {name}")
            out[name] = rule
    return out


#: the rule of each Catalyst logical-plan node class (simple name)
RULES: dict[str, Rule] = _one_rule_each("nodes", "plan node")
#: the rule of each Spark Connect relation kind (a field of ``Relation``)
CONNECT: dict[str, Rule] = _one_rule_each("relations", "relation")
#: relation kinds the rules' operations make that Connect does not trace, and why
CONNECT_OPAQUE: dict[str, str] = {k: v for r in _RULES for k, v in r.connect_opaque.items()}

#: the DataFrame methods the rules name (capture wraps them in a tracked block)
METHODS = frozenset(m for r in _RULES for m in r.methods)
#: node kinds that never change which records exist, nor their order in our numbering
TRIVIAL = frozenset(n for n, r in RULES.items() if r.trivial)
#: node kinds whose output, alone in an operation, is their input's records in order
KEEPS_RECORDS = frozenset(n for n, r in RULES.items() if r.keeps_records)


def rule_for(node_class: str) -> Rule | None:
    """The rule for a plan node class (its simple name), or None: not traced."""
    return RULES.get(node_class)


def connect_rule_for(kind: str) -> Rule | None:
    """The rule for a Spark Connect relation kind, or None: not traced."""
    return CONNECT.get(kind)


def category_of(
    rw: Rewrite, n_in_cols: list[int], out_cols: list[str], in_cols: list[list[str]]
) -> str:
    """The category of the operation ``rw`` rewrites (the paper's seven, plus
    aggregate, dedup, explode, sort, window), from the nodes it holds and the columns
    of its inputs (``n_in_cols``, ``in_cols``) and output (``out_cols``)."""
    nodes = set(rw.nodes)
    if rw.group is not None:
        return "aggregate" if rw.group.kind == "aggregate" else "dedup"
    if rw.n_branches:
        return "append"
    if "Join" in nodes:
        return "join"
    if any(b.kind == "genpos" for b in rw.blocks):
        return "explode"
    if rw.sort:
        return "sort"
    if nodes & {"Filter", "Sample", "GlobalLimit", "LocalLimit", "Offset", "Intersect", "Except"}:
        return "horizontal_reduction"
    if "Window" in nodes:
        return "window"
    if nodes <= TRIVIAL | {"Sort"}:
        return "trivial"
    return column_category(n_in_cols[0], in_cols[0], out_cols)


def column_category(n_in: int, in_cols: list[str], out_cols: list[str]) -> str:
    """The category of a one-input operation that keeps its records, from its columns:
    fewer of the same (vertical reduction), more (augmentation), else a transformation.

    >>> column_category(3, ["a", "b", "c"], ["a", "c"])
    'vertical_reduction'
    """
    if len(out_cols) < n_in and set(out_cols) <= set(in_cols):
        return "vertical_reduction"
    if len(out_cols) > n_in:
        return "vertical_augmentation"
    return "transformation"
