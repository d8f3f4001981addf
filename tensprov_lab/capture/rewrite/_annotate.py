"""Annotated plans: the user's plan with hidden record-key columns carried through.

For an operation ``out = f(in_1, ..., in_n)`` the analyzed plan of ``out`` contains the
plans of its inputs as subtrees.  We replace each input subtree by the input's
*annotated* plan (same output attributes, same expression ids, plus key columns) and
let the keys pass through every node between the inputs and the root.  Because the
user's own expressions are kept as they are, the annotated plan computes exactly the
user's records, each tagged with the keys of the input records it comes from.
"""

from __future__ import annotations

from typing import Any

from tensprov_lab.capture.plan._keyed import Annotated, Block, Rewrite, Unsupported, key_name
from tensprov_lab.capture.plan._stable import plan_is_stable, positional
from tensprov_lab.capture.rules import rule_for
from tensprov_lab.capture.spark._jvm import Jvm

__all__ = ["annotate_source", "find_input", "rewrite"]

JObject = Any


def annotate_source(jvm: Jvm, plan: JObject, pin: bool) -> Annotated:
    """Key a source by scan position; pin it first when its order is not stable."""
    # built in Catalyst's terms, as the analyzer resolves ``monotonically_increasing_id()
    # .alias(name)``: through a DataFrame it took ~40 round trips for a 15-column source
    mono = jvm.alias(jvm.expression("MonotonicallyIncreasingID")(), key_name("s"))
    aplan = jvm.project_with(plan.output(), [mono], plan)
    if pin:
        pinned = jvm.to_df(aplan).localCheckpoint(eager=True)
        aplan = jvm.plan(pinned)
    return Annotated(aplan, [aplan.output().last()], 1)


def find_input(
    jvm: Jvm,
    node: JObject,
    plans: list[JObject],
    idents: list[int],
    found: list[int],
    root: bool = False,
) -> tuple[int, str] | None:
    """Which input plan the subtree ``node`` is, and how: ``"same"`` (the very plan),
    ``"rebuilt"`` (the analyzer rebuilt it: same attributes, same result) or
    ``"reinstanced"`` (a relation used twice gets new expression ids: same result,
    columns matched by position).  ``found`` lists the inputs met so far."""  # fmt: skip
    ident = jvm.ident(node)
    for i, q_ident in enumerate(idents):
        if ident == q_ident:
            return i, "same"
    if root:
        # the operation itself (e.g. alias) may have the same result as its input
        return None
    node_ids = jvm.expr_ids(node)
    # inputs not found yet first: two inputs may have the same result (a no-op select of
    # a source), and every input of the call must be found
    for i in sorted(range(len(plans)), key=lambda j: j in found):
        q = plans[i]
        q_ids = jvm.expr_ids(q)
        if node_ids == q_ids and node.sameResult(q):
            return i, "rebuilt"
        if node_ids and node_ids != q_ids and node.sameResult(q):
            return i, "reinstanced"
    return None


def regroup_union(
    jvm: Jvm, node: JObject, kids: list[JObject], inputs: list[JObject]
) -> list[JObject]:
    """``a.union(b).union(c)`` flattens into one Union node: find the children that make
    up an input which is itself a union, and put them back under one node (so that the
    input is found as the input it is)."""
    for q in inputs:
        if jvm.cls(q) != "Union":
            continue
        m = len(jvm.children(q))
        i = 0
        while i + m <= len(kids) and len(kids) > m:
            group = _group_of(jvm, node, kids[i : i + m], q)
            if group is not None:
                kids = [*kids[:i], group, *kids[i + m :]]
            i += 1
    return kids


def _group_of(jvm: Jvm, node: JObject, kids: list[JObject], q: JObject) -> JObject | None:
    """The children ``kids`` of the flattened union ``node`` under one node, when they
    make up the input union ``q``; else None."""
    group = jvm.copy(node, children=jvm.seq(kids))
    if group.sameResult(q):
        return group
    # pyspark 3.5 re-instances the second use of a union (``u.union(u)``) by putting a
    # renaming projection over each of its children, which ``sameResult`` tells apart
    inner = [_renamed(jvm, k) for k in kids]
    if any(k is None for k in inner):
        return None
    bare = jvm.copy(node, children=jvm.seq(inner))
    if not bare.sameResult(q):
        return None
    # a rename changes no value: the group is ``q`` re-instanced, under the names (and
    # expression ids) the first of the children gave the union's output
    names = jvm.output(kids[0])
    exprs = [jvm.alias(a, str(s.name()), like=s) for a, s in zip(jvm.output(bare), names)]
    return jvm.project(exprs, bare)


