"""SQL statements: ``spark.sql(...)`` inside a tracked block, one operation per plan step.

A statement's analyzed plan reaches the DataFrames it reads through temp views: a view
made with ``df.createOrReplaceTempView("v")`` resolves to ``SubqueryAlias v`` over
``View`` over ``df``'s own plan (the very JVM object), so the DataFrames capture already
knows are found below the statement by identity, like :meth:`Tracker.register` finds
them below a DataFrame made by an untracked call.

The record-level rewrite traces one grouping (aggregate, distinct) per operation and
expects nothing but projections around it, so a statement such as::

    SELECT region, sum(x) FROM a JOIN b USING (k) WHERE x > 5 GROUP BY region

is *decomposed*: every main plan node (join, filter, aggregate, union, distinct, sort,
limit, window, generate ...) becomes one recorded operation named ``sql:<Node>``, with the
projections right above it and the aliases, views and hints right below it.  Each
intermediate result is a dataset of the graph (a DataFrame built from the sub-plan, whose
plan is that very sub-plan object, so the rewrite finds it by identity), and the last
operation's output is the DataFrame ``spark.sql`` returned.  Record lineage is then the
same as the equivalent DataFrame-API pipeline's, and column lineage comes from the plan
as always.

What the rewrite cannot trace becomes an opaque operation with a warning, as for the
DataFrame API.  A plan node with a subquery *expression* (``x > (SELECT avg(x) ...)``,
``IN (SELECT ...)``, ``EXISTS``) reads records outside its children: the subquery's
relations become extra inputs of that operation, which the rewrite cannot find in its
children, so the operation is opaque -- never a silently localized mask.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from tensprov_lab.capture.plan._nodes import Capturing as Tracker
from tensprov_lab.capture.plan._nodes import Node
from tensprov_lab.capture.rules import TRIVIAL
from tensprov_lab.capture.spark._jvm import Jvm

__all__ = ["FinishingNode", "readable", "record_plan", "record_statement", "session_class"]

JObject = Any

#: nodes merged into the operation of the main node right below them
_ABOVE = TRIVIAL | {"Project"}
#: a main node takes these children along when they come right below it: the two halves
#: of ``LIMIT``, and the expansion (plus its projection) of ``ROLLUP`` / ``CUBE``
_MERGE = {"GlobalLimit": ["LocalLimit"], "Aggregate": ["Expand", "Project"]}
#: roots that are not queries: nothing to record
_COMMANDS = {"CommandResult"}
_EXPR_ID = re.compile(r"#\d+L?(?![\w])")


def session_class(spark: Any) -> type:
    """The class whose ``sql`` method serves ``spark.sql`` (the classic SparkSession).

    >>> session_class(spark).__name__  # doctest: +SKIP
    'SparkSession'
    """
    for cls in type(spark).__mro__:
        if "sql" in vars(cls):
            return cls
    return type(spark)


class FinishingNode(Node):
    """A node whose capture is completed by ``finish(node)``.

    The tracker's capture assigns ``ds_id`` as its last step, after the dataset and its
    producing operation are in the store; ``finish`` then adds what only the caller knows
    (ML slots and model, the category of an ML stage, the user's plan of a statement
    captured from an inlined copy).  It runs once; its errors become warnings.
    """

    def __init__(
        self,
        *args: Any,
        finish: Callable[[Node], None] | None = None,
        tracker: Tracker | None = None,
        method: str | None = None,
        suffix: str = "",
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self._finish = finish
        self._tracker = tracker
        #: name of the operation making it (default: from its plan) and text appended to
        #: that operation's expression
        self.method = method
        self.suffix = suffix

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        if name != "ds_id" or value is None:
            return
        finish = self.__dict__.get("_finish")
        if finish is None:
            return
        object.__setattr__(self, "_finish", None)
        try:
            finish(self)
        except Exception as exc:  # extra detail must never lose the operation
            tracker = self.__dict__.get("_tracker")
            if tracker is not None:
                tracker._note(
                    f"could not complete the capture of {self.name or 'a dataset'}: {exc}"
                )


def readable(node: JObject) -> str:
    """One line for a plan node, without expression ids.

    >>> readable(plan)  # doctest: +SKIP
    'Aggregate [region], [region, sum(x) AS t]'
    """
    return _EXPR_ID.sub("", str(node.simpleString(200)))


def _inline_ctes(jvm: Jvm, plan: JObject) -> JObject:
    """``plan`` with every ``WITH`` relation inlined where it is referenced (Catalyst's
    own ``InlineCTE`` rule, always inlining); each reference gets its own copy."""
    opt = jvm.jvm.org.apache.spark.sql.catalyst.optimizer
    cls = jvm.jvm.java.lang.Class.forName("org.apache.spark.sql.catalyst.optimizer.InlineCTE")
    ctor = cls.getConstructors()[0]
    n = int(ctor.getParameterCount())
    companion = getattr(getattr(opt, "InlineCTE$"), "MODULE$")
    args = jvm.gateway.new_array(jvm.jvm.java.lang.Object, n)
    for i in range(n):  # the constructor's defaults, but alwaysInline = true
        args[i] = getattr(companion, f"apply$default${i + 1}")()
    args[0] = True
    return ctor.newInstance(args).apply(plan)


#: Catalyst's own rules that give a statement's joins their conditions, applied to the
#: analyzed plan before it is decomposed: a comma join (``FROM a, b WHERE a.k = b.k``)
#: is a join without a condition under a filter, whose step on its own would be the
#: cross product the statement never computes
#: (``BooleanSimplification`` first: it takes the conjuncts every branch of an ``OR``
#: shares out of it, TPC-H Q19's join key among them, which then become the join's)
_JOIN_RULES = (
    "BooleanSimplification$", "ReorderJoin$", "PushPredicateThroughNonJoin$",
    "PushPredicateThroughJoin$",
)  # fmt: skip


#: Catalyst's rules that turn subquery expressions into joins, applied once before
#: those: ``EXISTS`` / ``IN`` (and their ``NOT``) become semi and anti joins, a
#: correlated scalar subquery a left outer join with its aggregate; so each is a step
#: of its own with record lineage (an uncorrelated scalar subquery stays an expression:
#: its result is an input of the step that compares it, see ``context``)
_SUBQUERY_RULES = (
    "PullupCorrelatedPredicates$", "RewriteCorrelatedScalarSubquery$",
    "RewritePredicateSubquery$",
)  # fmt: skip


def _joins_with_conditions(jvm: Jvm, plan: JObject) -> JObject:
    """``plan`` with its subquery expressions made joins and each filter over inner
    joins pushed into them, as the optimizer does, when it has either (a statement
    with neither keeps its steps as written) (``ReorderJoin`` orders a multi-way
    comma join so that each join has a condition; ``PushPredicateThroughJoin`` makes a
    conjunct over both sides a join condition and one over one side a filter below it,
    repeated until nothing changes).  The same plan object when nothing applies."""
    opt = jvm.jvm.org.apache.spark.sql.catalyst.optimizer

    def pushed(plan: JObject) -> JObject:
        rules = [getattr(getattr(opt, name), "MODULE$") for name in _JOIN_RULES]
        for _ in range(8):
            before = plan
            for rule in rules:
                plan = rule.apply(plan)
            if plan.fastEquals(before):
                break
        return plan

    subqueries = _tree_pattern(jvm, "PLAN_EXPRESSION")
    if not _conditionless_join(jvm, plan) and not bool(plan.containsPattern(subqueries)):
        return plan  # the statement's steps as it is written
    # conditions into the joins first (a subquery rewritten to a join would sit between
    # a filter and the joins it belongs to), then the subqueries, then their conditions
    plan = pushed(plan)
    for _ in range(4):  # a subquery inside a subquery is rewritten once its outer one is
        if not bool(plan.containsPattern(subqueries)):
            break
        before = plan
        for name in _SUBQUERY_RULES:
            plan = getattr(getattr(opt, name), "MODULE$").apply(plan)
        plan = pushed(plan)
        if plan.fastEquals(before):
            break
    return _subquery_plans_rewritten(jvm, plan)


def _subquery_plans_rewritten(jvm: Jvm, plan: JObject) -> JObject:
    """``plan`` with the plan of each uncorrelated scalar subquery that a filter of it
    compares with rewritten as a statement's is (:func:`_joins_with_conditions`): the
    rules rewrite a plan's nodes, not the plans inside their expressions, and TPC-H
    Q11's ``HAVING`` compares with a comma join of its own, whose filter would
    otherwise run as the join Spark makes of it.  The same plan object when nothing
    changes."""

    scalar = _tree_pattern(jvm, "SCALAR_SUBQUERY")  # (a plan's bits hold its expressions')

    def same(new: list[JObject], old: list[JObject]) -> bool:
        return all(jvm.ident(a) == jvm.ident(b) for a, b in zip(new, old))

    def in_expression(expr: JObject) -> JObject:
        if not bool(expr.containsPattern(scalar)):
            return expr
        if jvm.cls(expr) == "ScalarSubquery" and not jvm.lst(expr.outerAttrs()):
            inner = expr.plan()
            new = _views_kept(jvm, inner, _joins_with_conditions(jvm, inner))
            return expr if jvm.ident(new) == jvm.ident(inner) else expr.withNewPlan(new)
        kids = jvm.lst(expr.children())
        new_kids = [in_expression(k) for k in kids]
        return expr if same(new_kids, kids) else expr.withNewChildren(jvm.seq(new_kids))

    def in_plan(node: JObject) -> JObject:
        if not bool(node.containsPattern(scalar)) or jvm.cls(node) == "View":
            return node
        kids = jvm.children(node)
        new_kids = [in_plan(k) for k in kids]
        if not same(new_kids, kids):
            node = node.withNewChildren(jvm.seq(new_kids))
        if jvm.cls(node) == "Filter":
            condition = in_expression(node.condition())
            if jvm.ident(condition) != jvm.ident(node.condition()):
                node = node.copy(condition, node.child())
        return node

    return in_plan(plan)


def _conditionless_join(jvm: Jvm, plan: JObject) -> bool:
    """Whether the statement (not the views it reads) has an inner or cross join
    without a condition: a comma join, or a cross join a filter may be over."""
    stack = [plan]
    while stack:
        node = stack.pop()
        cls = jvm.cls(node)
        if cls == "View":
            continue
        if cls == "Join" and not bool(node.condition().isDefined()):
            if str(node.joinType().toString()) in ("Inner", "Cross"):
                return True
        stack.extend(jvm.children(node))
    return False


def _views_kept(jvm: Jvm, before: JObject, after: JObject) -> JObject:
    """``after`` (``before`` rewritten by the optimizer's rules) with the plan below each
    view put back as it was: the rules rewrite the whole tree, and below a view is a
    DataFrame capture knows by the identity of its plan (a filter pushed below a sort
    there made the user's own steps unknown, recorded again as steps of the
    statement).  Nothing passes a view, so its plan is the same plan."""
    if jvm.ident(before) == jvm.ident(after):
        return after
    kept: dict[tuple[int, ...], JObject] = {}
    stack = [before]
    while stack:
        node = stack.pop()
        kids = jvm.children(node)
        if jvm.cls(node) == "View" and len(kids) == 1:
            kept[tuple(jvm.expr_ids(kids[0]))] = kids[0]
            continue
        stack.extend(kids)

    def restored(node: JObject) -> JObject:
        kids = jvm.children(node)
        if jvm.cls(node) == "View" and len(kids) == 1:
            old = kept.get(tuple(jvm.expr_ids(kids[0])))
            new = [old if old is not None else kids[0]]
        else:
            new = [restored(k) for k in kids]
        if all(jvm.ident(a) == jvm.ident(b) for a, b in zip(new, kids)):
            return node
        return node.withNewChildren(jvm.seq(new))

    return restored(after)


def _tree_pattern(jvm: Jvm, name: str) -> JObject:
    return getattr(
        getattr(jvm.jvm.org.apache.spark.sql.catalyst.trees, "TreePattern$"), "MODULE$"
    ).withName(name)


def _has_cte(jvm: Jvm, plan: JObject) -> bool:
    stack = [plan]
    while stack:
        node = stack.pop()
        if jvm.cls(node) in ("WithCTE", "CTERelationRef"):
            return True
        stack.extend(jvm.children(node))
    return False


class _Decomposer:
    """Splits one statement's plan into recorded operations (see the module docstring)."""

    def __init__(self, tracker: Tracker) -> None:
        self.tracker = tracker
        self.jvm = tracker.jvm
        #: boundary found for a subtree (by identity); None: not a boundary
        self.bounds: dict[int, Node | None] = {}
        #: boundaries met so far with the subtree they were found at (re-instanced copies
        #: of a relation used twice are matched against these)
        self.seen: list[tuple[Node, JObject]] = []
        self._utils = self.jvm.jvm.org.apache.spark.sql.catalyst.expressions.SubExprUtils

    # -- boundaries: known datasets and sources ---------------------------------------
    def boundary(self, plan: JObject, parent: JObject | None) -> Node | None:
        """The dataset ``plan`` already is: a known one, or a new source (a leaf, or the
        plan under a temp view with nothing known below it)."""
        jvm = self.jvm
        ident = jvm.ident(plan)
        if ident in self.bounds:
            return self.bounds[ident]
        node = self.tracker.nodes.get(ident)
        if node is None:
            leaf = not jvm.children(plan)
            view = parent is not None and jvm.cls(parent) == "View" and self._plain(plan)
            if leaf or view:
                node = self._reinstanced(plan)
                if node is not None and view:
                    # the user's DataFrame behind a view met after a copy of it (a
                    # subquery's, decomposed first) is that copy's dataset
                    self.tracker.nodes.setdefault(ident, node)
                node = node or self._source(plan)
        self.bounds[ident] = node
        if node is not None:
            self.seen.append((node, plan))
        return node

    def _plain(self, plan: JObject) -> bool:
        """Nothing known and no other view below: a DataFrame the user made outside
        tracking, which becomes a source as it would when passed to a DataFrame method."""
        stack = [plan]
        while stack:
            node = stack.pop()
            if self.jvm.ident(node) in self.tracker.nodes or self.jvm.cls(node) == "View":
                return False
            stack.extend(self.jvm.children(node))
        return True

    def _reinstanced(self, plan: JObject) -> Node | None:
        """A relation read twice (self-join, a CTE used twice) is re-instanced by the
        analyzer: same result, new expression ids.  It is the same dataset."""
        jvm = self.jvm
        cls, ids = jvm.cls(plan), jvm.expr_ids(plan)
        for node, other in self.seen:
            if jvm.cls(other) != cls:
                continue
            other_ids = jvm.expr_ids(other)
            if len(other_ids) == len(ids) and other_ids != ids and plan.sameResult(other):
                return node
        return None

    def _source(self, plan: JObject) -> Node:
        node = Node(df=self.jvm.to_df(plan), plan=plan, ident=self.jvm.ident(plan))
        return self.tracker.add_source(node)

    # -- operations ---------------------------------------------------------------------
    def dataset(
        self, plan: JObject, parent: JObject | None = None, out: Node | None = None
    ) -> Node:
        """The dataset node of ``plan``, recording the operations that make it.

        ``out`` is the prepared node of the statement's result (the user's DataFrame).
        """
        if out is None:
            found = self.boundary(plan, parent)
            if found is not None:
                return found
        members, below = self.segment(plan)
        inputs: list[Node] = []
        for kid, kid_parent in below:
            node = self.dataset(kid, kid_parent)
            if all(node is not n for n in inputs):
                inputs.append(node)
        extra, context = self.subquery_inputs(members, inputs)
        inputs += extra
        method, expression = self.describe(members)
        if out is None:
            out = Node(df=self.jvm.to_df(plan), plan=plan, ident=self.jvm.ident(plan))
        elif isinstance(out, FinishingNode):
            method = out.method or method
            expression += out.suffix
        out.context = context
        node = self.tracker.add_pending(method, inputs, out, expression)
        self.bounds[self.jvm.ident(plan)] = node
        return node

    def segment(self, top: JObject) -> tuple[list[JObject], list[tuple[JObject, JObject]]]:
        """The plan nodes of the operation whose output is ``top``, and the subtrees right
        below them (each with its parent), top first."""
        jvm = self.jvm
        members: list[JObject] = []
        node = top
        # projections, aliases, views and hints above the main node
        while True:
            members.append(node)
            kids = jvm.children(node)
            if jvm.cls(node) not in _ABOVE or len(kids) != 1:
                break
            if self.boundary(kids[0], node) is not None:
                break
            node = kids[0]
        for want in _MERGE.get(jvm.cls(node), []):
            kids = jvm.children(node)
            if len(kids) != 1 or jvm.cls(kids[0]) != want:
                break
            if self.boundary(kids[0], node) is not None:
                break
            node = kids[0]
            members.append(node)
        # aliases, views and hints right below it
        below: list[tuple[JObject, JObject]] = []
        for kid in jvm.children(node):
            parent = node
            while jvm.cls(kid) in TRIVIAL and self.boundary(kid, parent) is None:
                grand = jvm.children(kid)
                if len(grand) != 1:
                    break
                members.append(kid)
                parent, kid = kid, grand[0]
            below.append((kid, parent))
        return members, below

    def describe(self, members: list[JObject]) -> tuple[str, str]:
        """``sql:<main node>`` and the readable main nodes, in data-flow order."""
        main = [m for m in members if self.jvm.cls(m) not in _ABOVE]
        shown = main or [m for m in members if self.jvm.cls(m) == "Project"][-1:] or members[:1]
        flow = [m for m in members if self.jvm.cls(m) not in TRIVIAL] or shown
        key = shown[0] if main else shown[-1]
        return f"sql:{self.jvm.cls(key)}", " → ".join(readable(m) for m in reversed(flow))

    # -- subquery expressions -------------------------------------------------------------
    def subquery_inputs(
        self, members: list[JObject], inputs: list[Node]
    ) -> tuple[list[Node], list[Node]]:
        """Datasets read by subquery expressions of the operation's nodes, and those of
        them that are the value of an uncorrelated scalar subquery a filter compares
        (the operation's *context*: its one record decides which records pass, so every
        output record comes from it too)."""
        extra: list[Node] = []
        context: list[Node] = []
        for m in members:
            scalars = self._scalar_plans(m) if self.jvm.cls(m) == "Filter" else set()
            for sub in self.jvm.lst(m.subqueries()):
                parts = self._uncorrelated(sub)
                for part in parts:
                    node = self.dataset(part)
                    if any(node is n for n in [*inputs, *extra]):
                        node = self._copy(node)
                    extra.append(node)
                    if len(parts) == 1 and self.jvm.ident(sub) in scalars:
                        context.append(node)
        return extra, context

    def _scalar_plans(self, node: JObject) -> set[int]:
        """The plans of the scalar subqueries in ``node``'s expressions, by identity."""
        found: set[int] = set()
        stack = list(self.jvm.lst(node.expressions()))
        while stack:
            e = stack.pop()
            if self.jvm.cls(e) == "ScalarSubquery":
                found.add(self.jvm.ident(e.plan()))
            else:
                stack.extend(self.jvm.lst(e.children()))
        return found

    def _uncorrelated(self, plan: JObject) -> list[JObject]:
        """The largest subtrees of a subquery that do not refer to the outer query."""
        if not self._correlated(plan):
            return [plan]
        return [p for kid in self.jvm.children(plan) for p in self._uncorrelated(kid)]

    def _correlated(self, plan: JObject) -> bool:
        stack = [plan]
        while stack:
            node = stack.pop()
            if any(bool(self._utils.containsOuter(e)) for e in self.jvm.lst(node.expressions())):
                return True
            stack.extend(self.jvm.children(node))
        return False

    def _copy(self, node: Node) -> Node:
        """A dataset of its own for a relation a subquery reads that the operation also
        reads directly, so that the operation stays opaque rather than traced from its
        direct input alone."""
        plan = self.jvm.project(self.jvm.output(node.plan), node.plan)
        out = Node(df=self.jvm.to_df(plan), plan=plan, ident=self.jvm.ident(plan))
        return self.tracker.add_pending(
            "sql:subquery", [node], out, "the relation a subquery expression reads"
        )


def record_plan(
    tracker: Tracker,
    out: Any,
    *,
    method: str | None = None,
    suffix: str = "",
    finish: Callable[[Node], None] | None = None,
    inputs: list[Any] | None = None,
) -> Node | None:
    """Record the operations that make the DataFrame ``out`` from its plan.

    Parameters
    ----------
    tracker : Tracker
    out : DataFrame
        The result of a SQL statement (or of a stage that runs one, e.g. SQLTransformer).
    method : str, optional
        Name of the last operation (default ``sql:<its main node>``).
    suffix : str
        Appended to the last operation's expression (e.g. the statement).
    finish : callable, optional
        Run with the result's node once it is captured (see :class:`FinishingNode`).
    inputs : list of DataFrame, optional
        DataFrames the statement reads through views of its own (registered first, so
        that they are found below it).

    Returns
    -------
    Node or None
        The result's node; None for a statement that is not a query (a command) or reads
        nothing (a leaf).

    Examples
    --------
    >>> node = record_plan(tracker, spark.sql("SELECT * FROM v WHERE x > 5"))  # doctest: +SKIP
    >>> tracker.pending[-1].method  # doctest: +SKIP
    'sql:Filter'
    """
    jvm = tracker.jvm
    for df in inputs or []:
        tracker.register(df)
    plan = jvm.plan(out)
    ident = jvm.ident(plan)
    if ident in tracker.nodes:
        return tracker.nodes[ident]
    command = jvm.jvm.java.lang.Class.forName("org.apache.spark.sql.catalyst.plans.logical.Command")
    if jvm.cls(plan) in _COMMANDS or bool(command.isInstance(plan)) or not jvm.children(plan):
        return None
    user_plan = plan
    if _has_cte(jvm, plan):
        # the rewrite knows no CTE nodes: capture an inlined copy
        plan = _inline_ctes(jvm, plan)
    plan = _views_kept(jvm, plan, _joins_with_conditions(jvm, plan))
    if jvm.ident(plan) != ident:
        # then give the node the user's plan back, which later DataFrame calls on the
        # result contain

        def restore(node: Node, inner: Callable[[Node], None] | None = finish) -> None:
            node.plan = user_plan
            if inner is not None:
                inner(node)

        finish = restore
    node = FinishingNode(
        df=out, plan=plan, ident=ident, finish=finish, tracker=tracker, method=method,
        suffix=suffix,
    )  # fmt: skip
    return _Decomposer(tracker).dataset(plan, out=node)


def record_statement(tracker: Tracker, session: Any, args: tuple, kwargs: dict, out: Any) -> None:
    """Record ``out = spark.sql(statement, ...)`` (called by the wrapped ``sql``)."""
    from pyspark.sql import DataFrame

    if not isinstance(out, DataFrame):
        return
    if session is not tracker.spark and not session._jsparkSession.equals(
        tracker.spark._jsparkSession
    ):
        return  # another session: not this tracker's
    statement = args[0] if args else kwargs.get("sqlQuery", "")
    text = " ".join(str(statement).split())
    text = text if len(text) <= 120 else text[:117] + "..."
    try:
        record_plan(tracker, out, suffix=f"  [spark.sql: {text}]")
    except Exception as exc:
        # whatever went wrong, the statement still gets one (maybe opaque) operation
        tracker._note(f"spark.sql({text!r}) was not decomposed: {exc}")
        plan = tracker.jvm.plan(out)
        known = [n.df for n in tracker._known_below(plan)]
        if known and tracker.jvm.ident(plan) not in tracker.nodes:
            tracker.record_operation("sql", known, out, (text,))
