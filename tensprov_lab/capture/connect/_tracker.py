"""The tracker of a Spark Connect session: no py4j, no driver JVM on the client.

While a block is tracked, the Connect DataFrame (and GroupedData) methods are wrapped
and each call is recorded as ``output = method(inputs)``, as for a classic session.
When the block ends, every recorded operation is captured in order: its plan (the
client's protobuf tree) is rewritten to carry record keys (:mod:`._rewrite`), the server
runs it, and only the key columns come back (one Spark job per dataset; an aggregate's
groups take one more).  The tensors are built from the keys as for a classic session,
so queries, exports and the explorer work on the result unchanged.

What differs from a classic session is listed in ``docs/connect.md``.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any

import numpy as np

from tensprov_lab._warn import warn
from tensprov_lab.capture.connect import _fused
from tensprov_lab.capture.connect._ahead import read_ahead, read_source
from tensprov_lab.capture.connect._arrow import read_all, read_pieces
from tensprov_lab.capture.connect._attributes import attribute_maps, decomposition
from tensprov_lab.capture.connect._direct import read_direct
from tensprov_lab.capture.connect._groups import (
    EXACT_GROUP_TYPES,
    Ride,
    plain_grouping,
    plan_rides,
    trace_groups,
)
from tensprov_lab.capture.connect._hops import HOP, capture_hop, record_hop
from tensprov_lab.capture.connect._hops import REASON as HOP_REASON
from tensprov_lab.capture.connect._index import (
    PARTITION,
    Index,
    JoinedKeyIndex,
    KeyIndex,
    Unidentifiable,
    cross_records,
    key_array,
    scan_keys,
)
from tensprov_lab.capture.connect._nodes import CNode, CPending
from tensprov_lab.capture.connect._operation import (
    SAME_RECORDS,
    category_of,
    chain,
    check_limit,
    drops_vanish,
    generates,
    origin,
    own_expressions,
    relations,
)
from tensprov_lab.capture.connect._records import read_records
from tensprov_lab.capture.connect._rewrite import Annotator
from tensprov_lab.capture.connect._sql import SQL, VIEW_METHODS, capture_sql, record_sql
from tensprov_lab.capture.connect._windows import Unframed, trace_windows
from tensprov_lab.capture.memory._budget import Budget
from tensprov_lab.capture.plan import _proto as P
from tensprov_lab.capture.plan._connect import (
    Unsupported,
    global_aggregate,
    sorted_input,
)
from tensprov_lab.capture.plan._connect import (
    stable as is_stable,
)
from tensprov_lab.capture.plan._nodes import (
    ROW,
    RunLog,
    _describe,
    _short_error,
    bound_dataframes,
    call_inputs,
    named,
)
from tensprov_lab.capture.recording._background import BackgroundCapture, Blocks
from tensprov_lab.capture.recording._patching import (
    AfterImport,
    Depth,
    patch_methods,
    patch_pandas_api,
    restore,
    stamp_call,
)
from tensprov_lab.store import AllTensor, IdentityTensor, Store, make_tensor, tensor_from_pairs

__all__ = ["ConnectTracker", "is_connect"]

#: Connect DataFrame methods recorded in a tracked block (those the client builds one
#: relation for; the others call these)
DATAFRAME_METHODS = [
    "alias", "coalesce", "crossJoin", "distinct", "drop", "dropDuplicates", "dropna",
    "drop_duplicates", "fillna", "filter", "hint", "join", "limit", "orderBy", "replace",
    "repartition", "repartitionByRange", "sample", "select", "selectExpr", "sort",
    "sortWithinPartitions", "toDF", "union", "unionAll", "unionByName", "where",
    "withColumn", "withColumnRenamed", "withColumns", "withColumnsRenamed", "offset",
    "intersect", "intersectAll", "subtract", "exceptAll", "localCheckpoint", "checkpoint",
    "unpivot", "melt", "mapInPandas", "mapInArrow", "transform", "tail", "describe",
    "summary", "withMetadata", "observe", "dropDuplicatesWithinWatermark", "to", "withWatermark",
]  # fmt: skip
GROUPED_METHODS = ["agg", "count", "sum", "avg", "mean", "max", "min", "pivot", "applyInPandas"]
_TRANSPARENT = {"transform"}


def is_connect(spark: Any) -> bool:
    """Whether ``spark`` is a Spark Connect session."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


