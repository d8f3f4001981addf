"""The tracker: one per SparkSession, running the capture of each tracked block.

While a block is tracked, DataFrame (and GroupedData) methods are wrapped: each call
runs the original method unchanged and records ``output = method(inputs)``
(:mod:`._recording`).  Nothing is computed then.  When the block ends, the wrappers are
removed, the block's fused reads run (:mod:`._fused`), and every recorded operation is
captured in order: its plan is annotated with record keys and its tensors come from the
fused reads or from the keys read back (:mod:`._record_rules`).  Reading records back
for queries is :mod:`._records`; what is kept per dataset and run, :mod:`._nodes`.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from tensprov_lab._warn import warn
from tensprov_lab.capture.hops import _ml, _pandas
from tensprov_lab.capture.memory._budget import Budget
from tensprov_lab.capture.plan._bound import remember
from tensprov_lab.capture.plan._keyed import Annotated, Rewrite, Unsupported
from tensprov_lab.capture.plan._keys import (
    KeyError_,
    LazyScanKeyIndex,
    ScanKeyIndex,
    arrow_keys,
)
from tensprov_lab.capture.plan._nodes import (
    Node,
    Pending,
    Persisting,
    RunLog,
    TensProvWarning,
    _short_error,
    first_consumers,
    persisted,
)
from tensprov_lab.capture.plan._pieces import read_whole
from tensprov_lab.capture.plan._records import RecordReading
from tensprov_lab.capture.plan._stable import plan_is_stable
from tensprov_lab.capture.recording import _context, _guard, _notes
from tensprov_lab.capture.recording._background import BackgroundCapture, Blocks
from tensprov_lab.capture.recording._columns import column_maps
from tensprov_lab.capture.recording._context import context_maps, context_tensors
from tensprov_lab.capture.recording._patching import stamp_call
from tensprov_lab.capture.recording._record_rules import RecordRules
from tensprov_lab.capture.recording._recording import (
    DATAFRAME_METHODS,
    GROUPED_METHODS,
    Recording,
    early_group,
)
from tensprov_lab.capture.rewrite._annotate import annotate_source, rewrite
from tensprov_lab.capture.rules import category_of
from tensprov_lab.capture.sources import _fused
from tensprov_lab.capture.sources._direct import partition_rows
from tensprov_lab.capture.sources._direct_csv import CheckedFiles
from tensprov_lab.capture.sources._direct_files import arrow_ready, ready_arrow
from tensprov_lab.capture.spark._jobs import JobGroup, cancel_running
from tensprov_lab.capture.spark._jvm import Jvm
from tensprov_lab.capture.spark._quiet import silence
from tensprov_lab.capture.spark._versions import sigint_noted, to_arrow
from tensprov_lab.store import Store

__all__ = [
    "Tracker",
    "TensProvWarning",
    "Node",
    "Pending",
    "RunLog",
    "DATAFRAME_METHODS",
    "GROUPED_METHODS",
]


#: first consumers that may give a source its record index from the keys they read
#: (a join, a set operation matched in NumPy): the count waits for them
_INDEXES_SOURCES = {"join", "intersect", "intersectAll", "subtract", "exceptAll"}


class Tracker(Recording, RecordRules, RecordReading, Blocks):
    """Registry of captured DataFrames for one SparkSession, shared by all its runs."""

    #: what-if previews replay operations in Spark (a loaded run's cannot:
    #: ``offline`` says why)
    replays = True

    def __init__(self, spark: Any, store: Store) -> None:
        self.spark = spark
        self.jvm = Jvm(spark)
        self.store = store
        #: whether a Ctrl-C came while the block's capture runs (see sigint_noted)
        self._sigint: Callable[[], bool] = _never
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
        #: bytes of tensors the store may hold in memory (past it they spill to disk)
        self.budget = Budget()
        self.budget.spark = spark
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
        self._early: dict[int, tuple[Annotated, Future[ScanKeyIndex] | None]] = {}
        #: the job group capture's jobs run in, and their count (see _jobs.py)
        self._job_group = JobGroup(spark, lambda: self.jvm.helper_ready)
        self._pool: ThreadPoolExecutor | None = None
        #: the fused reads of the block being captured (see _fused), and the operations
        #: (by output ident) whose tensors came from them
        self._fusion: _fused.Fusion | None = None
        #: the capture of the last block when it runs in the background
        self._background: BackgroundCapture | None = None
        self._fused_done: set[int] = set()
        #: the failures and reasons said in the block being captured (each said once)
        self._said: set[str] = set()
        #: whether to fuse a block's reads (False: one job per operation, as before;
        #: the tests compare the two)
        self.fuse = True
        #: whether a fused read of a Parquet source may read its files directly (False:
        #: every read is a Spark job; the tests compare the two)
        self.direct_reads = True
        #: CSV files found plain in the block being captured (read by its early counts,
        #: then by its fused reads)
        self._checked = CheckedFiles()

    # -- runs ----------------------------------------------------------------------
    def begin(self, name: str | None) -> RunLog:
        run = super().begin(name)
        # the Java helper compiled and Arrow's compute functions registered while the
        # user's code runs, not at the end of the first block
        if not self.jvm.helper_known:
            self._worker().submit(lambda: self.jvm.helper)
        if not arrow_ready.is_set():
            self._worker().submit(ready_arrow)
        return run

    def _worker(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="tensprov-lab-index")
        return self._pool

    def end(
        self,
        frame: Any,
        progress: Callable[[int, int, str], None] | None = None,
        background: bool = False,
    ) -> RunLog:
        """Capture the block that ends; with ``background``, return once the methods are
        restored and the DataFrames the caller's scope binds are noted, the rest (naming
        the datasets after those variables included) running in a thread of its own
        (:mod:`._background`): whatever reads the run waits for it (:meth:`wait`)."""
        run = self._active
        assert run is not None
        self.unpatch()
        if not background:
            with self._job_group.running(), sigint_noted() as seen:
                self._sigint = seen
                try:
                    return self._end(run, frame, progress)
                finally:
                    self._sigint = _never
        bound = self._bound_dataframes(frame)  # the caller's variables, as they are now

        def work() -> None:
            with self._job_group.running():
                self._name_variables(None, bound)
                relay = self._background.relay(progress) if self._background else progress
                self._end(run, None, relay)

        self._background = BackgroundCapture(run, work, self._job_group.cancel, self.spark)
        self._background.start()
        return run

    def _end(
        self, run: RunLog, frame: Any, progress: Callable[[int, int, str], None] | None
    ) -> RunLog:
        try:
            if frame is not None:
                self._name_variables(frame)
            t0 = time.perf_counter()
            silence(self.jvm)  # capture's jobs over what the block removed fail: silently
            pending, self.pending = self.pending, []
            # annotated results read again by later captures are cached for the
            # duration of this capture when recomputing them is costly (Python code)
            self._reused = {
                n.ident for item in pending if isinstance(item, Pending) for n in item.inputs
            }
            # what must not be read at all (streams, removed files) is screened first
            unread = _guard.screen(pending)
            self._fusion = self._fuse(
                [item for item in pending if _ident(item) not in unread], progress
            )
            if self._fusion is not None:
                run.jobs += sum(self._fusion.jobs.values())
                run.file_reads += self._fusion.file_reads
                # the reads' keys come before any operation: spill earlier runs' if need be
                self.budget.over(self.store, self.nodes.values())
            first_use = first_consumers(pending)
            for i, item in enumerate(pending):
                self._stop_point()
                if progress is not None:
                    what = item.method if isinstance(item, Pending) else "source"
                    progress(i, len(pending), what)
                self._current = item.out if isinstance(item, Pending) else item
                with self._job_group.counting() as jobs:
                    try:
                        self._capture_item(item, run, first_use, unread)
                    except Exception as exc:  # noqa: BLE001 - capture's, never the user's
                        if self._sigint():  # (a Ctrl-C some library raised as its error)
                            raise KeyboardInterrupt from None
                        _guard.degrade(self, item, run, exc)
                run.jobs += jobs[0]
                if isinstance(item, Pending):
                    self._account(item, jobs[0])
            self._current = None  # (what follows is about the whole block)
            with self._job_group.counting() as jobs:
                self._index_or_degrade([n for n in pending if isinstance(n, Node)], run)
                try:
                    self._materialize(run)
                except Exception as exc:  # noqa: BLE001 - the provenance is kept all the same
                    self._note(
                        f"capture failed: {_short_error(exc)}; the block's datasets are not "
                        "kept for recomputation"
                    )
            if self.budget.over(self.store, self.nodes.values()):  # spill past the budget
                self._note(self.budget.used_up(self.store, self.nodes.values()))
            run.jobs += jobs[0]
            self._stop_point()
            run.seconds = time.perf_counter() - t0
            run.ended = time.time()
        except KeyboardInterrupt:
            # Ctrl-C: the block's provenance is dropped whole (the store as before the
            # block, earlier runs untouched), then the interrupt goes on to the user
            run.interrupted = True
            raise
        except Exception as exc:  # noqa: BLE001 - the user's block ran: keep what was captured
            self._capture_failed(exc)
        finally:
            self._active, self._fusion, self._current = None, None, None
            self._fused_done = set()
            kept = {id(n.cached) for n in self.by_ds.values() if n.cached is not None}
            for df in self._cached:
                if id(df) not in kept:
                    df.unpersist()
            self._cached, self._reused, self._kept, self._said = [], set(), {}, set()
            self._drop_early()
            self._checked.clear()
            if run.interrupted:
                self.forget([run.id])
        return run

    def _capture_item(
        self,
        item: Pending | Node,
        run: RunLog,
        first_use: dict[int, Pending],
        unread: dict[int, str],
    ) -> None:
        """Capture one operation or source of the block (``unread``: the items not to be
        read, with why; see :func:`._guard.screen`)."""
        why = unread.get(_ident(item))
        if why is not None:  # (later blocks' operations over it are not read either)
            (item.out if isinstance(item, Pending) else item).unread = why
        if isinstance(item, Node):
            if why is not None:
                _guard.unread_source(self, item, run, why)
                return
            consumer = first_use.get(id(item))
            defer = consumer is not None and consumer.method in _INDEXES_SOURCES
            self._capture_source(item, run, defer=defer)
            return
        if why is not None:
            cols, types = self.jvm.columns(item.out.df)
            say = _guard.first_time(self, why)
            _guard.opaque(self, item, run, why, cols, types, 0.0, read=False, say=say)
            return
        try:
            self._capture_operation(item, run)
        finally:
            self._index_or_degrade(item.inputs, run)

    def _cancel_early(self, whole: Callable[[int], bool]) -> None:
        """Cancel the early counts of the sources the fused reads read ``whole`` in scan
        order: those are counted only if a raw key of theirs is ever translated (see
        ``LazyScanKeyIndex``), and a count still running would compete with the
        block's capture for the cores (COMPAS: a second scan of its CSV)."""
        sc = self.spark.sparkContext
        for ident, (ann, future) in list(self._early.items()):
            if future is None or not whole(ident):
                continue
            if not future.cancel():  # running: stop its Spark job
                with contextlib.suppress(Exception):
                    cancel_running(sc, early_group(ident))
            self._early[ident] = (ann, None)

    def _drop_early(self) -> None:
        """Forget the counts started in the block (a source nothing captured): the jobs
        still running finish on their own."""
        for _, future in self._early.values():
            if future is not None:
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
            if df is None:  # (registering a cache plans its query: not in the block)
                fill = why == "not deterministic"  # (run again, it gives other records)
                df = Persisting(self._worker().submit(self._persist, node.ann.plan, fill))
            node.cached = df
            store.datasets[d].materialized = why

    def _persist(self, plan: Any, fill: bool = False) -> Any:
        """``plan`` persisted; ``fill``: its cache filled now, not on first use."""
        with self.quiet():
            df = self.jvm.to_df(plan).persist()
            if fill:
                df.count()
        return df

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
        self.wait()
        if self._active is not None:
            raise RuntimeError(
                "a tracked block is running: forget runs after it ends, not inside it"
            )
        ids = set(run_ids)
        spilled = self.budget.forget(self.store, ids)
        removed = set(self.store.remove_run(ids))
        self.budget.release(spilled)
        last = not set(self.runs) - ids  # no run left: no DataFrame is worth keeping
        gone = [
            (ident, n)
            for ident, n in self.nodes.items()
            if last or n.run in ids or (n.ds_id is not None and n.ds_id in removed)
        ]
        self.budget.release(self.budget.key_files(n for _, n in gone))
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
        # Spark caches by plan: a dataset still tracked may share a dropped one's entry
        kept = [persisted(n.cached) for n in self.nodes.values() if n.cached is not None]
        kept = [k for k in kept + [persisted(k) for k in keep] if k is not None]
        for node in nodes:
            df, node.cached = persisted(node.cached), None
            try:
                if df is not None and not any(_same_result(df, k) for k in kept):
                    df.unpersist()
                plan = node.ann.plan if node.pinned and node.ann is not None else None
                if plan is not None and self.jvm.cls(plan) == "LogicalRDD":
                    plan.rdd().unpersist(False)
            except Exception as exc:  # noqa: BLE001 - report it, keep releasing the rest
                problems.append(f"{self._label(node)}: {_short_error(exc)}")
        return problems

    def _drop_stale(self, fresh: Node) -> None:
        """Release what earlier runs cached from files that have changed since (the
        stamps of ``fresh``, a source over the same files, say so): Spark's cache
        matches a cached plan by its shape, so a later run's plan over the same paths
        would read those records instead of the files' new ones."""
        now = {s.path: s for s in fresh.files or ()}
        stale = [
            n.ds_id
            for n in self.by_ds.values()
            if n is not fresh
            and n.ds_id is not None
            and n.files
            and any(s.path in now and now[s.path] != s for s in n.files)
        ]
        for d in {o for s in stale for o in self.store.downstream(s)}:
            node = self.by_ds.get(d)
            df = persisted(node.cached) if node is not None else None
            if node is not None and df is not None:
                with contextlib.suppress(Exception):
                    df.unpersist()
                node.cached, node.records = None, None

    @staticmethod
    def _label(node: Node) -> str:
        return node.name or f"dataset#{node.ds_id}"

    # -- capture -------------------------------------------------------------------
    def _collect_keys(
        self, plan: Any, names: list[str], keep: bool = False, ident: int | None = None
    ) -> np.ndarray:
        """Read key columns back; ``keep`` caches the whole annotated result for the
        later captures of this run that start from it.  Keys more than one job may
        return to the driver (``spark.driver.maxResultSize``) are read again in pieces
        of scan positions of the result, cached for it (computed once more)."""
        df = self.jvm.to_df(plan)
        if keep:
            df = df.persist()
            self._cached.append(df)
            if ident is not None:
                self._kept[ident] = df
        table = read_whole(df.select(*names), self.jvm.to_arrow, self.spark, cached=keep)
        return arrow_keys(table, names)

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
        # a pinned source reads its copy; the others their files again (stamped at screening)
        if not stable:
            node.files = None
        if node.files:
            self._drop_stale(node)
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
            fusion.direct = self.direct_reads
            fusion.checked = self._checked
            fusion.size_of = lambda ident: self.nodes[ident].n if ident in self.nodes else None
            # before the reads start: a count still running would compete with them
            # for the cores (a read that fails then counts its source at the end)
            self._cancel_early(fusion.reads_whole)
            if fusion.reads and progress is not None:
                progress(0, len(pending), "reading sources")
            fusion.fetch(self._job_group.counting)
        except Exception as exc:  # noqa: BLE001 - every operation takes its own job
            self._note(f"fused capture not used ({_short_error(exc)})")
            return None
        return fusion

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

    def _index_or_degrade(self, nodes: list[Node], run: RunLog) -> None:
        """:meth:`_index_deferred`, a source it fails on recorded without records."""
        for node in nodes:
            try:
                self._index_deferred([node])
            except Exception as exc:  # noqa: BLE001 - capture's own failure: coarse
                _guard.degrade(self, node, run, exc)

    def _early_index(self, node: Node) -> ScanKeyIndex | None:
        """The record index counted for ``node`` while the block ran (None: none was, or
        the job failed, and counting again says why)."""
        early = self._early.pop(node.ident, None)
        if early is None or early[0] is not node.ann or early[1] is None:
            return None
        try:
            return early[1].result()
        except Exception:  # noqa: BLE001 - counted again, in this thread
            return None

    def _set_index(self, node: Node, ki: ScanKeyIndex) -> None:
        node.ki, node.n, node.deferred = ki, ki.n, False
        self._dataset(node).n_rows = ki.n
        if node.plan is not None and not self.jvm.children(node.plan):
            remember(node.plan, ki.n)  # its consumers' reads need not count it again

    def _scan_index(self, ann: Annotated) -> ScanKeyIndex:
        """Partition sizes of a keyed source: from its Parquet files' footers, else one
        small aggregate instead of every key."""
        from pyspark.sql import functions as F

        rows = partition_rows(self.jvm, ann.plan)
        if rows is not None:
            return ScanKeyIndex(rows)

        key = F.col(ann.key_names()[0])
        sizes = to_arrow(
            self.jvm.to_df(ann.plan)
            .groupBy(F.shiftright(key, 33).alias("p"))
            .agg((F.max(key.bitwiseAND((1 << 33) - 1)) + 1).alias("n"))
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
            _ml.capture_fit(self, p, run, t0)
            return
        cols, types = self.jvm.columns(p.out.df)
        in_nodes = p.inputs
        if p.out.opaque_reason is not None:
            if _pandas.capture_hop(self, p, run, cols, types, t0):
                return
            why = p.out.opaque_reason.format(upstream=self._label(in_nodes[0]))
            _guard.opaque(self, p, run, why, cols, types, 0.0)
            return
        unreadable = [n for n in in_nodes if n.ann is None or (n.ki is None and not n.deferred)]
        if unreadable:
            # its input's cause was said when that input was recorded: one warning a cause
            why = "an input has no record-level provenance"
            _guard.opaque(self, p, run, why, cols, types, 0.0, say=False)
            return
        if self.budget.over(self.store, self.nodes.values()):
            why = self.budget.used_up(self.store, self.nodes.values())
            _guard.opaque(self, p, run, why, cols, types, 0.0)
            return
        try:
            rw = rewrite(self.jvm, p.out.plan, [(n.plan, n.ann) for n in in_nodes])  # type: ignore[misc]
            context = _context.context_positions(in_nodes, rw.occurrences, p.out.context)
            if sorted(set(rw.occurrences) | set(context)) != list(range(len(in_nodes))):
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
            ctx_nodes = [in_nodes[i] for i in context]
            self._index_deferred(ctx_nodes)
            tensors = [*tensors, *context_tensors(n_out, ctx_nodes)]
        except (Unsupported, KeyError_) as exc:
            _guard.opaque(self, p, run, str(exc), cols, types, time.perf_counter() - t0)
            return
        except Exception as exc:  # a Spark error while reading keys back
            why = f"capture failed: {_short_error(exc)}"
            say = _guard.first_time(self, why)  # one failure, said once per block
            _guard.opaque(self, p, run, why, cols, types, time.perf_counter() - t0, say=say)
            return
        in_cols = [self._dataset(n).columns for n in occ_nodes]
        category = category_of(rw, [len(c) for c in in_cols], cols, in_cols)
        nondet, warns, said = _notes.determinism(self, p, rw, occ_nodes, len(cols), in_cols, n_out)
        attrs = column_maps(self, p, rw.occurrences, len(cols), in_cols)
        if ctx_nodes:
            context_maps(attrs, len(cols), [self._dataset(n).columns for n in ctx_nodes])
            rw.replay_blockers.append(_context.CONTEXT_BLOCKER)
            rw.drops_change_others = True
            occ_nodes = [*occ_nodes, *ctx_nodes]
        ds = self.store.add_dataset(
            p.out.name, columns=cols, dtypes=types, n_rows=n_out, run=run.id,
            hidden=category == "trivial",
        )  # fmt: skip
        op = self._add_operation(
            ds.id, p.method, category, [n.ds_id for n in occ_nodes], tensors,
            expression=p.expression, nondeterministic=nondet, contextual=rw.contextual,
            trivial=category == "trivial", warnings=warns,
            replay_blocker=rw.replay_blockers[0] if rw.replay_blockers else None,
            drops_vanish=not rw.drops_change_others
            and all(r is not None and r.drops_vanish for r in rw.rules),
            seconds=time.perf_counter() - t0, run=run.id, **attrs,
        )  # fmt: skip
        p.out.ann = Annotated(rw.plan, rw.keys, rw.width)
        p.out.ki, p.out.n, p.out.ds_id = ki, n_out, ds.id
        p.out.key_ordered = not rw.sort and all(n.key_ordered for n in occ_nodes)
        p.out.ties_exact = _ties_exact(rw, occ_nodes)
        # (a node's finish, set off by its ds_id, may have dropped notes: an ML stage's)
        self._recorded(run, p.out, op.id, [w for w in said if w in op.warnings])

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
        stamp_call(self.store.operations[op_id], node.call)
        run.operations.append(op_id)
        run.datasets.append(node.ds_id)
        for note in notes:
            self._note_done(run, note)

    def _note_done(self, run: RunLog, message: str) -> None:
        message = self._named(message)
        run.warnings.append(message)
        if not self._in_background() and not run.listed:
            warn(message)


def _ident(item: Pending | Node) -> int:
    return item.out.ident if isinstance(item, Pending) else item.ident


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


def _ties_exact(rw: Rewrite, inputs: list[Node]) -> bool:
    """Whether Spark returns the output of ``rw`` in canonical order where a sort ties:
    a sort needs key-ordered inputs (it breaks ties by raw keys), anything else keeps
    its inputs' order; a sort without ties gives the canonical order whatever its
    inputs' (the pandas API's ``sort_values`` breaks ties by a unique number)."""
    if rw.sort and rw.sort_total:
        return True
    return all(n.key_ordered if rw.sort else n.ties_exact for n in inputs)


def _never() -> bool:
    return False
