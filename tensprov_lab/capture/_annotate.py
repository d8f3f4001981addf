"""Annotated plans: the user's plan with hidden record-key columns carried through.

For an operation ``out = f(in_1, ..., in_n)`` the analyzed plan of ``out`` contains the
plans of its inputs as subtrees.  We replace each input subtree by the input's
*annotated* plan (same output attributes, same expression ids, plus key columns) and
let the keys pass through every node between the inputs and the root.  Because the
user's own expressions are kept as they are, the annotated plan computes exactly the
user's records, each tagged with the keys of the input records it comes from.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from tensprov_lab.capture._jvm import Jvm

__all__ = ["Annotated", "Block", "Rewrite", "Unsupported", "annotate_source", "rewrite"]

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
    semi: Semi | None = None
    #: the last (for a plan with one join at its top: the top) join rewritten, and how
    #: many of the output's blocks come from its left side
    join_node: JObject = None
    join_left_blocks: int = 0
    n_branches: int = 0
    contextual: bool = False
    nondeterministic: bool = False

    @property
    def keys(self) -> list[JObject]:
        return [a for b in self.blocks for a in b.attrs]

    @property
    def width(self) -> int:
        return sum(b.width for b in self.blocks)


_PASS = {
    "Filter",
    "GlobalLimit",
    "LocalLimit",
    "Sample",
    "Repartition",
    "RepartitionByExpression",
    "RebalancePartitions",
    "SubqueryAlias",
    "ResolvedHint",
    "View",
    "Offset",
    "CollectMetrics",
    "Window",
}
#: node kinds that never change which records exist, nor their order in our numbering
TRIVIAL = {
    "Repartition",
    "RepartitionByExpression",
    "RebalancePartitions",
    "ResolvedHint",
    "SubqueryAlias",
    "View",
    "CollectMetrics",
}
STABLE_LEAVES = {
    "LogicalRDD",
    "LocalRelation",
    "LogicalRelation",
    "Range",
    "DataSourceV2Relation",
    "HiveTableRelation",
    "OneRowRelation",
    "InMemoryRelation",
}
_STABLE_INNER = {"Project", "Filter", "SubqueryAlias", "View", "ResolvedHint", "Generate"}


def _literals(jvm: Jvm, items: list[tuple[str, str | None, str]]) -> list[JObject]:
    """Named literal expressions without references, one fresh expression id each.

    ``items`` are ``(sql literal, cast type or None, name)``.
    """
    from pyspark.sql import functions as F

    cols = []
    for lit, typ, name in items:
        c = F.expr(lit)
        cols.append((c.cast(typ) if typ else c).alias(name))
    return jvm.expressions_of(jvm.spark.range(1).select(*cols))


def plan_is_stable(jvm: Jvm, plan: JObject) -> bool:
    """Does re-executing ``plan`` give the same rows in the same order?"""
    stack = [plan]
    while stack:
        node = stack.pop()
        cls = jvm.cls(node)
        if cls not in STABLE_LEAVES and cls not in _STABLE_INNER:
            return False
        if not jvm.deterministic(node):
            return False
        stack.extend(jvm.children(node))
    return True


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
            group = jvm.copy(node, children=jvm.seq(kids[i : i + m]))
            if group.sameResult(q):
                kids = [*kids[:i], group, *kids[i + m :]]
            i += 1
    return kids


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
        self.info.nodes.append(cls)
        if not self.jvm.deterministic(node):
            self.info.nondeterministic = True
        handler = getattr(self, f"_on_{cls}", None)
        if handler is not None:
            return handler(node, kids, results)  # type: ignore[no-any-return]
        if cls in _PASS:
            if cls == "Window":
                self.info.contextual = True
            plan = node.withNewChildren(self.jvm.seq([p for p, _ in results]))
            return plan, results[0][1]
        raise Unsupported(f"plan node {cls} is not traced record by record")

    @staticmethod
    def _attrs(blocks: list[Block]) -> list[JObject]:
        return [a for b in blocks for a in b.attrs]

    def _single(self, results: list[tuple[JObject, list[Block]]]) -> tuple[JObject, list[Block]]:
        if len(results) != 1:
            raise Unsupported("expected one child")
        return results[0]

    def _on_Project(self, node: JObject, kids: list[JObject], results: list[Any]) -> Any:
        child, blocks = self._single(results)
        return self.jvm.reproject(node, self._attrs(blocks), child), blocks

    def _on_Sort(self, node: JObject, kids: list[JObject], results: list[Any]) -> Any:
        child, blocks = self._single(results)
        if not bool(getattr(node, "global")()):
            # sortWithinPartitions: our numbering ignores partitions, so nothing changes
            return node.withNewChildren(self.jvm.seq([child])), blocks
        from pyspark.sql import functions as F

        names = [str(a.name()) for a in self._attrs(blocks)]
        # break ties by input order so the numbering does not depend on partitioning
        tie = self.jvm.to_df(child).orderBy(*[F.col(n).asc_nulls_first() for n in names])
        extra = self.jvm.lst(tie._jdf.queryExecution().analyzed().order())
        user = self.jvm.lst(node.order())
        self.info.sort = True
        new = self.jvm.copy(node, order=self.jvm.seq([*user, *extra]), child=child)
        self.info.sort_node = new
        self.info.sort_exprs = [o.child() for o in user]
        return new, blocks

    def _group_plan(self, child: JObject, blocks: list[Block]) -> Any:
        """A representative member per group (flat key columns, nullable: a global
        aggregate over no rows has none) and the list of every member."""
        from pyspark.sql import functions as F

        names = [str(a.name()) for a in self._attrs(blocks)]
        members = key_name("m")
        order = F.struct(*names)
        reps = [
            (F.min(F.col(n)) if len(names) == 1 else F.min_by(F.col(n), order)).alias(key_name("g"))
            for n in names
        ]
        dummy = self.jvm.to_df(child).agg(*reps, F.collect_list(order).alias(members))
        agg = dummy._jdf.queryExecution().analyzed()
        exprs = self.jvm.lst(agg.aggregateExpressions())
        return agg, exprs[:-1], exprs[-1], members

    def _flat(self, grouping: list[JObject], child: JObject, blocks: list[Block]) -> Any:
        """Members next to their grouping values, if pandas groups those like Spark."""
        exact = {"integer", "long", "short", "byte", "string", "boolean", "date"}
        if any(str(g.dataType().typeName()) not in exact for g in grouping):
            return None, [], []
        names = [key_name("v") for _ in grouping]
        exprs = [self.jvm.alias(g, n) for g, n in zip(grouping, names)]
        keys = self._attrs(blocks)
        return self.jvm.project([*exprs, *keys], child), names, [str(k.name()) for k in keys]

    def _input_block(self, blocks: list[Block], what: str) -> Block:
        inputs = [b for b in blocks if b.kind == "input"]
        if len(inputs) != 1 or len(blocks) != 1:
            raise Unsupported(f"{what} over more than one input is not traced yet")
        return inputs[0]

    def _on_Aggregate(self, node: JObject, kids: list[JObject], results: list[Any]) -> Any:
        child, blocks = self._single(results)
        block = self._input_block(blocks, "an aggregate")
        if self.info.group is not None:
            raise Unsupported("two grouping steps in one operation")
        agg, reps, list_alias, members = self._group_plan(child, blocks)
        members_plan = self.jvm.copy(
            node, aggregateExpressions=self.jvm.seq([list_alias]), child=child
        )
        grouping = self.jvm.lst(node.groupingExpressions())
        # rollup/cube: one input record is in several groups, one per grouping set
        gid = [
            g
            for g in grouping
            if self.jvm.cls(g) == "AttributeReference" and str(g.name()) == "spark_grouping_id"
        ]
        new = self.jvm.copy(
            node,
            aggregateExpressions=self.jvm.seq(
                [*self.jvm.lst(node.aggregateExpressions()), *reps, *gid]
            ),
            child=child,
        )
        flat, gcols, kcols = self._flat(grouping, child, blocks)
        if gid and flat is None:
            raise Unsupported("grouping sets over values pandas cannot compare exactly")
        self.info.group = Group(
            "aggregate", members_plan, members, block.pos, flat, gcols, kcols,
            gid_col=gcols[grouping.index(gid[0])] if gid else None,
        )  # fmt: skip
        # not contextual: every member of a group is in the tensor, so replaying the
        # aggregate on a group's members recomputes its record (paper §III-E)
        out = [Block("input", block.pos, [r.toAttribute() for r in reps], block.width)]
        if gid:
            out.append(Block("gid", -1, gid, 1))
        return new, out

    def _dedup(
        self, node: JObject, keys: list[JObject], child: JObject, blocks: list[Block]
    ) -> Any:
        block = self._input_block(blocks, "dropDuplicates")
        if self.info.group is not None:
            raise Unsupported("two grouping steps in one operation")
        agg, reps, list_alias, members = self._group_plan(child, blocks)
        members_plan = self.jvm.copy(
            agg,
            groupingExpressions=self.jvm.seq(keys),
            aggregateExpressions=self.jvm.seq([list_alias]),
        )
        flat, gcols, kcols = self._flat(keys, child, blocks)
        self.info.group = Group("dedup", members_plan, members, block.pos, flat, gcols, kcols)
        # a template Deduplicate node (its constructor differs across Spark versions)
        template = self.jvm.to_df(child).dropDuplicates()._jdf.queryExecution().analyzed()
        new = self.jvm.copy(template, keys=self.jvm.seq(keys), child=child)
        return new, blocks

    def _on_Deduplicate(self, node: JObject, kids: list[JObject], results: list[Any]) -> Any:
        child, blocks = self._single(results)
        return self._dedup(node, self.jvm.lst(node.keys()), child, blocks)

    def _on_Distinct(self, node: JObject, kids: list[JObject], results: list[Any]) -> Any:
        child, blocks = self._single(results)
        return self._dedup(node, self.jvm.output(kids[0]), child, blocks)

    def _on_Join(self, node: JObject, kids: list[JObject], results: list[Any]) -> Any:
        (left, lb), (right, rb) = results
        if not lb or not rb:
            raise Unsupported("a join with an untracked side")
        new = node.withNewChildren(self.jvm.seq([left, right]))
        jt = str(node.joinType().toString())
        if jt in ("LeftSemi", "LeftAnti"):
            if self.info.semi is not None:
                raise Unsupported("two semi joins in one operation")
            pairs = None
            if jt == "LeftSemi":
                inner = getattr(self.jvm.jvm.org.apache.spark.sql.catalyst.plans, "Inner$")
                pairs = self.jvm.copy(new, joinType=getattr(inner, "MODULE$"))
            self.info.semi = Semi(pairs, lb, rb)
            return new, lb
        self.info.join_node, self.info.join_left_blocks = new, len(lb)
        return new, lb + rb

    def _on_Union(self, node: JObject, kids: list[JObject], results: list[Any]) -> Any:
        if self.info.n_branches:
            raise Unsupported("nested unions in one operation")
        jvm = self.jvm
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
            lits = _literals(jvm, items)
            it = iter(lits[1:])
            exprs = [*jvm.output(kid), lits[0]]
            for b in all_blocks:
                exprs += b.attrs if any(b is x for x in blocks) else [next(it) for _ in b.attrs]
            projects.append(jvm.project(exprs, child))
        new = jvm.copy(node, children=jvm.seq(projects))
        out = jvm.output(new)[len(jvm.output(kids[0])) :]
        self.info.n_branches = len(kids)
        new_blocks = [Block("branch", -1, [out[0]], 1)]
        k = 1
        for b in all_blocks:
            new_blocks.append(Block(b.kind, b.pos, out[k : k + len(b.attrs)], b.width))
            k += len(b.attrs)
        return new, new_blocks

    def _on_Generate(self, node: JObject, kids: list[JObject], results: list[Any]) -> Any:
        child, blocks = self._single(results)
        jvm = self.jvm
        gen = node.generator()
        kind = jvm.cls(gen)
        outputs = jvm.lst(node.generatorOutput())
        if kind == "PosExplode":
            # the user's position column, under a name of ours
            new = jvm.copy(node, child=child)
            alias = jvm.alias(outputs[0], key_name("p"))
            new = jvm.project([*jvm.output(new), alias], new)
            pos = alias.toAttribute()
        elif kind == "Explode":
            # the element's position makes exploded records unique and stable, unlike
            # any id computed after a shuffle
            expr = jvm._expr
            types = jvm.jvm.org.apache.spark.sql.types
            pos = expr.AttributeReference(
                key_name("p"),
                getattr(getattr(types, "IntegerType$"), "MODULE$"),
                True,
                types.Metadata.empty(),
                expr.NamedExpression.newExprId(),
                jvm.seq([]),
            )
            new = jvm.copy(
                node,
                generator=expr.PosExplode(gen.child()),
                generatorOutput=jvm.seq([pos, *outputs]),
                child=child,
            )
        else:
            raise Unsupported(f"generator {kind} is not traced record by record")
        return new, [*blocks, Block("genpos", -1, [pos], 1)]

    def _on_Expand(self, node: JObject, kids: list[JObject], results: list[Any]) -> Any:
        child, blocks = self._single(results)
        keys = self._attrs(blocks)
        projections = [
            self.jvm.seq([*self.jvm.lst(p), *keys]) for p in self.jvm.lst(node.projections())
        ]
        new = self.jvm.copy(
            node,
            projections=self.jvm.seq(projections),
            output=self.jvm.seq([*self.jvm.lst(node.output()), *keys]),
            child=child,
        )
        return new, blocks


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
