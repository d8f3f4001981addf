"""Watching a tracked block: pyspark's DataFrame methods wrapped while it runs, and each
call recorded as ``output = method(inputs)`` (nothing is computed then)."""

from __future__ import annotations

import contextlib
import os
import threading
import weakref
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np

from tensprov_lab._warn import warn
from tensprov_lab.capture.plan._keyed import Annotated
from tensprov_lab.capture.plan._keys import ScanKeyIndex
from tensprov_lab.capture.plan._nodes import (
    Node,
    Pending,
    RunLog,
    _describe,
    bound_dataframes,
    call_inputs,
    named,
)
from tensprov_lab.capture.plan._stable import plan_is_stable
from tensprov_lab.capture.recording._patching import (
    AfterImport,
    Depth,
    patch_methods,
    patch_pandas_api,
    restore,
)
from tensprov_lab.capture.rewrite._annotate import annotate_source
from tensprov_lab.capture.rules import METHODS
from tensprov_lab.capture.sources._direct import direct_count
from tensprov_lab.capture.sources._direct_csv import CheckedFiles
from tensprov_lab.capture.spark._jvm import Jvm
from tensprov_lab.capture.spark._quiet import mark, silence, unmark

if TYPE_CHECKING:
    from tensprov_lab.store import Store

__all__ = ["DATAFRAME_METHODS", "GROUPED_METHODS", "Recording"]

#: DataFrame methods recorded in a tracked block: the ones the rules name (see
#: :mod:`.rules`), and ones whose plans several rules trace or none does (opaque)
DATAFRAME_METHODS = sorted(
    METHODS
    | {
        "transform", "describe", "summary", "mapInPandas", "mapInArrow", "localCheckpoint",
        "checkpoint", "dropDuplicatesWithinWatermark", "sampleBy", "crosstab", "freqItems",
        "transpose", "lateralJoin", "zipWithIndex", "repartitionById",
    }
)  # fmt: skip
GROUPED_METHODS = ["agg", "count", "sum", "avg", "mean", "max", "min", "applyInPandas"]
#: methods whose inner calls are the operations (they only call other methods)
_TRANSPARENT = {"transform"}

#: first consumers that read a source's records anyway (a join reads its keys, see
#: Tracker._join_keys; a filter or aggregate its columns, see _fused), so that counting
#: it early would only scan it twice
_READS_SOURCE_KEYS = {
    "join", "filter", "where", "dropna", "intersect", "intersectAll", "subtract", "exceptAll",
    *GROUPED_METHODS,
}  # fmt: skip


