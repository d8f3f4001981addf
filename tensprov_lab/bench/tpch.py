"""``tensprov-lab bench --suite tpch``: the 22 TPC-H queries tracked, one query a process.

TPC-H is the workload fine-grained lineage systems are measured on, and its queries are
SQL as people write it: comma joins with their conditions in ``WHERE``, ``EXISTS`` /
``IN`` subqueries, correlated and uncorrelated scalar subqueries, ``CASE``, ``LIKE``,
``HAVING``, ``LIMIT``.  The data comes from ``tpchgen-cli`` (Parquet, made once per
scale factor in ``--data``); the query texts ship with the package
(``bench/tpch_queries.sql``).  Each query runs in a process of its own on Spark's
default 1 GB driver (``--driver-memory``), as a new user's session would: the tables
are temp views made untracked, the query runs once untracked (a warm-up), then
``--repeat`` times untracked and as a tracked block ``out = spark.sql(q);
out.collect()``, the two alternating (after a tracked warm-up block of another, tiny
query: the first capture of a process loads capture's modules and its Java helper,
which ``--suite notebook`` times).

Printed per query: untracked seconds and the tracked block's seconds (medians), what
tracking added to the query (the one median less the other) and its ratio to the
untracked query, Spark jobs,
opaque operations, tensor bytes, the JVM's and Python's peak memory, the p50 of a
backward query of one output row, and whether the tracked result equals the untracked
one; then a summary line.  A query whose process dies or runs past ``--timeout`` is
reported as such (the session of a user would have died or hung).

Examples
--------
::

    tensprov-lab bench --suite tpch --sf 1
    tensprov-lab bench --suite tpch --sf 0.1 --queries 2,17,21 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import resources
from typing import Any

__all__ = ["TABLES", "generate", "main", "measure", "queries", "register"]

#: the eight TPC-H tables, as tpchgen-cli names their files
TABLES = ("customer", "lineitem", "nation", "orders", "part", "partsupp", "region", "supplier")


def queries() -> dict[int, str]:
    """The 22 TPC-H query texts, by number.

    >>> qs = queries()
    >>> len(qs), qs[6].split()[0]
    (22, 'SELECT')
    """
    text = resources.files("tensprov_lab.bench").joinpath("tpch_queries.sql").read_text()
    parts = re.split(r"^-- Q(\d+)\s*$", text, flags=re.M)
    return {int(n): body.strip() for n, body in zip(parts[1::2], parts[2::2])}


def generate(sf: float, folder: str | None = None) -> str:
    """The folder of the scale factor ``sf`` tables (``<folder>/sf<sf>``, one Parquet
    file a table), made with ``tpchgen-cli`` unless every file is there already.

    Raises
    ------
    RuntimeError
        When ``tpchgen-cli`` is not installed (``pip install tpchgen-cli``) or fails.
    """
    base = folder or os.path.join(tempfile.gettempdir(), "tensprov-tpch")
    out = os.path.join(base, f"sf{sf:g}")
    if all(os.path.exists(os.path.join(out, f"{t}.parquet")) for t in TABLES):
        return out
    exe = shutil.which("tpchgen-cli") or os.path.join(
        os.path.dirname(sys.executable), "tpchgen-cli"
    )
    if not os.path.exists(exe):
        raise RuntimeError(
            "TPC-H data needs tpchgen-cli: `pip install tpchgen-cli` (in the test extra)"
        )
    os.makedirs(out, exist_ok=True)
    done = subprocess.run(
        [exe, "parquet", "-s", f"{sf:g}", f"--output-dir={out}"], capture_output=True, text=True
    )
    if done.returncode != 0:
        raise RuntimeError(f"tpchgen-cli failed: {done.stderr.strip()[:500]}")
    return out


def register(spark: Any, folder: str) -> dict[str, Any]:
    """The tables of ``folder`` as temp views of ``spark`` (their DataFrames, by name)."""
    frames = {}
    for t in TABLES:
        df = spark.read.parquet(os.path.join(folder, f"{t}.parquet"))
        df.createOrReplaceTempView(t)
        frames[t] = df
    return frames


def measure(spark: Any, folder: str, number: int, repeat: int = 1) -> dict[str, Any]:
    """Figures of TPC-H query ``number`` over the tables of ``folder`` (see the module
    docstring); every figure a plain number, string or list."""
    import numpy as np

    import tensprov_lab

    text = queries()[number]
    register(spark, folder)
    spark.sql(text).collect()  # warm-up: the files' footers, Spark's code generation
    with tensprov_lab.track(spark, name="warm-up"):
        spark.range(5).filter("id > 1").collect()
    _reset_peaks(spark)
    # untracked and tracked runs alternate, so that the machine's drift lands on both
    untracked, tracked, same = [], [], True
    last: list[Any] = []  # the last block's run and output
    for _ in range(max(repeat, 1)):
        t0 = time.perf_counter()
        want = spark.sql(text).collect()
        untracked.append(time.perf_counter() - t0)
        last.clear()  # the previous block's store is let go before the next one
        t0 = time.perf_counter()
        with tensprov_lab.track(spark, name=f"tpch-q{number}") as run:
            out = spark.sql(text)
            got = out.collect()
        tracked.append(time.perf_counter() - t0)
        same = same and sorted(map(tuple, got)) == sorted(map(tuple, want))
        last += [run, out]
        del run, out, got
    run, out = last
    base, mid = statistics.median(untracked), statistics.median(tracked)
    rows = int(run.dataset(out).n_rows or 0)
    back = []
    for i in range(min(rows, 20)):
        t1 = time.perf_counter()
        run.backward(out, rows=[i])
        back.append(time.perf_counter() - t1)
    import resource

    return {
        "query": number,
        "untracked_s": base,
        "tracked_s": mid,
        # what tracking adds to the query (never below nothing: timing noise)
        "capture_s": max(mid - base, 0.0),
        "ratio": max(mid - base, 0.0) / max(base, 1e-9),
        "jobs": int(run._log.jobs),
        "operations": len(run.operations),
        "opaque": [op.method for op in run.operations if op.opaque],
        "tensor_bytes": int(run.nbytes),
        "jvm_heap_mb": _peak_heap_mb(spark),
        "python_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "backward_p50_ms": float(np.median(back)) * 1e3 if back else None,
        "same": same,
        "rows": rows,
    }


def _heap_pools(spark: Any) -> list[Any]:
    mf = spark._jvm.java.lang.management.ManagementFactory
    heap = spark._jvm.java.lang.management.MemoryType.HEAP
    return [p for p in mf.getMemoryPoolMXBeans() if p.getType().equals(heap)]


def _reset_peaks(spark: Any) -> None:
    for pool in _heap_pools(spark):
        pool.resetPeakUsage()


def _peak_heap_mb(spark: Any) -> float:
    """The JVM heap's peak use since :func:`_reset_peaks`, in MB (the pools' peaks
    summed: an upper bound of the heap's peak)."""
    return sum(int(p.getPeakUsage().getUsed()) for p in _heap_pools(spark)) / 2**20


