"""A fused capture's reads (see :mod:`._fused`): each dataset's columns read once,
straight from a source's files where they can be (:mod:`._direct`), else by one Spark
job each (in pieces past what the driver takes at once), the reads side by side."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any

from tensprov_lab.capture.sources._direct import DirectRead, direct_read
from tensprov_lab.capture.sources._direct_csv import CheckedFiles
from tensprov_lab.capture.spark._versions import thread_target, to_arrow

__all__ = ["Fetching"]

JObject = Any


class Fetching:
    """The reads of :class:`._fused.Fusion` (a mixin: the attributes below are the
    fusion's)."""

    jvm: Any
    reads: dict[int, dict[str, JObject]]
    exprs: dict[int, dict[str, JObject]]
    plans: dict[int, JObject]
    tables: dict[int, Any]
    direct: bool
    checked: CheckedFiles | None
    spark_reads: set[int]
    seconds: dict[int, float]
    jobs: dict[int, int]
    _rows: dict[int, int]
    _stopped: threading.Event
    #: (the fusion's own: it reads with the piece sizes its module is given)
    _spark_read: Any

    def fetch(self, count_jobs: Any) -> None:
        """Read every dataset's columns, straight from a source's files where they can be
        (:mod:`._direct`), else one Spark job each, the reads side by side (a small
        read, e.g. a dimension table, then costs no time of its own); a dataset that
        cannot be read leaves the rules that need it to their own jobs.  Reads run
        together share out the jobs counted for them (one each as a rule)."""
        jvm = self.jvm
        frames: dict[int, Any] = {}
        direct: dict[int, DirectRead] = {}
        for ident in self.reads:
            if self.direct:
                reader = direct_read(jvm, self.plans[ident], self.exprs[ident], self.checked)
                if reader is not None:
                    direct[ident] = reader
                    continue  # its Spark read is planned only if the files cannot be read
            frame = self._frame(ident)
            if frame is not None:
                frames[ident] = frame
        idents = [i for i in self.reads if i in frames or i in direct]
        # a read running Python UDFs keeps the session's Arrow batches (a pandas UDF
        # sees its input in them), so it does not share the batch setting of the others
        if len(idents) < 2 or any(
            jvm.runs_python(df) for i, df in frames.items() if i not in direct
        ):
            for ident in idents:
                with count_jobs() as jobs:
                    self._read_one(ident, direct.get(ident), frames.get(ident), jvm.to_arrow)
                self.jobs[ident] = jobs[0]
            return
        # the workers inherit the thread's job group: Ctrl-C cancels their jobs too
        read = thread_target(jvm.spark, self._read_one)
        pool = ThreadPoolExecutor(len(idents), thread_name_prefix="tensprov-read")
        try:
            with count_jobs() as jobs, jvm.large_batches():
                futures = [
                    pool.submit(read, i, direct.get(i), frames.get(i), _to_arrow) for i in idents
                ]
                # waits in short slices: a Ctrl-C reaches this thread at once
                while wait(futures, timeout=0.1).not_done:
                    pass
                for future in futures:
                    future.result()
        except BaseException:
            # on Ctrl-C the caller cancels the jobs; the workers then end on their own
            self._stopped.set()
            raise
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
        # one job a Spark read as a rule: the jobs counted together are shared out
        spark_reads = [i for i in idents if i in self.spark_reads] or idents
        share, extra = divmod(jobs[0], len(spark_reads))
        for k, ident in enumerate(spark_reads):
            self.jobs[ident] = share + (extra if k == 0 else 0)

    def _frame(self, ident: int) -> Any:
        """The DataFrame of ``ident``'s columns, read through Spark (None: it cannot be)."""
        try:
            jvm = self.jvm
            return jvm.to_df(jvm.project(list(self.reads[ident].values()), self.plans[ident]))
        except Exception:  # noqa: BLE001 - those rules fall back to their own jobs
            return None

    def _read_one(self, ident: int, reader: DirectRead | None, df: Any, to_arrow: Any) -> None:
        """Read ``ident``'s columns: from its files with ``reader`` when there is one and
        it can, else ``df`` (made now when None) through Spark."""
        t0 = time.perf_counter()
        table = None
        if reader is not None:
            try:
                table = reader()
            except Exception:  # noqa: BLE001 - Unreadable, or pyarrow's own: Spark reads it
                table = None
            if table is None:
                df = self._frame(ident)
        try:
            if table is None and df is not None:
                self.spark_reads.add(ident)
                table = self._spark_read(ident, to_arrow)
            if table is not None:
                self.tables[ident] = table
                self._rows[ident] = int(table.num_rows)
        except Exception:  # noqa: BLE001 - those rules fall back to their own jobs
            pass
        self.seconds[ident] = time.perf_counter() - t0

    @property
    def file_reads(self) -> int:
        """How many reads came straight from the sources' files."""
        return sum(1 for i in self.tables if i not in self.spark_reads)


def _to_arrow(df: Any) -> Any:
    return to_arrow(df)
