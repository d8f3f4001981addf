"""``union`` / ``unionAll`` / ``unionByName``.

Record rule: the left block, then the right block (the paper's block-diagonal append);
each branch adds a literal branch number, and the key columns of the inputs it does not
read as typed nulls, so every output record carries one layout of keys.  Attribute
rule: each output column's values come from the same position of every branch.  Replay:
a union distributes over union.

Examples
--------
>>> from tensprov_lab.capture.rules import rule_for
>>> rule_for("Union").same_output
True
"""

from __future__ import annotations

from typing import Any

from tensprov_lab.capture.plan._exprs import Lin
from tensprov_lab.capture.plan._keyed import Block, Unsupported, key_name, literals
from tensprov_lab.capture.rules._base import PlanNode, Rewriting, Rule, Walked, Walking

__all__ = ["Union"]


class Union(Rule):
    nodes = ("Union",)
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
