"""Spark-resident tensors: the tier past local disk, where lineage lives in Spark.

A tensor moved to Spark becomes a table of its ones, ``(o, i)`` pairs of output and
input rows sorted by ``o``, written as Parquet (zstd) into a directory Spark reads.
Queries on it run as Spark jobs: a backward lookup reads only the row groups whose
``o`` range holds the rows asked for (well under a second on a warm session), a
forward lookup scans the table (seconds).  The process holds none of its bytes.

The driver writes the files itself (pyarrow, a few million pairs at a time, so it never
holds a large tensor twice): the directory must be one Spark's executors see under the
same path, which the local temporary directory is for a local session, a standalone
cluster on this machine or a Spark Connect server on loopback.  On a cluster across
machines give a shared mount (``track(..., spark_dir="/mnt/shared/tensprov")``);
capture checks that Spark reads back every pair before it lets go of the tensor, and
keeps it where it was (with a warning) when it cannot.

Window frames stay on local disk: they are stored as ranges over a partition's order,
and listed as pairs a running sum's frames would be quadratic.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import uuid
from collections.abc import Callable
from typing import Any

import numpy as np

from tensprov_lab.capture.plan._nodes import _short_error
from tensprov_lab.capture.spark._versions import to_arrow
from tensprov_lab.store import ColumnsTensor, Operation, Tensor, WindowTensor, tensor_from_pairs
from tensprov_lab.store._spill import Put, release, to_files

__all__ = [
    "SparkTensor",
    "SparkTierError",
    "on_progress",
    "report_progress",
    "spark_tensor",
    "to_spark",
]

#: pairs written per Parquet row group (the unit a lookup reads)
_ROW_GROUP = 1 << 20
#: output rows' pairs the driver lists at a time while writing
_CHUNK_PAIRS = 1 << 22
#: at most this many rows are looked up with an ``isin`` list; more go as a keys file
_ISIN = 4096
_SCHEMA = "o long, i long"

#: who hears about a Spark job a query runs: ``report(message)`` before it, and
#: ``report(None)`` once it is done (the notebook extension shows a line in the cell)
_progress: list[Callable[[str | None], None]] = []
_lock = threading.Lock()


class SparkTierError(RuntimeError):
    """A tensor could not be kept in Spark (e.g. the executors do not see the directory
    it was written to)."""


def on_progress(report: Callable[[str | None], None] | None) -> None:
    """Send the progress of queries' Spark jobs to ``report`` (None: to standard error
    when it is a terminal)."""
    _progress[:] = [report] if report is not None else []


def report_progress(message: str | None) -> None:
    """Tell whoever listens (:func:`on_progress`) about a wait in the user's thread:
    ``message`` before it and as it goes on, None once it is over."""
    if _progress:
        _progress[0](message)
    elif sys.stderr is not None and sys.stderr.isatty():
        sys.stderr.write(f"\r{message or ''}\x1b[K" if message else "\r\x1b[K")
        sys.stderr.flush()


class SparkTensor(Tensor):
    """A tensor kept in Spark as a Parquet table of its ones (see the module's text).

    Parameters
    ----------
    spark : SparkSession
        The session whose jobs answer queries (classic or Spark Connect).
    path : str
        The directory of the table.
    n_out, n_in, nnz : int
        Its shape and number of ones.
    label : str
        What progress lines call it.

    Examples
    --------
    >>> from tensprov_lab.store import IndexTensor
    >>> t = to_spark(spark, IndexTensor.from_index([2, 0, 2], n_in=3), "/tmp/t")  # doctest: +SKIP
    >>> t.backward([0, 1]), t.forward([2])                                        # doctest: +SKIP
    (array([0, 2]), array([0, 2]))
    """

    kind = "spark"

    def __init__(
        self, spark: Any, path: str, n_out: int, n_in: int, nnz: int, label: str = "a tensor"
    ) -> None:
        super().__init__(n_out, n_in)
        self.spark = spark
        self.path = path
        self._nnz = int(nnz)
        self.label = label

    @property
    def nnz(self) -> int:
        return self._nnz

    @property
    def nbytes(self) -> int:
        return 0  # held by Spark's storage, not by this process

    def disk_nbytes(self) -> int:
        """Bytes of its Parquet files."""
        return sum(
            os.path.getsize(os.path.join(self.path, f))
            for f in os.listdir(self.path)
            if f.endswith(".parquet")
        )

    def _table(self) -> Any:
        return self.spark.read.schema(_SCHEMA).parquet(self.path)

    def _read(self, column: str, rows: np.ndarray, what: str) -> tuple[np.ndarray, np.ndarray]:
        """The pairs whose ``column`` is one of ``rows`` (sorted, unique), as
        ``(o, i)``."""
        if len(rows) == 0:
            return np.empty(0, np.int64), np.empty(0, np.int64)
        with _lock:
            report_progress(
                f"tensprov-lab: {what} of {self.label} from Spark ({len(rows):,} rows) …"
            )
            keys_dir = None
            try:
                df, keys_dir = self._lookup(column, rows)
                table = to_arrow(df)
            except Exception as err:
                raise LookupError(
                    f"could not read the lineage of {self.label} from its table in Spark "
                    f"({self.path}): {_short_error(err)}. It needs the Spark session that "
                    "keeps it, running; to keep a run's lineage without Spark, save it "
                    "while the session runs (tensprov_lab.save)"
                ) from None
            finally:
                report_progress(None)
                if keys_dir is not None:
                    release([keys_dir])
        o = table.column("o").to_numpy().astype(np.int64, copy=False)
        i = table.column("i").to_numpy().astype(np.int64, copy=False)
        return o, i

    def _lookup(self, column: str, rows: np.ndarray) -> tuple[Any, str | None]:
        """The query of the pairs whose ``column`` is one of ``rows``, and the directory
        of the keys table it joins with (None: the rows are a list in the query)."""
        from pyspark.sql import functions as F

        n = self.n_out if column == "o" else self.n_in
        df = self._table()
        if len(rows) >= n:
            return df, None
        df = df.where(F.col(column).between(int(rows[0]), int(rows[-1])))
        if len(rows) <= _ISIN:
            return df.where(F.col(column).isin([int(r) for r in rows])), None
        keys_dir = _write_keys(column, rows, self.path)
        keys = self.spark.read.schema(f"{column} long").parquet(keys_dir)
        return df.join(keys, column, "left_semi"), keys_dir

    def _backward(self, u: np.ndarray) -> np.ndarray:
        return np.unique(self._read("o", u, "backward lineage")[1])

    def _forward(self, u: np.ndarray) -> np.ndarray:
        return np.unique(self._read("i", u, "forward lineage")[0])

    def _pairs(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        o, i = self._read("o", u, "backward lineage")
        order = np.lexsort((i, o))
        return o[order], i[order]

    def in_memory(self) -> Tensor:
        o, i = self._read("o", np.arange(self.n_out, dtype=np.int64), "the whole tensor")
        return tensor_from_pairs(o, i, n_out=self.n_out, n_in=self.n_in)

    def _repr_extra(self) -> str:
        return f", path={self.path!r}"


def _write_keys(column: str, rows: np.ndarray, near: str) -> str:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = os.path.join(os.path.dirname(near.rstrip("/")), f"keys-{uuid.uuid4().hex}")
    os.makedirs(path)
    pq.write_table(pa.table({column: rows}), os.path.join(path, "part-0.parquet"))
    return path


def spark_tensor(spark: Any, t: Tensor, path: str, label: str = "a tensor") -> Tensor:
    """``t`` moved to Spark as a table under ``path``; O(1) tensors, window tensors and
    tensors already in Spark come back as they are, a :class:`ColumnsTensor` has its
    parts moved one by one.

    Raises
    ------
    SparkTierError
        When Spark does not read back every pair (the files are removed again).
    """
    if isinstance(t, SparkTensor) or isinstance(t, WindowTensor) or t.nbytes == 0:
        return t
    if isinstance(t, ColumnsTensor):
        whole = spark_tensor(spark, t.whole, f"{path}_whole", label)
        parts = [spark_tensor(spark, p, f"{path}_part{k}", label) for k, p in enumerate(t.parts)]
        return ColumnsTensor(whole, parts, t.columns)
    import pyarrow as pa
    import pyarrow.parquet as pq

    os.makedirs(path, exist_ok=True)
    schema = pa.schema([("o", pa.int64()), ("i", pa.int64())])
    # output rows per chunk, so that a chunk lists about _CHUNK_PAIRS pairs
    step = max(1, int(_CHUNK_PAIRS * t.n_out / max(t.nnz, 1)))
    try:
        file = os.path.join(path, "part-0.parquet")
        with pq.ParquetWriter(file, schema, compression="zstd") as w:
            for start in range(0, t.n_out, step):
                o, i = t._pairs(np.arange(start, min(start + step, t.n_out), dtype=np.int64))
                w.write_table(pa.table({"o": o, "i": i}, schema=schema), row_group_size=_ROW_GROUP)
        st = SparkTensor(spark, path, t.n_out, t.n_in, t.nnz, label)
        seen = st._table().count()
    except Exception as err:
        release([path])
        raise SparkTierError(
            f"Spark could not read the tensor table written to {path!r}: {_short_error(err)}. "
            "On a cluster across machines, give a directory every executor sees under the "
            "same path: track(..., spark_dir='/a/shared/mount')"
        ) from None
    if seen != t.nnz:
        release([path])
        raise SparkTierError(
            f"Spark read {seen:,} of the {t.nnz:,} pairs written to {path!r}: its executors "
            "do not see that directory; give a shared one: track(..., spark_dir=...)"
        )
    return st


def to_spark(spark: Any, directory: str | None = None, fallback: str | None = None) -> Put:
    """The Spark destination of :func:`~tensprov_lab.store._spill.spill`: each tensor of
    an operation becomes a :class:`SparkTensor` under ``directory`` (default: a new
    temporary directory).  When Spark cannot take them, the operation goes to local
    files under ``fallback`` instead, with a warning (None: it stays where it is)."""
    from tensprov_lab._warn import warn

    base = directory or tempfile.mkdtemp(prefix="tensprov-spark-")

    def put(op: Operation) -> tuple[list[Tensor], list[str]] | None:
        assert op.tensors is not None
        if any(isinstance(t, WindowTensor) and t.nbytes for t in op.tensors):
            # frames stay ranges on local disk (listed as pairs they could be quadratic)
            return to_files(fallback)(op) if fallback is not None else None
        run = uuid.uuid4().hex[:8]
        paths: list[str] = []
        moved: list[Tensor] = []
        try:
            for k, t in enumerate(op.tensors):
                path = os.path.join(base, f"op{op.id}_{k}_{run}")
                moved.append(spark_tensor(spark, t, path, label=f"operation {op.id} ({op.method})"))
                paths.extend(_paths_of(moved[-1]))
        except SparkTierError as err:
            release(paths)
            warn(f"tensprov-lab: {err}")
            return to_files(fallback)(op) if fallback is not None else None
        return moved, paths

    return put


def _paths_of(t: Tensor) -> list[str]:
    if isinstance(t, SparkTensor):
        return [t.path]
    if isinstance(t, ColumnsTensor):
        return [p for x in (t.whole, *t.parts) for p in _paths_of(x)]
    return []
