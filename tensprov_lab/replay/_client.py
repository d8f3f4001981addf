"""Replays over Spark Connect of a few records, run on the client when they can be.

A replay over Connect (:mod:`._connect`) is a new plan each time, and the server's
analysis and planning of it take most of its time: a replay of 10 records of the engine
bench's ``priced`` took 355-469 ms, of which the server ran the same plan again in
87-134 ms (``/tmp/cw/exp_*.py``, session 8).  A what-if must be several times faster
than re-running the pipeline (657 ms there), so a replay of a few records whose sources
the client can read runs on the client instead:

- each source at the frontier is a plain local Parquet read whose files capture read
  on the client (:func:`~tensprov_lab.capture.connect._direct.read_direct`) and whose
  keys, worked out from the files' layout, are exactly the ones the capture saw
  (checked once per source); or else a source fetched from the server whole, once,
  when it fits in half the cache (:meth:`ClientReplay._fetch`, a few pieces of every
  partition at a time, keys checked too);
- the records the replay needs are taken from those (decoded once and kept in a cache
  of :data:`CACHE_BYTES`, the least recently used going first);
- the same keyed plan a Connect replay would send is evaluated on them by
  :mod:`._client_eval`, which refuses whatever it does not evaluate as Spark does.

Anything else -- a source too large to fetch, more than :data:`MOST` records at the
frontier, an aggregate, a window, a relation or function the client does not
evaluate -- goes to :class:`~._connect.ConnectReplay` as before, so answers
are the same either way; ``tracker.client_replays = False`` turns this off.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from tensprov_lab.capture.connect._arrow import read_pieces
from tensprov_lab.capture.connect._records import keyed_records
from tensprov_lab.capture.plan._connect import keyed_source, source_key
from tensprov_lab.capture.plan._pieces import row_bytes
from tensprov_lab.replay import _frontier as fr
from tensprov_lab.replay._client_eval import Unsupported, evaluate
from tensprov_lab.replay._connect import ConnectReplay, _shared
from tensprov_lab.replay._frontier import rows_of
from tensprov_lab.store._sets import difference, unique

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["CACHE_BYTES", "MOST", "Change", "ClientReplay", "clear_cache", "server_only"]

#: most records a replay on the client reads at its frontier (more: Spark replays them)
MOST = 100_000
#: bytes of decoded source files the client keeps for its replays
CACHE_BYTES = 1 << 30


@dataclass(frozen=True)
class Change:
    """A source as a what-if changes it (see :meth:`ConnectReplay.changed_source`):
    built lazily, so that either engine can read it."""

    src: int
    rows: np.ndarray
    exclude: np.ndarray
    touched: np.ndarray
    edits: dict[int, dict[str, Any]]

    def on(self, engine: ConnectReplay) -> Any:
        return engine.changed_source(self.src, self.rows, self.exclude, self.touched, self.edits)


@dataclass(frozen=True)
class _Files:
    """A source's files as the client reads them: each one's path and size, and the key
    of its first record (a file's keys are consecutive)."""

    paths: tuple[tuple[str, int], ...]
    first: np.ndarray
    counts: np.ndarray
    columns: tuple[tuple[str, pa.DataType], ...]
    #: the files' stamps at capture
    stamps: tuple[Any, ...]


@dataclass(frozen=True)
class _Fetched:
    """A source whose records the client fetched from the server, whole, once: found in
    the cache under ``key`` (fetched again if it was dropped)."""

    key: tuple[Any, ...]
    #: its files' stamps at capture, when the client read them then
    stamps: tuple[Any, ...] = ()


@dataclass(frozen=True)
class _ServerOnly:
    """A source whose records only the server reads (its files' stamps still checked),
    and why."""

    stamps: tuple[Any, ...] = ()
    why: str = ""


class _Cache:
    """Tables of source records (decoded files by path, size and modification time;
    sources fetched whole), least recently used first out."""

    def __init__(self) -> None:
        self._tables: OrderedDict[tuple[Any, ...], pa.Table] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[Any, ...], load: Callable[[], pa.Table]) -> pa.Table:
        with self._lock:
            got = self._tables.get(key)
            if got is not None:
                self._tables.move_to_end(key)
                return got
        got = load()
        got = pa.Table.from_arrays([c.combine_chunks() for c in got.columns], got.column_names)
        with self._lock:
            self._tables[key] = got
            while sum(t.nbytes for t in self._tables.values()) > CACHE_BYTES and self._tables:
                self._tables.popitem(last=False)
        return got

    def table(self, path: str, size: int, columns: tuple[tuple[str, pa.DataType], ...]) -> pa.Table:
        from tensprov_lab.capture.sources._direct_files import Unreadable, read_parquet_files

        try:
            stamp = (path, size, os.stat(path).st_mtime_ns)
        except OSError as exc:
            raise Unsupported(str(exc)) from None

        def load() -> pa.Table:
            try:
                return read_parquet_files(((path, size, None),), columns)
            except Unreadable as exc:
                raise Unsupported(str(exc)) from None

        return self.get(stamp, load)

    def clear(self) -> None:
        with self._lock:
            self._tables.clear()


