"""``intersect`` / ``subtract`` (set semantics) and ``intersectAll`` / ``exceptAll`` (bags).

Record rule, written as Catalyst plans these nodes (values compared null-safely):

- ``intersect``: the distinct left records that have an equal right record; one output
  record per group of equal left records, numbered by its smallest member
  (DESIGN.md §3), its left tensor listing every member and its right tensor every equal
  right record (the witnesses);
- ``subtract`` (``Except``): the same groups of the left records with no equal right
  record; the right tensor is empty (an anti join);
- ``intersectAll``: the ``k``-th of a value's left records (in key order, which is the
  canonical order of a scan) is kept when the right side has at least ``k`` of that
  value, and is matched with the right side's ``k``-th; output records in left order;
- ``exceptAll``: the ``k``-th left record is kept when the right side has fewer than
  ``k`` of its value; no right records in its tensor.

Each is rewritten into the plan Spark itself runs for it (a semi or anti join on every
column, under a deduplication or over a per-value row number), so the keys of the kept
records ride through Spark.  Attribute rule: every column of both sides decides which
records exist (influencing); the values come from the left side.  Replay: ``subtract``
and ``exceptAll`` do not distribute over union (dropping a right record can make a left
one appear).  Over Spark Connect these are ``set_op`` relations of :mod:`.union`'s,
opaque there (see ``CONNECT_OPAQUE``).

Examples
--------
>>> from tensprov_lab.capture.rules import rule_for
>>> rule_for("Intersect") is rule_for("Except")
True
>>> rule_for("Intersect").same_output
True
"""

from __future__ import annotations

from typing import Any

from tensprov_lab.capture.plan._exprs import Lin
from tensprov_lab.capture.plan._keyed import Block, Semi, Unsupported, key_name
from tensprov_lab.capture.rules._base import Captured, Rule, attrs
from tensprov_lab.capture.rules._classic import PlanNode, Reading, Rewriting, Walked, Walking
from tensprov_lab.capture.rules.aggregate import group_tensors
from tensprov_lab.capture.rules.dedup import Distinct
from tensprov_lab.capture.rules.join import matched_right
from tensprov_lab.capture.spark._jvm import Jvm

__all__ = ["SetOperation"]

JObject = Any


class SetOperation(Rule):
    nodes = ("Intersect", "Except")
    methods = ("intersect", "intersectAll", "subtract", "exceptAll")
    same_output = True

    def annotate(self, rw: Rewriting, node: Any, kids: list[Any], results: list[Walked]) -> Walked:
        (left, lb), (right, rb) = results
        if not lb or not rb:
            raise Unsupported(f"{_what(rw.jvm, node)} with an untracked side")
        if rw.info.semi is not None or rw.info.group is not None or rw.info.n_branches:
            raise Unsupported(f"{_what(rw.jvm, node)} beside another join or grouping")
        jvm = rw.jvm
        anti = jvm.cls(node) == "Except"
        # an outer join pads, a semi join keeps a record that lost one match, a set
        # operation's groups shrink: dropping records changes others
        rw.info.drops_change_others = True
        if anti:  # the replay rule, read here: no second round trip
            rw.info.replay_blockers.append(
                "removing a record can make others appear (an except: not distributive)"
            )
        lcols, rcols = jvm.output(kids[0]), jvm.output(kids[1])
        if bool(node.isAll()):
            return _all(rw, anti, (left, lb, lcols), (right, rb, rcols))
        cond = _same_values(jvm, list(zip(lcols, rcols)))
        join = _join(jvm, left, right, cond, anti)
        pairs = None if anti else _join(jvm, left, right, cond, None)
        rw.info.semi = Semi(pairs, lb, rb)
        # one record per group of equal left records: the deduplication Spark runs
        return Distinct().annotate(rw, node, [kids[0]], [(join, lb)])

    def tensors(self, reader: Reading, rw: Any, occ: list[Any]) -> Captured | None:
        if rw.group is None or rw.semi is None:
            return None  # (the bag forms: the generic rule over the kept left records)
        reader._index_deferred(occ)
        n, (members,), ki = group_tensors(reader, rw, occ)
        tensors: list[Any] = [None] * len(occ)
        tensors[rw.group.pos] = members
        in_to_out = getattr(ki, "in_to_out", None)
        if in_to_out is None:
            raise Unsupported("the groups of an intersect without their members")
        return n, matched_right(reader, rw, occ, lambda li: in_to_out[li], n, tensors), ki

    def attributes(self, w: Walking, n: PlanNode) -> dict[int, Lin]:
        for ids in n.kid_ids:
            env = n.envs[n.kid_ids.index(ids)] if n.envs else n.env
            for a in ids:
                w.row |= env[a].all() if a in env else set()
        return {}


