"""The process-wide store, its trackers and the runs kept in this process.

Below :mod:`tensprov_lab._run` (a Run forgets itself through :func:`forget`) and above
capture: it holds runs but never imports the Run class, so no module imports it back.
"""

from __future__ import annotations

import sys
import threading
from typing import TYPE_CHECKING, Any

from tensprov_lab.store import Store

if TYPE_CHECKING:
    from tensprov_lab.capture.recording._tracker import Tracker

__all__ = ["store", "runs", "last_run", "forget", "wait"]

_STORE = Store()
_TRACKERS: dict[int, Tracker] = {}
#: the runs kept, oldest first (tensprov_lab.Run objects)
_RUNS: list[Any] = []
#: runs were forgotten in this process (for a clearer message when none is left)
_FORGOT = False


def store() -> Store:
    """The process-wide provenance store (every run of every tracked block)."""
    wait()
    return _STORE


def wait() -> None:
    """Wait for the captures running in the background (``track(background=True)``)."""
    for tracker in list(_TRACKERS.values()):
        tracker.wait()
    # a cancelled background capture leaves no run, as a Ctrl-C in the foreground
    _RUNS[:] = [r for r in _RUNS if not r._runlog.interrupted]


def runs() -> list[Any]:
    """Every run kept in this process, oldest first (``tensprov_lab.runs``)."""
    wait()
    return list(_RUNS)


def last_run() -> Any:
    """The most recent run (``tensprov_lab.last_run``)."""
    wait()
    if not _RUNS:
        what = "every run was forgotten" if _FORGOT else "nothing has been tracked yet"
        raise LookupError(
            f"{what}: run code in `with tensprov_lab.track(spark):` or a %%provtrack cell first"
        )
    return _RUNS[-1]


def forget(run: Any = None) -> None:
    """Free the provenance of ``run``, or of every run (``tensprov_lab.forget``)."""
    global _FORGOT
    from tensprov_lab._warn import warn

    wait()
    if any(t._active is not None for t in _TRACKERS.values()):
        raise RuntimeError("a tracked block is running: forget runs after it ends, not inside it")
    problems: list[str] = []
    if run is None:
        for tracker in _TRACKERS.values():
            problems += tracker.forget(list(tracker.runs))  # nothing left to keep
        for r in _RUNS:  # runs of trackers of stopped sessions, say
            r._log.forgotten = True
        _RUNS.clear()
        client = sys.modules.get("tensprov_lab.replay._client")
        if client is not None:  # (loaded by a replay over Connect: it holds decoded files)
            client.clear_cache()
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
        warn(
            "tensprov-lab: the provenance was forgotten, but part of what capture kept in "
            f"Spark's cache could not be released: {'; '.join(problems)}"
        )


def _dependency_message(run: Any, blocking: list[int | None]) -> str:
    def label(r: Any) -> str:
        return f"{r.name!r} (id {r.id})" if r.name else f"id {r.id}"

    known = {r.id: r for r in _RUNS if r._tracker.store is run._tracker.store}
    names = ", ".join(label(known[b]) if b in known else f"id {b}" for b in blocking)
    return (
        f"cannot forget run {label(run)}: later run(s) {names} read its datasets (a "
        "DataFrame captured in it was used in their tracked block), and their lineage "
        "would break. Forget those runs first (tensprov_lab.forget(run) for each, newest "
        "first), or forget every run with tensprov_lab.forget()"
    )


#: guards the making of trackers (``prepare`` makes one in a thread of its own)
_MAKING = threading.Lock()


def prepare(spark: Any) -> threading.Thread | None:
    """Get capture ready for ``spark`` in a thread of its own: its modules imported, its
    tracker made and its JVM helper compiled, so that the first tracked block does not
    wait for them (``local_spark()`` and ``%load_ext tensprov_lab`` call this). Returns
    the thread (None when there is nothing to prepare); failures are left to the first
    block, which reports them."""
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        return None

    def work() -> None:
        try:
            tracker = _tracker(spark)
            tracker._classes()  # (imports what a block wraps: SQL, pandas and ML hops)
            tracker.jvm.helper  # noqa: B018 - compiled on first use, once per JVM
        except Exception:  # noqa: BLE001, S110 - the first block says what is wrong
            pass

    thread = threading.Thread(target=work, name="tensprov-lab-prepare", daemon=True)
    thread.start()
    return thread


def _tracker(spark: Any) -> Tracker:
    with _MAKING:
        return _make_tracker(spark)


def _make_tracker(spark: Any) -> Tracker:
    _check_session(spark)
    if type(spark).__module__.startswith("pyspark.sql.connect"):
        from tensprov_lab.capture.connect import ConnectTracker

        key = id(spark)
        found = _TRACKERS.get(key)
        if found is None:
            found = _TRACKERS[key] = ConnectTracker(spark, _STORE)  # type: ignore[assignment]
        return found  # type: ignore[return-value]
    from tensprov_lab.capture.recording._tracker import Tracker

    key = id(spark._jsparkSession)
    tracker = _TRACKERS.get(key)
    if tracker is None:
        tracker = _TRACKERS[key] = Tracker(spark, _STORE)
    return tracker


def _check_session(spark: Any) -> None:
    """A clear error for what capture cannot track."""
    kind = type(spark)
    if kind.__module__.startswith("pyspark.sql.connect"):
        from tensprov_lab.capture.spark._versions import spark4

        if not spark4():
            import pyspark

            raise NotImplementedError(
                "tracking a Spark Connect session needs pyspark 4's Connect client; this "
                f"is pyspark {pyspark.__version__}. Track a classic session of Spark 3.5 "
                "(SparkSession.builder without .remote(...)), or use pyspark>=4 for Spark "
                "Connect (docs/connect.md)"
            )
        return
    if not hasattr(spark, "_jsparkSession"):
        raise TypeError(
            f"track() needs a pyspark SparkSession, got {kind.__module__}.{kind.__name__}"
        )