_CACHE = _Cache()


def server_only(tracker: Any) -> dict[int, str]:
    """The sources (dataset ids) whose records only the server reads for replays, and
    why (the engine bench prints them)."""
    return {
        d: node.files.why
        for d, node in tracker.by_ds.items()
        if isinstance(getattr(node, "files", None), _ServerOnly)
    }


def clear_cache() -> None:
    """Forget the source files decoded for replays on the client."""
    _CACHE.clear()


class ClientReplay:
    """The replay engine of a Spark Connect session that runs replays of few records on
    the client (see the module's text), and the rest as :class:`ConnectReplay` does."""

    def __init__(self, tracker: Any) -> None:
        self.tracker = tracker
        self.store = tracker.store
        self.spark_engine = ConnectReplay(tracker)

    # -- the engine -----------------------------------------------------------------------
    def records(self, ds_id: int, rows: np.ndarray) -> pd.DataFrame:
        self.spark_engine.check_files(ds_id)
        try:
            got = self._records(ds_id, np.asarray(rows, dtype=np.int64))
        except Unsupported:
            got = None
        return self.spark_engine.records(ds_id, rows) if got is None else got

    def replayed(
        self, ds_id: int, rows: np.ndarray, edit: Callable[[int, np.ndarray], Any]
    ) -> tuple[pd.DataFrame, np.ndarray]:
        self.spark_engine.check_files(ds_id)
        try:
            got = self._replayed(ds_id, np.asarray(rows, dtype=np.int64), edit)
        except Unsupported:
            got = None
        if got is not None:
            return got
        engine = self.spark_engine
        return engine.replayed(ds_id, rows, lambda d, r: edit(d, r).on(engine))

    def changed_source(
        self, src: int, rows: np.ndarray, exclude: np.ndarray, touched: np.ndarray,
        edits: dict[int, dict[str, Any]],
    ) -> Change:  # fmt: skip
        return Change(src, rows, exclude, touched, edits)

    # -- on the client --------------------------------------------------------------------
    def _records(self, ds_id: int, rows: np.ndarray) -> pd.DataFrame | None:
        rows = unique(rows)
        t = self.tracker
        node = self.spark_engine._node(ds_id)
        op = self.store.producer(ds_id)
        if node.records is not None or _shared(node):
            return None  # (kept in the driver already, or told apart by order)
        front, back, whole = fr.inputs(t, ds_id, rows)
        if front == [ds_id]:
            table = self._source_rows(ds_id, rows)
            pdf, idx = keyed_records(table, [source_key(node.ident)], node.index)
            return rows_of(pdf, idx, rows, recomputed=False)
        if whole & set(front) or self.spark_engine._by_position(node, front) is not None:
            return None
        frontier = {d: self._source_rows(d, back.get(d, np.zeros(0, np.int64))) for d in front}
        pdf, idx = self._run(node, frontier)
        return rows_of(pdf, idx, rows, recomputed=op is not None and not op.opaque)

    def _replayed(
        self, ds_id: int, rows: np.ndarray, edit: Callable[[int, np.ndarray], Any]
    ) -> tuple[pd.DataFrame, np.ndarray] | None:
        node = self.spark_engine._node(ds_id)
        if _shared(node):
            return None
        front, back, _ = fr.inputs(self.tracker, ds_id, rows, stop_at_cached=False)
        if self.spark_engine._by_position(node, front) is not None:
            return None
        empty = np.zeros(0, dtype=np.int64)
        frontier = {
            d: self._changed(edit(d, rows if front == [ds_id] else back.get(d, empty)))
            for d in front
        }  # fmt: skip
        if front == [ds_id]:
            return keyed_records(frontier[ds_id], [source_key(node.ident)], node.index)
        return self._run(node, frontier)

    def _run(self, node: Any, frontier: dict[int, pa.Table]) -> tuple[pd.DataFrame, np.ndarray]:
        """The keyed plan of ``node`` over the records ``frontier`` (dataset -> its
        records and key), evaluated here."""
        engine = self.spark_engine
        relations = {}
        for d in frontier:
            src = engine._node(d)
            if src.source is None:
                raise Unsupported("a frontier that is not a source")
            relations[src.ident] = keyed_source(src.ident, src.source).rel
        keyed = engine._plan(node, relations)
        tables = {source_key(engine._node(d).ident): table for d, table in frontier.items()}
        got = evaluate(keyed.rel, tables)
        schema = engine.arrow_schema(node, keyed.rel, keyed.keys)
        return keyed_records(_as_spark(got, schema), keyed.keys, node.index)

    def _changed(self, change: Any) -> pa.Table:
        """The records of a :class:`Change` of a source, read here."""
        if not isinstance(change, Change):
            raise Unsupported("a frontier the client does not read")
        table = self._source_rows(change.src, change.rows, change.exclude)
        if not len(change.touched):
            return table
        edited = self._source_rows(change.src, change.touched)
        names = edited.column_names
        at = {int(r): i for i, r in enumerate(np.asarray(change.touched, dtype=np.int64))}
        cols = {n: edited.column(n).to_pylist() for n in names}
        for row, new in change.edits.items():
            if int(row) not in at:
                continue
            for col, value in new.items():
                hit = [n for n in names if n.lower() == col.lower()]
                if len(hit) != 1:
                    raise Unsupported(f"no single column {col!r}")
                cols[hit[0]][at[int(row)]] = value
        try:
            arrays = [pa.array(cols[n], type=edited.column(n).type) for n in names]
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError) as exc:
            raise Unsupported(f"an edited value of another type ({exc})") from None
        return pa.concat_tables([table, pa.Table.from_arrays(arrays, names)])

    def _source_rows(self, d: int, rows: np.ndarray, exclude: np.ndarray | None = None) -> pa.Table:
        """Records ``rows`` of source ``d`` with their key, read from its files or its
        fetched copy (when they are a large part of it: all of it but ``exclude``, as a
        Connect replay reads it)."""
        node = self.spark_engine._node(d)
        files = self._source(d)
        n = node.index.n
        rows = np.asarray(rows, dtype=np.int64)
        if len(rows) >= max(fr.IN_LIST, n * fr.WHOLE):
            rows = difference(np.arange(n, dtype=np.int64), np.asarray(
                exclude if exclude is not None else np.zeros(0), dtype=np.int64))  # fmt: skip
        if len(rows) > MOST:
            raise Unsupported("too many records for the client")
        if isinstance(files, _Fetched):  # in canonical order, with its key
            return _CACHE.get(files.key, lambda: self._fetch(d)).take(pa.array(rows))
        keys = node.index.table[rows, 0]
        at = np.searchsorted(files.first, keys, side="right") - 1
        parts = []
        for f in np.unique(at):
            path, size = files.paths[int(f)]
            table = _CACHE.table(path, size, files.columns)
            hits = at == f
            parts.append((np.flatnonzero(hits), table.take(pa.array(keys[hits] - files.first[f]))))
        if parts:
            order = np.argsort(np.concatenate([p for p, _ in parts]), kind="stable")
            table = pa.concat_tables([t for _, t in parts]).take(pa.array(order))
        else:
            table = pa.table({name: pa.array([], type=kind) for name, kind in files.columns})
        return table.append_column(source_key(node.ident), pa.array(keys, type=pa.int64()))

    def _source(self, d: int) -> _Files | _Fetched:
        """Where the client reads source ``d``'s records: the files it read at capture,
        when it reads them as Spark does; else the source fetched whole from the server
        once, when that fits in the cache (:class:`Unsupported`: neither)."""
        node = self.spark_engine._node(d)
        if node.files is None or isinstance(node.files, tuple):
            direct, stamps = node.files or (None, ())
            node.files = (direct is not None and self._layout(d, node, direct, stamps)) or \
                self._fetchable(d, node, stamps)  # fmt: skip
        if isinstance(node.files, _ServerOnly):
            raise Unsupported("a source the client does not read")
        return node.files  # type: ignore[no-any-return]

    def _fetchable(self, d: int, node: Any, stamps: tuple[Any, ...]) -> _Fetched | _ServerOnly:
        """Whether the client may fetch source ``d`` whole: it is a source (not an
        opaque step's output), the run keeps records (``materialize``), and its records
        fit in half the cache (strings counted at 24 bytes)."""
        t = self.tracker
        if t.materialize == "none" or node.source is None or self.store.producer(d) is not None:
            return _ServerOnly(stamps, "the run keeps no records, or not a source")
        row = row_bytes(self.store.datasets[d].dtypes, 8)
        if node.index.n * row > CACHE_BYTES // 2 or node.index.table.shape[1] != 1:
            return _ServerOnly(stamps, "too large to fetch")
        return _Fetched((id(t), d, node.ident), stamps)

    def _fetch(self, d: int) -> pa.Table:
        """Source ``d``'s records, fetched from the server with their keys, in canonical
        order (when first needed; not persisted there first: a cached copy holds the
        server's memory, where large task results were then lost).  Fetched in pieces
        of scan positions within every partition as capture reads a source
        (:func:`~tensprov_lab.capture.connect._arrow.read_pieces`: 5M records in two
        partitions, 92 MB each, ran a Connect server of 1 GB out of memory and stopped
        it).  The keys must be those of the capture."""
        node = self.spark_engine._node(d)
        keyed = keyed_source(node.ident, node.source)
        want = node.index.table[:, 0]
        row = row_bytes(self.store.datasets[d].dtypes, 8)
        table, failure = None, None
        for _ in range(2):  # (a task result lost once is fetched again)
            try:
                whole = lambda piece: piece  # noqa: E731 - every column, the key's too
                table = read_pieces(self.tracker.spark, keyed.rel, keyed.keys[0], whole, row)
                break
            except Exception as exc:  # noqa: BLE001 - the server's to report: it replays
                failure = exc
        if table is None:
            why = f"the source could not be fetched ({failure})"
            node.files = _ServerOnly(node.files.stamps, why)
            raise Unsupported(why)
        keys = table.column(keyed.keys[0]).to_numpy()
        order = np.argsort(keys, kind="stable")
        if len(keys) != len(want) or not np.array_equal(keys[order], want):
            why = "the fetched source has other keys than at capture"
            node.files = _ServerOnly(node.files.stamps, why)  # (not the records captured)
            raise Unsupported(why)
        ds = self.store.datasets[d]
        if not ds.materialized:
            ds.materialized = "source, kept in the client for recomputation"
        return table.take(pa.array(order))

    def _layout(self, d: int, node: Any, direct: Any, stamps: tuple[Any, ...]) -> _Files | None:
        """The layout of the files capture read, when the client reads them as Spark
        does (None: it does not)."""
        from tensprov_lab.capture.connect._direct import _ids
        from tensprov_lab.capture.sources._direct import _parquet_rows
        from tensprov_lab.capture.sources._direct_files import ARROW_TYPES as _ARROW_TYPES

        ds = self.store.datasets[d]
        types = {**_ARROW_TYPES, "date": pa.date32()}
        if any(kind not in types for kind in ds.dtypes):
            return None
        try:
            counts = [_parquet_rows(path, size) for path, size, _ in direct.files]
            if "date" in ds.dtypes and any(_rebased(path) for path, _, _ in direct.files):
                return None
        except Exception:  # noqa: BLE001 - anything unexpected: Spark replays it
            return None
        keys = _ids(direct.partitions, counts)[:, 0]
        if len(keys) != node.index.n or not np.array_equal(keys, node.index.table[:, 0]):
            return None  # (not the records the capture numbered)
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
        keep = np.asarray(counts) > 0  # (an empty file has no first key)
        return _Files(
            tuple((p, s) for (p, s, _), k in zip(direct.files, keep) if k),
            keys[starts[keep]], np.asarray(counts, dtype=np.int64)[keep],
            tuple((name, types[kind]) for name, kind in zip(ds.columns, ds.dtypes)),
            stamps,
        )  # fmt: skip