def _one(argv: list[str]) -> int:
    """Child process: one query, its figures as one JSON line on stdout."""
    folder, number, repeat, memory = argv[0], int(argv[1]), int(argv[2]), argv[3]
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[*]")
        .config("spark.driver.memory", memory)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("OFF")
    print(json.dumps(measure(spark, folder, number, repeat)), flush=True)
    return 0


def _run_one(folder: str, number: int, repeat: int, memory: str, timeout: float) -> dict:
    cmd = [sys.executable, "-m", "tensprov_lab.bench.tpch", "--one", folder, str(number),
           str(repeat), memory]  # fmt: skip
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"query": number, "failed": f"still running after {timeout:.0f} s"}
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("{"):
            return dict(json.loads(line))
    died = "OutOfMemoryError" in done.stderr or "Connection refused" in done.stderr
    last = [ln for ln in done.stderr.splitlines() if "Error" in ln or "Exception" in ln]
    why = "the JVM died (out of memory)" if died else (last[-1][:200] if last else "no figures")
    return {"query": number, "failed": why}


def format_table(results: list[dict]) -> str:
    """The figures as a text table and a summary line."""
    head = (
        f"{'query':>5} {'untracked s':>11} {'tracked s':>9} {'added s':>7} {'ratio':>6} "
        f"{'jobs':>4} {'opaque':>6} {'tensor MB':>9} {'heap MB':>8} {'py MB':>6} "
        f"{'back ms':>7} same"
    )
    lines = [head]
    for r in results:
        if "failed" in r:
            lines.append(f"Q{r['query']:>4} FAILED: {r['failed']}")
            continue
        back = r["backward_p50_ms"]
        lines.append(
            f"Q{r['query']:>4} {r['untracked_s']:>11.2f} {r.get('tracked_s', 0.0):>9.2f} "
            f"{r['capture_s']:>7.2f} "
            f"{r['ratio']:>6.2f} {r['jobs']:>4} {len(r['opaque']):>6} "
            f"{r['tensor_bytes'] / 2**20:>9.2f} {r['jvm_heap_mb']:>8.0f} "
            f"{r['python_rss_mb']:>6.0f} {back if back is None else round(back, 2)!s:>7} "
            f"{r['same']}"
        )
    lines.append(summary(results))
    return "\n".join(lines)


