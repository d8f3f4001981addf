"""Reading a captured dataset's records back from Spark (by row, by predicate), and the
session replays of a few records run in."""

from __future__ import annotations

import contextlib
import functools
import weakref
from typing import TYPE_CHECKING, Any

import numpy as np

from tensprov_lab.capture.plan._files import changes
from tensprov_lab.capture.plan._keys import (
    IN_LIST,
    ScanKeyIndex,
    UniqueKeyIndex,
    arrow_keys,
    keys_in,
    keys_sql,
)
from tensprov_lab.capture.plan._nodes import Node, _short_error
from tensprov_lab.capture.spark._jvm import Jvm
from tensprov_lab.capture.spark._versions import quiet_analysis_errors, to_arrow
from tensprov_lab.store import Store
from tensprov_lab.store._sets import unique

__all__ = ["RecordReading"]

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


def _records_error(label: str, why: str) -> ValueError:
    return ValueError(f"the records of {label} cannot be read: {why}")


class RecordReading:
    """Record reads of :class:`~._tracker.Tracker` (a mixin over its nodes and store)."""

    spark: Any
    jvm: Jvm
    store: Store
    nodes: dict[int, Node]
    by_ds: dict[int, Node]
    _plan_idents: weakref.WeakKeyDictionary[Any, int]

    if TYPE_CHECKING:

        def _collect_keys(
            self, plan: Any, names: list[str], keep: bool = False, ident: int | None = None
        ) -> np.ndarray: ...

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
        self._check_files(node.ds_id)
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

    def _readable(self, ds_id: int, files: bool = True) -> Node:
        """The node of ``ds_id``, whose records can be read from Spark (or a clear
        error); ``files``: its sources' files are checked too (once per read)."""
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
        if files:
            self._check_files(ds_id)
        return node

    def _check_files(self, ds_id: int) -> None:
        """Refuse to read records of ``ds_id`` when a file that one of the sources it
        comes from read at capture has changed since: its records would be other
        records under the captured row numbers."""
        for d in self.store.upstream(ds_id):
            if self.store.producer(d) is not None:
                continue
            node = self.by_ds.get(d)
            what = changes(node.files, self.spark) if node is not None and node.files else None
            if what is not None:
                source = self.store.datasets[d].label
                raise _records_error(
                    self.store.datasets[ds_id].label,
                    f"{what} (a file of source {source}). Its lineage still answers; the "
                    "records read now would not be the captured ones: capture again "
                    "(re-run the tracked block) to see records",
                )

    def _frame(self, node: Node, ds_id: int, where: str | None) -> Any:
        """The annotated DataFrame of the readable ``node`` of ``ds_id``, filtered by
        ``where`` (checked now, so a bad predicate fails with a clear message)."""
        assert node.ann is not None
        label = self.store.datasets[ds_id].label
        df = self.jvm.to_df(node.ann.plan)
        if where is not None:
            try:
                with quiet_analysis_errors():
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

    def replayable(self, ds_id: int) -> bool:
        """Whether records of ``ds_id`` are recomputed by replay (a derived dataset not
        kept whole; :func:`tensprov_lab.replay.read_records`) rather than read here."""
        op = self.store.producer(ds_id)
        node = self._readable(ds_id, files=False)
        return op is not None and not op.opaque and node.cached is None

    def records(self, ds_id: int, rows: np.ndarray | None, where: str | None) -> Any:
        """Records of ``ds_id`` read from Spark (the whole dataset's annotated plan,
        filtered), with their canonical ``_row``."""
        from tensprov_lab.capture.plan._nodes import ROW

        op = self.store.producer(ds_id)
        node = self._readable(ds_id)
        derived = self.replayable(ds_id)
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
        table = to_arrow(df)
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
