"""``tensprov-lab bench --suite pandas``: the pandas API on Spark, tracked.

Five small pandas-on-Spark pipelines (issue 59's), each run untracked and in a
``tensprov_lab.track`` block in turns: per pipeline the operations capture recorded,
how many are opaque, the warnings the block gave, whether ``run.rows(result)``
answers, and the block's time tracked over untracked (medians of ``--repeat``, the
result brought to the driver with ``to_pandas()`` in both).

Examples
--------
::

    tensprov-lab bench --suite pandas --repeat 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import warnings
from collections.abc import Callable
from typing import Any

__all__ = ["PIPELINES", "main"]


def _filter_groupby(a: Any, b: Any) -> Any:
    psdf = a.pandas_api()
    return psdf[psdf.v > 5].groupby("k").sum().reset_index()


def _merge_sort_head(a: Any, b: Any) -> Any:
    x, y = a.pandas_api(), b.pandas_api()
    return x.merge(y, on="k").assign(w=lambda d: d.v * 2).sort_values("v").head(5)


def _dedup_agg(a: Any, b: Any) -> Any:
    psdf = a.pandas_api()
    return psdf.drop_duplicates(subset=["k"]).groupby("k").agg({"v": "max"})


def _where_fillna(a: Any, b: Any) -> Any:
    psdf = a.pandas_api()
    return psdf.where(psdf.v > 4).fillna(0)


def _left_merge_mean(a: Any, b: Any) -> Any:
    x, y = a.pandas_api(), b.pandas_api()
    return x.merge(y, on="k", how="left").groupby("label").mean()


#: the pipelines, by name: each takes the two Spark DataFrames and returns a
#: pandas-on-Spark frame
PIPELINES: dict[str, Callable[[Any, Any], Any]] = {
    "filter + groupby.sum": _filter_groupby,
    "merge + assign + sort_values + head": _merge_sort_head,
    "drop_duplicates + groupby.agg": _dedup_agg,
    "where + fillna": _where_fillna,
    "left merge + groupby.mean": _left_merge_mean,
}


def _frames(spark: Any, rows: int) -> tuple[Any, Any]:
    a = spark.createDataFrame(
        [(i, i % 3, float((i * 7) % 11)) for i in range(rows)], ["id", "k", "v"]
    ).cache()
    b = spark.createDataFrame([(0, "x"), (1, "y"), (2, "z")], ["k", "label"]).cache()
    a.count(), b.count()
    return a, b


def _untracked(make: Callable[[Any, Any], Any], a: Any, b: Any) -> float:
    t0 = time.perf_counter()
    make(a, b).to_pandas()
    return time.perf_counter() - t0


def _tracked(spark: Any, make: Callable[[Any, Any], Any], a: Any, b: Any) -> dict[str, Any]:
    import tensprov_lab

    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with tensprov_lab.track(spark) as run:
            out = make(a, b)
            out.to_pandas()
    seconds = time.perf_counter() - t0
    said = [w for w in caught if type(w.message).__name__ == "TensProvWarning"]
    try:
        answered = len(run.rows(out))
    except ValueError:  # a frame of unapplied column expressions: refused by name
        answered = None
    ops = run.operations
    result = {
        "ops": len(ops),
        "opaque": sum(op.opaque for op in ops),
        "warnings": len(said),
        "rows": answered,
        "seconds": seconds,
    }
    run.forget()
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tensprov-lab bench --suite pandas",
                                     description=__doc__.split("\n\n")[0])  # fmt: skip
    parser.add_argument("--suite", default="pandas", help=argparse.SUPPRESS)
    parser.add_argument("--rows", type=int, default=1000, help="records of the left frame")
    parser.add_argument("--repeat", type=int, default=3, help="turns (medians)")
    parser.add_argument("--cores", type=int, default=2, help="local Spark cores (default 2)")
    args = parser.parse_args(argv)
    os.environ.setdefault("PYARROW_IGNORE_TIMEZONE", "1")  # (pyspark.pandas asks for it)
    from pyspark.sql import SparkSession

    from tensprov_lab._spark import local_spark

    # a session of its own, stopped at the end; one already running is used and kept
    own = SparkSession.getActiveSession() is None
    spark = local_spark(args.cores, app="tensprov-lab-bench-pandas")
    import pyspark.pandas  # noqa: F401 - loaded before the first block, as a user would

    # (the bench's own to_pandas() of small results: pandas-on-Spark's advice is noise)
    warnings.filterwarnings("ignore", message=r"`to_pandas` loads all data")

    a, b = _frames(spark, args.rows)
    print(f"pandas API on Spark, {args.rows} records, medians of {args.repeat} turns")
    header = f"{'pipeline':38} {'ops':>4} {'opaque':>6} {'warns':>5} {'rows()':>7}"
    print(f"{header} {'untracked':>9} {'tracked':>8} {'ratio':>6}")
    for name, make in PIPELINES.items():
        _untracked(make, a, b)  # warm-up: the first run of a plan plans it
        plain, tracked = [], []
        last: dict[str, Any] = {}
        for _ in range(args.repeat):
            plain.append(_untracked(make, a, b))
            last = _tracked(spark, make, a, b)
            tracked.append(last["seconds"])
        ratio = statistics.median(tracked) / statistics.median(plain)
        rows = "refused" if last["rows"] is None else str(last["rows"])
        print(
            f"{name:38} {last['ops']:>4} {last['opaque']:>6} {last['warnings']:>5} "
            f"{rows:>7} {statistics.median(plain):>8.2f}s {statistics.median(tracked):>7.2f}s "
            f"{ratio:>5.2f}×"
        )
    a.unpersist(), b.unpersist()
    if own:
        spark.stop()
    return 0
