"""``union`` / ``unionAll`` / ``unionByName``.

Record rule: the left block, then the right block (the paper's block-diagonal append);
each branch adds a literal branch number, and the key columns of the inputs it does not
read as typed nulls, so every output record carries one layout of keys.  Attribute
rule: each output column's values come from the same position of every branch.  Replay:
a union distributes over union.  Over Spark Connect: a ``set_op`` relation of union
all gives each side the other's keys as nulls and a column saying which side a record
comes from (``union`` distinct, ``intersect`` and ``except`` are opaque there; on a
classic session the last two are :mod:`.dedup`'s).

Examples
--------
>>> from tensprov_lab.capture.rules import rule_for
>>> rule_for("Union").same_output
True
"""

from __future__ import annotations

from typing import Any

from tensprov_lab.capture.plan import _proto as P
from tensprov_lab.capture.plan._connect import Keyed
from tensprov_lab.capture.plan._exprs import Lin
from tensprov_lab.capture.plan._keyed import Block, Unsupported, key_name, literals
from tensprov_lab.capture.rules._base import Keying, Mapping, Rule
from tensprov_lab.capture.rules._classic import PlanNode, Rewriting, Walked, Walking

__all__ = ["Union"]


class Union(Rule):
    nodes = ("Union",)
    relations = ("set_op",)
    drops_vanish = True
    methods = ("union", "unionAll", "unionByName")
    same_output = True

    def annotate(self, rw: Rewriting, node: Any, kids: list[Any], results: list[Walked]) -> Walked:
        if rw.info.n_branches:
            raise Unsupported("nested unions in one operation")
        jvm = rw.jvm
        if any(not b for _, b in results):
            raise Unsupported("a union with an untracked side")
        all_blocks = [b for _, bs in results for b in bs]
        projects = []
        for c, ((child, blocks), kid) in enumerate(zip(results, kids)):
            items: list[tuple[str, str | None, str]] = [(str(c), "bigint", key_name("b"))]
            for b in all_blocks:
                if not any(b is x for x in blocks):
                    items += [
                        ("NULL", str(a.dataType().catalogString()), key_name("n")) for a in b.attrs
                    ]
            lits = literals(jvm, items)
            it = iter(lits[1:])
            exprs = [*jvm.output(kid), lits[0]]
            for b in all_blocks:
                exprs += b.attrs if any(b is x for x in blocks) else [next(it) for _ in b.attrs]
            projects.append(jvm.project(exprs, child))
        new = jvm.copy(node, children=jvm.seq(projects))
        out = jvm.output(new)[len(jvm.output(kids[0])) :]
        rw.info.n_branches = len(kids)
        new_blocks = [Block("branch", -1, [out[0]], 1)]
        k = 1
        for b in all_blocks:
            new_blocks.append(Block(b.kind, b.pos, out[k : k + len(b.attrs)], b.width))
            k += len(b.attrs)
        return new, new_blocks

    def attributes(self, w: Walking, n: PlanNode) -> dict[int, Lin]:
        new = {}
        for j, a in enumerate(n.out_ids):
            parts = [n.envs[k].get(ids[j]) for k, ids in enumerate(n.kid_ids) if j < len(ids)]
            new[a] = Lin(
                frozenset().union(*(p.contrib for p in parts if p)),
                frozenset().union(*(p.infl for p in parts if p)),
            )
        return new

    # -- over Spark Connect --------------------------------------------------------------
    def keyed(self, a: Keying, rel: Any) -> Keyed:
        from pyspark.sql.connect import proto

        op = rel.set_op
        if op.set_op_type != proto.SetOperation.SetOpType.SET_OP_TYPE_UNION or not op.is_all:
            raise Unsupported("intersect, except and union distinct (traced on a classic session)")
        sides = [P.plan_id(op.left_input), P.plan_id(op.right_input)]
        new, (left, right) = a.kids(rel)
        keys = list(dict.fromkeys(left.keys + right.keys))
        tag = f"{P.KEY_PREFIX}u{P.plan_id(rel)}"
        for side, (name, kid) in enumerate([("left_input", left), ("right_input", right)]):
            getattr(new.set_op, name).CopyFrom(_union_side(a, kid, keys, tag, side))
        return Keyed(
            new,
            [tag, *keys],
            {**left.ids, **right.ids},
            left.monotone and right.monotone,
            tag=tag,
            sides=sides,
        )

    def maps(self, m: Mapping, rel: Any) -> None:
        op = rel.set_op
        if not all(P.plan_id(r) in m.ids for r in (op.left_input, op.right_input)):
            return m.everything()
        # a union of a DataFrame with itself has one input for both sides
        for side in {m.ids.index(P.plan_id(r)) for r in (op.left_input, op.right_input)}:  # type: ignore[arg-type]
            if op.by_name:
                m.identity(side)
            elif len(m.in_cols[side]) == len(m.out_cols):
                m.positional(side, range(len(m.out_cols)))
            else:
                m.everything()


def _union_side(a: Keying, kid: Keyed, keys: list[str], tag: str, side: int) -> Any:
    """One side of a Connect union: its own columns as they were, then every key of both
    sides (nulls for the other side's), then the side: the same layout on both, for a
    union by position and by name alike."""
    names = a.columns(kid.rel)
    temp = [c if c.startswith(P.KEY_PREFIX) else f"{P.KEY_PREFIX}c{i}" for i, c in
            enumerate(names)]  # fmt: skip
    renamed = P.wrap("to_df", kid.rel, column_names=temp)
    exprs = [P.alias(P.col(t), c) for t, c in zip(temp, names) if not c.startswith(P.KEY_PREFIX)]
    exprs += [P.col(k) if k in kid.keys else P.alias(P.null_long(), k) for k in keys]
    exprs.append(P.alias(P.literal(side), tag))
    return P.wrap("project", renamed, expressions=exprs)