class ConnectTracker(Depth, Blocks):
    """Registry of captured DataFrames of one Spark Connect session."""

    jvm = None
    #: operations are replayed as Connect plans (tensprov_lab.replay._connect)
    replays = True

    def __init__(self, spark: Any, store: Store) -> None:
        self.spark = spark
        self.store = store
        self.nodes: dict[int, CNode] = {}
        self.by_ds: dict[int, CNode] = {}
        self.runs: dict[int, RunLog] = {}
        self.pending: list[CPending | CNode] = []
        self.budget = Budget()
        self.budget.spark = spark
        #: aggregates whose grouping values ride along an earlier read (this capture's)
        self._rides: list[Ride] = []
        #: views registered from tracked DataFrames, by lower-case name (._sql)
        self.views: dict[str, CNode] = {}
        #: the fused reads of the capture running now (._fused)
        self._fusion: _fused.Fusion | None = None
        self.materialize = "auto"
        #: read a plain Parquet source's keys and fused reads from its files on the
        #: client when the server is local (:mod:`._direct`); tests turn it off to
        #: compare with Spark's reads
        self.direct_reads = True
        #: what :func:`._direct.layout_conf` learns once a session
        self._layout_cache: dict[str, Any] = {}
        self._active: RunLog | None = None
        self._patched: list[tuple[type, str, Any]] = []
        self._import_hook: AfterImport | None = None
        self._local = threading.local()
        #: the capture running in the background (``track(..., background=True)``)
        self._background: BackgroundCapture | None = None
        #: column names of relations by plan id, for replays' rewrites (each asks the
        #: server once)
        self.replay_columns: dict[int, list[str]] = {}
        #: replay a few records on the client when it can (tensprov_lab.replay._client)
        self.client_replays = True

    # -- runs ----------------------------------------------------------------------------
    def end(self, frame: Any, progress: Any = None, background: bool = False) -> RunLog:
        """Capture the block that ends; with ``background``, return once the methods are
        restored and the caller's DataFrames noted, the capture running in a thread of
        its own (:class:`~tensprov_lab.capture.recording._background.BackgroundCapture`)."""
        run = self._active
        assert run is not None
        self.unpatch()
        tag = f"tensprov-lab-capture-{run.id}"
        if not background:
            return self._end(run, frame, progress, tag)
        bound = bound_dataframes(frame)  # the caller's variables, as they are now

        def work() -> None:
            self._end(run, None, progress, tag, bound)

        def cancel_jobs() -> None:
            with contextlib.suppress(Exception):
                self.spark.interruptTag(tag)

        self._background = BackgroundCapture(run, work, cancel_jobs)
        self._background.start()
        return run

    def _end(self, run: RunLog, frame: Any, progress: Any, tag: str, bound: Any = None) -> RunLog:
        # the capture's jobs carry a tag of their own (tags belong to the thread that
        # adds them): Ctrl-C or run.cancel() interrupts them on the server
        with contextlib.suppress(Exception):
            self.spark.addTag(tag)
        try:
            t0 = time.perf_counter()
            # named first, so that notes name datasets by their variables
            if frame is not None:
                self._name_variables(frame)
            elif bound is not None:
                self._name_bound(bound)
            pending, self.pending = self.pending, []
            self._rides = plan_rides(pending, plain_grouping, relations, generates)
            self._fusion = _fused.plan(self, pending, chain, self._rides)
            annotator = self._annotator()
            read_ahead(self, pending, annotator, tag)
            for i, item in enumerate(pending):
                if progress is not None:
                    what = item.method if isinstance(item, CPending) else "source"
                    progress(i, len(pending), what)
                self._current = item.out if isinstance(item, CPending) else item
                if isinstance(item, CPending):
                    self._fusion.prefetch.settle()  # (see ._ahead.read_ahead)
                    self._capture_operation(item, run, annotator)
                else:
                    self._capture_source(item, run, annotator)
                # spill past the budget as it is reached, not only at the end
                self.budget.over(self.store, self.nodes.values())
                self._stop_point()
            self._current = None  # (what follows is about the whole block)
            if self.budget.over(self.store, self.nodes.values()):
                self._note(self.budget.used_up(self.store, self.nodes.values()))
            run.seconds = time.perf_counter() - t0
            run.ended = time.time()
        except KeyboardInterrupt:
            # the block's provenance is dropped whole, as on a classic session
            run.interrupted = True
            with contextlib.suppress(Exception):
                self.spark.interruptTag(tag)
            raise
        except Exception as exc:  # noqa: BLE001 - the user's block ran: keep what was captured
            self._capture_failed(exc)
        finally:
            # the fused reads' columns and the values that rode along go with the
            # capture that read them
            if self._fusion is not None:
                self._fusion.prefetch.close()
            self._active, self._fusion, self._rides, self._current = None, None, [], None
            with contextlib.suppress(Exception):
                self.spark.removeTag(tag)
            if run.interrupted:
                self.forget([run.id])
        return run

    def abort(self) -> None:
        self.unpatch()
        self.pending = []
        self._active = None

    def forget(self, run_ids: list[int], keep: list[Any] | None = None) -> list[str]:
        self.wait()
        if self._active is not None:
            raise RuntimeError(
                "a tracked block is running: forget runs after it ends, not inside it"
            )
        ids = set(run_ids)
        spilled = self.budget.forget(self.store, ids)  # files and tables past the budget
        removed = set(self.store.remove_run(ids))
        self.budget.release(spilled)
        gone = [
            ident for ident, node in self.nodes.items()
            if node.run in ids or (node.ds_id is not None and node.ds_id in removed)
        ]  # fmt: skip
        self.budget.release(self.budget.key_files(self.nodes[i] for i in gone))
        for ident in gone:
            kept = self.nodes.pop(ident).kept
            if kept is not None:  # a keyed source persisted for replays
                with contextlib.suppress(Exception):
                    kept.unpersist()
        for d in removed:
            self.by_ds.pop(d, None)
        for r in ids:
            log = self.runs.pop(r, None)
            if log is not None:
                log.forgotten = True
        return []

    # -- recording -------------------------------------------------------------------------
    def patch(self) -> None:
        from pyspark.sql.connect.dataframe import DataFrame
        from pyspark.sql.connect.group import GroupedData

        transparent = lambda name, obj: name in _TRANSPARENT  # noqa: E731
        from pyspark.sql.connect.session import SparkSession

        targets = [
            (DataFrame, DATAFRAME_METHODS, transparent),
            (GroupedData, GROUPED_METHODS, None),
            # hops through pandas (._hops), views and SQL statements (._sql)
            (DataFrame, ["toPandas", *VIEW_METHODS], None),
            (SparkSession, ["createDataFrame", "sql"], None),
        ]
        try:
            patch_methods(self, targets, self._patched)
            self._import_hook = patch_pandas_api(self, DataFrame, self._patched)
        except BaseException:
            self.abort()
            raise

    def unpatch(self) -> None:
        hook = getattr(self, "_import_hook", None)
        if hook is not None:
            hook.remove()
            self._import_hook = None
        restore(self._patched)

    def _record(self, method: str, obj: Any, args: tuple, kwargs: dict, out: Any) -> None:
        from pyspark.sql.connect.dataframe import DataFrame

        if record_hop(self, method, obj, args, kwargs, out):
            return
        if record_sql(self, method, obj, args, kwargs, out):
            return
        frames = call_inputs(obj, args, kwargs, out, DataFrame)
        if frames is None or out._plan._plan_id in self.nodes:
            return
        inputs: list[CNode] = []
        for d in frames:
            node = self.register(d)
            # a DataFrame joined with itself is both of the join's inputs (as on a
            # classic session); elsewhere one input
            if method == "join" or all(node is not n for n in inputs):
                inputs.append(node)
        parts = [_describe(a) for a in args] + [f"{k}={_describe(v)}" for k, v in kwargs.items()]
        self.add_pending(method, inputs, out, f"{method}({', '.join(parts)})")

    def add_pending(self, method: str, inputs: list[CNode], out: Any, expression: str) -> None:
        """Note an operation of the block, to capture at its end."""
        assert self._active is not None
        node = CNode(df=out, ident=out._plan._plan_id, run=self._active.id, call=self._call)
        self.nodes[node.ident] = node
        self.pending.append(CPending(method, inputs, node, expression, self._active.id))

    def register(self, df: Any) -> CNode:
        """The node of an input DataFrame; a new one becomes a source of the block."""
        ident = df._plan._plan_id
        node = self.nodes.get(ident)
        if node is None:
            node = self.nodes[ident] = CNode(df=df, ident=ident, run=self._run_id())
            self.pending.append(node)
        return node

    def _run_id(self) -> int | None:
        return None if self._active is None else self._active.id

    #: the dataset whose operation is being captured: its variable names the notes
    _current: CNode | None = None

    def _note(self, message: str) -> None:
        message = named(self._current.name if self._current is not None else None, message)
        run = self._active
        if run is not None:
            run.warnings.append(message)
        bg = self._background
        in_thread = bg is not None and bg.in_capture_thread()  # (shown at the first wait)
        if not in_thread and not (run is not None and run.listed):
            warn(message)

    def _name_variables(self, frame: Any) -> None:
        self._name_bound(bound_dataframes(frame))

    def _name_bound(self, bound: Any) -> None:
        """Name datasets after the variables (``(name, DataFrame)`` pairs) bound to
        them."""
        from tensprov_lab.capture.hops._pandas_api import spark_frame_of

        for var, value in bound:
            try:
                # a pandas-on-Spark frame names the DataFrame that holds its values
                node = self.node_of(spark_frame_of(value))
            except Exception:  # noqa: BLE001 - values not held by a dataset yet
                continue
            if node is not None and node.name is None:
                node.name = var
                if node.ds_id is not None:
                    self.store.datasets[node.ds_id].name = var

    # -- capture ---------------------------------------------------------------------------
    def _schema(self, node: CNode) -> tuple[list[str], list[str]]:
        fields = self.fields(node)
        return [f.name for f in fields], [f.dataType.simpleString() for f in fields]

    def fields(self, node: CNode) -> list[Any]:
        """Dataset ``node``'s schema fields (:meth:`._fused.Fusion.schema`)."""
        if self._fusion is None:
            return list(node.df.schema.fields)
        return self._fusion.schema(self.nodes, node)

    def _keys(self, rel: Any, names: list[str]) -> np.ndarray:
        """The key columns ``names`` of the rewritten relation ``rel``, read back (one
        Spark job): one row per record, in the order Spark returns them; -1 for null."""
        return self._read(rel, names, [])[0]

    def _scan_keys(self, rel: Any, names: list[str]) -> np.ndarray:
        """:meth:`_keys` of a relation keyed as a source (``names``: its scan key), read
        in pieces of scan positions (:func:`~._arrow.read_pieces`)."""
        if len(names) != 1:
            return self._keys(rel, names)
        key = names[0]
        table = read_pieces(self.spark, rel, key, lambda piece: P.select(piece, [P.col(key)]), 8)
        return key_array(table, names)

    def _read(self, rel: Any, names: list[str], along: list[str]) -> tuple[np.ndarray, list[Any]]:
        """:meth:`_keys`, and the user's columns ``along`` read in the same job (Arrow
        arrays in the same row order); past the server's ``spark.driver.maxResultSize``,
        in pieces of the result cached for the purpose (computed once more)."""
        from pyspark.sql import functions as F

        df = P.dataframe(self.spark, rel)
        if not names and not along:
            n = df.count()
            return np.zeros((n, 0), dtype=np.int64), []
        cols = [F.col(f"`{k}`") for k in names] + [F.col(f"`{c}`") for c in along]
        table = read_all(self.spark, P.relation(df.select(*cols)), batches=False)
        return key_array(table, names), [table.column(c) for c in along]

    def _along(self, p: CPending) -> tuple[list[Ride], list[str]]:
        """The rides (:class:`._groups.Ride`) whose grouping values are read with the keys of
        ``p``'s output, and the columns to read: each of an exact type, one column of
        that name."""
        rides = [r for r in self._rides if r.root == p.out.ident]
        if not rides:
            return [], []
        cols, types = self._schema(p.out)
        low = [c.lower() for c in cols]
        fit = [
            r for r in rides
            if all(low.count(n.lower()) == 1 and types[low.index(n.lower())]
                   in EXACT_GROUP_TYPES for n in r.names)
        ]  # fmt: skip
        along = list(dict.fromkeys(cols[low.index(n.lower())] for r in fit for n in r.names))
        return fit, along

    def _key_source(self, node: CNode, annotator: Annotator) -> str:
        """Make ``node`` a source of the rewrite: keyed by scan position (pinned first
        when its plan does not give its records in the same order every time)."""
        rel = P.relation(node.df)
        stable = is_stable(rel)
        if not stable:
            pinned = node.df.localCheckpoint(eager=True)
            rel = P.relation(pinned)
            node.cached = pinned
        node.source = rel
        annotator.rekey(node.ident, rel)
        return "" if stable else " (pinned: order not stable)"

    def _annotator(self) -> Annotator:
        """A rewrite that knows every dataset tracked so far (a block may read the
        DataFrames of an earlier one) and the sources keyed so far."""
        sources = {n.ident: n.source for n in self.nodes.values() if n.source is not None}
        return Annotator(self.spark, sources, set(self.nodes))

    def _capture_source(self, node: CNode, run: RunLog, annotator: Annotator) -> None:
        note = self._key_source(node, annotator)
        keyed = annotator.annotate(P.relation(node.df))
        fusion = self._fusion
        reads = fusion.reads.get(node.ident) if fusion is not None else None
        cols, types = self._schema(node)
        keys, table = None, None
        if len(keyed.keys) == 1:
            keys, table = read_direct(self, node, reads or {}, list(zip(cols, types)))
        spark_read = keys is None
        if keys is None and reads:
            try:
                assert fusion is not None
                table, compact = fusion.prefetch.result(
                    f"read {node.ident}",
                    lambda: read_source(self.spark, node.source, keyed.rel, keyed.keys, reads),
                )
                keys = scan_keys(table.column(PARTITION).to_numpy()) if compact else \
                    key_array(table, keyed.keys)  # fmt: skip
            except Exception:  # noqa: BLE001 - a condition Spark refuses: no fusion here
                self._stop_point()  # (or the capture was cancelled, its job interrupted)
                table = None
        if keys is None:
            keys = self._scan_keys(keyed.rel, keyed.keys)
        first = keys[:, 0]
        # read in scan order, as Spark returns a source: no sort, no copy of its columns
        order = None if bool(np.all(first[1:] > first[:-1])) else \
            np.argsort(first, kind="stable")  # fmt: skip
        if fusion is not None and table is not None:
            fusion.took(node.ident, table, order)
        node.index = KeyIndex(keys if order is None else keys[order])
        ds = self.store.add_dataset(
            node.name, columns=cols, dtypes=types, n_rows=node.index.n, role="source",
            run=run.id, origin=f"{origin(node.source)}{note}",
        )  # fmt: skip
        node.ds_id = ds.id
        self.by_ds[ds.id] = node
        run.datasets.append(ds.id)
        run.jobs += int(spark_read)

    def _capture_operation(self, p: CPending, run: RunLog, annotator: Annotator) -> None:
        t0 = time.perf_counter()
        if p.method == SQL:
            capture_sql(self, p, run, annotator, t0)
            return
        rel = P.relation(p.out.df)
        ids = [n.ident for n in p.inputs]
        kinds = chain(rel, set(ids))
        cols, types = self._schema(p.out)
        in_cols = [self.store.datasets[n.ds_id].columns for n in p.inputs if n.ds_id is not None]
        contributing, influencing, exact = attribute_maps(rel, in_cols, cols, ids)
        if len(kinds) != 1:  # several relations in one call: maps of the top one only
            contributing = [np.ones_like(c) for c in contributing]
            exact = False
        exprs = own_expressions(rel, set(ids))
        nondet = any(P.nondeterministic(e) for e in exprs)
        window = any(e.WhichOneof("expr_type") == "window" for e in exprs)
        notes: list[str] = []
        jobs_before = run.jobs
        try:
            if p.method == HOP:
                if capture_hop(self, p, run, annotator, cols, types, t0):
                    return
                label = self.store.datasets[p.inputs[0].ds_id].label  # type: ignore[index]
                raise Unsupported(HOP_REASON.format(upstream=label))
            if any(n.index is None for n in p.inputs):
                raise Unsupported("an input that was not traced record by record")
            if nondet and kinds - {"project", "with_columns"}:
                raise Unsupported("a non-deterministic expression that decides which records")
            framed = self._trace_window(p, rel, annotator, run, notes) if window else None
            if framed is not None:
                n_out, tensors, index, category = framed
            else:
                n_out, tensors, index, category = self._trace(p, rel, kinds, annotator, run)
        except (Unsupported, Unidentifiable) as exc:
            self._opaque(p, run, annotator, cols, types, f"{p.method}: {exc}", t0,
                         contributing, influencing, exact)  # fmt: skip
            return
        except Exception as exc:  # noqa: BLE001 - coarse lineage, with the reason
            self._opaque(p, run, annotator, cols, types, f"{p.method}: {_short_error(exc)}",
                         t0, contributing, influencing, exact)  # fmt: skip
            return
        if window:
            category = "window"
        if P.kind(rel) == "limit" and not sorted_input(rel):
            nondet = True  # whichever records Spark reads first, as on a classic session
        if nondet:
            notes.append(
                f"{p.expression} is not deterministic: its records may differ between "
                "executions, and so may their provenance"
            )
        subset = list(rel.deduplicate.column_names) if P.kind(rel) == "deduplicate" else []
        if category == "dedup" and subset and len(set(subset)) < len(cols):
            nondet = True
            notes.append(
                f"{p.expression} keeps an arbitrary record of each group; the provenance "
                "lists every record of the group"
            )
        if window and framed is None:
            notes.append(
                "window function: over Spark Connect its lineage is the record's own input "
                "row (the localized answer); the frame is not traced here"
            )
        for w in notes:
            self._note(f"{p.method}: {w}")
        p.out.index = index
        ds = self.store.add_dataset(p.out.name, columns=cols, dtypes=types, n_rows=n_out,
                                    run=run.id, hidden=category == "trivial")  # fmt: skip
        p.out.ds_id = ds.id
        self.by_ds[ds.id] = p.out
        run.datasets.append(ds.id)
        op = self.store.add_operation(
            p.method, category, [n.ds_id for n in p.inputs], ds.id, tensors,  # type: ignore[misc]
            expression=p.expression, run=run.id, seconds=time.perf_counter() - t0,
            nondeterministic=nondet, contextual=window or category == "window",
            contributing=contributing, influencing=influencing, attributes_exact=exact,
            warnings=notes, jobs=run.jobs - jobs_before,
            trivial=category == "trivial",
            decomposition=decomposition(rel, in_cols[0], cols) if kinds == {"aggregate"}
            and len(in_cols) == 1 else None,
            drops_vanish=drops_vanish(rel, set(ids)),
        )  # fmt: skip
        stamp_call(op, p.out.call)
        run.operations.append(op.id)

    def _trace_window(
        self, p: CPending, rel: Any, annotator: Annotator, run: RunLog, notes_out: list[str]
    ) -> tuple[int, list[Any], Index, str] | None:
        """A withColumn or select of window functions over one input: every record from
        its frames (None: not that shape, or frames the plan does not tell; the caller
        then gives the localized answer with a warning)."""
        if len(p.inputs) != 1 or len(relations(rel, {p.inputs[0].ident})) != 1:
            return None
        if generates(rel, p):
            return None
        (node,) = p.inputs
        assert node.index is not None
        kid = annotator.annotate(P.children(rel)[0])
        keys = kid.ids.get(node.ident)
        if keys is None:
            return None
        try:
            tensor, notes, jobs = trace_windows(
                self.spark, rel, kid, keys, node.index, self._schema(p.out)[0]
            )
        except Unframed:
            return None
        run.jobs += jobs
        notes_out.extend(f"window: {note}" for note in notes)
        return node.index.n, [tensor], node.index, "window"

    def _trace(
        self, p: CPending, rel: Any, kinds: set[str], annotator: Annotator, run: RunLog
    ) -> tuple[int, list[Any], Index, str]:
        """The records of one operation: output size, tensors, index, category."""
        top = P.kind(rel)
        if top in ("aggregate", "deduplicate") and kinds == {top}:
            return self._trace_groups(p, rel, annotator, run)
        if kinds == {"project"} and len(p.inputs) == 1 and global_aggregate(rel):
            (node,) = p.inputs  # one record of every input record: no job
            assert node.index is not None
            one = KeyIndex(np.zeros((1, 0), np.int64))
            return 1, [AllTensor(1, node.index.n)], one, "aggregate"
        if kinds <= SAME_RECORDS and len(p.inputs) == 1 and not generates(rel, p):
            # the input's records, one for one and in order: no job
            (node,) = p.inputs
            assert node.index is not None
            in_cols = self.store.datasets[node.ds_id].columns  # type: ignore[index]
            out_cols = self._schema(p.out)[0]
            category = category_of(kinds, rel, node.index.n, node.index.n, in_cols, out_cols)
            return node.index.n, [IdentityTensor(node.index.n)], node.index, category
        fused = self._fused(p, kinds)
        if fused is not None:
            return fused
        cross = cross_records(rel, p.inputs) if kinds == {"join"} and top == "join" else None
        if cross is not None:
            return cross
        if kinds == {"limit"} and sorted_input(rel):
            check_limit(self.spark, rel, annotator)
            run.jobs += 1
        keyed = annotator.annotate(rel)
        rides, along = self._along(p) if keyed.semi is None else ([], [])
        keys, values = self._read(keyed.rel, keyed.keys, along)
        run.jobs += 1
        position = {k: i for i, k in enumerate(keyed.keys)}
        if keyed.semi is not None:
            return self._trace_semi(p, keyed, keys, position, run)
        idx = []
        twice = len({n.ident for n in p.inputs}) < len(p.inputs)
        for s, node in enumerate(p.inputs):
            # a self-join: the input's identity comes from each side in turn
            ids = keyed.side_ids[s] if twice and len(keyed.side_ids) == len(p.inputs) \
                else keyed.ids  # fmt: skip
            cols = ids.get(node.ident)
            if cols is None:
                raise Unsupported("an input whose records the plan does not carry")
            assert node.index is not None
            idx.append(node.index.lookup(keys[:, [position[c] for c in cols]]))
        if keyed.tag is not None:
            side = keys[:, position[keyed.tag]]
            for s, (node, got) in enumerate(zip(p.inputs, idx)):
                sides = [j for j, ident in enumerate(keyed.sides) if ident == node.ident]
                idx[s] = np.where(np.isin(side, sides), got, -1)
            combined = np.max(np.column_stack(idx), axis=1) if len(idx) > 1 else idx[0]
            order = np.lexsort((combined, side))
        elif "sort" in kinds and keyed.monotone is False and top == "sort":
            order = np.arange(len(keys))
        elif keyed.pos is not None:  # an explode: by input record, then position
            order = np.lexsort((keys[:, position[keyed.pos]], *reversed(idx)))
        else:
            order = np.lexsort(tuple(reversed(idx)))
        if len(keys) and not np.all(np.column_stack(idx).max(axis=1) >= 0):
            raise Unsupported("records that come from no input record")
        tensors = [make_tensor(i[order], n.index.n) for i, n in zip(idx, p.inputs)]  # type: ignore[union-attr]
        in_cols = self.store.datasets[p.inputs[0].ds_id].columns  # type: ignore[index]
        out_cols = self._schema(p.out)[0]
        category = category_of(kinds, rel, p.inputs[0].index.n, len(keys), in_cols, out_cols)  # type: ignore[union-attr]
        index = KeyIndex(keys[order])
        at = {c.lower(): v for c, v in zip(along, values)}
        for r in rides:  # grouping values in this dataset's record order
            r.values, r.index = [at[n.lower()].take(order) for n in r.names], index
        return len(keys), tensors, index, category

    def _fused(self, p: CPending, kinds: set[str]) -> tuple[int, list[Any], Index, str] | None:
        """A filter or join whose records come from the block's fused reads (None: not
        one of those)."""
        fz, out = self._fusion, p.out.ident
        if fz is None or not fz.ready(out) or any(n.index is None for n in p.inputs):
            return None
        if kinds == {"filter"} and out in fz.scans:
            (node,) = p.inputs
            base = self.nodes[fz.scans[out].base].index
            kept, index = fz.filter(out, node.ident, base)  # type: ignore[arg-type]
            return len(kept), [make_tensor(kept, node.index.n)], index, "horizontal_reduction"  # type: ignore[union-attr]
        sides = [n.index for n in p.inputs]
        if kinds == {"join"} and out in fz.joins and all(isinstance(s, KeyIndex) for s in sides):
            left, right = p.inputs
            try:
                li, ri = fz.join(out)
            except _fused.Wide:  # keys past an int: its own job reads them as they are
                return None
            # the join's keys (both sides' side by side) only if a later operation asks
            index = JoinedKeyIndex(sides, [li, ri])  # type: ignore[arg-type]
            for r in self._rides:
                if r.root == out and id(r) in fz.ride_reads:
                    reads = fz.ride_reads[id(r)]
                    r.groups = fz.groups(out, reads)
                    r.values = fz.values(out, reads) if r.groups is None else None
                    r.index = index
            tensors = [make_tensor(li, left.index.n), make_tensor(ri, right.index.n)]  # type: ignore[union-attr]
            return len(li), tensors, index, "join"
        return None

    def _trace_semi(
        self, p: CPending, keyed: Any, keys: np.ndarray, position: dict[str, int], run: RunLog
    ) -> tuple[int, list[Any], Index, str]:
        """A semi join keeps left records, and its right tensor lists the right records
        each matched (read from the same join as an inner join); an anti join's none."""
        assert keyed.semi is not None
        anti, inner, left, right = keyed.semi
        lnode, rnode = p.inputs
        if keyed.sides != [lnode.ident, rnode.ident] or lnode.index is None or rnode.index is None:
            raise Unsupported("a semi join whose sides are not its inputs")
        li = lnode.index.lookup(keys[:, [position[c] for c in left.ids[lnode.ident]]])
        order = np.argsort(li, kind="stable")
        li = li[order]
        n_out = len(li)
        if anti:
            pairs_out = pairs_in = np.zeros(0, dtype=np.int64)
        else:
            lcols, rcols = left.ids[lnode.ident], right.ids[rnode.ident]
            both = self._keys(inner, list(dict.fromkeys(lcols + rcols)))
            run.jobs += 1
            at = {k: i for i, k in enumerate(dict.fromkeys(lcols + rcols))}
            pl = lnode.index.lookup(both[:, [at[c] for c in lcols]])
            pairs_in = rnode.index.lookup(both[:, [at[c] for c in rcols]])
            pairs_out = np.searchsorted(li, pl)
        tensors = [make_tensor(li, lnode.index.n),
                   tensor_from_pairs(pairs_out, pairs_in, n_out, rnode.index.n)]  # fmt: skip
        return n_out, tensors, KeyIndex(keys[order]), "join"

    def _trace_groups(
        self, p: CPending, rel: Any, annotator: Annotator, run: RunLog
    ) -> tuple[int, list[Any], Index, str]:
        return trace_groups(self, p, rel, annotator, run)

    def _opaque(
        self, p: CPending, run: RunLog, annotator: Annotator, cols: list[str], types: list[str],
        reason: str, t0: float, contributing: Any, influencing: Any, exact: bool,
    ) -> None:  # fmt: skip
        """Coarse lineage for an operation capture cannot trace: an opaque operation, and
        its output keyed afresh (as a source) so what follows it is traced again."""
        message = (
            f"not traced record by record over Spark Connect ({reason}); kept as an "
            "opaque operation (coarse lineage)"
        )
        self._note(message)
        n: int | None = None
        try:
            note = self._key_source(p.out, annotator)
            keyed = annotator.annotate(P.relation(p.out.df))
            keys = self._scan_keys(keyed.rel, keyed.keys)
            p.out.index = KeyIndex(keys[np.argsort(keys[:, 0], kind="stable")])
            n = p.out.index.n
            run.jobs += 1
        except Exception:  # noqa: BLE001 - what follows is opaque too
            note = ""
            p.out.index = None
        ds = self.store.add_dataset(p.out.name, columns=cols, dtypes=types, n_rows=n,
                                    run=run.id, origin=note.strip())  # fmt: skip
        p.out.ds_id = ds.id
        self.by_ds[ds.id] = p.out
        run.datasets.append(ds.id)
        op = self.store.add_operation(
            p.method, "opaque", [n.ds_id for n in p.inputs], ds.id, None,  # type: ignore[misc]
            expression=p.expression, run=run.id, opaque=True, warnings=[message],
            seconds=time.perf_counter() - t0, contributing=contributing,
            influencing=influencing, attributes_exact=exact,
        )  # fmt: skip
        stamp_call(op, p.out.call)
        run.operations.append(op.id)

    # -- reading records -------------------------------------------------------------------
    def node_of(self, df: Any) -> CNode | None:
        plan = getattr(df, "_plan", None)
        return None if plan is None else self.nodes.get(plan._plan_id)

    def records(self, ds_id: int, rows: np.ndarray | None, where: str | None) -> Any:
        """Records of ``ds_id`` (its plan run again with its keys), with their ``_row``."""
        return read_records(self, ds_id, rows, where)

    def select_rows(self, ds_id: int, where: str) -> np.ndarray:
        return np.unique(self.records(ds_id, None, where)[ROW].to_numpy())

    def replayable(self, ds_id: int) -> bool:
        """Whether some records of ``ds_id`` are read by a replay of their lineage
        (:mod:`tensprov_lab.replay._connect`) rather than by running its whole plan."""
        node = self.by_ds.get(ds_id)
        return node is not None and node.index is not None
