"""Small helpers for reading and building Catalyst plans through py4j.

Capture works on the *analyzed logical plan* of each DataFrame: it is exact (column
references are resolved to expression ids) and it is the same whatever the cluster.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import threading
from collections.abc import Callable
from importlib import resources
from typing import Any, NamedTuple

from tensprov_lab.capture.spark._batches import large_batches
from tensprov_lab.capture.spark._versions import (
    java_source,
    jvm_dataset_class,
    local_relation_args,
    product_names,
    scala_list,
    scala_wrap_array,
    to_arrow,
)

__all__ = ["Jvm"]

JObject = Any

_MISS = object()
#: facts remembered per py4j proxy before the memo starts afresh (each holds a proxy at
#: most, so the JVM objects behind them stay alive until then)
_MEMO_SIZE = 50_000
#: the compiled helpers of each py4j gateway (one JVM each), by ``id`` of the gateway
#: and class name
_HELPERS: dict[tuple[int, str], tuple[Any, Any]] = {}
_HELPER = "TensProvHelper"
_REPLAYER = "TensProvReplay"
_HELPER_LOCK = threading.Lock()


def schema_json(df: Any) -> str | None:
    """The JSON of ``df``'s schema, read in pieces by the helper of its JVM (pyspark's
    ``df.schema`` reads it in one answer, which stalls ~43 ms above 8 KB); None when no
    helper was compiled there yet."""
    helper = _compiled(df.sparkSession.sparkContext._gateway)
    if helper is _MISS or helper is None:
        return None
    return Jvm._whole(helper, str(helper.schemaJson(df._jdf)))


def _compiled(gateway: Any, name: str = _HELPER) -> Any:
    """The helper ``name`` compiled for ``gateway`` (None: it could not be), ``_MISS`` if
    none was tried yet."""
    known = _HELPERS.get((id(gateway), name))
    return known[1] if known is not None and known[0] is gateway else _MISS


class Shape(NamedTuple):
    """What a walk over a plan asks of each node (see :meth:`Jvm.shape`)."""

    ident: int
    cls: str
    #: the node's own expressions are deterministic (its children's are not included)
    deterministic: bool
    #: the ``ident`` of each child
    kids: tuple[int, ...]


class FileRelation(NamedTuple):
    """A relation of files (:meth:`Jvm.file_relation`)."""

    #: the file format's class, e.g. ``ParquetFileFormat``
    format: str
    partition_columns: int
    #: its options, keys in lower case
    options: dict[str, str]
    #: each output column's expression id, name and type (``simpleString``)
    columns: list[tuple[int, str, str]]
    #: the scheme, raw path and size of the relation's one file when a scan reads it
    #: whole (None: several files, or one Spark splits)
    whole: tuple[str, str, int] | None = None


class Jvm:
    """Plan helpers bound to one SparkSession."""

    def __init__(self, spark: Any) -> None:
        self.spark = spark
        self.jvm = spark._jvm
        self.gateway = spark.sparkContext._gateway
        self._list = scala_list(self.jvm)
        self._tokens = itertools.count(1)
        self._logical = self.jvm.org.apache.spark.sql.catalyst.plans.logical
        self._expr = self.jvm.org.apache.spark.sql.catalyst.expressions
        self._classes: dict[str, JObject] = {}
        self._memo: dict[tuple[str, str], Any] = {}
        #: a proxy of each plan whose shape was read, by ident: a child that is one of
        #: them is not asked for again (most are: an operation's input is its child)
        self._proxies: dict[int, JObject] = {}
        self._helper: Any = _MISS
        self._replayer: Any = _MISS
        self._seqs: dict[tuple[str, ...], JObject] = {}

    # -- the JVM-side helper (TensProvHelper.java) ---------------------------------
    @property
    def helper(self) -> JObject | None:
        """Capture's helper object in the JVM, compiled on first use; None when it cannot
        be compiled here (then every fact is read with plain py4j calls, more of them)."""
        if self._helper is _MISS:
            self._helper = self.once(_HELPER, None)
        return self._helper

    @property
    def replayer(self) -> JObject | None:
        """The JVM side of replays run in the driver (TensProvReplay.java, see
        ``replay._replay._local``), compiled on first use; None when it cannot be here."""
        if self._replayer is _MISS:
            helper = self.helper
            self._replayer = None if helper is None else self.once(_REPLAYER, helper)
        return self._replayer

    def once(self, name: str, parent: JObject | None) -> JObject | None:
        """The object of Java class ``name`` (``name.java`` beside this module) in this
        JVM, compiled on first use; None when it cannot be here.  One per JVM: py4j
        finds a method by its class's name, so another compilation's would be called."""
        with _HELPER_LOCK:  # the worker thread may ask while the block runs
            helper = _compiled(self.gateway, name)
            if helper is _MISS:
                helper = self._compile_helper(name, parent)
                _HELPERS[(id(self.gateway), name)] = (self.gateway, helper)
        return helper

    @property
    def helper_ready(self) -> JObject | None:
        """:attr:`helper` if it is compiled already, else None (without waiting for it:
        the worker thread may be compiling it)."""
        if self._helper is _MISS and _compiled(self.gateway) is _MISS:
            return None
        return self.helper

    @property
    def helper_known(self) -> bool:
        """Whether :attr:`helper` was looked for already (compiled, or found missing)."""
        return self._helper is not _MISS

    def _compile_helper(self, name: str, parent: JObject | None) -> JObject | None:
        """An instance of the class in ``name``.java, compiled with Janino; its classes
        see Spark's and, with ``parent``, those of that compiled object's class."""
        try:
            source = resources.files(__package__).joinpath(f"{name}.java")
            compiler = self.jvm.org.codehaus.janino.SimpleCompiler()
            loader = (
                self.jvm.org.apache.spark.util.Utils.getContextOrSparkClassLoader()
                if parent is None
                else parent.getClass().getClassLoader()
            )
            compiler.setParentClassLoader(loader)
            compiler.cook(java_source(source.read_text(encoding="utf-8")))
            cls = compiler.getClassLoader().loadClass(name)
            no_types = self.gateway.new_array(self.jvm.java.lang.Class, 0)
            no_args = self.gateway.new_array(self.jvm.java.lang.Object, 0)
            made = cls.getDeclaredConstructor(no_types).newInstance(no_args)
        except Exception:  # noqa: BLE001 - another Spark build, no Janino: the slow way
            return None
        if name == _HELPER:
            # (without it the helper names no object in a reply: one more round trip)
            with contextlib.suppress(Exception):
                made.useGateway(self.gateway.java_gateway_server)
        return made

    def project_info(self, project: JObject) -> tuple[list[int], list[list[int]]] | None:
        """A projection's output expression ids, and for each expression it adds to its
        child's output that expression's id followed by the ids it references; None
        without the helper or when an added expression holds a subquery."""
        if self.helper is None:
            return None
        # (once per proxy; a recorded call's reply has it already, see :meth:`recorded`)
        found: tuple[list[int], list[list[int]]] | None = self._memoized(
            "project_info", project, self._project_info
        )
        return found

    def _project_info(self, project: JObject) -> tuple[list[int], list[list[int]]] | None:
        helper = self.helper
        assert helper is not None, "asked only with the helper"
        reply = helper.projectInfo(project)
        return None if reply is None else _parse_project_info(self._whole(helper, str(reply)))

    def file_relation(self, node: JObject) -> FileRelation | None:
        """A relation of files as the helper reads it in one round trip (once per plan
        proxy: Spark lists a relation's files when it makes it); None without the helper
        or for another plan."""
        found: FileRelation | None = self._memoized("file_relation", node, self._file_relation)
        return found

    def _file_relation(self, node: JObject) -> FileRelation | None:
        helper = self.helper
        if helper is None:
            return None
        reply = helper.fileRelation(node)
        if reply is None:
            return None
        fields = _fields(self._whole(helper, str(reply)))
        n = int(fields[3])
        options = {fields[4 + 2 * i].lower(): fields[5 + 2 * i] for i in range(n)}
        rest = fields[4 + 2 * n :]
        columns = [(int(rest[i]), rest[i + 1], rest[i + 2]) for i in range(0, len(rest), 3)]
        whole = None
        if fields[2]:
            scheme, path, size = fields[2].split("\t")
            whole = (scheme, path, int(size))
        return FileRelation(fields[0], int(fields[1]), options, columns, whole)

    @staticmethod
    def _whole(helper: JObject, reply: str) -> str:
        """The text of a helper's reply, asking for the pieces after the first."""
        parts = []
        while True:
            token, _, text = reply.partition(" ")
            parts.append(text)
            if token == "0":
                return "".join(parts)
            reply = str(helper.more(int(token)))

    def to_json(self, node: JObject) -> str:
        """``node.toJSON()``; through the helper in pieces, which is much faster for
        a long text (see TensProvHelper.java)."""
        helper = self.helper
        if helper is None:
            return str(node.toJSON())
        return self._whole(helper, str(helper.json(node)))

    # -- constants (looked up once: each costs py4j round trips) -------------------
    @functools.cached_property
    def empty(self) -> JObject:
        """An empty Scala ``List``."""
        return self._list(self.jvm.java.util.ArrayList())

    def logical(self, name: str) -> JObject:
        """The Catalyst logical plan class ``name`` (looked up once: each lookup is a
        py4j round trip)."""
        return self._class(self._logical, name)

    def expression(self, name: str) -> JObject:
        """The Catalyst expression class ``name`` (looked up once)."""
        return self._class(self._expr, name)

    def _class(self, package: JObject, name: str) -> JObject:
        key = f"{package}.{name}"
        cls = self._classes.get(key)
        if cls is None:
            cls = self._classes[key] = getattr(package, name)
        return cls

    @functools.cached_property
    def none(self) -> JObject:
        """Scala's ``None``."""
        return self.jvm.scala.Option.apply(None)

    @functools.cached_property
    def plan_expression(self) -> JObject:
        """Catalyst's tree pattern of expressions that hold a plan (subqueries)."""
        return self.jvm.org.apache.spark.sql.catalyst.trees.TreePattern.PLAN_EXPRESSION()

    @functools.cached_property
    def python_udf(self) -> JObject:
        """Catalyst's tree pattern of Python UDF calls.  (Made once: each step of
        ``jvm.org.apache...`` is a py4j round trip.)"""
        return self.jvm.org.apache.spark.sql.catalyst.trees.TreePattern.PYTHON_UDF()

    @functools.cached_property
    def equi_join_keys(self) -> JObject:
        """Catalyst's ``ExtractEquiJoinKeys`` pattern."""
        planning = self.jvm.org.apache.spark.sql.catalyst.planning
        return getattr(getattr(planning, "ExtractEquiJoinKeys$"), "MODULE$")

    @functools.cached_property
    def no_columns(self) -> JObject:
        """An empty ``LocalRelation`` without columns, made once: a plan over it is
        written into JSON in half the time it takes over a new one (0.6 against 1.2 ms
        for a one-column projection, measured)."""
        return self.empty_relation(self.empty)

    def empty_relation(self, attrs: JObject) -> JObject:
        """A ``LocalRelation`` with output ``attrs`` and no rows."""
        return self.logical("LocalRelation")(*local_relation_args(attrs, self.empty, self.none))

    # -- collections -------------------------------------------------------------
    def seq(self, items: list[JObject]) -> JObject:
        items = list(items)
        if len(items) > 4:
            return self._list(items)
        # prepended one by one: a call each, where converting a Python list costs a
        # call per element plus three
        out = self.empty
        for item in reversed(items):
            out = getattr(out, "$colon$colon")(item)
        return out

    def lst(self, seq: JObject) -> list[JObject]:
        size = int(seq.size())
        if size > _SHORT:
            # indexed access: apply(i) on a long List walks it, and iterating a
            # converted Java list ends in a py4j exception round trip
            seq = seq.toIndexedSeq()
        return [seq.apply(i) for i in range(size)]

    # -- plans -------------------------------------------------------------------
    def plan(self, df: Any) -> JObject:
        """The analyzed plan of ``df``: one proxy per DataFrame, so the facts asked of it
        are asked once."""
        return self._memoized("plan", df._jdf, lambda jdf: jdf.logicalPlan())

    def _memoized(self, kind: str, obj: JObject, compute: Any) -> Any:
        """``compute(obj)``, once per proxy: a py4j proxy names one JVM object for good
        (its id is never given to another), and the facts asked here never change for
        that object (plans and expressions are immutable)."""
        target = getattr(obj, "_target_id", None)
        if target is None:
            return compute(obj)
        key = (kind, target)
        value = self._memo.get(key, _MISS)
        if value is _MISS:
            if len(self._memo) >= _MEMO_SIZE:
                self._memo.clear()
                self._proxies.clear()
            value = self._memo[key] = compute(obj)
        return value

    def fact(self, kind: str, obj: JObject, compute: Callable[[JObject], Any]) -> Any:
        """``compute(obj)``, asked once per JVM object (plans and expressions never change):
        for facts other modules derive from a plan node."""
        return self._memoized(kind, obj, compute)

    def forget_facts(self) -> None:
        """Drop every fact and proxy remembered so far: the JVM objects behind them (plans
        of forgotten runs) can then be collected.  Facts asked again are read anew and
        are the same; idents do not change."""
        self._memo.clear()
        self._proxies.clear()
        self._seqs.clear()

    def ident(self, obj: JObject) -> int:
        """A number for the JVM object ``obj`` itself (not its value), unique for the life
        of this ``Jvm``: two proxies of one object get the same number, two equal but
        distinct plans different ones.

        ``System.identityHashCode`` would be one call too, but it has 31 bits and is not
        unique: with thousands of live plans in a long session two would collide and a
        lookup would return the provenance of another dataset.  So each object gets
        the next number of a counter, kept in a JVM map that compares keys by reference
        and holds them weakly (a plan nobody uses any more is not kept alive).  A proxy
        asked again gets its number without a round trip.
        """
        return int(self._memoized("ident", obj, self._number))

    def _number(self, obj: JObject) -> int:
        token = next(self._tokens)
        known = self._numbers.putIfAbsent(obj, token)
        return token if known is None else int(known)

    @functools.cached_property
    def _numbers(self) -> JObject:
        try:
            # Guava ships with Spark; weak keys are compared by reference
            return self.jvm.com.google.common.collect.MapMaker().weakKeys().makeMap()
        except Exception:  # noqa: BLE001 - a Spark build without Guava
            # by reference too; holds the plans the tracker has seen, which it mostly
            # keeps alive anyway
            util = self.jvm.java.util
            return util.Collections.synchronizedMap(util.IdentityHashMap())

    def inner_join(self, node: JObject) -> tuple[JObject, JObject] | None:
        """``(join type, condition)`` of ``node`` if it is an inner ``Join``, else None."""
        return self._memoized("inner", node, self._inner_join)  # type: ignore[no-any-return]

    def _inner_join(self, node: JObject) -> tuple[JObject, JObject] | None:
        if self.cls(node) != "Join":
            return None
        how = node.joinType()
        return (how, node.condition()) if str(how) == "Inner" else None

    def replicated(self, inner: tuple[JObject, JObject], left: JObject, right: JObject) -> JObject:
        """The inner join ``inner`` (see ``inner_join``) of ``left`` and ``right``,
        hinted to pair its sides in place (``CartesianProduct`` with its condition): no
        shuffle, hence no stage of its own, which is what a join of a few records
        needs."""
        how, condition = inner
        return self.logical("Join")(left, right, how, condition, self._replicate_hint)

    @functools.cached_property
    def _replicate_hint(self) -> JObject:
        strategy = getattr(getattr(self._logical, "SHUFFLE_REPLICATE_NL$"), "MODULE$")
        info = self._logical.HintInfo(self.jvm.scala.Option.apply(strategy))
        return self._logical.JoinHint(self.none, self.jvm.scala.Option.apply(info))

    def single_partition(self, plan: JObject) -> JObject:
        """``plan`` read as one partition without a shuffle (``coalesce(1)``)."""
        return self.logical("Repartition")(1, False, plan)

    def filter_sql(self, text: str, child: JObject) -> JObject:
        """``Filter(text, child)``, analysed on its own: resolved before it joins a larger
        plan, whose own analysis would otherwise rename the attributes of a relation
        that occurs twice (a self-union) and break the references above it."""
        condition = self._parser.parseExpression(text)
        return self._analyzer.execute(self.logical("Filter")(condition, child))

    def keys_filter(self, key: JObject, values: list[int], child: JObject) -> JObject:
        """``Filter(key IN (values), child)`` for a resolved ``bigint`` attribute ``key``
        of ``child`` and integer ``values``, built resolved: analysing an ``IN`` list of
        a hundred values costs about 15 ms.

        From ``HASHED`` values on, they are also tested as a hash set first.  The
        in-memory scan skips cache batches only with the ``IN`` list, whose test of a
        record compares it with every value; the hash set decides the records of the
        batches it reads in one lookup, and the ``IN`` list then sees only the few that
        pass.
        """
        listed = ", ".join(f"{int(v)}L" for v in values)
        # parsed, not analysed: the arguments of the unresolved array() are bigint
        # literals already
        literals = self._parser.parseExpression(f"array({listed})").arguments()
        condition = self.expression("In")(key, literals)
        if len(values) >= self.HASHED:
            array = self.expression("CreateArray")(literals, False).eval(None)
            hashed = self.expression("InSet")(key, array.toSeq(self._long).toSet())
            condition = self.expression("And")(hashed, condition)
        return self.logical("Filter")(condition, child)

    #: fewest values ``keys_filter`` also tests as a hash set
    HASHED = 16

    def is_long(self, attr: JObject) -> bool:
        """Whether the attribute ``attr`` is of type ``bigint``."""
        return bool(self._memoized("long", attr, lambda a: str(a.dataType()) == "LongType"))

    @functools.cached_property
    def _long(self) -> JObject:
        return getattr(getattr(self.jvm.org.apache.spark.sql.types, "LongType$"), "MODULE$")

    @functools.cached_property
    def _parser(self) -> JObject:
        return self._state.sqlParser()

    @functools.cached_property
    def _analyzer(self) -> JObject:
        return self._state.analyzer()

    @functools.cached_property
    def _state(self) -> JObject:
        return self.spark._jsparkSession.sessionState()

    def broadcast_threshold(self) -> int:
        """``spark.sql.autoBroadcastJoinThreshold`` in bytes (-1: never broadcast)."""
        return int(self._state.conf().autoBroadcastJoinThreshold())

    def cls(self, obj: JObject) -> str:
        return str(self._memoized("cls", obj, _simple_name))

    def shape(self, node: JObject) -> Shape:
        """The ident, class name and deterministic flag of the plan node ``node`` and the
        idents of its children: one round trip with the helper, where asking for them
        one by one takes about seven."""
        shape: Shape = self._memoized("shape", node, self._shape)
        return shape

    def _shape(self, node: JObject) -> Shape:
        helper = self.helper
        if helper is None:
            kids = tuple(self.ident(k) for k in self.children(node))
            return Shape(self.ident(node), self.cls(node), self.deterministic(node), kids)
        return self._remember_shape(node, str(helper.shape(node, self._numbers)))

    def _remember_shape(self, node: JObject, reply: str) -> Shape:
        """The :class:`Shape` in the helper's ``reply`` for ``node``, remembered."""
        head, _, cls = reply.partition("\t")
        ident, det, *numbers = (int(x) for x in head.split())
        target = node._target_id
        shape = Shape(ident, cls, bool(det), tuple(numbers))
        if len(self._memo) >= _MEMO_SIZE:
            self._memo.clear()
            self._proxies.clear()
        # asked again by these names: answered from the same reply
        self._memo[("shape", target)] = shape
        self._memo[("ident", target)] = ident
        self._memo[("cls", target)] = cls
        self._proxies[ident] = node
        return shape

    def recorded(self, df: Any) -> tuple[JObject, int] | None:
        """The plan of ``df``, a DataFrame a tracked call returned, and its ident, in one
        round trip with the helper compiled: the plan's proxy (made from the id the
        helper puts it under in py4j's table), shape and columns and, for a projection,
        :meth:`project_info`, which the block's end then asks for from memory.  Never
        waits for the helper: called while the user's code runs.  None for a DataFrame
        whose plan is not resolved (built to be part of another's expression: a
        subquery with outer references), which is no dataset of its own."""
        from py4j.java_gateway import JavaObject

        helper = self.helper_ready
        jdf = df._jdf
        key = ("plan", str(getattr(jdf, "_target_id", "")))
        if helper is None or not key[1] or key in self._memo:
            if not self.resolved(df):
                return None
            plan = self.plan(df)
            return plan, self.plan_ident(plan)
        answer = helper.recorded(jdf, self._numbers)
        if answer is None:
            return None
        handed, shape, info, catalog, text, *names = _fields(self._whole(helper, str(answer)))
        # py4j makes the same proxy of an id it returns (its finalizer frees the id)
        plan = JavaObject(handed, self.gateway._gateway_client) if handed else jdf.logicalPlan()
        facts = self._remember_shape(plan, shape)
        target = plan._target_id
        self._memo[key] = plan
        self._memo[("resolved", target)] = True  # (the helper answers for resolved plans)
        if info:
            self._memo[("project_info", target)] = (
                None if info == "-" else _parse_project_info(info)
            )
        self._memo[("columns", target)] = self._read_columns(catalog, text, names, df)
        return plan, facts.ident

    def resolved(self, df: Any) -> bool:
        """Whether ``df``'s plan is resolved (not: part of another's expression, e.g. a
        table function of outer references, whose schema Spark fails and logs)."""
        return bool(self._memoized("resolved", self.plan(df), lambda p: bool(p.resolved())))

    def plan_ident(self, plan: JObject) -> int:
        """``ident(plan)``; when the helper is compiled already, asked with the plan's
        :meth:`shape` in the same one round trip (a capture asks for it later).  Never
        waits for the helper: called while the user's code runs."""
        if self.helper_ready is not None:
            return self.shape(plan).ident
        return self.ident(plan)

    def children(self, node: JObject) -> list[JObject]:
        return list(self._memoized("children", node, self._children))

    def _children(self, node: JObject) -> list[JObject]:
        # not waiting for the helper: asked while the user's code runs too
        helper = self.helper_ready
        if helper is None or getattr(node, "_target_id", None) is None:
            return self.lst(node.children())
        kids = []
        for i, ident in enumerate(self.shape(node).kids):
            kid = self._proxies.get(ident)
            if kid is None:
                kid = helper.child(node, i)
                self._memo[("ident", kid._target_id)] = ident
            kids.append(kid)
        return kids

    def output(self, node: JObject) -> list[JObject]:
        return self.lst(node.output())

    def expr_ids(self, node: JObject) -> list[int]:
        """A plan's output expression ids (one round trip with the helper)."""
        helper = self.helper
        if helper is None:
            return [int(a.exprId().id()) for a in self.output(node)]
        return [int(x) for x in self._whole(helper, str(helper.outputIds(node))).split()]

    def to_df(self, plan: JObject, spark: Any = None) -> Any:
        """A DataFrame of ``plan`` in ``spark`` (default: the tracked session)."""
        from pyspark.sql import DataFrame

        spark = self.spark if spark is None else spark
        jds = self._dataset.ofRows(spark._jsparkSession, plan)
        return DataFrame(jds, spark)

    def to_arrow(self, df: Any) -> Any:
        """``df.toArrow()`` in large batches, the session's setting restored after:
        Spark's default of 10,000 records per batch makes a 5M-row read 500 batches,
        whose per-batch cost is a third of the read (0.49 s -> 0.35 s).  A plan running
        Python UDFs keeps the session's batches (a pandas UDF sees its input in them)."""
        if self.runs_python(df):
            return to_arrow(df)
        with self.large_batches():
            return to_arrow(df)

    def runs_python(self, df: Any) -> bool:
        """Whether ``df``'s plan runs Python UDFs (True when that cannot be read)."""
        try:
            return bool(df._jdf.queryExecution().analyzed().containsPattern(self.python_udf))
        except Exception:  # noqa: BLE001 - another Spark build: assume so
            return True

    def large_batches(self) -> Any:
        """Reads inside take Arrow batches of a million records (see :mod:`._batches`)."""
        return large_batches(self.spark)

    @functools.cached_property
    def _dataset(self) -> JObject:
        return functools.reduce(getattr, jvm_dataset_class().split("."), self.jvm)

    def copy(self, node: JObject, **replace: JObject) -> JObject:
        """``node`` with some constructor arguments replaced (by position name)."""
        n = node.productArity()
        args = self.gateway.new_array(self.jvm.java.lang.Object, n)
        names = product_names(node, n)
        for i in range(n):
            args[i] = replace[names[i]] if names[i] in replace else node.productElement(i)
        unknown = set(replace) - set(names)
        if unknown:
            raise KeyError(f"{self.cls(node)} has no argument {sorted(unknown)}")
        return node.makeCopy(args)

    def union(self, children: list[JObject]) -> JObject:
        """``Union`` of plans with the same output types, by position (the first
        child's attributes name the output)."""
        return self.logical("Union")(self.seq(children), False, False)

    def project(self, exprs: list[JObject], child: JObject) -> JObject:
        return self.logical("Project")(self.seq(exprs), child)

    def project_with(self, exprs: JObject, extra: list[JObject], child: JObject) -> JObject:
        """``Project(exprs ++ extra, child)`` for a Scala ``exprs`` sequence, joined in the
        JVM: moving a wide projection's expressions to Python and back costs two py4j
        round trips per column."""
        # `:::` (prefix ::: list) takes one argument in Scala 2.12 and 2.13 alike
        joined = getattr(self.seq(extra), "$colon$colon$colon")(exprs.toList())
        return self.logical("Project")(joined, child)

    def reproject(self, project: JObject, extra: list[JObject], child: JObject) -> JObject:
        """The projection ``project`` over ``child``, passing ``extra`` on after its own
        expressions (one round trip with the helper)."""
        helper = self.helper
        if helper is None:
            return self.project_with(project.projectList(), extra, child)
        return helper.projectWith(project, self._same_seq(extra), child)

    def _same_seq(self, items: list[JObject]) -> JObject:
        """``seq(items)``, made once for the same objects: a chain of projections passes
        the same key columns on at every step."""
        key = tuple(str(getattr(i, "_target_id", "")) for i in items)
        if "" in key:
            return self.seq(items)
        seq = self._seqs.get(key)
        if seq is None:
            if len(self._seqs) >= _MEMO_SIZE:
                self._seqs.clear()
            seq = self._seqs[key] = self.seq(items)
        return seq

    def alias(self, expr: JObject, name: str, like: JObject | None = None) -> JObject:
        """``expr AS name``; with ``like`` (an attribute) reuse its expression id."""
        empty = self.empty
        if like is None:
            exprid = self._expr.NamedExpression.newExprId()
            qualifier = empty
        else:
            exprid, qualifier = like.exprId(), like.qualifier()
        return self._expr.Alias(expr, name, exprid, qualifier, self.none, empty)

    def expressions_of(self, df: Any) -> list[JObject]:
        """The named expressions of a ``select`` made with the DataFrame API."""
        plan = df._jdf.queryExecution().analyzed()
        return self.lst(plan.projectList())

    def deterministic(self, node: JObject) -> bool:
        """Whether every expression of the plan node ``node`` is deterministic, in one
        round trip: an expression is deterministic when all its children are, so we ask
        a (never evaluated) ``Coalesce`` holding them all."""
        if self.helper_ready is not None and getattr(node, "_target_id", None) is not None:
            return self.shape(node).deterministic
        if node.deterministic():
            # the node and its whole subtree: one round trip for the common case
            return True
        return bool(self.expression("Coalesce")(node.expressions()).deterministic())

    def columns(self, df: Any) -> tuple[list[str], list[str]]:
        """Column names and type strings (pyspark's ``simpleString``) of ``df``.

        pyspark reads a schema as JSON, which Spark writes at about 0.4 ms a column: on
        a wide pipeline (Census one-hot encodes into 104 columns, one ``withColumn``
        at a time) that was a fifth of the capture.  The names (exact, joined in the
        JVM) and the schema's ``catalogString`` are read instead; a schema they cannot
        spell unambiguously (user-defined types, structs, whose field names it does not
        quote) is read as JSON.
        """
        plan = self._memo.get(("plan", getattr(df._jdf, "_target_id", "")))
        known = self._memo.get(("columns", getattr(plan, "_target_id", "")))
        if known is not None:  # read when the call that made df was recorded
            return list(known[0]), list(known[1])
        helper = self.helper
        if helper is not None:
            catalog, text, *names = _fields(self._whole(helper, str(helper.columns(df._jdf))))
        else:
            schema = df._jdf.schema()
            names = str(self._join_names(schema)).split("\0")
            catalog, text = str(schema.catalogString()), str(schema)
        read = self._read_columns(catalog, text, names, df)
        return list(read[0]), list(read[1])

    @staticmethod
    def _read_columns(
        catalog: str, text: str, names: list[str], df: Any
    ) -> tuple[tuple[str, ...], tuple[str, ...]]:
        types = _split_types(catalog, names)
        # nested field names are not quoted in a catalog string: with a struct type
        # a split could be wrong, not only impossible
        if types is None or any("struct<" in t for t in types) or _maybe_udt(text):
            fields = df.schema.fields
            return tuple(f.name for f in fields), tuple(f.dataType.simpleString() for f in fields)
        return tuple(names), tuple(types)

    def _join_names(self, schema: JObject) -> JObject:
        return self._wrap_array(schema.fieldNames()).mkString("\0")

    @functools.cached_property
    def _wrap_array(self) -> JObject:
        # the member itself: looking a static method up on a class is a round trip
        return scala_wrap_array(self.jvm)

    def tree_string(self, node: JObject) -> str:
        return str(node.simpleString(200))


#: longest sequence ``Jvm.lst`` reads by position without converting it first
_SHORT = 8


def _fields(text: str) -> list[str]:
    """Split the helper's ``length:text`` fields.

    >>> _fields("3:a:b0:1:c")
    ['a:b', '', 'c']
    """
    out, pos = [], 0
    while pos < len(text):
        colon = text.index(":", pos)
        size = int(text[pos:colon])
        out.append(text[colon + 1 : colon + 1 + size])
        pos = colon + 1 + size
    return out


def _parse_project_info(text: str) -> tuple[list[int], list[list[int]]]:
    lines = text.split("\n")
    out = [int(x) for x in lines[0].split()]
    return out, [[int(x) for x in line.split()] for line in lines[1:]]


def _simple_name(obj: JObject) -> str:
    return str(obj.getClass().getSimpleName())


def _maybe_udt(text: str) -> bool:
    """Whether a schema's ``toString`` may hold a user-defined type, which the catalog
    string spells as its storage type (pyspark as ``vector``, ``udt``, ...).  A UDT
    prints as its class (``...VectorUDT@1f2e``, ``PythonUserDefinedType(...)``); the
    built-in types never contain these marks, a column name may (then the schema is
    merely read the slow way)."""
    return "UDT" in text or "UserDefinedType" in text or "@" in text


def _split_types(catalog: str, names: list[str]) -> list[str] | None:
    """The type of each field in ``catalog`` (a ``struct<name:type,...>`` string) whose
    field names are ``names``, or None when it cannot be split unambiguously.

    >>> _split_types("struct<a:int,b:decimal(10,2),c:map<string,int>>", ["a", "b", "c"])
    ['int', 'decimal(10,2)', 'map<string,int>']
    >>> _split_types("struct<a:struct<x(:int>>", ["a"]) is None
    True
    """
    prefix = "struct<"
    if not catalog.startswith(prefix) or not catalog.endswith(">"):
        return None
    body, pos, types = catalog[len(prefix) : -1], 0, []
    for i, name in enumerate(names):
        head = f"{name}:"
        if not body.startswith(head, pos):
            return None
        pos += len(head)
        depth, end = 0, pos
        while end < len(body):
            c = body[end]
            if c in "<(":
                depth += 1
            elif c in ">)":
                depth -= 1
                if depth < 0:
                    return None
            elif c == "," and depth == 0:
                break
            end += 1
        if depth != 0 or end == pos:
            return None
        types.append(body[pos:end])
        pos = end + 1
        if (pos < len(body)) != (i < len(names) - 1):
            return None
    if pos < len(body) and names:
        return None
    return types if names or not body else None
