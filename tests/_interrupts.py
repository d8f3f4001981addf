"""Ctrl-C as a terminal or a notebook's interrupt gives it, for the tests."""

from __future__ import annotations

import signal
import threading


def ctrl_c() -> None:
    """SIGINT to the main thread (as Linux gives a process's SIGINT, and a Jupyter
    kernel's interrupt): its blocking call, e.g. a socket read of a Spark job's
    results, ends at once, unlike ``_thread.interrupt_main``, which waits for the
    call to return (a 40 s job) before the ``KeyboardInterrupt`` is raised."""
    signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)  # type: ignore[arg-type]