class Recording(Depth):
    """Patching and recording of :class:`~._tracker.Tracker` (a mixin over its registry
    of nodes and the running block)."""

    spark: Any
    jvm: Jvm
    nodes: dict[int, Node]
    store: Store
    pending: list[Pending | Node]
    _local: threading.local
    _patched: list[tuple[type, str, Any]]
    _import_hook: AfterImport | None = None
    _active: RunLog | None
    _plan_idents: weakref.WeakKeyDictionary[Any, int]
    _fresh: set[int]
    _early: dict[int, tuple[Annotated, Future[ScanKeyIndex] | None]]
    _checked: CheckedFiles
    _planless: Iterator[int]

    if TYPE_CHECKING:

        def abort(self) -> None: ...

        def _worker(self) -> ThreadPoolExecutor: ...
        def _scan_index(self, ann: Annotated) -> ScanKeyIndex: ...

    # -- patching ------------------------------------------------------------------
    def _classes(self) -> list[tuple[type, list[str], Callable[[str, Any], bool] | None]]:
        """The classes whose methods are wrapped during a block, each with its method names
        and which calls are *transparent* (the calls they make are the operations)."""
        from pyspark.sql.group import GroupedData

        from tensprov_lab.capture.hops import _ml, _pandas, _pandas_api, _sql
        from tensprov_lab.capture.spark._versions import classic_dataframe

        session = _sql.session_class(self.spark)
        return [
            (classic_dataframe(), DATAFRAME_METHODS, lambda name, obj: name in _TRANSPARENT),
            (GroupedData, GROUPED_METHODS, None),
            (session, ["sql"], None),
            *_pandas.targets(session),
            *_pandas_api.targets(),
            *_ml.targets(),
        ]

    def patch(self) -> None:
        try:
            patch_methods(self, self._classes(), self._patched)
            from tensprov_lab.capture.hops import _pandas_api
            from tensprov_lab.capture.spark._versions import classic_dataframe

            self._import_hook = patch_pandas_api(
                self, classic_dataframe(), self._patched, also=_pandas_api.targets
            )
            from tensprov_lab.capture.hops import _pandas

            for cls, name, make in _pandas.properties():
                had = cls.__dict__.get(name)
                if had is not None:
                    self._patched.append((cls, name, had))
                    setattr(cls, name, make(self, had))
        except BaseException:
            self.abort()  # leave nothing half patched, and no block running
            raise

    def unpatch(self) -> None:
        hook = getattr(self, "_import_hook", None)
        if hook is not None:
            hook.remove()
            self._import_hook = None
        restore(self._patched)

    # -- recording -----------------------------------------------------------------
    _bound_dataframes = staticmethod(bound_dataframes)

    def _name_variables(self, frame: Any, bound: list[tuple[str, Any]] | None = None) -> None:
        from tensprov_lab.capture.hops._pandas_api import spark_frame_of

        for var, value in self._bound_dataframes(frame) if bound is None else bound:
            try:
                # a pandas-on-Spark frame names the DataFrame that holds its values
                value = spark_frame_of(value)
                node = self.nodes.get(self.jvm.ident(self.jvm.plan(value)))
            except Exception:
                continue
            if node is not None and node.name is None:
                node.name = var
                if node.ds_id is not None:
                    self.store.datasets[node.ds_id].name = var

    #: the dataset whose operation is being captured: its variable names the notes
    _current: Node | None = None

    def _named(self, message: str) -> str:
        """``message`` led by the variable holding the operation's result, so that a
        note says which of the user's DataFrames it is about."""
        return named(self._current.name if self._current is not None else None, message)

    def _note(self, message: str) -> None:
        message = self._named(message)
        run = self._active
        if run is not None:
            run.warnings.append(message)
        # in the background, shown when the capture is waited for; in a notebook,
        # listed with the run's summary
        if not self._in_background() and not (run is not None and run.listed):
            warn(message)

    def _in_background(self) -> bool:
        """Whether this is the thread of a background capture."""
        bg = getattr(self, "_background", None)
        return bg is not None and bg.in_capture_thread()

    def _record(self, method: str, obj: Any, args: tuple, kwargs: dict, out: Any) -> None:
        from pyspark.sql import DataFrame

        if self._record_extension(method, obj, args, kwargs, out):
            return
        in_dfs = call_inputs(obj, args, kwargs, out, DataFrame)
        if in_dfs is not None:
            self.record_operation(method, in_dfs, out, args, kwargs)

    def record_operation(
        self, method: str, in_dfs: list[Any], out: Any, args: tuple = (), kwargs: dict | None = None
    ) -> Node | None:
        recorded = self.jvm.recorded(out)
        if recorded is None:  # part of another DataFrame's expression, not a dataset
            return None
        plan, ident = recorded
        if ident in self.nodes:
            return self.nodes[ident]
        inputs: list[Node] = []
        for d in in_dfs:
            if not self.jvm.resolved(d):
                continue  # (a table function of outer references: part of this call)
            node = self.register(d)
            if all(node is not n for n in inputs):
                inputs.append(node)
        self._index_early(method, inputs)
        parts = [_describe(a) for a in args]
        parts += [f"{k}={_describe(v)}" for k, v in (kwargs or {}).items()]
        assert self._active is not None
        node = Node(df=out, plan=plan, ident=ident, run=self._active.id, call=self._call)
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

    # -- SQL statements and Spark ML stages (capture/hops/_sql.py, capture/hops/_ml.py) ---------
    def _record_extension(self, method: str, obj: Any, args: tuple, kwargs: dict, out: Any) -> bool:
        """Record a wrapped call made on something other than a DataFrame or GroupedData
        (``spark.sql``, an ML ``transform`` or ``fit``); False leaves it to ``_record``."""
        from pyspark.sql import DataFrame

        if method in ("toPandas", "createDataFrame"):
            from tensprov_lab.capture.hops._pandas import record_call as record_pandas

            return record_pandas(self, method, obj, args, kwargs, out)  # type: ignore[arg-type]
        if isinstance(obj, DataFrame) or hasattr(obj, "_df"):
            return False
        if method == "sql":
            from tensprov_lab.capture.hops._sql import record_statement

            record_statement(self, obj, args, kwargs, out)  # type: ignore[arg-type]  # the Tracker
            return True
        from tensprov_lab.capture.hops._ml import record_call

        record_call(self, method, obj, args, kwargs, out)  # type: ignore[arg-type]  # the Tracker
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
        if out.call is None:
            out.call = self._call
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
            count = direct_count(self.jvm, node.plan, self._checked)
            job = self._worker().submit(self._count_quietly, ann, early_group(node.ident), count)
            self._early[node.ident] = (ann, job)

    def _count_quietly(
        self, ann: Annotated, group: str, count: Callable[[], np.ndarray] | None = None
    ) -> ScanKeyIndex:
        if count is not None:
            # counted from the files without a job (Parquet footers, a plain CSV file)
            try:
                return ScanKeyIndex(count())
            except Exception:  # noqa: BLE001 - Unreadable, pyarrow's own: Spark counts
                pass
        # its own job group: a count the block's fused reads make useless is cancelled
        sc = self.spark.sparkContext
        silence(self.jvm)  # (a source the block removes meanwhile fails its tasks)
        previous = mark(sc, group)
        try:
            with self.quiet():  # the worker's DataFrames are capture's own, not the user's
                return self._scan_index(ann)
        finally:
            unmark(sc, previous)

    def quiet(self) -> Any:
        """A context manager in which wrapped calls are not recorded (for the DataFrames
        capture builds for itself while the block runs)."""

        @contextlib.contextmanager
        def depth() -> Any:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1

        return depth()


def early_group(ident: int) -> str:
    """The Spark job group of the early count of source ``ident`` (one per tracker
    process and source: ``ident`` is unique among a tracker's nodes)."""
    return f"tensprov-lab-early-{os.getpid()}-{ident}"