def _what(jvm: Jvm, node: JObject) -> str:
    name = "an intersect" if jvm.cls(node) == "Intersect" else "an except"
    return name + (" all" if bool(node.isAll()) else "")


def _same_values(jvm: Jvm, pairs: list[tuple[JObject, JObject]]) -> JObject:
    """``l1 <=> r1 AND l2 <=> r2 ...``: how Spark compares a set operation's records."""
    e = jvm.jvm.org.apache.spark.sql.catalyst.expressions
    cond = None
    for lc, rc in pairs:
        eq = e.EqualNullSafe(lc, rc)
        cond = eq if cond is None else e.And(cond, eq)
    if cond is None:
        raise Unsupported("a set operation without columns")
    return cond


def _join(jvm: Jvm, left: JObject, right: JObject, cond: JObject, anti: bool | None) -> JObject:
    """``left`` joined to ``right`` on ``cond``: semi (``anti`` False), anti (True) or
    inner (None, the pairs that say which right records a kept left record matched)."""
    plans = jvm.jvm.org.apache.spark.sql.catalyst.plans
    kind = {False: "LeftSemi$", True: "LeftAnti$", None: "Inner$"}[anti]
    template = _template(jvm)
    return jvm.copy(
        template,
        left=left,
        right=right,
        joinType=getattr(getattr(plans, kind), "MODULE$"),
        condition=jvm.jvm.scala.Option.apply(cond),
    )


def _template(jvm: Jvm) -> JObject:
    """A resolved ``Join`` node to copy (its constructor differs across Spark versions)."""

    def make(_: JObject) -> JObject:
        one = jvm.spark.range(1)
        node = one.join(jvm.spark.range(1), how="left_semi")._jdf.queryExecution().analyzed()
        while jvm.cls(node) != "Join":  # (under a projection on some releases)
            node = node.children().head()
        return node

    return jvm.fact("join-template", jvm.empty, make)


def _all(
    rw: Rewriting,
    anti: bool,
    left: tuple[JObject, list[Block], list[JObject]],
    right: tuple[JObject, list[Block], list[JObject]],
) -> Walked:
    """``intersectAll`` / ``exceptAll``: each side's records numbered within their value
    (by key), then a semi (anti) join on the values and that number; the left keys of
    the kept records pass on."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    jvm = rw.jvm
    numbered = []
    for plan, blocks, cols in (left, right):
        if any(b.kind != "input" for b in blocks):
            raise Unsupported("intersectAll / exceptAll over a union or an explode")
        name = key_name("k")
        df = jvm.to_df(plan)
        by = Window.partitionBy(*[F.col(f"`{c.name()}`") for c in cols]).orderBy(
            *[F.col(f"`{a.name()}`") for a in attrs(blocks)]
        )
        plan2 = df.withColumn(name, F.row_number().over(by))._jdf.queryExecution().analyzed()
        numbered.append((plan2, jvm.output(plan2)[-1]))
    (lplan, lnum), (rplan, rnum) = numbered
    e = jvm.jvm.org.apache.spark.sql.catalyst.expressions
    cond = e.And(_same_values(jvm, list(zip(left[2], right[2]))), e.EqualTo(lnum, rnum))
    join = _join(jvm, lplan, rplan, cond, anti)
    pairs = None if anti else _join(jvm, lplan, rplan, cond, None)
    rw.info.semi = Semi(pairs, left[1], right[1])
    out = jvm.project([*left[2], *attrs(left[1])], join)
    return out, left[1]
