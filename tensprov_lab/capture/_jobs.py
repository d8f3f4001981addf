"""Capture's Spark jobs: run in a job group of their own, and counted.

A capture's jobs run in a job group of its own, so that Ctrl-C or an error in the
middle of one cancels them and they can be counted per operation
(``run.operations[i].jobs``).
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from typing import Any

__all__ = ["JobGroup"]

#: numbers of the job groups capture counts its Spark jobs with
_NUMBERS = itertools.count(1)


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

    def __init__(self, spark: Any) -> None:
        self.spark = spark
        #: the group of the capture that runs (None: none runs)
        self.name: str | None = None
        self._seen = 0
        self._status: Any = None
        #: Spark's DAG scheduler, for the id its next job gets (see counting)
        self._scheduler: Any = None

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """Run capture's Spark jobs inside in a group of their own (the thread's previous
        group restored after): Ctrl-C or an error in the middle of a job stops them,
        and :meth:`counting` counts them."""
        sc = self.spark.sparkContext
        group = f"tensprov-lab-capture-{next(_NUMBERS)}"
        try:
            previous = sc.getLocalProperty("spark.jobGroup.id")
            sc.setLocalProperty("spark.jobGroup.id", group)
            self._status = sc.statusTracker()
        except Exception:  # noqa: BLE001 - counting is extra: never fail capture for it
            yield
            return
        try:
            self._scheduler = sc._jsc.sc().dagScheduler()
            int(self._scheduler.nextJobId())
        except Exception:  # noqa: BLE001 - another Spark build: the group asked each time
            self._scheduler = None
        self.name, self._seen = group, 0
        try:
            yield
        except BaseException:
            with contextlib.suppress(Exception):
                sc.cancelJobGroup(group)
            raise
        finally:
            self.name = None
            sc.setLocalProperty("spark.jobGroup.id", previous)  # type: ignore[arg-type]

    def cancel(self) -> None:
        """Cancel the jobs of the capture that runs, if one does."""
        if self.name is not None:
            self.spark.sparkContext.cancelJobGroup(self.name)

    @contextlib.contextmanager
    def counting(self) -> Iterator[list[int]]:
        """Count the group's Spark jobs run inside (``with ... as counted``:
        ``counted[0]`` afterwards).  Spark is asked for the group's jobs only when some
        job started meanwhile: asking lists every job Spark keeps (about 1 ms), where
        the id the next job gets is one small round trip, and most operations start
        none (German's 66 steps asked 200 times for no job)."""
        counted = [0]
        start = self._next_id() if self.name is not None else None
        try:
            yield counted
        finally:
            if self.name is not None and (start is None or self._next_id() != start):
                try:
                    total = len(self._status.getJobIdsForGroup(self.name))
                    counted[0], self._seen = total - self._seen, total
                except Exception:  # noqa: BLE001 - counting is extra
                    pass

    def _next_id(self) -> int | None:
        """The id Spark's next job gets (None: not known)."""
        if self._scheduler is None:
            return None
        try:
            return int(self._scheduler.nextJobId())
        except Exception:  # noqa: BLE001 - counting is extra: never fail capture for it
            self._scheduler = None
            return None
