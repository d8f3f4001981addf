"""Replays over Spark Connect: the dataset's keyed Connect plan on a cut-down frontier.

Capture over Connect rewrites a dataset's plan so that its records carry the keys of
the records they come from (:class:`~tensprov_lab.capture.connect._rewrite.Annotator`).
A replay builds that same rewrite with each source at the frontier
(:mod:`._frontier`) standing for just the records the backward lineage names:

- the source keyed by scan position, persisted on the server by the first replay that
  reads it (``CNode.kept``; unless the run said ``materialize="none"``), so that later
  replays read only the cached batches holding their keys (the keys increase in scan
  order, and Spark skips a cached batch whose key range misses the filter);
- filtered by its keys (an ``IN`` list, or a semi join with a local table of keys for
  many), or read whole minus some keys when most of it is wanted, or read whole
  upstream of a window;
- for a what-if, without the dropped records and with the edited ones as a local
  relation of their new values (:meth:`ConnectReplay.changed_source`).

The user's expressions name their DataFrames' plan ids; the relation standing for a
source takes the source's plan id, so they resolve as before.  The records' keys then
give their canonical rows (:mod:`~tensprov_lab.capture.connect._index`; -1 for a record
the capture did not see).  A small dataset whose replay would read its sources whole
anyway (an aggregate's few groups) is read whole once and kept in the driver.

No py4j: everything here is a Connect plan the server runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from tensprov_lab.capture.connect._index import KeyIndex
from tensprov_lab.capture.connect._records import keyed_records
from tensprov_lab.capture.connect._rewrite import Annotator
from tensprov_lab.capture.plan import _proto as P
from tensprov_lab.capture.plan._connect import Keyed, Unsupported, keyed_source, source_key
from tensprov_lab.capture.plan._files import changes
from tensprov_lab.capture.spark._versions import to_arrow
from tensprov_lab.replay import _frontier as fr
from tensprov_lab.replay._frontier import NotPreviewable, rows_of
from tensprov_lab.store._sets import unique

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["ConnectReplay"]

Relation = Any

#: most records of a source a replay reads as one partition (see ConnectReplay._restrict)
_FEW = 1000
#: relation kinds whose records depend on which other records are read (a replay of
#: some records would keep others): a plan with one is run whole
_BY_POSITION = {"sample", "limit", "offset", "tail"}


def _shared(node: Any) -> bool:
    """Whether records of ``node`` share their keys (an explode): told apart by their
    order only, which a replay of some of them does not keep."""
    return isinstance(node.index, KeyIndex) and not node.index.unique


class ConnectReplay:
    """The replay engine of a Spark Connect session (what :mod:`._what_if` asks of
    one, and recomputation of records)."""

    def __init__(self, tracker: Any) -> None:
        self.tracker = tracker
        self.spark = tracker.spark
        self.store = tracker.store

    # -- the frontier ---------------------------------------------------------------------
    def _node(self, ds_id: int) -> Any:
        node = self.tracker.by_ds.get(ds_id)
        if node is None or node.index is None:
            raise ValueError(f"{self.store.datasets[ds_id].label} has no readable records")
        return node

    def _keyed_source(self, d: int) -> tuple[Relation, str]:
        """The keyed source (or opaque output) ``d``: its relation and key column,
        persisted on the server on first use."""
        node = self._node(d)
        if node.source is None:
            raise NotPreviewable(f"{self.store.datasets[d].label} is not keyed as a source")
        keyed = keyed_source(node.ident, node.source)
        if node.kept is None and self.tracker.materialize != "none":
            # persisted as this very relation: the server's cache serves every plan
            # that reads it (a plan matches a cached one whatever its plan ids)
            node.kept = P.dataframe(self.spark, keyed.rel).persist()
            what = "source" if self.store.producer(d) is None else "opaque output"
            self.store.datasets[d].materialized = f"{what}, cached for recomputation"
        return keyed.rel, keyed.keys[0]

    def _restrict(self, d: int, rows: np.ndarray, exclude: np.ndarray | None = None) -> Relation:
        """Source ``d`` with just the records ``rows``, or, when they are a large part
        of it, the whole source without ``exclude``.  A few records are read as one
        partition: the joins and groupings above then need no shuffle (one partition
        satisfies any distribution), and a replay is one Spark stage."""
        from pyspark.sql import functions as Fn

        rel, key = self._keyed_source(d)
        node = self._node(d)
        if len(rows) >= max(fr.IN_LIST, node.index.n * fr.WHOLE):
            if exclude is None or not len(exclude):
                return rel
            rows, keep = np.asarray(exclude, dtype=np.int64), False
        else:
            keep = True
        values = node.index.table[np.asarray(rows, dtype=np.int64), 0]
        df = P.dataframe(self.spark, rel)
        if len(values) <= fr.IN_LIST:
            cond = Fn.col(key).isin([int(v) for v in values])
            df = df.where(cond if keep else ~cond)
        else:  # a long IN list makes a huge plan: a semi join with a local table of keys
            import pyarrow as pa

            want = self.spark.createDataFrame(pa.table({"__tp_want": values}))
            how = "left_semi" if keep else "left_anti"
            df = df.join(Fn.broadcast(want), Fn.col(key) == Fn.col("__tp_want"), how)
        if keep and len(values) <= _FEW:
            df = df.coalesce(1)
        return _topped(P.relation(df), node.ident)

    def _by_position(self, node: Any, front: list[int]) -> str | None:
        """What in the plan of ``node`` above ``front`` keeps records by their position
        or draws them at random (a sample, a limit, a non-deterministic expression), so
        that a replay of some records could keep others; None: nothing."""
        stop = {self._node(d).ident for d in front}
        stack = [P.relation(node.df)]
        while stack:
            rel = stack.pop()
            if P.plan_id(rel) in stop:
                continue
            if P.kind(rel) in _BY_POSITION:
                return f"a {P.kind(rel)}"
            if any(P.nondeterministic(e) for e in P.own_expressions(rel)):
                return "a non-deterministic expression"
            stack.extend(P.children(rel))
        return None

    def check_files(self, ds_id: int) -> None:
        """Refuse a replay of ``ds_id`` over a source whose files the client read at
        capture and that changed since: it would read other records under the captured
        row numbers (as a classic session refuses, ``capture.plan._files``)."""
        for d in self.store.upstream(ds_id):
            files = getattr(self.tracker.by_ds.get(d), "files", None)
            stamps = files[1] if isinstance(files, tuple) else getattr(files, "stamps", None)
            what = changes(stamps, None) if stamps else None
            if what is not None:
                raise ValueError(
                    f"the records of {self.store.datasets[d].label} cannot be read: {what}. "
                    "Its lineage still answers; the records read now would not be the "
                    "captured ones: capture again (re-run the tracked block) to recompute "
                    "records or preview changes"
                )

    # -- running a replay -----------------------------------------------------------------
    def _plan(self, node: Any, frontier: dict[int, Relation]) -> Keyed:
        """The keyed plan of ``node`` over ``frontier`` (plan id -> relation)."""
        t = self.tracker
        sources = {n.ident: n.source for n in t.nodes.values() if n.source is not None}
        annotator = Annotator(self.spark, sources, set(t.nodes), frontier, t.replay_columns)
        try:
            return annotator.annotate(P.relation(node.df))
        except Unsupported as exc:
            label = self.store.datasets[node.ds_id].label
            raise NotPreviewable(f"{label} cannot be replayed over Spark Connect ({exc})") from None

    def arrow_schema(self, node: Any, rel: Relation, keys: list[str]) -> Any:
        """The Arrow schema of the records of ``rel``, a replay of ``node`` keyed by
        ``keys``: every replay of a dataset has the same columns, so their types (as
        ``toArrow`` gives them) are asked of the server once."""
        if node.arrow_schema is None or node.arrow_schema[0] != keys:
            from pyspark.sql.pandas.types import to_arrow_schema

            schema = to_arrow_schema(
                P.dataframe(self.spark, rel).schema,
                error_on_duplicated_field_names_in_struct=True,
                timezone="UTC",
            )
            node.arrow_schema = (list(keys), schema)
        return node.arrow_schema[1]

    def _read(self, node: Any, rel: Relation, keys: list[str]) -> tuple[pd.DataFrame, np.ndarray]:
        """The user's columns of the records of ``rel`` and their canonical rows."""
        schema = self.arrow_schema(node, rel, keys)
        table, _ = P.dataframe(self.spark, rel)._to_table()
        return keyed_records(table.cast(schema), keys, node.index)

    def records(self, ds_id: int, rows: np.ndarray) -> pd.DataFrame:
        """Records ``rows`` of ``ds_id`` recomputed from their lineage-related records
        (a source's, or an opaque output's, read by key)."""
        self.check_files(ds_id)
        rows = unique(np.asarray(rows, dtype=np.int64))
        node = self._node(ds_id)
        op = self.store.producer(ds_id)
        derived = op is not None and not op.opaque
        if node.records is not None:
            pdf, idx = node.records
            return rows_of(pdf.copy(), idx, rows, recomputed=derived)
        if _shared(node):
            return self.tracker.records(ds_id, rows, None)
        front, back, whole = fr.inputs(self.tracker, ds_id, rows)
        if front == [ds_id]:  # a source or an opaque output: its records by key
            rel = self._restrict(ds_id, rows)
            return rows_of(*self._read(node, rel, [source_key(node.ident)]), rows, recomputed=False)
        if self._by_position(node, front) is not None:
            return self.tracker.records(ds_id, rows, None)
        many = bool(whole & set(front)) or any(len(back.get(d, ())) > fr.IN_LIST for d in front)
        if many and (node.index.n or 0) <= fr.KEEP_WHOLE:
            # a few records made of many source records (an aggregate's groups): read
            # whole once and kept, as replays of them would read as much each time
            keyed = self._plan(node, {self._node(d).ident: self._keyed_source(d)[0] for d in front})
            node.records = self._read(node, keyed.rel, keyed.keys)
            return rows_of(node.records[0].copy(), node.records[1], rows, recomputed=derived)
        frontier = {}
        for d in front:
            keep = back.get(d, np.zeros(0, dtype=np.int64))
            # a window needs every record of its input
            frontier[self._node(d).ident] = (
                self._keyed_source(d)[0] if d in whole else self._restrict(d, keep)
            )
        keyed = self._plan(node, frontier)
        return rows_of(*self._read(node, keyed.rel, keyed.keys), rows, recomputed=derived)

    def replayed(
        self, ds_id: int, rows: np.ndarray, edit: Callable[[int, np.ndarray], Relation]
    ) -> tuple[pd.DataFrame, np.ndarray]:
        """Records of ``ds_id`` replayed from the frontier ``edit(source, rows)`` builds
        (their canonical rows; -1 for a record the capture did not see)."""
        self.check_files(ds_id)
        node = self._node(ds_id)
        if _shared(node):
            raise NotPreviewable(
                f"{self.store.datasets[ds_id].label}: its records share their keys (an "
                "explode) and are told apart by their order, which a replay does not keep"
            )
        front, back, _ = fr.inputs(self.tracker, ds_id, rows, stop_at_cached=False)
        why = self._by_position(node, front)
        if why is not None:
            raise NotPreviewable(
                f"{self.store.datasets[ds_id].label}: {why}, whose records depend on which "
                "other records are read"
            )
        empty = np.zeros(0, dtype=np.int64)
        frontier = {
            self._node(d).ident: edit(d, rows if front == [ds_id] else back.get(d, empty))
            for d in front
        }
        keyed = self._plan(node, frontier)
        return self._read(node, keyed.rel, keyed.keys)

    def changed_source(
        self, src: int, rows: np.ndarray, exclude: np.ndarray, touched: np.ndarray,
        edits: dict[int, dict[str, Any]],
    ) -> Relation:  # fmt: skip
        """Source ``src`` with records ``rows`` as they are (``exclude``: the records
        not to read when reading it whole) and records ``touched`` edited as ``edits``
        (row -> column -> value) say: a local relation of their new values."""
        from pyspark.sql import functions as Fn

        base = self._restrict(src, rows, exclude)
        if not len(touched):
            return base
        rel, key = self._keyed_source(src)
        node = self._node(src)
        values = node.index.table[np.asarray(touched, dtype=np.int64), 0]
        df = P.dataframe(self.spark, rel).where(Fn.col(key).isin([int(v) for v in values]))
        pdf = to_arrow(df).to_pandas()
        for row, new in edits.items():
            at = pdf[key] == int(node.index.table[row, 0])
            for col, val in new.items():
                pdf.loc[at, col] = val
        local = self.spark.createDataFrame(pdf, schema=df.schema)
        both = P.dataframe(self.spark, base).union(local)
        return _topped(P.relation(both), node.ident)


def _topped(rel: Relation, pid: int) -> Relation:
    """``rel`` with the plan id ``pid`` moved from the relation below that holds it to
    ``rel`` itself, so that the user's columns of that plan resolve on ``rel``."""
    stack = list(P.children(rel))
    while stack:
        r = stack.pop()
        if P.plan_id(r) == pid:
            P.with_id(r, None)
            break
        stack.extend(P.children(r))
    return P.with_id(rel, pid)
