"""Capture in the background: a tracked block returns once its operations are recorded.

A block's operations are lazy in Spark: without tracking the block ends at once. The
capture after it reads the block's sources and builds tensors, which takes about as
long as running the pipeline (``docs/benchmarks.md``). With ``track(...,
background=True)`` that work runs in a thread of its own while the notebook goes on;
anything that reads the run's provenance (a query, ``tensprov_lab.store()``, the next
tracked block, ``forget``, ``save``) waits for it first (:meth:`BackgroundCapture.wait`).

The capture thread keeps the block's job group, so ``run.cancel()`` or a Ctrl-C while a
query waits stops its Spark jobs and drops the run's provenance whole, as a Ctrl-C in a
foreground capture does. Warnings of the capture are kept on the run and shown when the
capture is first waited for, so they do not land in whatever cell runs at that moment.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tensprov_lab._warn import warn
from tensprov_lab.capture.plan._nodes import RunLog, _short_error
from tensprov_lab.store import Store

__all__ = ["BackgroundCapture", "Blocks"]


class BackgroundCapture:
    """One block's capture running in a thread: wait for it, or cancel it.

    Parameters
    ----------
    run : RunLog
        The run being captured.
    work : callable
        The capture itself, run in the thread (it raises ``KeyboardInterrupt`` when
        :attr:`stop` is set, which drops the run).
    cancel_jobs : callable
        Cancels the Spark jobs the capture is running (its job group).
    spark : SparkSession, optional
        The session whose thread-local properties (the job group, tags) the capture
        thread inherits.

    Examples
    --------
    >>> log = RunLog(id=1, name="demo")
    >>> bg = BackgroundCapture(log, lambda: time.sleep(0.01), cancel_jobs=lambda: None)
    >>> bg.start()
    >>> bg.wait()
    >>> bg.done
    True
    """

    def __init__(
        self,
        run: RunLog,
        work: Callable[[], Any],
        cancel_jobs: Callable[[], None],
        spark: Any = None,
    ) -> None:
        self.run = run
        self._spark = spark
        self._work = work
        self._cancel_jobs = cancel_jobs
        #: set to stop the capture (checked between its operations)
        self.stop = threading.Event()
        self._finished = threading.Event()
        self._error: BaseException | None = None
        #: whether its warnings (and failure) were shown, in the user's thread
        self.reported = False
        self._warnings_before = len(run.warnings)
        self.thread: threading.Thread | None = None
        #: seconds from start to the end of the capture
        self.seconds = 0.0
        #: the capture's last step: (index, count, what), as progress reports it
        self.step: tuple[int, int, str] | None = None

    def relay(
        self, progress: Callable[[int, int, str], None] | None
    ) -> Callable[[int, int, str], None]:
        """A progress callback for the capture that notes its step (said to whoever
        waits) and passes it on to ``progress``."""

        def step(i: int, n: int, what: str) -> None:
            self.step = (i, n, what)
            if progress is not None:
                progress(i, n, what)

        return step

    def _waiting(self) -> str:
        name = self.run.name or self.run.id
        text = f"tensprov-lab: waiting for the capture of run {name} in the background"
        if self.step is not None:
            i, n, what = self.step
            text += f" ({i + 1}/{n}: {what})"
        return text + " …"

    def start(self) -> None:
        target: Callable[[], None] = self._run
        if self._spark is not None:
            from tensprov_lab.capture.spark._versions import thread_target

            # the thread inherits the block's local properties (job group, tags)
            target = thread_target(self._spark, self._run)
        # a daemon: a script that ends does not wait for a capture nobody will query
        self.thread = threading.Thread(target=target, name="tensprov-lab-capture", daemon=True)
        self._t0 = time.perf_counter()
        self.thread.start()

    def _run(self) -> None:
        try:
            self._work()
        except BaseException as exc:  # noqa: BLE001 - handed to whoever waits
            self._error = exc
        finally:
            self.seconds = time.perf_counter() - self._t0
            self._finished.set()

    @property
    def done(self) -> bool:
        """Whether the capture has ended (finished, failed or cancelled)."""
        return self._finished.is_set()

    @property
    def error(self) -> BaseException | None:
        """What stopped the capture (a ``KeyboardInterrupt`` when it was cancelled), or
        None."""
        return self._error

    def in_capture_thread(self) -> bool:
        return threading.current_thread() is self.thread

    def wait(self) -> None:
        """Block until the capture ends; a Ctrl-C meanwhile cancels it (its provenance is
        dropped) and goes on to the caller.  The first wait after the end shows the
        capture's warnings, and a failure of the capture as a warning."""
        if self.in_capture_thread():
            return
        from tensprov_lab.capture.memory._resident import report_progress

        # the user's thread says what it waits for, past a moment (a notebook shows it
        # in the running cell)
        said: str | None = None
        user = threading.current_thread() is threading.main_thread()
        t0 = time.perf_counter()
        try:
            # short slices: a Ctrl-C reaches this thread at once
            while not self._finished.wait(0.05):
                if user and time.perf_counter() - t0 > 0.3 and self._waiting() != said:
                    said = self._waiting()
                    report_progress(said)
        except KeyboardInterrupt:
            self.cancel()
            raise
        finally:
            if said is not None:
                report_progress(None)
        self._report()

    def cancel(self) -> None:
        """Stop the capture and wait until it has dropped the run's provenance."""
        if self.done:
            return
        self.stop.set()
        self._cancel_jobs()
        while not self._finished.wait(0.05):
            self._cancel_jobs()  # a job started after the first cancel

    def _report(self) -> None:
        # in the user's thread only: a thread waiting on its own (the notebook's summary
        # line) leaves them to the first query the user runs
        if self.reported or threading.current_thread() is not threading.main_thread():
            return
        self.reported = True
        if not self.run.listed:  # (else listed with the notebook's summary of the run)
            for message in self.run.warnings[self._warnings_before :]:
                warn(message)
        err = self._error
        if err is not None and not isinstance(err, KeyboardInterrupt):
            warn(f"tensprov-lab: capture failed: {err}")


