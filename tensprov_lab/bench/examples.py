"""``tensprov-lab bench --suite examples``: pyspark's own documented examples, tracked.

Every docstring example of the DataFrame, Column, functions, readers and writers,
window and grouping APIs, the pandas API on Spark and the ML feature transformers
(pyspark's doctests, with the globals pyspark's own test runner gives them) runs
untracked, then again from a fresh namespace inside a ``tensprov_lab.track`` block.
Of the examples that pass untracked, it counts

- **blocks failed**: the tracked block raised where the untracked code did not;
- **differs**: the example's printed output differs from its documented output tracked
  (it matched untracked);
- **record-level**: the captured operations that are not opaque, over all captured;
- **ERROR lines**: ``ERROR`` lines and Java stack-trace lines on standard error
  (Spark's log, passed on by the session :func:`~tensprov_lab.local_spark` starts)
  during the tracked run beyond those of the untracked run.

Then the examples that failed or differed, and the methods of the opaque operations
(most frequent first), each with an example that made one.

Examples
--------
::

    tensprov-lab bench --suite examples                     # every module (~40 min)
    tensprov-lab bench --suite examples --modules pandas,DataFrame --limit 30
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import doctest
import importlib
import io
import os
import sys
import tempfile
import time
import uuid
import warnings
from dataclasses import dataclass, field
from typing import Any

__all__ = ["MODULES", "Outcome", "main", "run_example"]

#: the documented APIs, by name: the modules whose docstrings are the examples (the
#: first importable of each tuple: pyspark 4 moved some)
MODULES: dict[str, tuple[str, ...]] = {
    "DataFrame": ("pyspark.sql.dataframe",),
    "Column": ("pyspark.sql.column",),
    "functions": ("pyspark.sql.functions.builtin", "pyspark.sql.functions"),
    "readwriter": ("pyspark.sql.readwriter",),
    "window": ("pyspark.sql.window",),
    "group": ("pyspark.sql.group",),
    "pandas": ("pyspark.pandas.frame",),
    "pandas.groupby": ("pyspark.pandas.groupby",),
    "ml.feature": ("pyspark.ml.feature",),
}

_FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


@dataclass
class Outcome:
    """What one documented example did untracked and tracked."""

    name: str
    passed_untracked: bool
    #: the tracked block raised (capture's fault): the exception, else ""
    raised: str = ""
    #: the first example whose output differed tracked, else ""
    differs: str = ""
    ops: int = 0
    opaque: list[str] = field(default_factory=list)
    warnings: int = 0
    #: ERROR / stack-trace lines on standard error, untracked and tracked
    errors_untracked: int = 0
    errors_tracked: int = 0
    error_sample: str = ""
    seconds_untracked: float = 0.0
    seconds_tracked: float = 0.0


def _module(candidates: tuple[str, ...]) -> Any:
    for name in candidates:
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    return None


def _globals(module: Any, spark: Any, folder: str) -> dict[str, Any]:
    """The names pyspark's own test runner of ``module`` gives its doctests."""
    globs = dict(module.__dict__)
    globs["spark"] = spark
    globs["sc"] = spark.sparkContext
    globs["path"] = folder
    globs["temp_path"] = folder
    globs["db"] = "tensprov_examples"
    if module.__name__.startswith("pyspark.pandas"):
        import pyspark.pandas as ps

        globs["ps"] = ps
    return globs


def _is_error(line: str) -> bool:
    return " ERROR " in line or line.startswith(("\tat ", "Traceback", "py4j.protocol."))


class _Tee(io.TextIOBase):
    """Standard error while an example runs: kept, and counted by line."""

    def __init__(self) -> None:
        self.text: list[str] = []

    def write(self, s: str) -> int:
        self.text.append(s)
        return len(s)

    def lines(self) -> list[str]:
        return "".join(self.text).splitlines()


def _state(spark: Any) -> set[tuple[str, bool]]:
    return {(t.name, bool(t.isTemporary)) for t in spark.catalog.listTables()}


def _clean(spark: Any, before: set[tuple[str, bool]]) -> None:
    """Drop the views and tables an example made, and uncache: the next starts clean."""
    for name, temporary in _state(spark) - before:
        with contextlib.suppress(Exception):
            if temporary:
                spark.catalog.dropTempView(name)
            else:
                spark.sql(f"DROP TABLE IF EXISTS `{name}`")
    spark.catalog.clearCache()


def _run_doctest(test: doctest.DocTest, module: Any, spark: Any) -> tuple[int, str, float]:
    """Run ``test`` from fresh globals: its failures, the first failing source, seconds."""
    with tempfile.TemporaryDirectory() as folder:
        fresh = doctest.DocTest(
            test.examples, _globals(module, spark, folder), test.name, test.filename,
            test.lineno, test.docstring,
        )  # fmt: skip
        report = io.StringIO()
        runner = doctest.DocTestRunner(optionflags=_FLAGS, verbose=False)
        cwd = os.getcwd()
        t0 = time.perf_counter()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                result = runner.run(fresh, out=report.write)
        finally:
            os.chdir(cwd)
        seconds = time.perf_counter() - t0
    first = ""
    if result.failed:
        text = report.getvalue()
        at = text.find("Failed example:")
        first = " ".join(text[at:].split("\n")[1:2]).strip() if at >= 0 else text[:200]
    return result.failed, first, seconds


