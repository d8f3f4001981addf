"""What a tracked cell shows while and after it captures: the progress of a capture
(an updating output in a notebook, one rewritten line on a terminal) that turns into the
run's summary with its warnings listed under it, and the progress of a query's Spark job.
"""

from __future__ import annotations

import html
import sys
import threading
from typing import TYPE_CHECKING, Any

from IPython.display import display

if TYPE_CHECKING:
    from tensprov_lab._run import Run

__all__ = ["Progress", "QueryProgress", "in_notebook", "one_line", "summary_text"]


class QueryProgress:
    """A line in the running cell while a query reads Spark-resident tensors (one
    output per cell, emptied when the job is done)."""

    def __init__(self, shell: Any) -> None:
        self.shell = shell
        self._handle: Any = None
        self._cell: Any = None

    def __call__(self, message: str | None) -> None:
        cell = getattr(self.shell, "execution_count", None)
        if message is None:
            if self._handle is not None and cell == self._cell:
                self._handle.update({"text/plain": ""}, raw=True)
            return
        bundle = {
            "text/plain": message,
            "text/html": f"<progress></progress> {html.escape(message)}",
        }
        if self._handle is None or cell != self._cell:
            self._handle, self._cell = display(bundle, raw=True, display_id=True), cell
        else:
            self._handle.update(bundle, raw=True)


class Progress:
    """Live progress of a capture: an updating output in a notebook, one rewritten line
    on a terminal, nothing when output goes to a file. At the end it turns into the
    summary line.
    """

    def __init__(self, shell: Any) -> None:
        # Jupyter kernels run a ZMQInteractiveShell, the one shell with a kernel
        self.notebook = getattr(shell, "kernel", None) is not None
        self._terminal = not self.notebook and _isatty(sys.stdout)
        self._handle: Any = None
        self._width = 0
        #: the thread that writes the summary of a capture in the background
        self.summarizer: Any = None

    def __call__(self, i: int, n: int, what: str) -> None:
        text = f"tensprov-lab: capturing provenance {i + 1}/{n} ({what})"
        if self.notebook:
            bundle = {
                "text/plain": text,
                "text/html": f"<progress value='{i}' max='{n}'></progress> "
                f"capturing provenance {i + 1}/{n} ({html.escape(what)})",
            }
            if self._handle is None:
                self._handle = display(bundle, raw=True, display_id=True)
            else:
                self._handle.update(bundle, raw=True)
        elif self._terminal:
            sys.stdout.write("\r" + text.ljust(self._width))
            sys.stdout.flush()
            self._width = len(text)

    def say(self, text: str) -> None:
        """Show ``text`` in the notebook's progress display (nothing elsewhere)."""
        if not self.notebook:
            return
        bundle = {"text/plain": text, "text/html": f"<progress></progress> {html.escape(text)}"}
        if self._handle is None:
            self._handle = display(bundle, raw=True, display_id=True)
        else:
            self._handle.update(bundle, raw=True)

    def later(self, run: Run) -> None:
        """A capture running in the background: say so now, and put the summary line in
        its place when the capture ends (a notebook only: a terminal gets nothing
        written under its prompt; ``run.summary()`` is there to ask)."""
        if not self.notebook:
            self.finish(None)
            return

        background = run._tracker._background

        def summarize() -> None:
            try:
                run.wait()  # in this thread: a failure is raised in the user's, by a query
                error = background.error if background is not None else None
                text = summary_text(run, None if error is None else one_line(error))
            except LookupError as exc:  # cancelled
                text = f"tensprov-lab: {exc}"
            self.finish(text)

        self.summarizer = threading.Thread(
            target=summarize, name="tensprov-lab-summary", daemon=True
        )
        self.summarizer.start()

    def finish(self, summary: str | None) -> None:
        if self._handle is not None:
            self._handle.update({"text/plain": summary or ""}, raw=True)
            return
        if self._width:
            sys.stdout.write("\r" + " " * self._width + "\r")
            sys.stdout.flush()
        if summary is not None:
            print(summary)


#: at most this many of a run's warnings are listed under its summary
_LISTED = 5


def summary_text(run: Run, failure: str | None = None) -> str:
    """The summary line of a tracked cell, the run's warnings listed under it (each on
    one line, at most :data:`_LISTED`), or why its capture failed."""
    if run._log.interrupted:
        return f"tensprov-lab run {run.name or run.id}: capture interrupted, nothing kept"
    lines = [run.summary()]
    if failure is not None:
        lines.append(f"  capture failed: {failure} (what was captured before is kept)")
    if run._log.listed:
        notes = run._log.warnings
        for note in notes[:_LISTED]:
            lines.append(f"  warning: {note.strip().splitlines()[0] if note.strip() else note}")
        if len(notes) > _LISTED:
            lines.append(f"  … {len(notes) - _LISTED} more warnings: run.warnings")
    return "\n".join(lines)


def in_notebook(shell: Any) -> bool:
    """Whether the shell is a Jupyter kernel (the one shell with a ``kernel``)."""
    return getattr(shell, "kernel", None) is not None


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def one_line(exc: BaseException) -> str:
    """The first line of an error's message (a KeyError's without its quotes).

    >>> one_line(KeyError("no dataset named 'x'"))
    "no dataset named 'x'"
    >>> one_line(ValueError("first line" + chr(10) + "second line"))
    'first line'
    """
    msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
    lines = str(msg).strip().splitlines()
    return lines[0] if lines else type(exc).__name__