def _renamed(jvm: Jvm, node: JObject) -> JObject | None:
    """The child of ``node`` when ``node`` is a projection that only renames its
    child's columns, in order; else None."""
    if jvm.cls(node) != "Project":
        return None
    child = node.child()
    exprs = jvm.lst(node.projectList())
    out = jvm.output(child)
    if len(exprs) != len(out):
        return None
    for e, a in zip(exprs, out):
        if jvm.cls(e) == "Alias":
            e = e.child()
        if jvm.cls(e) != "AttributeReference" or not e.exprId().equals(a.exprId()):
            return None
    return child


class _Rewriter:
    def __init__(self, jvm: Jvm, inputs: list[tuple[JObject, Annotated]]) -> None:
        self.jvm = jvm
        self.inputs = inputs
        self.idents = [jvm.ident(p) for p, _ in inputs]
        self.occurrences: list[int] = []
        self.info = Rewrite(plan=None, blocks=[], occurrences=self.occurrences)

    # -- finding the inputs ----------------------------------------------------------
    def _match(self, node: JObject, root: bool) -> tuple[JObject, list[Block]] | None:
        found = find_input(self.jvm, node, [p for p, _ in self.inputs], self.idents,
                           self.occurrences, root)  # fmt: skip
        if found is None:
            return None
        i, how = found
        ann = self.inputs[i][1]
        if how == "reinstanced":
            return self._reinstance(i, node, ann)
        return self._occurrence(i, ann.plan, ann.keys, ann.width)

    def _occurrence(
        self, i: int, plan: JObject, keys: list[JObject], width: int
    ) -> tuple[JObject, list[Block]]:
        pos = len(self.occurrences)
        self.occurrences.append(i)
        return plan, [Block("input", pos, keys, width)]

    def _reinstance(self, i: int, node: JObject, ann: Annotated) -> tuple[JObject, list[Block]]:
        jvm = self.jvm
        a_out = jvm.output(ann.plan)
        s_out = jvm.output(node)
        exprs = [
            q if q.exprId().equals(s.exprId()) else jvm.alias(q, str(s.name()), like=s)
            for q, s in zip(a_out, s_out)
        ]
        keys = [jvm.alias(k, key_name("r")) for k in ann.keys]
        plan = jvm.project(exprs + keys, ann.plan)
        return self._occurrence(i, plan, [k.toAttribute() for k in keys], ann.width)

    # -- the walk --------------------------------------------------------------------
    def walk(self, node: JObject, root: bool = False) -> tuple[JObject, list[Block]]:
        found = self._match(node, root)
        if found is not None:
            return found
        kids = self.jvm.children(node)
        cls = self.jvm.cls(node)
        if cls == "Union":
            kids = regroup_union(self.jvm, node, kids, [q for q, _ in self.inputs])
        results = [self.walk(k) for k in kids]
        if not any(b for _, b in results):
            return node, []
        rule = rule_for(cls)
        if rule is None:
            raise Unsupported(f"plan node {cls} is not traced record by record")
        self.info.nodes.append(cls)
        self.info.rules.append(rule)
        if not self.jvm.deterministic(node):
            if not positional(self.jvm, node):
                self.info.nondeterministic = True
            elif not plan_is_stable(self.jvm, kids[0]):
                # records numbered by position (pandas-on-Spark's __natural_order__):
                # the same numbers each time over a child of stable order only
                self.info.renumbers = True
        if rule.contextual:
            self.info.contextual = True
        blocker = rule.replay_blocker(self.jvm, node)
        if blocker is not None:
            self.info.replay_blockers.append(blocker)
        return rule.annotate(self, node, kids, results)


def rewrite(jvm: Jvm, plan: JObject, inputs: list[tuple[JObject, Annotated]]) -> Rewrite:
    """Annotate the plan of an operation's output given its inputs' annotations.

    Raises :class:`Unsupported` when a node on the way cannot carry keys exactly.
    """
    rw = _Rewriter(jvm, inputs)
    new, walked = rw.walk(plan, root=True)
    if not walked:
        raise Unsupported("none of the operation's inputs appears in its plan")
    # branch first, exploded position last: the raw key layout KeyIndex expects
    blocks = sorted(walked, key=lambda b: {"branch": 0, "input": 1, "genpos": 2, "gid": 2}[b.kind])
    keys = [a for b in blocks for a in b.attrs]
    if rw.info.sort_node is not None and jvm.ident(rw.info.sort_node) != jvm.ident(new):
        rw.info.sort_node = None  # not at the root: its order expressions may be out of scope
    # a projection at the root (select, withColumn) was rewritten to the output and then
    # the keys in this order already: a second projection would only deepen the plan
    # that every later operation on this dataset builds on
    same_order = all(a is b for a, b in zip(blocks, walked))  # `==` would ask the JVM
    if not (rw.info.nodes and rw.info.nodes[-1] == "Project" and same_order):
        new = jvm.project_with(plan.output(), keys, new)
    rw.info.plan = new
    rw.info.blocks = blocks
    return rw.info
