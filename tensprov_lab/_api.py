"""The process-wide store and the ``track`` context manager."""

from __future__ import annotations

import re
import sys
import warnings
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from tensprov_lab.store import Store

if TYPE_CHECKING:
    from tensprov_lab._run import Run
    from tensprov_lab.capture._tracker import Tracker

__all__ = ["track", "store", "last_run", "runs", "forget", "parse_size"]

_STORE = Store()
_TRACKERS: dict[int, Tracker] = {}
_RUNS: list[Run] = []
#: runs were forgotten in this process (for a clearer message when none is left)
_FORGOT = False


def store() -> Store:
    """The process-wide provenance store (every run of every tracked block)."""
    return _STORE


def runs() -> list[Run]:
    """Every run recorded in this process, oldest first."""
    return list(_RUNS)


def last_run() -> Run:
    """The most recent run.

    Raises
    ------
    LookupError
        When nothing has been tracked yet.
    """
    if not _RUNS:
        what = "every run was forgotten" if _FORGOT else "nothing has been tracked yet"
        raise LookupError(
            f"{what}: run code in `with tensprov_lab.track(spark):` or a %%provtrack cell first"
        )
    return _RUNS[-1]


def forget(run: Run | None = None) -> None:
    """Free the provenance of a run, or of every run.

    The run's datasets and operations leave the store (``store().nbytes`` drops), what
    capture kept in Spark's cache for them is unpersisted, and the run leaves
    :func:`runs`.  The forgotten :class:`~tensprov_lab.Run` raises ``LookupError`` when
    queried, and its DataFrames, used in a later tracked block, are new sources there.
    Use it when a tracked block hits its memory budget, or to drop the runs of cells you
    re-ran.

    Parameters
    ----------
    run : Run, optional
        The run to forget (also ``run.forget()``).  Default: every run of every
        SparkSession.

    Raises
    ------
    ValueError
        When a later run reads datasets of ``run`` (a DataFrame captured in ``run`` and
        used in that run's block): its lineage would break.  Forget the later runs
        first, or everything with ``tensprov_lab.forget()``.
    RuntimeError
        Inside a tracked block.

    Examples
    --------
    >>> with tensprov_lab.track(spark, name="draft") as run:  # doctest: +SKIP
    ...     big = orders.filter("amount > 50")
    >>> tensprov_lab.forget(run)  # doctest: +SKIP
    >>> tensprov_lab.forget()  # every run  # doctest: +SKIP
    """
    global _FORGOT
    from tensprov_lab.capture._tracker import TensProvWarning

    if any(t._active is not None for t in _TRACKERS.values()):
        raise RuntimeError("a tracked block is running: forget runs after it ends, not inside it")
    problems: list[str] = []
    if run is None:
        for tracker in _TRACKERS.values():
            problems += tracker.forget(list(tracker.runs))  # nothing left to keep
        for r in _RUNS:  # runs of trackers of stopped sessions, say
            r._log.forgotten = True
        _RUNS.clear()
    else:
        if run._log.forgotten:
            return
        blocking = run._tracker.store.dependent_runs([run.id])
        if blocking:
            raise ValueError(_dependency_message(run, blocking))
        tracker = run._tracker
        keep = [
            n.cached
            for t in _TRACKERS.values()
            if t is not tracker
            for n in t.nodes.values()
            if n.cached is not None
        ]
        problems = tracker.forget([run.id], keep)
        _RUNS[:] = [r for r in _RUNS if r._log is not run._log]
    _FORGOT = True
    if problems:
        warnings.warn(
            "tensprov-lab: the provenance was forgotten, but part of what capture kept in "
            f"Spark's cache could not be released: {'; '.join(problems)}",
            TensProvWarning,
            stacklevel=2,
        )


def _dependency_message(run: Run, blocking: list[int | None]) -> str:
    def label(r: Run) -> str:
        return f"{r.name!r} (id {r.id})" if r.name else f"id {r.id}"

    known = {r.id: r for r in _RUNS if r._tracker.store is run._tracker.store}
    names = ", ".join(label(known[b]) if b in known else f"id {b}" for b in blocking)
    return (
        f"cannot forget run {label(run)}: later run(s) {names} read its datasets (a "
        "DataFrame captured in it was used in their tracked block), and their lineage "
        "would break. Forget those runs first (tensprov_lab.forget(run) for each, newest "
        "first), or forget every run with tensprov_lab.forget()"
    )


def _tracker(spark: Any) -> Tracker:
    from tensprov_lab.capture._tracker import Tracker

    key = id(spark._jsparkSession)
    tracker = _TRACKERS.get(key)
    if tracker is None:
        tracker = _TRACKERS[key] = Tracker(spark, _STORE)
    return tracker


def parse_size(size: int | str | None) -> int | None:
    """``"512MB"`` → bytes.

    >>> parse_size("1.5 KB")
    1536
    """
    if size is None or isinstance(size, int):
        return size
    m = re.fullmatch(r"\s*([0-9.]+)\s*([kmgt]?i?b?)\s*", str(size), re.IGNORECASE)
    if not m:
        raise ValueError(f"cannot read the size {size!r}: write e.g. 512MB or 2GB")
    unit = m.group(2).lower().rstrip("b").rstrip("i")
    scale = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}[unit]
    return int(float(m.group(1)) * scale)


class track:  # noqa: N801 - used like a function: ``with track(spark) as run``
    """Capture the provenance of the DataFrame code run inside the block.

    Parameters
    ----------
    spark : SparkSession
    name : str, optional
        Name of the run (default: its number).
    budget : int or str, optional
        Most bytes of tensors the store may hold, e.g. ``"1GB"``; operations past it
        are kept as opaque (coarse lineage only) with a warning.
    materialize : {"auto", "all", "none"}
        Which datasets to keep whole in Spark's cache for fast record reads and
        recomputation (``run.materialized`` lists them).  ``"auto"``: the pipeline's
        outputs, the inputs of contextual operations (windows) and the results of
        non-deterministic ones; every other dataset is recomputed on demand.

    Examples
    --------
    >>> with tensprov_lab.track(spark, name="demo") as run:  # doctest: +SKIP
    ...     big = orders.filter("amount > 50")
    >>> run.backward(big, rows=[0])  # doctest: +SKIP
    """

    def __init__(
        self,
        spark: Any,
        name: str | None = None,
        budget: int | str | None = None,
        materialize: str = "auto",
    ):
        if materialize not in ("auto", "all", "none"):
            raise ValueError(f"materialize must be 'auto', 'all' or 'none', not {materialize!r}")
        self.spark = spark
        self.name = name
        self.materialize = materialize
        self.budget = parse_size(budget)
        self.run: Run | None = None
        self._progress: Any = None

    def __enter__(self) -> Run:
        from tensprov_lab._run import Run

        tracker = _tracker(self.spark)
        tracker.budget = self.budget
        tracker.materialize = self.materialize
        log = tracker.begin(self.name)
        self._tracker = tracker
        self.run = Run(tracker, log)
        return self.run

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> Literal[False]:
        frame = sys._getframe(1)
        try:
            self._tracker.end(frame, progress=self._progress)
        except Exception as err:  # never hide the user's own exception behind ours
            self._tracker.abort()
            if exc_type is None:
                raise
            warnings.warn(f"tensprov-lab: capture failed: {err}", stacklevel=2)
        finally:
            del frame
        assert self.run is not None
        _RUNS.append(self.run)
        return False
