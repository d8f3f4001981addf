"""``join`` of every kind: inner, outer, cross, semi and anti, with any condition.

Record rule: every output record comes from one record of each side (-1 for the missing
side of an outer join), numbered by (left row, right row); both sides' keys travel
through Spark's own join, or, for an equi-join whose sides fit in this process,
:meth:`Join.tensors` matches the sides' key values in NumPy from one scan of each
(:mod:`.._equijoin`).  A semi join keeps left records; its right tensor lists the right
records that matched (:func:`semi_tensors`); an anti join's lists none.  Attribute rule:
the join condition's columns influence every output column.  Replay: an anti join does
not distribute over union (dropping a right record can make a left one appear).  Over
Spark Connect: the ``join`` relation puts both sides' keys side by side (the right's
renamed in a self-join); the attribute maps follow Spark's column layout of a ``USING``
join.

Examples
--------
>>> from tensprov_lab.capture.rules import rule_for
>>> rule_for("Join").nodes
('Join',)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tensprov_lab.capture.plan import _proto as P
from tensprov_lab.capture.plan._connect import Keyed
from tensprov_lab.capture.plan._equijoin import find_equi_join, join_pairs, key_codes
from tensprov_lab.capture.plan._exprs import Lin
from tensprov_lab.capture.plan._keyed import Rewrite, Semi, Unsupported, key_name
from tensprov_lab.capture.plan._keys import CrossKeyIndex, ScanKeyIndex, arrow_keys
from tensprov_lab.capture.plan._pieces import read_whole
from tensprov_lab.capture.rules._base import Captured, Keying, Mapping, Rule
from tensprov_lab.capture.rules._classic import PlanNode, Reading, Rewriting, Walked, Walking
from tensprov_lab.capture.spark._jvm import Jvm
from tensprov_lab.store import CrossTensor, tensor_from_pairs

__all__ = ["Join", "fits_in_numpy", "matched_right", "semi_tensors"]

#: most records of one join side read into this process to match keys in NumPy, and
#: Spark's size estimate of a side above which that is not even tried (sizes beyond
#: these are left to Spark's own join)
_JOIN_MAX_SIDE = 20_000_000
_JOIN_MAX_BYTES = 4 << 30
_BOTH = {"Inner", "LeftOuter", "RightOuter", "FullOuter", "Cross"}
_LEFT = {"LeftSemi", "LeftAnti"}


def _join_type(d: dict[str, Any]) -> str:
    return str(d.get("joinType", {}).get("object", "")).rstrip("$").rsplit(".", 1)[-1]


class Join(Rule):
    nodes = ("Join",)
    relations = ("join",)
    drops_vanish = True
    methods = ("join", "crossJoin")

    def annotate(self, rw: Rewriting, node: Any, kids: list[Any], results: list[Walked]) -> Walked:
        (left, lb), (right, rb) = results
        if not lb or not rb:
            raise Unsupported("a join with an untracked side")
        new = node.withNewChildren(rw.jvm.seq([left, right]))
        jt = str(node.joinType().toString())
        if jt not in ("Inner", "Cross"):
            # an outer join pads, a semi join keeps a record that lost one match
            rw.info.drops_change_others = True
        if jt == "LeftAnti":  # the replay rule, read here: no second round trip
            rw.info.replay_blockers.append(
                "removing a record can make others appear (an anti join: not distributive)"
            )
        if jt in _LEFT:
            if rw.info.semi is not None:
                raise Unsupported("two semi joins in one operation")
            pairs = None
            if jt == "LeftSemi":
                inner = getattr(rw.jvm.jvm.org.apache.spark.sql.catalyst.plans, "Inner$")
                pairs = rw.jvm.copy(new, joinType=getattr(inner, "MODULE$"))
            rw.info.semi = Semi(pairs, lb, rb)
            return new, lb
        rw.info.join_node, rw.info.join_left_blocks = new, len(lb)
        return new, lb + rb

    def tensors(self, reader: Reading, rw: Rewrite, occ: list[Any]) -> Captured | None:
        cross = _cross_tensors(reader, rw, occ)
        if cross is not None:
            return cross
        raw = _numpy_join_keys(reader, rw, occ)
        return None if raw is None else reader._functional(rw, occ, raw)

    def output_ids(self, d: dict[str, Any], kid_ids: list[list[int]]) -> list[int] | None:
        kind = _join_type(d)
        if kind in _BOTH:
            return kid_ids[0] + kid_ids[1]
        if kind in _LEFT:
            return kid_ids[0]
        return None

    def attributes(self, w: Walking, n: PlanNode) -> dict[int, Lin]:
        w.influence(n.env, n.d.get("condition"))
        return {}

    # -- over Spark Connect --------------------------------------------------------------
    def keyed(self, a: Keying, rel: Any) -> Keyed:
        """Both sides' keys side by side (a semi or anti join: the left's, and the same
        join as an inner join that says which pairs matched)."""
        from pyspark.sql.connect import proto

        sides = [P.plan_id(rel.join.left), P.plan_id(rel.join.right)]
        new, (left, right) = a.kids(rel)
        clash = [k for k in right.keys if k in left.keys]
        if clash:  # the same source on both sides: the right side's keys get new names
            renamed = {k: f"{k}_r{P.fresh_id()}" for k in clash}
            entries = []
            for old, name in renamed.items():
                r = proto.WithColumnsRenamed.Rename()
                r.col_name, r.new_col_name = old, name
                entries.append(r)
            new.join.right.CopyFrom(P.wrap("with_columns_renamed", right.rel, renames=entries))
            right = Keyed(
                new.join.right,
                [renamed.get(k, k) for k in right.keys],
                {i: [renamed.get(k, k) for k in ks] for i, ks in right.ids.items()},
                right.monotone,
            )
        kinds = proto.Join.JoinType
        if rel.join.join_type in (kinds.JOIN_TYPE_LEFT_SEMI, kinds.JOIN_TYPE_LEFT_ANTI):
            inner = type(new).FromString(new.SerializeToString())
            inner.join.join_type = kinds.JOIN_TYPE_INNER
            P.with_id(inner, None)
            anti = rel.join.join_type == kinds.JOIN_TYPE_LEFT_ANTI
            return Keyed(new, list(left.keys), dict(left.ids), left.monotone, sides=sides,
                         semi=(anti, inner, left, right))  # fmt: skip
        return Keyed(
            new,
            left.keys + right.keys,
            {**left.ids, **right.ids},
            left.monotone and right.monotone,
            sides=sides,
            side_ids=[dict(left.ids), dict(right.ids)],
        )

    def maps(self, m: Mapping, rel: Any) -> None:
        if len(m.in_cols) == 2:
            _join_maps(m, rel.join)
        else:  # a semi or anti join's right side is known, or one input on both sides
            m.everything()


def semi_tensors(
    reader: Reading, rw: Rewrite, occ: list[Any], left_idx: np.ndarray, tensors: list[Any]
) -> list[Any]:
    """The right tensors of a semi join (the right records each kept left record
    matched; none for an anti join), given the left rows kept in output order."""
    # a semi join keeps left records in their order: output row = rank among kept
    return matched_right(
        reader, rw, occ, lambda li: np.searchsorted(left_idx, li), len(left_idx), tensors
    )


def matched_right(
    reader: Reading,
    rw: Rewrite,
    occ: list[Any],
    out_of_left: Callable[[np.ndarray], np.ndarray],
    n_out: int,
    tensors: list[Any],
) -> list[Any]:
    """``tensors`` with the right tensors of the semi join ``rw.semi`` filled in: the
    right records each output record's left records matched (``out_of_left``: the
    output row of each left row), read from the same join as an inner join; empty for
    an anti join."""
    assert rw.semi is not None
    right = [b for b in rw.semi.right if b.kind == "input"]
    for b in right:
        n_in = occ[b.pos].n
        assert n_in is not None
        if rw.semi.pairs_plan is None:
            tensors[b.pos] = tensor_from_pairs(
                np.zeros(0, np.int64), np.zeros(0, np.int64), n_out, n_in
            )
            continue
        lnames = [str(a.name()) for lb in rw.semi.left for a in lb.attrs]
        rnames = [str(a.name()) for a in b.attrs]
        raw = reader._collect_keys(rw.semi.pairs_plan, lnames + rnames)
        lw = sum(lb.width for lb in rw.semi.left)
        lki = occ[rw.semi.left[0].pos].ki
        rki = occ[b.pos].ki
        assert lki is not None and rki is not None
        outs = np.asarray(out_of_left(lki.lookup(raw[:, :lw])), dtype=np.int64)
        ri = rki.lookup(raw[:, lw:])
        # (several equal left records of one output record match the same right one)
        pairs = np.unique(outs * max(n_in, 1) + ri)
        tensors[b.pos] = tensor_from_pairs(pairs // max(n_in, 1), pairs % max(n_in, 1), n_out, n_in)
    return tensors


#: the nodes an operation that is one cross product may have besides its join
_AROUND_CROSS = {"Project", "SubqueryAlias", "View", "ResolvedHint"}


def _cross_tensors(reader: Reading, rw: Rewrite, occ: list[Any]) -> Captured | None:
    """The implicit tensors of an operation that is one join without a condition (a
    cross join, or the join of a comma join before its ``WHERE``): pair ``i * m + j``
    from left record ``i`` and right record ``j``, known from the sides' sizes alone,
    so no Spark job reads (and no memory holds) the ``n * m`` pairs."""
    node = rw.join_node
    if node is None or rw.group is not None or rw.sort or rw.semi is not None:
        return None
    if rw.nondeterministic or rw.n_branches or rw.windows or rw.nodes.count("Join") != 1:
        return None
    if set(rw.nodes) - _AROUND_CROSS - {"Join"} or str(node.joinType().toString()) not in (
        "Inner", "Cross",
    ):  # fmt: skip
        return None
    if bool(node.condition().isDefined()):
        return None
    left, right = rw.blocks if len(rw.blocks) == 2 else (None, None)
    if left is None or right is None or rw.join_left_blocks != 1:
        return None
    if left.kind != "input" or right.kind != "input":
        return None
    reader._index_deferred(occ)
    lnode, rnode = occ[left.pos], occ[right.pos]
    n, m = lnode.n, rnode.n
    assert n is not None and m is not None and lnode.ki is not None and rnode.ki is not None
    tensors: list[Any] = [None] * len(occ)
    tensors[left.pos] = CrossTensor(n * m, n, max(m, 1))
    tensors[right.pos] = CrossTensor(n * m, m, 1)
    return n * m, tensors, CrossKeyIndex(lnode.ki, rnode.ki)


def _numpy_join_keys(reader: Reading, rw: Rewrite, occ: list[Any]) -> np.ndarray | None:
    """The raw keys of an equi-join's output, matched in NumPy from one scan of each
    side (see :mod:`.._equijoin`); ``None`` when the operation is not such a join or
    Spark's own join is the cheaper way (too big a side, or a side it broadcasts while
    every source it reads already has its record index)."""
    if rw.group is not None or rw.sort or rw.semi is not None or rw.nondeterministic:
        return None
    if any(b.kind != "input" for b in rw.blocks):
        return None
    jvm = reader.jvm
    ej = find_equi_join(jvm, rw.plan)
    if ej is None or rw.join_node is None or jvm.ident(ej.node) != jvm.ident(rw.join_node):
        return None
    ids = [int(a.exprId().id()) for a in rw.keys]
    split = rw.join_left_blocks
    side_of = [0 if i < split else 1 for i in range(len(rw.blocks))]
    # a side that is a whole source not yet counted gets its index from its keys
    whole = [
        bool(node.deferred and node.ann is not None)
        and jvm.ident(ej.sides[side]) == jvm.ident(node.ann.plan)
        for node, side in ((occ[b.pos], s) for b, s in zip(rw.blocks, side_of))
    ]
    # both sides read one source: its keys appear twice in the output, which Spark
    # cannot read back by name, while each side read on its own is unambiguous
    shared = len(set(ids)) < len(ids)
    if not shared and not _numpy_cheaper(jvm, ej.sides, any(whole)):
        return None
    tables = []
    for side, (plan, keys) in enumerate(zip(ej.sides, ej.keys)):
        side_keys = [a for b, s in zip(rw.blocks, side_of) if s == side for a in b.attrs]
        names = [key_name("j") for _ in keys]
        items = [*side_keys, *(jvm.alias(k, n) for k, n in zip(keys, names))]
        table = read_whole(jvm.to_df(jvm.project(items, plan)), jvm.to_arrow, jvm.spark)
        if table.num_rows > _JOIN_MAX_SIDE:
            return None
        tables.append((table, names))
    (lt, ln), (rt, rn) = tables
    codes = key_codes([lt.column(n) for n in ln], [rt.column(n) for n in rn])
    pairs = join_pairs(*codes, *ej.keep)
    raw = []
    for b_i, (b, side) in enumerate(zip(rw.blocks, side_of)):
        table = tables[side][0]
        block = arrow_keys(table, [str(a.name()) for a in b.attrs])
        node = occ[b.pos]
        if whole[b_i] and node.deferred:
            # the side is the whole source in scan order: its keys are its index
            ki = ScanKeyIndex.from_keys(block[:, 0])
            if ki is not None:
                reader._set_index(node, ki)
        picked = np.full((len(pairs[side]), block.shape[1]), -1, dtype=np.int64)
        found = pairs[side] >= 0
        picked[found] = block[pairs[side][found]]
        raw.append(picked)
    reader._index_deferred(occ)
    return np.column_stack(raw) if raw else np.zeros((0, 0), np.int64)


def _numpy_cheaper(jvm: Jvm, sides: list[Any], counts_a_source: bool) -> bool:
    """Whether to match a join's keys in NumPy rather than read Spark's join output.

    Every side must be small enough to read into this process.  Then NumPy wins when
    Spark would shuffle every side (too big to broadcast: its own join sorts both), and
    also when a side is a source still to be counted: reading its keys gives its record
    index, which otherwise costs a Spark job of its own (two such jobs made a first
    capture of a broadcast join about twice as slow).
    """
    try:
        limit = jvm.broadcast_threshold()
        sizes = [_estimated_bytes(jvm, s) for s in sides]
    except Exception:  # noqa: BLE001 - no estimate: leave the join to Spark
        return False
    # Spark's "no estimate" (e.g. an RDD) is Long.MaxValue, and estimates above one
    # scale it down: sizes no real data has (see fits_in_numpy)
    if not all(size >= 2**60 or size <= _JOIN_MAX_BYTES for size in sizes):
        return False
    return counts_a_source or all(limit < 0 or size > limit for size in sizes)


def fits_in_numpy(jvm: Jvm, plan: Any) -> bool:
    """Whether Spark's size estimate of ``plan``'s result is small enough to read it
    into this process (or Spark has none: its rows are counted as they are read)."""
    try:
        size = _estimated_bytes(jvm, plan)
    except Exception:  # noqa: BLE001 - no estimate: leave it to Spark
        return False
    return size >= 2**60 or size <= _JOIN_MAX_BYTES


def _estimated_bytes(jvm: Jvm, plan: Any) -> int:
    """Spark's size estimate of ``plan``'s result (what its broadcast choice reads)."""
    stats = jvm.to_df(plan)._jdf.queryExecution().optimizedPlan().stats()
    return int(str(stats.sizeInBytes()))


def _join_maps(m: Mapping, join: Any) -> None:
    """The attribute maps of a Connect join of two inputs."""
    from pyspark.sql.connect import proto

    left, right = m.in_cols
    using = list(join.using_columns)
    kinds = proto.Join.JoinType
    semi = join.join_type in (kinds.JOIN_TYPE_LEFT_SEMI, kinds.JOIN_TYPE_LEFT_ANTI)
    low = {u.lower() for u in using}
    # a USING join puts the using columns first, then each side's others (a semi or
    # anti join: the left's only)
    layout: list[tuple[int, int] | None] = [
        (0, j) for j, c in enumerate(left) if c.lower() not in low
    ]
    if not semi:
        layout += [(1, j) for j, c in enumerate(right) if c.lower() not in low]
    head = []
    for u in using:
        found = [(s, j) for s, cols in enumerate(m.in_cols[:1] if semi else m.in_cols)
                 for j, c in enumerate(cols) if c.lower() == u.lower()]  # fmt: skip
        head.append(found)
    if head:
        if len(head) + len(layout) != len(m.out_cols):
            m.everything()
            return
        # a using column is the left key (inner, left), the right one (right outer) or
        # the left one where there is one, else the right (full outer): both
        takes = {kinds.JOIN_TYPE_RIGHT_OUTER: {1}, kinds.JOIN_TYPE_FULL_OUTER: {0, 1}}
        sides = takes.get(join.join_type, {0})
        for o, found in enumerate(head):
            for s, j in found:
                if s in sides:
                    m.contributing[s][o, j] = True
        blank: list[tuple[int, int] | None] = [None] * len(head)
        layout = blank + layout
    if len(layout) != len(m.out_cols):
        m.everything()
        return
    for o, at in enumerate(layout):
        if at is not None:
            m.contributing[at[0]][o, at[1]] = True
    if join.HasField("join_condition"):
        m.influence(join.join_condition)
    if using:
        m.influence(*[P.col(u) for u in using])
