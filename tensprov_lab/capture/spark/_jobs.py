"""Capture's Spark jobs: run in a job group of their own, and counted.

A capture's jobs run in a job group of its own, so that Ctrl-C or an error in the
middle of one cancels them and they can be counted per operation
(``run.operations[i].jobs``).
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Callable, Iterator
from typing import Any

from tensprov_lab.capture.spark._quiet import mark, unmark

__all__ = ["JobGroup", "cancel_running"]

#: numbers of the job groups capture counts its Spark jobs with
_NUMBERS = itertools.count(1)
#: seconds a cancelled capture waits at most for its tasks to end (Spark kills a
#: cancelled task's Python worker after ``spark.python.task.killTimeout``, 2 s)
SETTLE_S = 10.0
#: how long after a cancel the jobs of the group that start late are cancelled too
LATE_S = 0.5


def cancel_running(sc: Any, group: str) -> None:
    """Cancel the jobs of ``group`` if one runs: Spark 4 logs a warning on the console
    for a cancel that finds none, and a count capture stops may be between jobs."""
    status = sc.statusTracker()
    for job in status.getJobIdsForGroup(group):
        info = status.getJobInfo(job)
        if info is not None and str(info.status) == "RUNNING":
            sc.cancelJobGroup(group)
            return


class JobGroup:
    """The job group of one capture at a time, and the count of its jobs.

    Examples
    --------
    Without a capture running, nothing is counted (and nothing asked of Spark):

    >>> jobs = JobGroup(spark=None)
    >>> with jobs.counting() as counted:
    ...     pass
    >>> counted
    [0]
    """

    def __init__(self, spark: Any, helper: Callable[[], Any] | None = None) -> None:
        self.spark = spark
        #: the group of the capture that runs (None: none runs)
        self.name: str | None = None
        self._seen = 0
        self._status: Any = None
        #: gives capture's helper in the JVM if it is compiled (see ``Jvm.helper_ready``)
        self._helper = helper
        self._count: Callable[[str], int] | None = None

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """Run capture's Spark jobs inside in a group of their own (the thread's previous
        group restored after): Ctrl-C or an error in the middle of a job stops them,
        and :meth:`counting` counts them."""
        sc = self.spark.sparkContext
        group = f"tensprov-lab-capture-{next(_NUMBERS)}"
        try:
            previous = mark(sc, group)  # (its tasks' log lines are silent: _quiet.py)
            self._status = sc.statusTracker()
            self._count = self._counter(sc)
        except Exception:  # noqa: BLE001 - counting is extra: never fail capture for it
            yield
            return
        self.name, self._seen = group, 0
        try:
            yield
        except BaseException:
            with contextlib.suppress(Exception):
                sc.cancelJobGroup(group)
                self._late_jobs(sc, group)
                self._settle(sc, group)
            raise
        finally:
            self.name = None
            unmark(sc, previous)

    def _late_jobs(self, sc: Any, group: str) -> None:
        """Cancel, for :data:`LATE_S` seconds, jobs of ``group`` that start after it was
        cancelled: a Ctrl-C that came while py4j was sending a job's command leaves the
        JVM to start that job (cancelling a group stops only the jobs that run)."""
        deadline = time.monotonic() + LATE_S
        while time.monotonic() < deadline:
            time.sleep(0.05)
            cancel_running(sc, group)

    def _settle(self, sc: Any, group: str) -> None:
        """After ``group`` was cancelled: on pyspark 3.5, wait for its tasks to end, then
        drop the Python workers a killed task left closed in Spark's pool of idle workers
        (``TensProvHelper.dropClosedPythonWorkers``, SPARK-54217).  Without it the user's
        next Python task after a Ctrl-C may be given one and fail with "Socket is
        closed"; pyspark 4 keeps no such worker."""
        from tensprov_lab.capture.spark._versions import spark4

        helper = None if spark4() else self._compiled_helper()
        if helper is None:
            return
        jsc = sc._jsc.sc()
        deadline = time.monotonic() + SETTLE_S
        while helper.activeTasks(jsc, group) > 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        helper.dropClosedPythonWorkers()

    def _compiled_helper(self) -> Any:
        """Capture's helper in the JVM if it is compiled already, else None."""
        return self._helper() if self._helper is not None else None

    def _counter(self, sc: Any) -> Callable[[str], int]:
        """How the group's jobs are counted: one round trip with the helper, else two."""
        helper = self._compiled_helper()
        if helper is not None:
            jsc = sc._jsc.sc()
            return lambda group: int(helper.jobCount(jsc, group))
        return lambda group: len(self._status.getJobIdsForGroup(group))

    def cancel(self) -> None:
        """Cancel the jobs of the capture that runs, if one does."""
        if self.name is not None:
            self.spark.sparkContext.cancelJobGroup(self.name)

    @contextlib.contextmanager
    def counting(self) -> Iterator[list[int]]:
        """Count the group's Spark jobs run inside (``with ... as counted``:
        ``counted[0]`` afterwards): one round trip, the group's jobs so far."""
        counted = [0]
        try:
            yield counted
        finally:
            if self.name is not None and self._count is not None:
                try:
                    total = self._count(self.name)
                    counted[0], self._seen = total - self._seen, total
                except Exception:  # noqa: BLE001 - counting is extra
                    pass
