"""``distinct`` and ``dropDuplicates(subset)``.

Record rule: a grouping step (see :mod:`.aggregate`): one output record per group of
equal values, numbered by its smallest member, the tensor listing every member.
``dropDuplicates`` on a subset keeps an arbitrary record of each group (the tracker flags
it non-deterministic).  Attribute rule: the dedup keys (every column for ``distinct``)
influence every output column.  Over Spark Connect, ``distinct`` and ``dropDuplicates``
are one ``deduplicate`` relation, rewritten as Spark runs it (an aggregate: the subset's
columns are the groups, every other column the first value met) with its smallest
member's keys.

**Set operations** (a deduplication over a semi or anti join): ``intersect`` /
``subtract`` (sets) and ``intersectAll`` / ``exceptAll`` (bags).  Record rule, written
as Catalyst plans these nodes (values compared null-safely):

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
>>> rule_for("Distinct") is rule_for("Deduplicate")
False
>>> rule_for("Distinct").same_output
True
>>> rule_for("Intersect") is rule_for("Except")
True
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tensprov_lab.capture.plan import _connect as cx
from tensprov_lab.capture.plan import _proto as P
from tensprov_lab.capture.plan._connect import Keyed
from tensprov_lab.capture.plan._equijoin import EXACT_TYPES
from tensprov_lab.capture.plan._exprs import Lin
from tensprov_lab.capture.plan._keyed import Block, Group, Semi, Unsupported, key_name
from tensprov_lab.capture.rules._base import Captured, Keying, Mapping, Rule, attrs, single
from tensprov_lab.capture.rules._classic import PlanNode, Reading, Rewriting, Walked, Walking
from tensprov_lab.capture.rules.aggregate import (
    Grouping,
    flat_plan,
    group_plan,
    group_tensors,
    input_block,
)
from tensprov_lab.capture.rules.join import fits_in_numpy, matched_right
from tensprov_lab.capture.spark._jvm import Jvm

__all__ = ["Deduplicate", "Distinct", "SetOperation", "match_sets"]

JObject = Any


class _Dedup(Grouping):
    same_output = True

    def keys(self, rw: Rewriting, node: Any, kids: list[Any]) -> list[Any]:
        raise NotImplementedError

    def annotate(self, rw: Rewriting, node: Any, kids: list[Any], results: list[Walked]) -> Walked:
        jvm = rw.jvm
        child, blocks = single(results)
        keys = self.keys(rw, node, kids)
        block = input_block(blocks, "dropDuplicates")
        if rw.info.group is not None:
            raise Unsupported("two grouping steps in one operation")
        agg, reps, list_alias, members = group_plan(rw, child, blocks, plan=True)
        members_plan = jvm.copy(
            agg, groupingExpressions=jvm.seq(keys), aggregateExpressions=jvm.seq([list_alias])
        )
        flat, gcols, kcols = flat_plan(rw, keys, child, blocks)
        rw.info.group = Group("dedup", members_plan, members, block.pos, flat, gcols, kcols)
        # a template Deduplicate node (its constructor differs across Spark versions)
        template = jvm.to_df(child).dropDuplicates()._jdf.queryExecution().analyzed()
        return jvm.copy(template, keys=jvm.seq(keys), child=child), blocks


class Deduplicate(_Dedup):
    nodes = ("Deduplicate",)
    relations = ("deduplicate",)
    methods = ("dropDuplicates", "drop_duplicates")

    def keys(self, rw: Rewriting, node: Any, kids: list[Any]) -> list[Any]:
        return rw.jvm.lst(node.keys())  # type: ignore[no-any-return]

    def attributes(self, w: Walking, n: PlanNode) -> dict[int, Lin]:
        w.influence(n.env, n.d.get("keys"))
        return {}

    # -- over Spark Connect --------------------------------------------------------------
    def keyed(self, a: Keying, rel: Any) -> Keyed:
        if rel.deduplicate.within_watermark:
            raise Unsupported("dropDuplicatesWithinWatermark")
        kid = a.annotate(P.children(rel)[0])
        d = rel.deduplicate
        user = a.user_columns(kid.rel)
        subset = list(d.column_names) if len(d.column_names) and not d.all_columns_as_keys \
            else user  # fmt: skip
        low = {c.lower() for c in subset}
        pid = P.plan_id(rel)
        rep = f"{P.KEY_PREFIX}r{pid}"
        aggs = [P.alias(P.fn("first", P.col(c)), c) for c in user if c.lower() not in low]
        aggs.append(cx.smallest_member(kid.keys, rep))
        group = cx.pb_aggregate(kid.rel, [P.col(c) for c in subset], aggs)
        keys = [f"{P.KEY_PREFIX}g{pid}_{j}" for j in range(len(kid.keys))]
        exprs = [P.col(c) for c in user] + cx.member_fields(kid.keys, rep, keys)
        out = P.wrap("project", group, expressions=exprs)
        return Keyed(P.with_id(out, pid), keys, {}, kid.monotone)

    def maps(self, m: Mapping, rel: Any) -> None:
        if len(m.in_cols) != 1:
            return m.everything()
        m.identity()
        d = rel.deduplicate
        cols = list(d.column_names) if len(d.column_names) else m.in_cols[0]
        m.influence(*[P.col(c) for c in cols])


class Distinct(_Dedup):
    nodes = ("Distinct",)
    methods = ("distinct",)

    def keys(self, rw: Rewriting, node: Any, kids: list[Any]) -> list[Any]:
        return rw.jvm.output(kids[0])  # type: ignore[no-any-return]

    def attributes(self, w: Walking, n: PlanNode) -> dict[int, Lin]:
        for a in n.kid_ids[0] if n.kid_ids else []:
            w.row |= n.env[a].all() if a in n.env else set()
        return {}


# -- set operations ---------------------------------------------------------------------


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
        rw.info.set_sides = [(left, lcols, lb), (right, rcols, rb)]
        if bool(node.isAll()):
            return _all(rw, anti, (left, lb, lcols), (right, rb, rcols))
        cond = _same_values(jvm, list(zip(lcols, rcols)))
        join = _join(jvm, left, right, cond, anti)
        pairs = None if anti else _join(jvm, left, right, cond, None)
        rw.info.semi = Semi(pairs, lb, rb)
        # one record per group of equal left records: the deduplication Spark runs
        return Distinct().annotate(rw, node, [kids[0]], [(join, lb)])

    def tensors(self, reader: Reading, rw: Any, occ: list[Any]) -> Captured | None:
        got = _matched_in_numpy(reader, rw, occ)
        if got is not None:
            return got
        reader._index_deferred(occ)
        if rw.group is None or rw.semi is None:
            return None  # (the bag forms: the generic rule over the kept left records)
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


#: most records of one side read into this process to match values in NumPy (beyond,
#: Spark's own join and grouping give the tensors)
_MAX_SIDE = 5_000_000


def _matched_in_numpy(reader: Reading, rw: Any, occ: list[Any]) -> Captured | None:
    """The tensors of a set operation from one read of each side's values and keys,
    matched here (no shuffle): the same records as the plan Spark runs, as the values
    compare exactly in NumPy (integral, string, boolean and date columns); None when
    they do not, or a side is large."""
    import pyarrow as pa

    from tensprov_lab.capture.plan._bound import rows_at_most
    from tensprov_lab.capture.plan._equijoin import value_codes
    from tensprov_lab.capture.plan._keys import MappedKeyIndex, ScanKeyIndex, arrow_keys
    from tensprov_lab.capture.plan._pieces import read_whole
    from tensprov_lab.store import make_tensor, tensor_from_pairs

    if len(rw.set_sides) != 2 or rw.semi is None:
        return None
    jvm = reader.jvm
    tables, rows = [], []
    sides = []
    for plan, cols, blocks in rw.set_sides:
        node = occ[blocks[0].pos] if len(blocks) == 1 else None
        if node is None or any(
            str(c.dataType().catalogString()) not in EXACT_TYPES for c in cols
        ):  # (a float, or a string of another collation, compares otherwise)
            return None
        # a side that is a whole source not yet counted gets its index from its keys
        whole = bool(node.deferred and node.ann is not None) and jvm.ident(plan) == jvm.ident(
            node.ann.plan
        )
        if not whole:
            reader._index_deferred([node])
        size = node.n if node.n is not None else rows_at_most(plan)
        if size is not None and size > _MAX_SIDE:
            return None
        if size is None and not fits_in_numpy(jvm, plan):  # (its rows counted when read)
            return None
        sides.append((plan, cols, blocks, node, whole))
    for plan, cols, blocks, node, whole in sides:
        names = [key_name("v") for _ in cols]
        keys = [str(a.name()) for a in attrs(blocks)]
        items = [jvm.alias(c, n) for c, n in zip(cols, names)]
        table = read_whole(jvm.to_df(jvm.project([*items, *attrs(blocks)], plan)), jvm.to_arrow,
                           jvm.spark)  # fmt: skip
        if table.num_rows > _MAX_SIDE:
            return None
        raw = arrow_keys(table, keys)
        if whole and node.deferred:  # the whole source in scan order: its keys index it
            scan = ScanKeyIndex.from_keys(raw[:, 0]) if raw.shape[1] == 1 else None
            if scan is not None:
                reader._set_index(node, scan)
        reader._index_deferred([node])
        tables.append([table.column(n).combine_chunks() for n in names])
        rows.append((node.ki.lookup(raw), raw, node))
    (li, lraw, lnode), (ri, rraw, rnode) = rows
    columns = [pa.concat_arrays([a, b.cast(a.type)]) for a, b in zip(*tables)]
    codes, _ = value_codes(columns)
    import pandas as pd

    gid = pd.factorize(codes)[0].astype(np.int64)
    bag = rw.group is None
    n, lo, lr, ro, rr = match_sets(
        gid[: len(li)], li, _key_order(lraw), gid[len(li) :], ri, _key_order(rraw),
        anti=rw.semi.pairs_plan is None, bag=bag,
    )  # fmt: skip
    assert lnode.n is not None and rnode.n is not None
    tensors: list[Any] = [None] * len(occ)
    lpos, rpos = rw.semi.left[0].pos, rw.semi.right[0].pos
    tensors[lpos] = make_tensor(lr, lnode.n) if bag else tensor_from_pairs(lo, lr, n, lnode.n)
    tensors[rpos] = tensor_from_pairs(ro, rr, n, rnode.n)
    in_to_out = np.full(lnode.n, -1, dtype=np.int64)
    in_to_out[lr] = lo
    return n, tensors, MappedKeyIndex(lnode.ki, in_to_out, n)


def match_sets(
    left: np.ndarray,
    left_rows: np.ndarray,
    left_order: np.ndarray,
    right: np.ndarray,
    right_rows: np.ndarray,
    right_order: np.ndarray,
    anti: bool,
    bag: bool,
) -> tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The records of a set operation, from each record's value (``left``, ``right``:
    equal numbers for equal values), row and rank in key order (``*_order``).

    Returns the number of output records and the pairs (output row, left row) and
    (output row, right row) of its tensors.  Sets (``bag`` False): one output record
    per value of the left side found (``anti``: not found) on the right, numbered by
    its smallest left row, paired with every record of that value.  Bags: the ``k``-th
    left record of a value (in key order) is kept when the right side has at least
    (``anti``: fewer than) ``k`` of it, paired with the right side's ``k``-th; output
    records in left row order.  Engine-neutral: plain NumPy in and out.

    >>> import numpy as np
    >>> v = np.array([0, 1, 1]); rows = np.arange(3)
    >>> n, lo, lr, ro, rr = match_sets(v, rows, rows, np.array([1]), np.array([0]),
    ...                                np.array([0]), anti=False, bag=False)
    >>> n, lo.tolist(), lr.tolist(), ro.tolist(), rr.tolist()
    (1, [0, 0], [1, 2], [0], [0])
    >>> match_sets(v, rows, rows, np.array([1]), np.array([0]), np.array([0]),
    ...            anti=False, bag=True)[2].tolist()
    [1]
    """
    n_values = int(max(left.max(initial=-1), right.max(initial=-1))) + 1
    in_right = np.bincount(right, minlength=n_values)
    none = np.zeros(0, dtype=np.int64)
    if not bag:
        keep = (in_right[left] == 0) if anti else (in_right[left] > 0)
        member, value = left_rows[keep], left[keep]
        smallest = np.full(n_values, np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(smallest, value, member)
        used = np.flatnonzero(smallest < np.iinfo(np.int64).max)
        out_of = np.full(n_values, -1, dtype=np.int64)
        out_of[used[np.argsort(smallest[used], kind="stable")]] = np.arange(len(used))
        hit = np.zeros(len(right), dtype=bool) if anti else out_of[right] >= 0
        return len(used), out_of[value], member, out_of[right][hit], right_rows[hit]
    lk = _rank_within(left, left_order)
    keep = (lk >= in_right[left]) if anti else (lk < in_right[left])
    order = np.argsort(left_rows[keep], kind="stable")
    kept = left_rows[keep][order]
    m = len(kept)
    outs = np.arange(m, dtype=np.int64)
    if anti:
        return m, outs, kept, none, none
    # the k-th right record of each value: looked up by (value, k)
    width = int(max(in_right.max(initial=0), 1))
    rk = _rank_within(right, right_order)
    codes = right * width + rk
    by_code = np.argsort(codes, kind="stable")
    wanted = (left[keep] * width + lk[keep])[order]
    return m, outs, kept, outs, right_rows[by_code[np.searchsorted(codes[by_code], wanted)]]


def _key_order(raw: np.ndarray) -> np.ndarray:
    """Each record's rank in the order of its keys (``raw``, first column first)."""
    order = np.lexsort([raw[:, j] for j in range(raw.shape[1] - 1, -1, -1)])
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return rank


def _rank_within(group: np.ndarray, order_key: np.ndarray) -> np.ndarray:
    """Each record's rank among the records of its group, in ``order_key`` order."""
    order = np.lexsort([order_key, group])
    sorted_groups = group[order]
    starts = np.r_[0, np.flatnonzero(np.diff(sorted_groups)) + 1] if len(order) else order
    first = np.repeat(starts, np.diff(np.r_[starts, len(order)]))
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order)) - first
    return rank


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
