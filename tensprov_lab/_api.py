"""The process-wide store and the ``track`` context manager."""

from __future__ import annotations

import re
import sys
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from tensprov_lab import _registry
from tensprov_lab._registry import _tracker, store
from tensprov_lab._warn import warn

if TYPE_CHECKING:
    from tensprov_lab._run import Run

__all__ = ["track", "store", "last_run", "runs", "forget", "parse_size"]


def runs() -> list[Run]:
    """Every run recorded in this process, oldest first."""
    return _registry.runs()


def last_run() -> Run:
    """The most recent run.

    Raises
    ------
    LookupError
        When nothing has been tracked yet.
    """
    run: Run = _registry.last_run()
    return run


def forget(run: Run | None = None) -> None:
    """Free the provenance of a run, or of every run.

    The run's datasets and operations leave the store (``store().nbytes`` drops), what
    capture kept in Spark's cache for them is unpersisted, and the run leaves
    :func:`runs` (forgetting every run also drops the source files decoded for replays
    on the client over Spark Connect).  The forgotten :class:`~tensprov_lab.Run` raises
    ``LookupError`` when queried, and its DataFrames, used in a later tracked block, are
    new sources there.
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
    _registry.forget(run)


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
        Most bytes of tensors and indexes the store may hold in memory, e.g. ``"1GB"``.
        Past it, tensors spill to local disk (memory-mapped files: queries keep
        answering from them); with ``spill=False``, or when everything is spilled
        already, operations past it are kept as opaque (coarse lineage only) with a
        warning.
    spill : bool
        Whether tensors past the budget spill (default True).
    storage : {"disk", "spark"}
        Where tensors past the budget go.  ``"disk"`` (the default): memory-mapped
        files in a local temporary directory, queries answer in milliseconds; when
        that disk runs short of room, to Spark instead.  ``"spark"``: Parquet tables
        Spark reads, queries on them run as Spark jobs (under a second backward,
        seconds forward) and the driver holds none of their bytes.
    spark_dir : str, optional
        The directory of Spark-resident tables (default: under the local temporary
        directory).  On a cluster across machines give one every executor sees under
        the same path (a shared mount).
    materialize : {"auto", "all", "none"}
        Which datasets to keep whole in Spark's cache for fast record reads and
        recomputation (``run.materialized`` lists them).  ``"auto"``: the pipeline's
        outputs, the inputs of contextual operations (windows) and the results of
        non-deterministic ones; every other dataset is recomputed on demand.
    background : bool
        Capture in a thread of its own (default False): the block returns as soon as
        its operations are recorded, as an untracked block of lazy DataFrame code does,
        and the reads and tensors of the capture run while your code goes on.  Anything
        that reads the run (queries, ``tensprov_lab.store()``, the next tracked block,
        forget, save) waits for it; ``run.wait()`` waits, ``run.cancel()`` (or a Ctrl-C
        while waiting) drops it.  Do not overwrite the block's source files before the
        capture ends: it reads them.

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
        spill: bool = True,
        background: bool = False,
        storage: str = "disk",
        spark_dir: str | None = None,
    ):
        if materialize not in ("auto", "all", "none"):
            raise ValueError(f"materialize must be 'auto', 'all' or 'none', not {materialize!r}")
        if storage not in ("disk", "spark"):
            raise ValueError(f"storage must be 'disk' or 'spark', not {storage!r}")
        self.storage, self.spark_dir = storage, spark_dir
        self.spark = spark
        self.name = name
        self.materialize = materialize
        self.budget = parse_size(budget)
        self.spill = spill
        self.background = background
        self.run: Run | None = None
        self._progress: Any = None

    def __enter__(self) -> Run:
        from tensprov_lab._run import Run

        tracker = _tracker(self.spark)
        tracker.budget.limit, tracker.budget.spill = self.budget, self.spill
        tracker.budget.storage, tracker.budget.spark_dir = self.storage, self.spark_dir
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
            self._tracker.end(frame, progress=self._progress, background=self.background)
        except Exception as err:  # the user's block ran: capture's failure is only said
            from tensprov_lab.capture.plan._nodes import _short_error

            self._tracker.abort()
            warn(f"tensprov-lab: capture failed, the block's provenance is incomplete: "
                 f"{_short_error(err)}")  # fmt: skip
        finally:
            del frame
        assert self.run is not None
        _registry._RUNS.append(self.run)
        return False