def run_example(test: doctest.DocTest, module: Any, spark: Any) -> Outcome:
    """Run one documented example untracked, then tracked, and say what differed."""
    import tensprov_lab
    from tensprov_lab._warn import TensProvWarning

    before = _state(spark)
    tee = _Tee()
    with contextlib.redirect_stderr(tee):
        failed, _, plain = _run_doctest(test, module, spark)
        time.sleep(0.05)  # the JVM's lines come through a thread
    _clean(spark, before)
    out = Outcome(test.name, failed == 0, seconds_untracked=plain)
    out.errors_untracked = sum(map(_is_error, tee.lines()))
    if failed:
        return out
    tee = _Tee()
    run = None
    t0 = time.perf_counter()
    with contextlib.redirect_stderr(tee), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with tensprov_lab.track(spark) as run:
                failed, first, _ = _run_doctest(test, module, spark)
        except Exception as exc:  # capture's: the examples' own are caught by doctest
            out.raised = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
            failed, first = 0, ""
        time.sleep(0.05)
    out.seconds_tracked = time.perf_counter() - t0
    _clean(spark, before)
    if failed:
        out.differs = first or "(output differs)"
    errors = [line for line in tee.lines() if _is_error(line)]
    out.errors_tracked = len(errors)
    out.error_sample = errors[0][:200] if errors else ""
    out.warnings = sum(issubclass(w.category, TensProvWarning) for w in caught)
    if run is not None:
        ops = run.operations
        out.ops = len(ops)
        out.opaque = [op.method for op in ops if op.opaque]
        run.forget()
    return out


def _examples(module: Any, limit: int | None) -> list[doctest.DocTest]:
    tests = doctest.DocTestFinder(exclude_empty=True).find(module, module.__name__)
    # the public API's: not private helpers' (``DataFrame._joinAsOf``)
    public = [t for t in tests if t.examples and not _private(t.name)]
    tests = sorted(public, key=lambda t: t.name)
    return tests[:limit] if limit else tests


def _private(name: str) -> bool:
    return any(part.startswith("_") and not part.startswith("__") for part in name.split("."))


def _report(name: str, outcomes: list[Outcome]) -> str:
    ran = [o for o in outcomes if o.passed_untracked]
    ops = sum(o.ops for o in ran)
    opaque = sum(len(o.opaque) for o in ran)
    level = 100.0 * (ops - opaque) / ops if ops else 100.0
    errors = sum(max(0, o.errors_tracked - o.errors_untracked) for o in ran)
    plain = sum(o.seconds_untracked for o in ran)
    tracked = sum(o.seconds_tracked for o in ran)
    return (
        f"{name:15} {len(outcomes):>9} {len(ran):>6} {sum(bool(o.raised) for o in ran):>7} "
        f"{sum(bool(o.differs) for o in ran):>7} {ops:>6} {level:>8.1f}% {errors:>7} "
        f"{plain:>8.1f}s {tracked:>8.1f}s"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tensprov-lab bench --suite examples",
                                     description=__doc__.split("\n\n")[0])  # fmt: skip
    parser.add_argument("--suite", default="examples", help=argparse.SUPPRESS)
    parser.add_argument(
        "--modules",
        default=",".join(MODULES),
        help=f"comma-separated, of: {', '.join(MODULES)} (default: all)",
    )
    parser.add_argument(
        "--limit", type=int, default=None, help="at most this many examples a module (by name)"
    )
    parser.add_argument("--cores", type=int, default=2, help="local Spark cores (default 2)")
    args = parser.parse_args(argv)
    chosen = [m.strip() for m in args.modules.split(",") if m.strip()]
    unknown = [m for m in chosen if m not in MODULES]
    if unknown:
        parser.error(f"unknown module(s) {', '.join(unknown)}: choose of {', '.join(MODULES)}")
    os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")  # (pyspark.pandas asks for it)
    from tensprov_lab._spark import local_spark

    spark = local_spark(args.cores, app=f"tensprov-lab-examples-{uuid.uuid4().hex[:6]}")
    spark.sql("CREATE DATABASE IF NOT EXISTS tensprov_examples")
    print("pyspark's documented examples, untracked then tracked (pyspark "
          f"{spark.version})", flush=True)  # fmt: skip
    header = (
        f"{'module':15} {'docstrings':>9} {'passed':>6} {'failed':>7} {'differs':>7} "
        f"{'ops':>6} {'rec-level':>9} {'ERRORs':>7} {'untracked':>9} {'tracked':>9}"
    )
    rows: list[str] = []
    everything: list[Outcome] = []
    for name in chosen:
        module = _module(MODULES[name])
        if module is None:
            rows.append(f"{name:15} (not importable in this pyspark)")
            continue
        tests = _examples(module, args.limit)
        outcomes = []
        for i, test in enumerate(tests, 1):
            outcomes.append(run_example(test, module, spark))
            if i % 25 == 0 or i == len(tests):
                print(f"  {name}: {i}/{len(tests)}", file=sys.stderr, flush=True)
        rows.append(_report(name, outcomes))
        everything += outcomes
    print(header)
    print("\n".join(rows))
    if len(chosen) > 1:
        print(_report("all", everything))
    ran = [o for o in everything if o.passed_untracked]
    for o in ran:
        if o.raised:
            print(f"failed tracked  {o.name}: {o.raised}")
        if o.differs:
            print(f"differs tracked {o.name}: {o.differs}")
        if o.errors_tracked > o.errors_untracked:
            print(f"ERROR lines     {o.name}: {o.error_sample}")
    opaque = collections.Counter(m for o in ran for m in o.opaque)
    first: dict[str, str] = {}
    for o in ran:
        for m in o.opaque:
            first.setdefault(m, o.name)
    for method, n in opaque.most_common(15):
        print(f"opaque {n:>4}× {method}  (e.g. {first[method]})")
    spark.sql("DROP DATABASE IF EXISTS tensprov_examples CASCADE")
    return 0