def summary(results: list[dict]) -> str:
    """One line: queries record-level, failed, ratio median and worst."""
    ok = [r for r in results if "failed" not in r]
    exact = [r for r in ok if not r["opaque"] and r["same"]]
    ratios = [r["ratio"] for r in ok]
    med = f"{statistics.median(ratios):.2f}" if ratios else "-"
    worst = f"{max(ratios):.2f}" if ratios else "-"
    return (
        f"summary: {len(exact)}/{len(results)} queries record-level with the untracked "
        f"result, {len(results) - len(ok)} failed; added/query ratio median {med}, "
        f"worst {worst}"
    )


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--one"]:
        return _one(argv[1:])
    parser = argparse.ArgumentParser(prog="tensprov-lab bench --suite tpch", description=__doc__)
    parser.add_argument("--suite", default="tpch", help=argparse.SUPPRESS)
    parser.add_argument("--sf", type=float, default=1.0, help="scale factor (default 1)")
    parser.add_argument("--queries", default="1-22", help="e.g. 1-22 (default) or 2,17,21")
    parser.add_argument(
        "--repeat", type=int, default=3, help="untracked and tracked runs (medians)"
    )
    parser.add_argument("--data", default=None, help="folder of the generated tables")
    parser.add_argument("--driver-memory", default="1g", help="Spark driver (default 1g)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds a query")
    parser.add_argument("--markdown", default=None, help="refresh this section of FILE")
    args = parser.parse_args(argv)
    numbers: list[int] = []
    for part in args.queries.split(","):
        lo, _, hi = part.partition("-")
        numbers += list(range(int(lo), int(hi or lo) + 1))
    folder = generate(args.sf, args.data)
    print(f"TPC-H SF {args.sf:g} in {folder}; driver {args.driver_memory}", flush=True)
    results = []
    for q in numbers:
        r = _run_one(folder, q, args.repeat, args.driver_memory, args.timeout)
        results.append(r)
        print(format_table([r]).splitlines()[1], flush=True)
    table = format_table(results)
    print(table)
    if args.markdown:
        from tensprov_lab.bench._markdown import about_this_run, command_line, refresh

        body = "```\n" + table + "\n```\n"
        key = f"tpch-sf{args.sf:g}-{args.driver_memory}"
        title = f"TPC-H, SF {args.sf:g}, {args.driver_memory} driver"
        refresh(args.markdown, key, title, command_line(argv), body, about_this_run())
    return 0 if all("failed" not in r for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
