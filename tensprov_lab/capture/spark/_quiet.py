"""Capture's own Spark jobs are silent: their tasks' log lines stay off the console.

Capture reads the block's sources after the block ran (and counts some while it runs).
A source the block removed in between, such as files in a ``tempfile.TemporaryDirectory``
or a table it dropped, fails every task of capture's job over it, and Spark logs a page
per task (``ERROR Executor: Exception in task ... FileNotFoundException``) and a line
per job (``ERROR TaskSetManager ... aborting job``).  Capture copes (that source becomes
coarse, with one warning); the pages are noise the user did not cause.

A log4j filter (``TensProvQuiet.java``) on the appenders of Spark's logging drops the
events of capture's jobs and only those: capture marks its jobs with the local property
:data:`MARK` (which executors put in the MDC of the job's tasks) beside its job group,
and Spark's scheduler's lines about the stages of those jobs go too.  The user's jobs,
and everything else Spark logs, are unchanged.

>>> sc = _Context()
>>> previous = mark(sc, "tensprov-lab-capture-1")
>>> sc.props
{'spark.jobGroup.id': 'tensprov-lab-capture-1', 'mdc.tensprov': 'tensprov-lab-capture-1'}
>>> unmark(sc, previous)
>>> sc.props
{'spark.jobGroup.id': None, 'mdc.tensprov': None}
"""

from __future__ import annotations

from typing import Any

__all__ = ["MARK", "mark", "silence", "unmark"]

#: the local property marking capture's jobs (executors copy ``mdc.*`` properties into
#: the log context of the job's tasks)
MARK = "mdc.tensprov"
_GROUP = "spark.jobGroup.id"
_CLASS = "TensProvQuiet"


def silence(jvm: Any) -> bool:
    """Keep the log lines of capture's jobs in ``jvm``'s Spark (a ``Jvm``) off the
    console from now on: the filter compiled and put on the appenders it is not on yet
    (ones Spark's logging added since the last call too).  Whether it is in place; when
    it cannot be (no Janino, another logging backend), Spark logs as before."""
    quiet = jvm.once(_CLASS, None)
    if quiet is None:
        return False
    try:
        quiet.install(jvm.spark.sparkContext._jsc.sc())
    except Exception:  # noqa: BLE001 - log lines are cosmetic: capture goes on
        return False
    return True


def mark(sc: Any, group: str) -> tuple[str | None, str | None]:
    """Run the Spark jobs this thread starts next in job group ``group``, marked as
    capture's (:data:`MARK`); the thread's previous group and mark, for :func:`unmark`."""
    previous = (sc.getLocalProperty(_GROUP), sc.getLocalProperty(MARK))
    sc.setLocalProperty(_GROUP, group)
    sc.setLocalProperty(MARK, group)
    return previous


def unmark(sc: Any, previous: tuple[str | None, str | None]) -> None:
    """Restore the job group and mark :func:`mark` replaced."""
    sc.setLocalProperty(_GROUP, previous[0])
    sc.setLocalProperty(MARK, previous[1])


class _Context:
    """A stand-in for a SparkContext's local properties (for the examples)."""

    def __init__(self) -> None:
        self.props: dict[str, str | None] = {}

    def getLocalProperty(self, key: str) -> str | None:  # noqa: N802 - Spark's name
        return self.props.get(key)

    def setLocalProperty(self, key: str, value: str | None) -> None:  # noqa: N802
        self.props[key] = value