def _rebased(path: str) -> bool:
    """Whether Spark may shift the dates of a Parquet file as it reads them: a file
    written by Spark 2 or in its legacy hybrid calendar."""
    import pyarrow.parquet as pq

    meta = pq.read_metadata(path).metadata or {}
    version = meta.get(b"org.apache.spark.version", b"3").decode("ascii", "replace")
    return b"org.apache.spark.legacyDateTime" in meta or version.split(".")[0] < "3"


def _as_spark(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` with ``schema``'s names and types, when its columns are those Spark's
    replay gives (else :class:`Unsupported`: the client computed something else)."""
    if table.num_columns != len(schema):
        raise Unsupported("another number of columns than Spark's")
    arrays = []
    for name, column, field in zip(table.column_names, table.columns, schema):
        kind = column.type
        same = (
            kind == field.type
            or (pa.types.is_string(kind) or pa.types.is_large_string(kind))
            and (pa.types.is_string(field.type) or pa.types.is_large_string(field.type))
        )
        if not (same or kind == pa.null()):
            raise Unsupported(f"{field.name}: {kind} where Spark gives {field.type}")
        if not name.startswith("_c") and name.lower() != field.name.lower():
            raise Unsupported(f"column {name!r} where Spark gives {field.name!r}")
        arrays.append(column.cast(field.type))
    return pa.Table.from_arrays(arrays, schema=schema)