class Blocks:
    """What both trackers share about the life of a tracked block: starting it, waiting
    for its capture in the background, and the points where a cancelled capture stops."""

    #: the capture running in the background (``track(..., background=True)``)
    _background: BackgroundCapture | None = None
    store: Store
    runs: dict[int, RunLog]
    #: the block being recorded, and the item of it being captured
    _active: RunLog | None
    _current: Any

    if TYPE_CHECKING:

        def _note(self, message: str) -> None: ...

    def patch(self) -> None:
        """Wrap the DataFrame methods a block records (each tracker its own)."""
        raise NotImplementedError

    def begin(self, name: str | None) -> RunLog:
        """Start recording a tracked block: its run."""
        self.wait()  # a block's capture still running in the background
        if self._active is not None:
            raise RuntimeError("a tracked block is already running; tracked blocks do not nest")
        # ids come from the store shared by every tracker: unique, and never reused
        # after a run is forgotten
        run = RunLog(id=self.store.new_run_id(), name=name)
        self.runs[run.id] = run
        self._active = run
        self.patch()
        return run

    def _capture_failed(self, exc: Exception) -> None:
        """A failure of capture itself while a block's captures run: what was captured
        stays, the rest is not recorded, and one note says so (never the user's error)."""
        self._current = None
        why = _short_error(exc)
        self._note(f"capture failed: {why}; the operations after it are not recorded")

    def wait(self) -> None:
        """Wait for a capture running in the background (nothing when there is none)."""
        bg = self._background
        if bg is None or bg.in_capture_thread():
            return
        bg.wait()
        if self._background is bg and bg.reported:  # (else left for the user's thread)
            self._background = None

    def _stop_point(self) -> None:
        """In a background capture that was cancelled: stop here, as Ctrl-C does in the
        foreground (a job cancelled under an operation may have made it opaque: the run
        is dropped whole all the same)."""
        bg = self._background
        if bg is not None and bg.in_capture_thread() and bg.stop.is_set():
            raise KeyboardInterrupt
        # (a Ctrl-C that a library turned into its own error: the classic tracker notes
        # them, see sigint_noted; the Connect one has no such handler to note)
        sigint = getattr(self, "_sigint", None)
        if sigint is not None and sigint():
            raise KeyboardInterrupt
