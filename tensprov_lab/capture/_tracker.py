"""Watching DataFrame calls inside a tracked block and capturing their provenance.

While a block is tracked, DataFrame (and GroupedData) methods are wrapped: each call
runs the original method unchanged and records ``output = method(inputs)``.  Nothing is
computed then.  When the block ends, the wrappers are removed and every recorded
operation is captured in order: its annotated plan is run once to read the record keys
back, which become the operation's tensors.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import threading
import time
import warnings
import weakref
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tensprov_lab.capture import _fused
from tensprov_lab.capture._annotate import (
    TRIVIAL,
    Annotated,
    Rewrite,
    Unsupported,
    annotate_source,
    key_name,
    plan_is_stable,
    rewrite,
)
from tensprov_lab.capture._attributes import attribute_maps
from tensprov_lab.capture._equijoin import find_equi_join, join_pairs, key_codes, value_codes
from tensprov_lab.capture._jvm import Jvm
from tensprov_lab.capture._keys import (
    IN_LIST,
    ComposedKeyIndex,
    GroupSetKeyIndex,
    KeyError_,
    KeyIndex,
    LazyScanKeyIndex,
    MappedKeyIndex,
    RangeKeyIndex,
    ScanKeyIndex,
    UniqueKeyIndex,
    arrow_keys,
    keys_in,
    keys_sql,
)
from tensprov_lab.store import IdentityTensor, Store, make_tensor, tensor_from_pairs
from tensprov_lab.store._sets import unique

__all__ = ["Tracker", "TensProvWarning", "DATAFRAME_METHODS", "GROUPED_METHODS"]


class TensProvWarning(UserWarning):
    """Capture could not trace something exactly, or found something worth knowing."""


DATAFRAME_METHODS = [
    "select", "selectExpr", "filter", "where", "withColumn", "withColumns",
    "withColumnRenamed", "withColumnsRenamed", "drop", "alias", "toDF", "join",
    "crossJoin", "union", "unionAll", "unionByName", "distinct", "dropDuplicates",
    "drop_duplicates", "orderBy", "sort", "sortWithinPartitions", "limit", "offset",
    "sample", "dropna", "fillna", "replace", "repartition", "repartitionByRange",
    "coalesce", "hint", "intersect", "intersectAll", "subtract", "exceptAll", "melt",
    "unpivot", "transform", "withMetadata", "to", "describe", "summary", "observe",
    "mapInPandas", "mapInArrow", "localCheckpoint", "checkpoint",
]  # fmt: skip
GROUPED_METHODS = ["agg", "count", "sum", "avg", "mean", "max", "min", "applyInPandas"]
#: methods whose inner calls are the operations (they only call other methods)
_TRANSPARENT = {"transform"}

_IDENTITY_NODES = TRIVIAL | {"Project", "Window", "Sort"}
#: numbers of the job groups capture counts its Spark jobs with
_JOB_GROUPS = itertools.count(1)
#: most records of one join side read into this process to match keys in NumPy, and
#: Spark's size estimate of a side above which that is not even tried (sizes beyond
#: these are left to Spark's own join)
_JOIN_MAX_SIDE = 20_000_000
_JOIN_MAX_BYTES = 4 << 30
#: first consumers that read a source's records anyway (a join reads its keys, see
#: Tracker._join_keys; a filter or aggregate its columns, see _fused), so that counting
#: it early would only scan it twice
_READS_SOURCE_KEYS = {"join", "filter", "where", "dropna", *GROUPED_METHODS}


@dataclass
class Node:
    """Capture-side state of one dataset."""

    df: Any
    plan: Any
    ident: int
    ds_id: int | None = None
    ann: Annotated | None = None
    ki: KeyIndex | None = None
    n: int | None = None
    name: str | None = None
    #: the persisted annotated DataFrame when the dataset is materialized
    cached: Any = None
    #: whether sorting its raw keys gives its canonical order (false below a global
    #: sort, which permutes records but keeps their keys)
    key_ordered: bool = True
    #: whether Spark itself returns its records in canonical order where a sort ties
    #: (false downstream of a sort of records that were not key-ordered)
    ties_exact: bool = True
    #: a source (or opaque output) may be cached for recomputation: the policy of the
    #: run that captured it
    cacheable: bool = True
    #: a source whose record index (``ki``, ``n``) its first consumer, a join, reads
    #: from the keys it collects anyway (see Tracker._join_keys)
    deferred: bool = False
    #: the run that recorded it (None: not recorded in a run yet)
    run: int | None = None
    #: its annotated plan reads a copy capture pinned (``localCheckpoint``: a persisted
    #: RDD that forgetting the run releases)
    pinned: bool = False
    #: the Arrow schema pyspark's ``toArrow`` gives its annotated records, and whether
    #: it uses large string and binary types (read once, for replays run in the driver:
    #: see _replay._local)
    arrow_schema: Any = None
    arrow_large: bool = False
    #: its one record is made from every record of its one input, and it has no plan
    #: (an ML fit: the model; see Tracker._capture_every_record)
    every_record: bool = False


@dataclass
class Pending:
    method: str
    inputs: list[Node]
    out: Node
    expression: str
    run: int


@dataclass
class RunLog:
    """What one tracked block recorded (filled in by the tracker)."""

    id: int
    name: str | None
    operations: list[int] = field(default_factory=list)
    datasets: list[int] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0
    failed: list[str] = field(default_factory=list)
    #: Spark jobs its capture ran (counting jobs, fused reads, operations' own jobs)
    jobs: int = 0
    #: its provenance was dropped (``tensprov_lab.forget``)
    forgotten: bool = False
    #: its capture was interrupted (Ctrl-C), and its provenance dropped with it
    interrupted: bool = False


def _describe(value: Any) -> str:
    from pyspark.sql import Column, DataFrame

    if isinstance(value, Column):
        return str(value._jc.toString())  # type: ignore[operator]
    if isinstance(value, DataFrame):
        return "<DataFrame>"
    if isinstance(value, (list, tuple)):
        inner = ", ".join(_describe(v) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {_describe(v)}" for k, v in value.items()) + "}"
    if callable(value):
        return getattr(value, "__name__", "<function>")
    return repr(value)


def _dataframes_in(value: Any) -> list[Any]:
    from pyspark.sql import DataFrame

    if isinstance(value, DataFrame):
        return [value]
    if isinstance(value, (list, tuple)):
        return [d for v in value for d in _dataframes_in(v)]
    return []


#: settings of the session that replays a few records.  Compiling generated code costs
#: more than interpreting a few rows, and a broadcast is a Spark job of its own; small
#: cache batches and IN lists (not hash sets, which the in-memory scan cannot prune with)
#: let a replay decode only the batches that hold the wanted keys.
_REPLAY_CONF = {
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.autoBroadcastJoinThreshold": "-1",
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    "spark.sql.optimizer.inSetConversionThreshold": str(IN_LIST),
    "spark.sql.inMemoryColumnarStorage.batchSize": "1000",
    # inferring filters from constraints (IN lists of keys included) took half of the
    # optimizer's time on a replay; the filters it adds are redundant by construction
    "spark.sql.constraintPropagation.enabled": "false",
}


class Tracker:
    """Registry of captured DataFrames for one SparkSession, shared by all its runs."""

    def __init__(self, spark: Any, store: Store) -> None:
        self.spark = spark
        self.jvm = Jvm(spark)
        self.store = store
        self.nodes: dict[int, Node] = {}
        #: plan identity of DataFrames already looked up (see node_of)
        self._plan_idents: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
        self.by_ds: dict[int, Node] = {}
        self.pending: list[Pending | Node] = []
        self.runs: dict[int, RunLog] = {}
        #: per thread: how deep in wrapped calls (or quiet()) the thread is; calls made
        #: below the first are the method's own, and capture's worker builds DataFrames
        #: of its own while the user's thread records
        self._local = threading.local()
        #: bytes of tensors the store may hold before capture stops tracing records
        self.budget: int | None = None
        self._active: RunLog | None = None
        self._patched: list[tuple[type, str, Any]] = []
        self._reused: set[int] = set()
        self._cached: list[Any] = []
        self._kept: dict[int, Any] = {}
        #: output expression ids of plans read for attribute maps, by plan identity
        self._ids: dict[int, list[int]] = {}
        #: which datasets to keep materialized: "auto" (pipeline outputs, inputs of
        #: contextual operations, outputs of non-deterministic ones), "all" or "none"
        self.materialize = "auto"
        #: sources of the running block no operation has read yet (by plan identity)
        self._fresh: set[int] = set()
        # idents of nodes without a plan (ML models): negative, never a plan's number
        self._planless = itertools.count(-1, -1)
        #: sources whose record index is being counted while the block runs: their
        #: annotated plan and the counting job (see _index_early)
        self._early: dict[int, tuple[Annotated, Future[ScanKeyIndex]]] = {}
        self._pool: ThreadPoolExecutor | None = None
        #: the fused reads of the block being captured (see _fused), and the operations
        #: (by output ident) whose tensors came from them
        self._fusion: _fused.Fusion | None = None
        self._fused_done: set[int] = set()
        #: whether to fuse a block's reads (False: one job per operation, as before;
        #: the tests compare the two)
        self.fuse = True

    @property
    def _depth(self) -> int:
        return getattr(self._local, "depth", 0)

    @_depth.setter
    def _depth(self, value: int) -> None:
        self._local.depth = value

    # -- patching ------------------------------------------------------------------
    def _classes(self) -> list[tuple[type, list[str], Callable[[str, Any], bool] | None]]:
        """The classes whose methods are wrapped during a block, each with its method names
        and which calls are *transparent* (the calls they make are the operations)."""
        from pyspark.sql.classic.dataframe import DataFrame as ClassicDataFrame
        from pyspark.sql.group import GroupedData

        from tensprov_lab.capture import _ml, _sql

        return [
            (ClassicDataFrame, DATAFRAME_METHODS, lambda name, obj: name in _TRANSPARENT),
            (GroupedData, GROUPED_METHODS, None),
            (_sql.session_class(self.spark), ["sql"], None),
            *_ml.targets(),
        ]

    def patch(self) -> None:
        try:
            for cls, names, transparent in self._classes():
                for name in names:
                    orig = getattr(cls, name, None)
                    if orig is None or not callable(orig):
                        continue
                    self._patched.append((cls, name, cls.__dict__.get(name)))
                    setattr(cls, name, self._wrap(name, orig, transparent))
        except BaseException:
            self.abort()  # leave nothing half patched, and no block running
            raise

    def unpatch(self) -> None:
        while self._patched:
            cls, name, had = self._patched.pop()
            if had is None:
                delattr(cls, name)
            else:
                setattr(cls, name, had)

    def _wrap(
        self,
        name: str,
        orig: Callable[..., Any],
        transparent: Callable[[str, Any], bool] | None = None,
    ) -> Callable[..., Any]:
        tracker = self

        @functools.wraps(orig)
        def wrapper(obj: Any, *args: Any, **kwargs: Any) -> Any:
            __tracebackhide__ = True  # noqa: F841 - errors show as without tracking
            if (
                tracker._depth
                or tracker._active is None
                or (transparent is not None and transparent(name, obj))
            ):
                return orig(obj, *args, **kwargs)
            tracker._depth += 1
            try:
                out = orig(obj, *args, **kwargs)
            finally:
                tracker._depth -= 1
            try:
                tracker._record(name, obj, args, kwargs, out)
            except Exception as exc:  # recording must never break the user's code
                tracker._note(f"could not record {name}(): {exc}")
            return out

        return wrapper

    # -- recording -----------------------------------------------------------------
    def _note(self, message: str) -> None:
        if self._active is not None:
            self._active.warnings.append(message)
        warnings.warn(message, TensProvWarning, stacklevel=3)

    def _record(self, method: str, obj: Any, args: tuple, kwargs: dict, out: Any) -> None:
        from pyspark.sql import DataFrame

        if self._record_extension(method, obj, args, kwargs, out):
            return
        if not isinstance(out, DataFrame):
            return
        base = obj if isinstance(obj, DataFrame) else getattr(obj, "_df", None)
        if base is None:
            return
        in_dfs = [base, *_dataframes_in(list(args)), *_dataframes_in(list(kwargs.values()))]
        self.record_operation(method, in_dfs, out, args, kwargs)

    def record_operation(
        self, method: str, in_dfs: list[Any], out: Any, args: tuple = (), kwargs: dict | None = None
    ) -> Node | None:
        plan = self.jvm.plan(out)
        ident = self.jvm.plan_ident(plan)
        if ident in self.nodes:
            return self.nodes[ident]
        inputs: list[Node] = []
        for d in in_dfs:
            node = self.register(d)
            if all(node is not n for n in inputs):
                inputs.append(node)
        self._index_early(method, inputs)
        parts = [_describe(a) for a in args]
        parts += [f"{k}={_describe(v)}" for k, v in (kwargs or {}).items()]
        assert self._active is not None
        node = Node(df=out, plan=plan, ident=ident, run=self._active.id)
        self.nodes[ident] = node
        self.pending.append(
            Pending(method, inputs, node, f"{method}({', '.join(parts)})", self._active.id)
        )
        return node

    def register(self, df: Any) -> Node:
        """The node of a DataFrame used as an input; new ones become sources (or are
        derived from known datasets by calls we did not watch, e.g. ``F.broadcast``)."""
        plan = self.jvm.plan(df)
        ident = self.jvm.plan_ident(plan)
        if ident in self.nodes:
            return self.nodes[ident]
        known = self._known_below(plan)
        if known:
            method = self.jvm.cls(plan)
            node = self.record_operation(method.lower(), [k.df for k in known], df)
            assert node is not None
            return node
        node = Node(df=df, plan=plan, ident=ident, run=self._run_id())
        self.nodes[ident] = node
        self.pending.append(node)
        self._fresh.add(ident)
        return node

    def planless_ident(self) -> int:
        """A node identity for a dataset without a plan (an ML model), unique in this
        tracker."""
        return next(self._planless)

    def _run_id(self) -> int | None:
        return None if self._active is None else self._active.id

    def _known_below(self, plan: Any) -> list[Node]:
        found: list[Node] = []
        stack = self.jvm.children(plan)
        while stack:
            p = stack.pop()
            n = self.nodes.get(self.jvm.ident(p))
            if n is not None:
                if all(n is not f for f in found):
                    found.append(n)
            else:
                stack.extend(self.jvm.children(p))
        return found

    # -- runs ----------------------------------------------------------------------
    def begin(self, name: str | None) -> RunLog:
        if self._active is not None:
            raise RuntimeError("a tracked block is already running; tracked blocks do not nest")
        # ids come from the store shared by every tracker: unique, and never reused
        # after a run is forgotten
        run = RunLog(id=self.store.new_run_id(), name=name)
        self.runs[run.id] = run
        self._active = run
        self.patch()
        if not self.jvm.helper_known:
            # compiled while the user's code runs, not at the end of the first block
            self._worker().submit(lambda: self.jvm.helper)
        return run

    def _worker(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="tensprov-lab-index")
        return self._pool

    def end(self, frame: Any, progress: Callable[[int, int, str], None] | None = None) -> RunLog:
        run = self._active
        assert run is not None
        self.unpatch()
        try:
            self._name_variables(frame)
            t0 = time.perf_counter()
            pending, self.pending = self.pending, []
            # annotated results read again by later captures are cached for the
            # duration of this capture when recomputing them is costly (Python code)
            self._reused = {
                n.ident for item in pending if isinstance(item, Pending) for n in item.inputs
            }
            self._fusion = self._fuse(pending, progress)
            if self._fusion is not None:
                run.jobs += sum(self._fusion.jobs.values())
            first_use = _first_consumers(pending)
            for i, item in enumerate(pending):
                if progress is not None:
                    what = item.method if isinstance(item, Pending) else "source"
                    progress(i, len(pending), what)
                with self._jobs() as jobs:
                    if isinstance(item, Pending):
                        try:
                            self._capture_operation(item, run)
                        finally:
                            self._index_deferred(item.inputs)
                    else:
                        consumer = first_use.get(id(item))
                        defer = consumer is not None and consumer.method == "join"
                        self._capture_source(item, run, defer=defer)
                run.jobs += jobs[0]
                if isinstance(item, Pending):
                    self._account(item, jobs[0])
            with self._jobs() as jobs:
                self._index_deferred([n for n in pending if isinstance(n, Node)])
                self._materialize(run)
            run.jobs += jobs[0]
            run.seconds = time.perf_counter() - t0
        except KeyboardInterrupt:
            # Ctrl-C: the block's provenance is dropped whole (the store as before the
            # block, earlier runs untouched), then the interrupt goes on to the user
            run.interrupted = True
            raise
        finally:
            self._active, self._fusion = None, None
            self._fused_done = set()
            kept = {id(n.cached) for n in self.by_ds.values() if n.cached is not None}
            for df in self._cached:
                if id(df) not in kept:
                    df.unpersist()
            self._cached, self._reused, self._kept = [], set(), {}
            self._drop_early()
            if run.interrupted:
                self.forget([run.id])
        return run

    def _drop_early(self) -> None:
        """Forget the counts started in the block (a source nothing captured): the jobs
        still running finish on their own."""
        for _, future in self._early.values():
            future.cancel()
        self._early.clear()
        self._fresh.clear()

    def _materialize(self, run: RunLog) -> None:
        """Keep the datasets recomputation needs whole (DESIGN.md §6).  Sources stay where
        they are; a non-deterministic result is cached now, since running it again would
        give other records."""
        if self.materialize == "none":
            return
        store = self.store
        reasons: dict[int, str] = {}
        for o in run.operations:
            op = store.operations[o]
            # an ML fit's context is the fitted model, which the operation keeps
            if op.contextual and op.model is None:
                for i in op.inputs:
                    if store.producer(i) is not None:
                        reasons.setdefault(i, "input of a contextual operation")
            if op.nondeterministic and not op.opaque:
                reasons.setdefault(op.output, "not deterministic")
        for d in run.datasets:
            if store.producer(d) is None or store.producer(d).opaque:  # type: ignore[union-attr]
                continue
            if self.materialize == "all":
                reasons.setdefault(d, "materialize='all'")
            elif not store.consumers(d) and not store.datasets[d].hidden:
                reasons.setdefault(d, "pipeline output")
        for d, why in reasons.items():
            node = self.by_ds.get(d)
            if node is None or node.ann is None or node.cached is not None:
                continue
            df = self._kept.pop(node.ident, None)
            if df is None:
                df = self.jvm.to_df(node.ann.plan).persist()
                if why == "not deterministic":
                    df.count()
            node.cached = df
            store.datasets[d].materialized = why

    def abort(self) -> None:
        """Undo patching without capturing (used when patching itself failed)."""
        self.unpatch()
        self.pending = []
        self._active = None
        self._drop_early()

    def forget(self, run_ids: list[int], keep: list[Any] | None = None) -> list[str]:
        """Drop the provenance of runs: their datasets and operations leave the store,
        their DataFrames leave this tracker (used again, they are new sources) and what
        capture persisted for them leaves Spark's cache.

        Nothing is changed when another run reads a dataset of ``run_ids`` (the store
        raises :class:`~tensprov_lab.store.StoreError`).  ``keep``: cached DataFrames of
        other trackers (of the same Spark application), whose cache entries must stay.
        Returns the problems met while releasing Spark's cache (the provenance is
        dropped all the same).
        """
        if self._active is not None:
            raise RuntimeError(
                "a tracked block is running: forget runs after it ends, not inside it"
            )
        ids = set(run_ids)
        removed = set(self.store.remove_run(ids))
        last = not set(self.runs) - ids  # no run left: no DataFrame is worth keeping
        gone = [
            (ident, n)
            for ident, n in self.nodes.items()
            if last or n.run in ids or (n.ds_id is not None and n.ds_id in removed)
        ]
        for ident, _ in gone:
            del self.nodes[ident]
            self._ids.pop(ident, None)
        if last:
            self._ids.clear()
        for d in removed | {n.ds_id for _, n in gone if n.ds_id is not None}:
            self.by_ds.pop(d, None)
        for r in ids:
            log = self.runs.pop(r, None)
            if log is not None:
                log.forgotten = True
        # the memo holds proxies of the forgotten plans, which keep them alive in the JVM
        self.jvm.forget_facts()
        return self._release([n for _, n in gone], keep or [])

    def _release(self, nodes: list[Node], keep: list[Any]) -> list[str]:
        """Unpersist what capture persisted for ``nodes`` (no longer in the tracker):
        their materialized DataFrames and the copies it pinned."""
        sc = self.spark.sparkContext
        if getattr(sc, "_jsc", None) is None:
            return []  # the session was stopped: its cache went with it
        problems: list[str] = []
        # Spark caches by plan: a dataset still tracked may share its cache entry with
        # a dropped one (same result), and must keep it
        kept = [n.cached for n in self.nodes.values() if n.cached is not None] + keep
        for node in nodes:
            df, node.cached = node.cached, None
            try:
                if df is not None and not any(_same_result(df, k) for k in kept):
                    df.unpersist()
                plan = node.ann.plan if node.pinned and node.ann is not None else None
                if plan is not None and self.jvm.cls(plan) == "LogicalRDD":
                    plan.rdd().unpersist(False)
            except Exception as exc:  # noqa: BLE001 - report it, keep releasing the rest
                problems.append(f"{self._label(node)}: {_short_error(exc)}")
        return problems

    @staticmethod
    def _label(node: Node) -> str:
        return node.name or f"dataset#{node.ds_id}"

    def _name_variables(self, frame: Any) -> None:
        from pyspark.sql import DataFrame

        # the block's own scope: its locals, and its globals at module level
        scopes: list[dict[str, Any]] = [frame.f_locals]
        if frame.f_globals is not frame.f_locals:
            scopes.append(frame.f_globals)
        for scope in scopes:
            for var, value in list(scope.items()):
                if isinstance(value, DataFrame) and not var.startswith("_"):
                    try:
                        node = self.nodes.get(self.jvm.ident(self.jvm.plan(value)))
                    except Exception:
                        continue
                    if node is not None and node.name is None:
                        node.name = var
                        if node.ds_id is not None:
                            self.store.datasets[node.ds_id].name = var

    # -- reading records back -------------------------------------------------------
    @functools.cached_property
    def replay_spark(self) -> Any:
        """A session of the same application (same cache) for replays of a few records:
        adaptive execution and hundreds of shuffle partitions only add latency there."""
        session = self.spark.newSession()
        for key, value in _REPLAY_CONF.items():
            session.conf.set(key, value)
        parallel = max(int(self.spark.sparkContext.defaultParallelism), 1)
        session.conf.set("spark.sql.shuffle.partitions", str(parallel))
        return session

    def source_plan(self, node: Node) -> Any:
        """The annotated plan of a source for reading some of its records.

        Unless its run said ``materialize="none"``, the keyed source is cached on first
        use: reading a few records then scans only the in-memory batches holding their
        keys (the keys increase in scan order), instead of the whole source each time.
        """
        assert node.ann is not None and node.ds_id is not None
        if node.cacheable and node.cached is None:
            # built in the replay session: its cache batches are small (see _REPLAY_CONF)
            node.cached = self.jvm.to_df(node.ann.plan, self.replay_spark).persist()
            what = "source" if self.store.producer(node.ds_id) is None else "opaque output"
            self.store.datasets[node.ds_id].materialized = f"{what}, cached for recomputation"
        return node.ann.plan

    def node_of(self, df: Any) -> Node | None:
        # a DataFrame's plan never changes: its identity is asked of the JVM once (two
        # py4j round trips cost more than a whole lineage query)
        try:
            ident = self._plan_idents.get(df)
        except TypeError:  # not weakly referenceable, not hashable: not a DataFrame
            ident = None
        if ident is None:
            try:
                ident = self.jvm.ident(self.jvm.plan(df))
            except Exception:
                return None
            with contextlib.suppress(TypeError):
                self._plan_idents[df] = ident
        return self.nodes.get(ident)

    def _readable(self, ds_id: int) -> Node:
        """The node of ``ds_id``, whose records can be read from Spark (or a clear
        error)."""
        node = self.by_ds.get(ds_id)
        label = self.store.datasets[ds_id].label
        if node is None or node.ann is None or node.ki is None:
            raise _records_error(label, "it was not captured")
        if getattr(self.spark.sparkContext, "_jsc", None) is None:
            raise _records_error(
                label,
                "the SparkSession of this run was stopped (lineage queries still work; "
                "records are read from Spark)",
            )
        return node

    def _frame(self, node: Node, ds_id: int, where: str | None) -> Any:
        """The annotated DataFrame of the readable ``node`` of ``ds_id``, filtered by
        ``where`` (checked now, so a bad predicate fails with a clear message)."""
        assert node.ann is not None
        label = self.store.datasets[ds_id].label
        df = self.jvm.to_df(node.ann.plan)
        if where is not None:
            try:
                df = df.where(where)
                df.schema  # noqa: B018 - analyse now so a bad predicate fails here
            except Exception as exc:
                cols = ", ".join(self.store.datasets[ds_id].columns)
                raise ValueError(
                    f"where={where!r} is not a valid predicate over {label} "
                    f"(columns: {cols}): {_short_error(exc)}"
                ) from None
        return df

    def select_rows(self, ds_id: int, where: str) -> np.ndarray:
        node = self._readable(ds_id)
        df = self._frame(node, ds_id, where)
        assert node.ann is not None and node.ki is not None
        raw = self._collect_keys(self.jvm.plan(df), node.ann.key_names())
        return unique(node.ki.lookup(raw))

    def records(self, ds_id: int, rows: np.ndarray | None, where: str | None) -> Any:

        from tensprov_lab._run import ROW

        op = self.store.producer(ds_id)
        node = self._readable(ds_id)
        derived = op is not None and not op.opaque and node.cached is None
        if derived and rows is not None and where is None:
            from tensprov_lab.capture._replay import replay_records

            # no DataFrame of the whole dataset: its analysis alone costs a few ms
            return replay_records(self, ds_id, rows)
        df = self._frame(node, ds_id, where)
        assert node.ann is not None and node.ki is not None
        names = node.ann.key_names()
        ki = node.ki
        if (
            rows is not None
            and isinstance(ki, (UniqueKeyIndex, ScanKeyIndex))
            and ki.n
            and ki.width == 1
        ):
            # sources: fetch just the requested records
            wanted = ki.values(np.asarray(rows, dtype=np.int64))
            if where is None:
                keyed = op is None or op.opaque  # read by key, not kept whole
                plan = self.source_plan(node) if keyed else node.ann.plan
                few = len(wanted) <= IN_LIST
                df = self.jvm.to_df(plan, self.replay_spark if few else None)
            df = df.where(keys_in(names[0], wanted))
        elif rows is not None and ki.n:
            condition = self._rows_condition(node, np.asarray(rows, dtype=np.int64))
            if condition is not None:
                df = df.where(condition)
        table = df.toArrow()
        raw = arrow_keys(table, names)
        idx = ki.lookup(raw)
        n_user = table.num_columns - len(names)
        pdf = table.select(list(range(n_user))).to_pandas()
        pdf.insert(0, ROW, idx)
        if rows is not None:
            pdf = pdf[np.isin(idx, rows)]
        pdf = pdf.sort_values(ROW, kind="stable").reset_index(drop=True)
        pdf.attrs["recomputed"] = derived
        return pdf

    def _rows_condition(self, node: Node, rows: np.ndarray) -> Any:
        """A Spark condition on the key columns of ``node`` that keeps the records of
        ``rows`` (and maybe a few others): without it, reading some records of a kept
        join or aggregate would bring the whole dataset to Python.  None when the keys
        cannot be told (then everything is read, as before)."""
        from pyspark.sql import functions as F

        assert node.ann is not None and node.ki is not None
        names = node.ann.key_names()
        # a key column is one raw column only when it is a bigint (structs flatten)
        if not all(self.jvm.is_long(k) for k in node.ann.keys):
            return None
        cols = node.ki.column_values(rows)
        if not cols or len(names) != node.ki.width:
            return None
        parts = []
        for pos, values in sorted(cols.items()):
            u = unique(values)
            if len(u) > IN_LIST:
                return None
            text = keys_sql(names[pos], u[u >= 0])
            if len(u) and u[0] == -1:  # the missing side of an outer join
                text = f"({text} OR `{names[pos]}` IS NULL)"
            parts.append(text)
        return F.expr(" AND ".join(parts))

    # -- capture -------------------------------------------------------------------
    def _collect_keys(
        self, plan: Any, names: list[str], keep: bool = False, ident: int | None = None
    ) -> np.ndarray:
        """Read key columns back; ``keep`` caches the whole annotated result for the
        later captures of this run that start from it."""
        df = self.jvm.to_df(plan)
        if keep:
            df = df.persist()
            self._cached.append(df)
            if ident is not None:
                self._kept[ident] = df
        return arrow_keys(df.select(*names).toArrow(), names)

    def _capture_source(self, node: Node, run: RunLog, defer: bool = False) -> None:
        """Key a source by scan position and count its records; ``defer`` leaves the
        count to its first consumer (see :meth:`_index_deferred`)."""
        early = self._early.get(node.ident)
        if early is not None:
            stable, ann = True, early[0]
        else:
            stable = plan_is_stable(self.jvm, node.plan)
            ann = annotate_source(self.jvm, node.plan, pin=not stable)
        cols, types = self.jvm.columns(node.df)
        origin = self.jvm.tree_string(self._leaf(node.plan))
        ds = self.store.add_dataset(
            node.name, columns=cols, dtypes=types, n_rows=None, role="source",
            run=run.id, origin=origin if stable else f"{origin} (pinned: order not stable)",
        )  # fmt: skip
        node.ann, node.ds_id, node.deferred, node.pinned = ann, ds.id, True, not stable
        node.cacheable = self.materialize != "none"
        self.by_ds[ds.id] = node
        run.datasets.append(ds.id)
        n = self._fusion.size(node.ident) if self._fusion is not None and stable else None
        if n is not None:
            # read whole in scan order already: its partition sizes, which translate
            # its raw keys, are counted only if a raw key is ever translated
            self._set_index(node, LazyScanKeyIndex(n, functools.partial(self._count, node)))
        elif not defer:
            self._index_deferred([node])

    def _fuse(self, pending: list[Any], progress: Any) -> _fused.Fusion | None:
        """Plan the block's fused reads and run them (one Spark job per dataset read)."""
        if not self.fuse:
            return None
        try:
            fusion = _fused.plan(self.jvm, pending, Pending)
            fusion.size_of = lambda ident: self.nodes[ident].n if ident in self.nodes else None
            if fusion.reads and progress is not None:
                progress(0, len(pending), "reading sources")
            fusion.fetch(self._jobs)
        except Exception as exc:  # noqa: BLE001 - every operation takes its own job
            self._note(f"fused capture not used ({_short_error(exc)})")
            return None
        return fusion

    @contextlib.contextmanager
    def _jobs(self) -> Any:
        """Count the Spark jobs run inside the block (``with ... as counted``: the count
        is ``counted[0]`` afterwards), by a job group of capture's own; the thread's
        previous job group is restored."""
        sc = self.spark.sparkContext
        counted = [0]
        try:
            previous = sc.getLocalProperty("spark.jobGroup.id")
            group = f"tensprov-lab-capture-{next(_JOB_GROUPS)}"
            sc.setLocalProperty("spark.jobGroup.id", group)
        except Exception:  # noqa: BLE001 - counting is extra: never fail capture for it
            yield counted
            return
        try:
            yield counted
        except BaseException:
            # Ctrl-C (or an error) in the middle of a job: stop capture's jobs too
            with contextlib.suppress(Exception):
                sc.cancelJobGroup(group)
            raise
        finally:
            sc.setLocalProperty("spark.jobGroup.id", previous)  # type: ignore[arg-type]
            try:
                counted[0] = len(sc.statusTracker().getJobIdsForGroup(group))
            except Exception:  # noqa: BLE001
                pass

    def _account(self, p: Pending, jobs: int) -> None:
        """Note on ``p``'s operation the jobs its capture ran, the fused reads it owns
        (their jobs and time) and whether its tensors came from them."""
        if p.out.ds_id is None:
            return
        op = self.store.producer(p.out.ds_id)
        if op is None:
            return
        op.jobs = jobs
        fusion = self._fusion
        if fusion is not None:
            for target in fusion.reads_of(p.out.ident):
                op.jobs += fusion.jobs.get(target, 0)
                op.seconds += fusion.seconds.get(target, 0.0)
        op.fused = p.out.ident in self._fused_done

    def _count(self, node: Node) -> ScanKeyIndex:
        """The partition sizes of source ``node`` (a Spark job; see LazyScanKeyIndex)."""
        assert node.ann is not None
        with self.quiet():
            return self._scan_index(node.ann)

    def _index_deferred(self, nodes: list[Node]) -> None:
        """Give deferred sources their record index (one small aggregate per source)."""
        for node in nodes:
            if node.deferred:
                assert node.ann is not None
                ki = self._early_index(node)
                self._set_index(node, ki if ki is not None else self._scan_index(node.ann))

    def _early_index(self, node: Node) -> ScanKeyIndex | None:
        """The record index counted for ``node`` while the block ran (None: none was, or
        the job failed, and counting again says why)."""
        early = self._early.pop(node.ident, None)
        if early is None or early[0] is not node.ann:
            return None
        try:
            return early[1].result()
        except Exception:  # noqa: BLE001 - counted again, in this thread
            return None

    def _set_index(self, node: Node, ki: ScanKeyIndex) -> None:
        node.ki, node.n, node.deferred = ki, ki.n, False
        self._dataset(node).n_rows = ki.n

    def _scan_index(self, ann: Annotated) -> ScanKeyIndex:
        """Partition sizes of a keyed source: one small aggregate instead of every key."""
        from pyspark.sql import functions as F

        key = F.col(ann.key_names()[0])
        sizes = (
            self.jvm.to_df(ann.plan)
            .groupBy(F.shiftright(key, 33).alias("p"))
            .agg((F.max(key.bitwiseAND((1 << 33) - 1)) + 1).alias("n"))
            .toArrow()
        )
        parts = np.asarray(sizes.column("p").to_numpy(zero_copy_only=False), dtype=np.int64)
        counts = np.asarray(sizes.column("n").to_numpy(zero_copy_only=False), dtype=np.int64)
        full = np.zeros(int(parts.max()) + 1 if len(parts) else 0, dtype=np.int64)
        full[parts] = counts
        return ScanKeyIndex(full)

    def _dataset(self, node: Node) -> Any:
        assert node.ds_id is not None, "inputs are captured before their consumers"
        return self.store.datasets[node.ds_id]

    def _leaf(self, plan: Any) -> Any:
        while True:
            kids = self.jvm.children(plan)
            if not kids:
                return plan
            plan = kids[0]

    def _capture_operation(self, p: Pending, run: RunLog) -> None:
        t0 = time.perf_counter()
        if p.out.every_record:
            self._capture_every_record(p, run, t0)
            return
        cols, types = self.jvm.columns(p.out.df)
        in_nodes = p.inputs
        unreadable = [n for n in in_nodes if n.ann is None or (n.ki is None and not n.deferred)]
        if unreadable:
            self._opaque(p, run, "an input has no record-level provenance", cols, types, 0.0)
            return
        if self.budget is not None and self.store.nbytes > self.budget:
            self._opaque(
                p, run,
                f"the memory budget of {self.budget:,} bytes is used up "
                f"({self.store.nbytes:,} bytes held); raise it with budget=... or "
                "free old runs with tensprov_lab.forget(run) (every run: "
                "tensprov_lab.forget())",
                cols, types, 0.0,
            )  # fmt: skip
            return
        try:
            rw = rewrite(self.jvm, p.out.plan, [(n.plan, n.ann) for n in in_nodes])  # type: ignore[misc]
            if sorted(set(rw.occurrences)) != list(range(len(in_nodes))):
                raise Unsupported("an input of the call does not appear in its plan")
            occ_nodes = [in_nodes[i] for i in rw.occurrences]
            if {"GlobalLimit", "LocalLimit", "Offset"} & set(rw.nodes) and not _ties_exact(
                rw, occ_nodes
            ):
                # Spark breaks the sort's ties by raw keys, not by the order we number
                # records in, so the records a limit keeps could be other ones
                raise Unsupported(
                    "a limit on the output of a sort of already sorted records: which of "
                    "the tied records it keeps cannot be traced exactly"
                )
            n_out, tensors, ki = self._tensors(rw, in_nodes, p.out.ident)
        except (Unsupported, KeyError_) as exc:
            self._opaque(p, run, str(exc), cols, types, time.perf_counter() - t0)
            return
        except Exception as exc:  # a Spark error while reading keys back
            msg = _short_error(exc)
            self._opaque(p, run, f"capture failed: {msg}", cols, types, time.perf_counter() - t0)
            return
        in_cols = [self._dataset(n).columns for n in occ_nodes]
        category = _category(rw, [len(c) for c in in_cols], cols, in_cols)
        nondet = rw.nondeterministic or self._unordered_limit(rw, occ_nodes)
        warns = []
        if nondet:
            warns.append(
                f"{p.expression} is not deterministic: its records may differ between "
                "executions, and so may their provenance"
            )
        if rw.group is not None and rw.group.kind == "dedup" and p.method != "distinct":
            subset_all = len(cols) == len(in_cols[0])
            if not subset_all:
                nondet = True
                warns.append(
                    f"{p.expression} keeps an arbitrary record of each group; the "
                    "provenance lists every record of the group"
                )
        attrs = self._attribute_maps(p, rw.occurrences, len(cols), in_cols)
        ds = self.store.add_dataset(
            p.out.name, columns=cols, dtypes=types, n_rows=n_out, run=run.id,
            hidden=category == "trivial",
        )  # fmt: skip
        op = self._add_operation(
            ds.id, p.method, category, [n.ds_id for n in occ_nodes], tensors,
            expression=p.expression, nondeterministic=nondet, contextual=rw.contextual,
            trivial=category == "trivial", warnings=warns,
            seconds=time.perf_counter() - t0, run=run.id, **attrs,
        )  # fmt: skip
        p.out.ann = Annotated(rw.plan, rw.keys, rw.width)
        p.out.ki, p.out.n, p.out.ds_id = ki, n_out, ds.id
        p.out.key_ordered = not rw.sort and all(n.key_ordered for n in occ_nodes)
        p.out.ties_exact = _ties_exact(rw, occ_nodes)
        self._recorded(run, p.out, op.id, warns)

    def _capture_every_record(self, p: Pending, run: RunLog, t0: float) -> None:
        """Record an operation whose one output record is made from every input record
        (an ML fit): its tensor needs only the input's size, so no plan is rewritten and
        no Spark job runs.  Its caller (``finish``) adds the category and column maps."""
        (node,) = p.inputs
        self._index_deferred([node])
        readable = node.ann is not None and node.ki is not None and node.n is not None
        ds = self.store.add_dataset(
            p.out.name, columns=["model"], dtypes=[""], n_rows=1, run=run.id
        )
        tensors, ki, why = None, None, None
        if readable:
            _, tensors, ki = _every_record(node)
        else:
            why = (
                f"{p.expression}: record-level provenance not captured (an input has no "
                "record-level provenance); kept as an opaque operation"
            )
        notes = [why] if why else []
        op = self._add_operation(
            ds.id, p.method, "aggregate" if readable else "opaque", [node.ds_id], tensors,
            expression=p.expression, contextual=True, opaque=not readable, warnings=notes,
            seconds=time.perf_counter() - t0, run=run.id,
        )  # fmt: skip
        # no annotated plan: nothing reads the model as a dataset, and it is not cached
        # (the operation keeps the model itself)
        p.out.ki, p.out.n, p.out.ds_id = ki, 1, ds.id
        self._recorded(run, p.out, op.id, notes)

    def _add_operation(self, out: int, method: str, category: str, inputs: list[Any],
                       tensors: Any, **kwargs: Any) -> Any:  # fmt: skip
        """``store.add_operation`` of the operation making dataset ``out``, just added;
        when the store refuses it, the dataset goes too (no half-recorded operation)."""
        try:
            return self.store.add_operation(method, category, inputs, out, tensors, **kwargs)
        except Exception:
            self.store.remove_dataset(out)
            raise

    def _recorded(self, run: RunLog, node: Node, op_id: int, notes: list[str]) -> None:
        """Note a captured operation and its output ``node`` in the run, and warn."""
        assert node.ds_id is not None
        self.by_ds[node.ds_id] = node
        run.operations.append(op_id)
        run.datasets.append(node.ds_id)
        for note in notes:
            self._note_done(run, note)

    def _attribute_maps(
        self, p: Pending, positions: list[int], n_out: int, in_cols: list[list[str]]
    ) -> dict[str, Any]:
        """Attribute maps aligned with the operation's inputs (``positions``: the input of
        the call behind each operation input); empty when the plan cannot be read."""
        try:
            m = attribute_maps(self.jvm, p.out.plan, [n.plan for n in p.inputs], self._ids)
        except Exception as exc:  # column lineage is extra: never lose the operation
            self._note(f"{p.expression}: column lineage not captured ({_short_error(exc)})")
            return {}
        contributing, influencing = [], []
        for k, i in enumerate(positions):
            if m.occurrences == positions:
                c, f = m.contributing[k], m.influencing[k]
            else:  # occurrences counted differently: OR over every occurrence of input i
                if i not in m.occurrences:
                    # an all-False map would claim "nothing flows": say "unknown" instead
                    self._note(f"{p.expression}: column lineage not captured (input not found)")
                    return {}
                c = np.zeros((n_out, len(in_cols[k])), dtype=bool)
                f = c.copy()
                for pos, j in enumerate(m.occurrences):
                    if j == i and m.contributing[pos].shape == c.shape:
                        c |= m.contributing[pos]
                        f |= m.influencing[pos]
            if c.shape != (n_out, len(in_cols[k])):
                self._note(f"{p.expression}: column lineage not captured (schema mismatch)")
                return {}
            contributing.append(c)
            influencing.append(f)
        return {
            "contributing": contributing,
            "influencing": influencing,
            "attributes_exact": m.exact,
        }

    def _note_done(self, run: RunLog, message: str) -> None:
        run.warnings.append(message)
        warnings.warn(message, TensProvWarning, stacklevel=4)

    def _unordered_limit(self, rw: Rewrite, occ: list[Node]) -> bool:
        if not ({"GlobalLimit", "Offset"} & set(rw.nodes)) or rw.sort:
            return False
        producer = self.store.producer(occ[0].ds_id) if occ[0].ds_id is not None else None
        return producer is None or producer.category != "sort"

    def _opaque(
        self, p: Pending, run: RunLog, why: str, cols: list[str], types: list[str], seconds: float
    ) -> None:
        """Record an operation we cannot trace: coarse lineage only, its output keyed anew."""
        message = (
            f"{p.expression}: record-level provenance not captured ({why}); "
            "kept as an opaque operation"
        )
        try:
            ann = annotate_source(self.jvm, p.out.plan, pin=True)
            ki: KeyIndex | None = self._scan_index(ann)
            n: int | None = ki.n if ki is not None else None
        except Exception as exc:
            ann, ki, n = None, None, None  # type: ignore[assignment]
            message += f"; its records cannot be read either ({_short_error(exc)})"
        attrs = self._attribute_maps(
            p, list(range(len(p.inputs))), len(cols), [self._dataset(i).columns for i in p.inputs]
        )
        ds = self.store.add_dataset(p.out.name, columns=cols, dtypes=types, n_rows=n, run=run.id)
        op = self._add_operation(
            ds.id, p.method, "opaque", [n.ds_id for n in p.inputs], None,
            expression=p.expression, opaque=True, warnings=[message], seconds=seconds, run=run.id,
            **attrs,
        )  # fmt: skip
        p.out.ann, p.out.ki, p.out.n, p.out.ds_id = ann, ki, n, ds.id
        p.out.pinned = ann is not None
        p.out.cacheable = self.materialize != "none"
        self._recorded(run, p.out, op.id, [message])

    def _tensors(
        self, rw: Rewrite, in_nodes: list[Node], out_ident: int = 0
    ) -> tuple[int, list[Any], KeyIndex]:
        occ = [in_nodes[i] for i in rw.occurrences]
        nodes = set(rw.nodes)
        genpos = [b for b in rw.blocks if b.kind == "genpos"]
        if (
            nodes <= _IDENTITY_NODES
            and not rw.sort
            and len(occ) == 1
            and rw.group is None
            and not genpos
        ):
            n = occ[0].n
            assert n is not None and occ[0].ki is not None
            return n, [IdentityTensor(n)], occ[0].ki
        fused = self._fused_tensors(rw, occ, out_ident)
        if fused is not None:
            return fused
        joined = self._join_keys(rw, occ)
        if joined is not None:
            return self._functional(rw, occ, joined)
        self._index_deferred(occ)
        if rw.group is not None:
            return self._group_tensors(rw, occ)
        names = [str(a.name()) for a in rw.keys]
        # cached while this capture runs when a later capture reads it again, and kept
        # afterwards when it must stay materialized (a non-deterministic result)
        if rw.sort and not all(n.key_ordered for n in occ):
            raw, runs = self._sorted_keys(rw, names)
            return self._functional(rw, occ, raw, runs)
        keep = rw.nondeterministic or (out_ident in self._reused and self._costly(rw.plan))
        raw = self._collect_keys(rw.plan, names, keep=keep, ident=out_ident)
        return self._functional(rw, occ, raw)

    def _fused_tensors(
        self, rw: Rewrite, occ: list[Node], out_ident: int
    ) -> tuple[int, list[Any], KeyIndex] | None:
        """The operation's tensors from the block's fused reads (see :mod:`._fused`);
        None when no fused rule covers it, or its reads are missing or disagree with
        what capture counted (then it takes a job of its own)."""
        fusion = self._fusion
        rule = fusion.rules.get(out_ident) if fusion is not None else None
        if fusion is None or rule is None or rw.sort or rw.semi is not None or rw.n_branches:
            return None
        try:
            self._index_deferred(occ)
            if rule.kind == "group":
                g = rw.group
                if g is None or g.kind != "aggregate" or g.gid_col is not None or len(occ) != 1:
                    return None
                parent, n_groups = fusion.groups(out_ident)
                members = np.arange(len(parent), dtype=np.int64)
                got = self._groups(occ[0], members, parent, n_groups, ordered=True)
                self._fused_done.add(out_ident)
                return got
            if rw.group is not None or any(b.kind != "input" for b in rw.blocks):
                return None
            if rule.kind == "filter":
                rows = {rule.inputs[0]: fusion.survivors(out_ident)}
            else:
                li, ri = fusion.pairs(out_ident)
                rows = dict(zip(rule.inputs, (li, ri)))
            given = [rows[occ[b.pos].ident] for b in rw.blocks]
            got = self._functional(rw, occ, None, given=given)
            self._fused_done.add(out_ident)
            return got
        except KeyError:  # a read that failed (its rule takes a job of its own)
            return None
        except Exception as exc:  # noqa: BLE001 - inconsistent reads: the operation's own job
            self._note(f"fused capture not used ({_short_error(exc)}); captured on its own")
            return None

    def _join_keys(self, rw: Rewrite, occ: list[Node]) -> np.ndarray | None:
        """The raw keys of an equi-join's output, matched in NumPy from one scan of each
        side (see :mod:`._equijoin`); ``None`` when the operation is not such a join or
        Spark's own join is the cheaper way (too big a side, or a side it broadcasts
        while every source it reads already has its record index)."""
        if rw.group is not None or rw.sort or rw.semi is not None or rw.nondeterministic:
            return None
        if any(b.kind != "input" for b in rw.blocks):
            return None
        jvm = self.jvm
        ej = find_equi_join(jvm, rw.plan)
        if ej is None or rw.join_node is None or jvm.ident(ej.node) != jvm.ident(rw.join_node):
            return None
        ids = [int(a.exprId().id()) for a in rw.keys]
        split = rw.join_left_blocks
        side_of = [0 if i < split else 1 for i in range(len(rw.blocks))]
        # a side that is a whole source not yet counted gets its index from its keys
        whole = [
            bool(node.deferred and node.ann is not None)
            and jvm.ident(ej.sides[side]) == jvm.ident(node.ann.plan)  # type: ignore[union-attr]
            for node, side in ((occ[b.pos], s) for b, s in zip(rw.blocks, side_of))
        ]
        # both sides read one source: its keys appear twice in the output, which Spark
        # cannot read back by name, while each side read on its own is unambiguous
        shared = len(set(ids)) < len(ids)
        if not shared and not self._numpy_cheaper(ej.sides, any(whole)):
            return None
        tables = []
        for side, (plan, keys) in enumerate(zip(ej.sides, ej.keys)):
            attrs = [a for b, s in zip(rw.blocks, side_of) if s == side for a in b.attrs]
            names = [key_name("j") for _ in keys]
            exprs = [*attrs, *(jvm.alias(k, n) for k, n in zip(keys, names))]
            table = jvm.to_df(jvm.project(exprs, plan)).toArrow()
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
                    self._set_index(node, ki)
            picked = np.full((len(pairs[side]), block.shape[1]), -1, dtype=np.int64)
            found = pairs[side] >= 0
            picked[found] = block[pairs[side][found]]
            raw.append(picked)
        self._index_deferred(occ)
        return np.column_stack(raw) if raw else np.zeros((0, 0), np.int64)

    def _numpy_cheaper(self, sides: list[Any], counts_a_source: bool) -> bool:
        """Whether to match a join's keys in NumPy rather than read Spark's join output.

        Every side must be small enough to read into this process.  Then NumPy wins
        when Spark would shuffle every side (too big to broadcast: its own join sorts
        both), and also when a side is a source still to be counted: reading its keys
        gives its record index, which otherwise costs a Spark job of its own (two such
        jobs made a first capture of a broadcast join about twice as slow).
        """
        try:
            limit = self.jvm.broadcast_threshold()
            sizes = [self._estimated_bytes(s) for s in sides]
        except Exception:  # noqa: BLE001 - no estimate: leave the join to Spark
            return False
        # Spark's "no estimate" (e.g. an RDD) is Long.MaxValue, and estimates above one
        # scale it down: sizes no real data has
        if not all(size >= 2**60 or size <= _JOIN_MAX_BYTES for size in sizes):
            return False
        return counts_a_source or all(limit < 0 or size > limit for size in sizes)

    def _estimated_bytes(self, plan: Any) -> int:
        """Spark's size estimate of ``plan``'s result (what its broadcast choice reads)."""
        stats = self.jvm.to_df(plan)._jdf.queryExecution().optimizedPlan().stats()
        return int(str(stats.sizeInBytes()))

    def _costly(self, plan: Any) -> bool:
        """Whether recomputing ``plan`` runs Python code (UDFs, pandas or Arrow
        functions).  Anything else is cheaper to recompute from its sources in each
        later capture job than to cache whole: caching every reused result made capture
        two to three times slower on the engine benchmark."""
        try:
            text = self.jvm.to_json(plan)
        except Exception:
            return True  # cannot tell: keep the old, safe behaviour
        return any(m in text for m in _PYTHON_MARKERS)

    def _sorted_keys(self, rw: Rewrite, names: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Keys of a global sort's output in sorted order, and the run of equal sort
        values each record belongs to.

        Spark breaks ties by raw keys, which is the canonical order of the input only
        when the input was not itself sorted; the runs let the caller re-order ties by
        canonical index instead.
        """
        if rw.sort_node is None:
            raise Unsupported(
                "a sort of an already sorted input, inside a call that also does other "
                "steps: its ties cannot be ordered exactly"
            )
        ties = [key_name("t") for _ in rw.sort_exprs]
        exprs = [*rw.keys, *(self.jvm.alias(e, n) for e, n in zip(rw.sort_exprs, ties))]
        table = self.jvm.to_df(self.jvm.project(exprs, rw.sort_node)).toArrow()
        raw = arrow_keys(table.select(names), names)
        same = np.ones(max(table.num_rows - 1, 0), dtype=bool)
        for n in ties:
            same &= _equal_to_previous(table.column(n))
        runs = np.concatenate([[0], np.cumsum(~same)]) if table.num_rows else np.zeros(0, np.int64)
        return raw, runs.astype(np.int64)

    def _functional(
        self,
        rw: Rewrite,
        occ: list[Node],
        raw: np.ndarray | None,
        runs: np.ndarray | None = None,
        given: list[np.ndarray] | None = None,
    ) -> tuple[int, list[Any], KeyIndex]:
        """Tensors and key index of an operation whose every output record comes from
        one record of each input: from the raw keys read back, or (``given``) from the
        input rows of each input block, known already (a fused capture)."""
        m = len(raw) if raw is not None else len(given[0]) if given else 0
        parts: list[np.ndarray] = []
        branch = np.zeros(m, dtype=np.int64)
        genpos = None
        blocks_ki: list[tuple[KeyIndex, int]] = []
        branch_col = None
        off = 0
        for b in rw.blocks:
            if b.kind == "branch":
                assert raw is not None
                branch, branch_col = raw[:, off], off
            elif b.kind == "genpos":
                assert raw is not None
                genpos = raw[:, off]
                pos_ki = RangeKeyIndex(int(genpos.max()) + 1 if m else 0)
                blocks_ki.append((pos_ki, off))
            else:
                node = occ[b.pos]
                assert node.ki is not None
                if given is not None:
                    parts.append(given[len(parts)])
                else:
                    assert raw is not None
                    parts.append(node.ki.lookup(raw[:, off : off + b.width]))
                blocks_ki.append((node.ki, off))
            off += b.width
        all_parts = parts + ([genpos] if genpos is not None else [])
        n_br = max(rw.n_branches, 1)
        fits = ComposedKeyIndex.fits(blocks_ki, n_br)
        codes = None
        if fits:
            radix = ComposedKeyIndex.radix(blocks_ki, n_br)
            codes = ComposedKeyIndex.encode([branch] + [p + 1 for p in all_parts], radix)
        if rw.sort and runs is not None:
            # sorted order, ties in the input's canonical order
            order = np.lexsort([*all_parts[::-1], branch, runs])
        elif rw.sort:
            order = np.arange(m)
        elif codes is not None:
            # the code sorts like (branch, input indices..., position): canonical order;
            # Spark often returns it already (scans, filters), so check before sorting
            in_order = m < 2 or bool(np.all(codes[1:] > codes[:-1]))
            order = np.arange(m) if in_order else np.argsort(codes, kind="stable")
        else:
            order = np.lexsort(all_parts[::-1] + [branch]) if m else np.arange(0)
        input_blocks = [b for b in rw.blocks if b.kind == "input"]
        tensors: list[Any] = [None] * len(occ)
        for b, idx in zip(input_blocks, parts):
            n_in = occ[b.pos].n
            assert n_in is not None
            tensors[b.pos] = make_tensor(idx[order], n_in)
        if rw.semi is not None:
            tensors = self._semi_tensors(rw, occ, parts[0][order], tensors)
        if len(all_parts) == 1 and branch_col is None:
            idx = all_parts[0][order]
            parent = occ[input_blocks[0].pos]
            assert parent.n is not None and parent.ki is not None
            if m and (bool(np.any(idx < 0)) or int(np.bincount(idx, minlength=parent.n).max()) > 1):
                raise KeyError_("an output record does not map to exactly one input record")
            in_to_out = np.full(parent.n, -1, dtype=np.int64)
            in_to_out[idx] = np.arange(m)
            return m, tensors, MappedKeyIndex(parent.ki, in_to_out, m)
        if codes is None:
            raise Unsupported("the combined key space of this operation is too large")
        ki = ComposedKeyIndex(blocks_ki, branch_col, n_br, codes[order], rw.width)
        if ki.has_duplicates():
            raise KeyError_("two output records carry the same input records")
        return m, tensors, ki

    def _semi_tensors(
        self, rw: Rewrite, occ: list[Node], left_idx: np.ndarray, tensors: list[Any]
    ) -> list[Any]:
        assert rw.semi is not None
        right = [b for b in rw.semi.right if b.kind == "input"]
        n_out = len(left_idx)
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
            raw = self._collect_keys(rw.semi.pairs_plan, lnames + rnames)
            lw = sum(lb.width for lb in rw.semi.left)
            lki = occ[rw.semi.left[0].pos].ki
            rki = occ[b.pos].ki
            assert lki is not None and rki is not None
            li = lki.lookup(raw[:, :lw])
            ri = rki.lookup(raw[:, lw:])
            # a semi join keeps left records in their order: output row = rank among kept
            outs = np.searchsorted(left_idx, li).astype(np.int64)
            tensors[b.pos] = tensor_from_pairs(outs, ri, n_out, n_in)
        return tensors

    def _group_tensors(self, rw: Rewrite, occ: list[Node]) -> tuple[int, list[Any], KeyIndex]:
        import pyarrow as pa
        import pyarrow.compute as pc

        g = rw.group
        assert g is not None
        extra = set(rw.nodes) - _IDENTITY_NODES - {"Aggregate", "Deduplicate", "Distinct", "Expand"}
        if extra:
            raise Unsupported(f"{sorted(extra)} after a grouping step")
        node = occ[g.pos]
        assert node.ki is not None and node.n is not None
        if _takes_every_record(rw):
            # one group of every input record (a global aggregate straight over its
            # input): nothing to read back from Spark
            return _every_record(node)
        if g.flat_plan is not None:
            table = self.jvm.to_df(g.flat_plan).toArrow()
            raw = arrow_keys(table, g.key_cols)
            if g.group_cols:
                parent, n_groups = _group_ids(table, g.group_cols)
            else:  # a global aggregate: one group, even over no rows
                parent, n_groups = np.zeros(len(raw), dtype=np.int64), 1
        else:
            table = self.jvm.to_df(g.members_plan).select(g.members).toArrow()
            col = table.column(g.members).combine_chunks()
            n_groups = len(col)
            flat = pc.list_flatten(col)
            parent = np.asarray(
                pc.list_parent_indices(col).to_numpy(zero_copy_only=False), dtype=np.int64
            )
            raw = arrow_keys(pa.table({"k": flat}), ["k"])
        member = node.ki.lookup(raw)
        gid = arrow_keys(table, [g.gid_col])[:, 0] if g.gid_col is not None else None
        return self._groups(node, member, parent, n_groups, gid)

    def _groups(
        self,
        node: Node,
        member: np.ndarray,
        parent: np.ndarray,
        n_groups: int,
        gid: np.ndarray | None = None,
        ordered: bool = False,
    ) -> tuple[int, list[Any], KeyIndex]:
        """The tensor and key index of a grouping of ``node``'s records: ``member[i]``
        is in group ``parent[i]`` (of grouping set ``gid[i]``); ``ordered``: groups are
        numbered by smallest member already."""
        assert node.ki is not None and node.n is not None
        if ordered:
            rank, out_rows = np.arange(n_groups), parent
        else:
            # groups ordered by their smallest member (set semantics, DESIGN.md §3);
            # groups of different grouping sets with the same smallest member by
            # grouping-set id
            first = np.full(n_groups, np.iinfo(np.int64).max, dtype=np.int64)
            np.minimum.at(first, parent, member)
            group_gid = np.zeros(n_groups, dtype=np.int64)
            if gid is not None:
                group_gid[parent] = gid
            order = np.lexsort((group_gid, first))
            rank = np.empty(n_groups, dtype=np.int64)
            rank[order] = np.arange(n_groups)
            out_rows = rank[parent]
        empty = np.flatnonzero(np.bincount(parent, minlength=n_groups) == 0)
        null_row = int(rank[empty[0]]) if len(empty) else None
        tensor = tensor_from_pairs(out_rows, member, n_groups, node.n)
        ki: KeyIndex
        if gid is not None:
            ki = GroupSetKeyIndex(node.ki, member, gid, out_rows, n_groups)
        else:
            in_to_out = np.full(node.n, -1, dtype=np.int64)
            in_to_out[member] = out_rows
            ki = MappedKeyIndex(node.ki, in_to_out, n_groups, null_row)
        return n_groups, [tensor], ki

    # -- SQL statements and Spark ML stages (capture/_sql.py, capture/_ml.py) ---------
    def _record_extension(self, method: str, obj: Any, args: tuple, kwargs: dict, out: Any) -> bool:
        """Record a wrapped call made on something other than a DataFrame or GroupedData
        (``spark.sql``, an ML ``transform`` or ``fit``); False leaves it to ``_record``."""
        from pyspark.sql import DataFrame

        if isinstance(obj, DataFrame) or hasattr(obj, "_df"):
            return False
        if method == "sql":
            from tensprov_lab.capture._sql import record_statement

            record_statement(self, obj, args, kwargs, out)
            return True
        from tensprov_lab.capture._ml import record_call

        record_call(self, method, obj, args, kwargs, out)
        return True

    def add_source(self, node: Node) -> Node:
        """Register ``node`` (keyed by ``node.ident``) as a source dataset of this run;
        the node already registered under that identity when there is one."""
        known = self.nodes.get(node.ident)
        if known is not None:
            return known
        node.run = self._run_id()
        self.nodes[node.ident] = node
        self.pending.append(node)
        self._fresh.add(node.ident)
        return node

    def add_pending(self, method: str, inputs: list[Node], out: Node, expression: str) -> Node:
        """Record ``out = method(*inputs)`` for an output node built by the caller (its
        ``plan`` is what capture rewrites, ``ident`` what finds it again); the node already
        registered under that identity when there is one."""
        known = self.nodes.get(out.ident)
        if known is not None:
            return known
        assert self._active is not None, "operations are recorded inside a tracked block"
        out.run = self._active.id
        self.nodes[out.ident] = out
        self.pending.append(Pending(method, inputs, out, expression, self._active.id))
        self._index_early(method, inputs)
        return out

    def _index_early(self, method: str, inputs: list[Node]) -> None:
        """Start counting the records of the sources ``method`` is the first to read.

        The count is one Spark job per source (see :meth:`_scan_index`).  Started here,
        in a background thread, it runs while the rest of the block is still building
        DataFrames (work in this process), instead of adding its time to the end of
        the block.  A source whose order is not stable is pinned at the end as before,
        and one first read by a join gets its index from the join's keys.
        """
        for node in inputs:
            if node.ident not in self._fresh:
                continue
            self._fresh.discard(node.ident)
            if method in _READS_SOURCE_KEYS or node.ident in self._early:
                continue
            try:
                with self.quiet():  # the annotation's own DataFrame calls are not the user's
                    if not plan_is_stable(self.jvm, node.plan):
                        continue
                    ann = annotate_source(self.jvm, node.plan, pin=False)
                    ann.key_names()  # asked here: the worker thread only runs the job
            except Exception:  # noqa: BLE001 - left to the end of the block, as before
                continue
            self._early[node.ident] = (ann, self._worker().submit(self._count_quietly, ann))

    def _count_quietly(self, ann: Annotated) -> ScanKeyIndex:
        with self.quiet():  # the worker's DataFrames are capture's own, not the user's
            return self._scan_index(ann)

    def quiet(self) -> Any:
        """A context manager in which wrapped calls are not recorded (for the DataFrames
        capture builds for itself while the block runs)."""
        import contextlib

        @contextlib.contextmanager
        def depth() -> Any:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1

        return depth()


def _group_ids(table: Any, columns: list[str]) -> tuple[np.ndarray, int]:
    """Group number of every row, grouping equal values (and nulls) like Spark does for
    integral, string, boolean and date columns."""
    import pandas as pd

    code, _ = value_codes([table.column(name) for name in columns])
    # hash-based: no sort of every member
    parent, uniq = pd.factorize(code)
    return parent.astype(np.int64), len(uniq)


def _first_consumers(pending: list[Any]) -> dict[int, Pending]:
    """The first recorded operation reading each node (by ``id``)."""
    first: dict[int, Pending] = {}
    for item in pending:
        if isinstance(item, Pending):
            for n in item.inputs:
                first.setdefault(id(n), item)
    return first


def _every_record(node: Node) -> tuple[int, list[Any], KeyIndex]:
    """One output record made from every record of ``node``: its size, tensor and keys."""
    assert node.ki is not None and node.n is not None
    member = np.arange(node.n, dtype=np.int64)
    everything = np.zeros(node.n, dtype=np.int64)
    tensor = tensor_from_pairs(everything, member, 1, node.n)
    return 1, [tensor], MappedKeyIndex(node.ki, everything, 1, 0 if not node.n else None)


def _takes_every_record(rw: Rewrite) -> bool:
    """Whether the operation is one global aggregate over every record of its one input:
    no grouping keys or grouping sets, and only row-preserving steps around it."""
    g = rw.group
    if g is None or g.kind != "aggregate" or g.group_cols or g.gid_col is not None:
        return False
    # flat_plan is None when grouping values cannot be compared exactly: then there are some
    if g.flat_plan is None or len(rw.occurrences) != 1:
        return False
    steps = [n for n in rw.nodes if n not in _IDENTITY_NODES]
    return steps == ["Aggregate"]


def _short_error(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__


def _category(
    rw: Rewrite, n_in_cols: list[int], out_cols: list[str], in_cols: list[list[str]]
) -> str:
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
    if nodes & {"Filter", "Sample", "GlobalLimit", "LocalLimit", "Offset"}:
        return "horizontal_reduction"
    if "Window" in nodes:
        return "window"
    if nodes <= TRIVIAL | {"Sort"}:
        return "trivial"
    if len(out_cols) < n_in_cols[0] and set(out_cols) <= set(in_cols[0]):
        return "vertical_reduction"
    if len(out_cols) > n_in_cols[0]:
        return "vertical_augmentation"
    return "transformation"


def _same_result(a: Any, b: Any) -> bool:
    """Whether two DataFrames compute the same result (one entry of Spark's cache)."""
    if a is b:
        return True
    try:
        return bool(
            a._jdf.queryExecution().analyzed().sameResult(b._jdf.queryExecution().analyzed())
        )
    except Exception:  # noqa: BLE001 - e.g. a DataFrame of a stopped session
        return False


def _records_error(label: str, why: str) -> ValueError:
    return ValueError(f"the records of {label} cannot be read: {why}")


#: class names in a plan's JSON that mean Python code runs when it is computed
_PYTHON_MARKERS = (
    "expressions.PythonUDF",
    "expressions.PythonUDAF",
    "InPandas",
    "InArrow",
    "PythonUDTF",
    "python.",
)


def _ties_exact(rw: Rewrite, inputs: list[Node]) -> bool:
    """Whether Spark returns the output of ``rw`` in canonical order where a sort ties:
    a sort needs key-ordered inputs (it breaks ties by raw keys), anything else keeps
    its inputs' order."""
    return all(n.key_ordered if rw.sort else n.ties_exact for n in inputs)


def _equal_to_previous(col: Any) -> np.ndarray:
    """For rows ``1..m-1`` of an Arrow column: equal to the row before under Spark's
    sort semantics (nulls equal each other, NaN equals NaN)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if len(col) < 2:
        return np.zeros(0, dtype=bool)
    t = col.type
    if pa.types.is_nested(t) or pa.types.is_dictionary(t):
        raise Unsupported(f"ties of a sort on a {t} value cannot be compared exactly")
    a, b = col.slice(1), col.slice(0, len(col) - 1)
    eq = pc.fill_null(pc.equal(a, b), False)
    both_null = pc.and_(pc.is_null(a), pc.is_null(b))
    out = pc.or_(eq, both_null)
    if pa.types.is_floating(t):
        both_nan = pc.fill_null(pc.and_(pc.is_nan(a), pc.is_nan(b)), False)
        out = pc.or_(out, both_nan)
    return np.asarray(out.to_numpy(zero_copy_only=False), dtype=bool)
