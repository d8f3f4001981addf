"""Engine benchmark: capture overhead, tensor size and query latency at scale.

The pipeline is the one of DESIGN.md §1: orders ⨝ customers, filter, withColumn,
groupBy.  Every figure is measured in this process, on this machine, in one run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tensprov_lab.bench.queries import latency

__all__ = ["EngineResult", "run_engine_bench", "main"]


@dataclass
class EngineResult:
    rows: int
    #: medians of the turns; the first capture of the process also compiles capture's
    #: JVM helper and warms its code paths, so it is given on its own
    baseline_s: float
    capture_s: float
    join_rows: int
    join_bytes: int
    total_bytes: int
    backward_ms: tuple[float, float]
    forward_ms: tuple[float, float]
    #: seconds spent capturing each operation (sources are the rest of ``capture_s``)
    steps: list[tuple[str, float]] = field(default_factory=list)
    #: Q1–Q11, recomputation and what-if latencies (``tensprov_lab.bench.queries``)
    queries: list[Any] = field(default_factory=list)
    #: Spark jobs the capture ran, and the operations it could not trace (a figure
    #: measured with any of them is not a figure of record-level capture)
    jobs: int = 0
    opaque: list[str] = field(default_factory=list)
    first_capture_s: float = 0.0
    #: peak resident memory of this Python process and of the JVM, MB (``VmHWM``: the
    #: highest since the process started, so a curve of growing sizes reads each size's)
    py_peak_mb: float = 0.0
    jvm_peak_mb: float = 0.0
    #: ``tensprov_lab.save`` of the run and ``tensprov_lab.load`` of it (checksums
    #: verified), seconds, and the save's size on disk
    save_s: float = 0.0
    load_s: float = 0.0
    save_mb: float = 0.0
    #: with ``--budget``: the budget, the tensors spilled to disk past it and what the
    #: store still holds in memory, MB (the queries above ran on the spilled tensors)
    budget_mb: float | None = None
    spilled_mb: float = 0.0
    memory_mb: float = 0.0
    #: with ``--background`` (medians): seconds the tracked block held the caller with
    #: its capture in the background, seconds until the sink's write right after it
    #: ended (the user's next action, competing with the capture), and the capture's
    #: own seconds in the background
    held_s: float | None = None
    acted_s: float | None = None
    background_capture_s: float | None = None
    #: with ``--tiers`` (or ``--budget``): the same run's single-record queries with its
    #: tensors where they were captured, then moved to disk, then into Spark: (tier,
    #: seconds to move, backward p50 ms, forward p50 ms, queries each, MB kept there)
    tiers: list[tuple[str, float, float, float, int, float]] = field(default_factory=list)

    @property
    def ratio(self) -> float:
        return self.capture_s / self.baseline_s

    @property
    def bytes_per_join_row(self) -> float:
        return self.join_bytes / max(self.join_rows, 1)


def make_data(spark: Any, n_orders: int, n_customers: int, folder: str) -> tuple[str, str]:
    """Write synthetic orders and customers as parquet and return their paths."""
    from pyspark.sql import functions as F

    orders_path = os.path.join(folder, f"orders_{n_orders}")
    customers_path = os.path.join(folder, f"customers_{n_customers}")
    if not os.path.exists(orders_path):
        (
            spark.range(n_orders)
            .select(
                F.col("id").alias("order_id"),
                (F.abs(F.xxhash64("id")) % n_customers).alias("cust_id"),
                F.round(F.rand(seed=1) * 100, 2).alias("amount"),
                F.date_add(F.lit("2024-01-01"), (F.col("id") % 365).cast("int")).alias("day"),
            )
            .write.parquet(orders_path)
        )
    if not os.path.exists(customers_path):
        (
            spark.range(n_customers)
            .select(
                F.col("id").alias("cust_id"),
                F.concat(F.lit("region-"), (F.col("id") % 7).cast("string")).alias("region"),
                (F.col("id") % 10).alias("segment"),
            )
            .write.parquet(customers_path)
        )
    return orders_path, customers_path


def pipeline(orders: Any, customers: Any) -> Any:
    from pyspark.sql import functions as F

    big = orders.filter(F.col("amount") > 20)
    joined = big.join(customers, "cust_id")
    priced = joined.withColumn("amount_eur", F.col("amount") * 0.92)
    return priced.groupBy("region", "segment").agg(
        F.sum("amount_eur").alias("total"), F.count("*").alias("n")
    )


def run_engine_bench(
    spark: Any,
    n_orders: int,
    folder: str,
    queries: int = 1000,
    progress: Any = print,
    all_queries: bool = True,
    repeat: int = 3,
    budget: int | None = None,
    background: bool = False,
    tiers: bool = False,
) -> EngineResult:
    import tensprov_lab

    n_customers = max(n_orders // 50, 100)
    progress(f"[{n_orders:,} orders] writing synthetic data …")
    orders_path, customers_path = make_data(spark, n_orders, n_customers, folder)
    orders = spark.read.parquet(orders_path)
    customers = spark.read.parquet(customers_path)

    progress(f"[{n_orders:,} orders] baseline: materialize the sink once without capture …")
    out = pipeline(orders, customers)
    out.write.format("noop").mode("overwrite").save()  # warm up the JVM and file cache

    def materialize() -> float:
        t0 = time.perf_counter()
        pipeline(orders, customers).write.format("noop").mode("overwrite").save()
        return time.perf_counter() - t0

    def capture_once(bg: bool = False) -> tuple[Any, float, dict[str, Any]]:
        t0 = time.perf_counter()
        with tensprov_lab.track(
            spark, name=f"bench-{n_orders}", budget=budget, background=bg
        ) as run:
            big = orders.filter("amount > 20")
            joined = big.join(customers, "cust_id")
            priced = joined.withColumn("amount_eur", joined.amount * 0.92)
            out = priced.groupBy("region", "segment").agg({"amount_eur": "sum", "*": "count"})
        frames = {"big": big, "joined": joined, "priced": priced, "out": out}
        return run, time.perf_counter() - t0, frames

    # baseline and capture taken in turns, medians of `repeat` (this machine is noisy);
    # a capture's sources are new to the next one once its run is forgotten
    baselines, captures = [], []
    opaque: list[str] = []
    helds, acteds, bg_captures = [], [], []

    def note_opaque(run: Any) -> None:
        opaque.extend(
            o.expression for o in run.operations if o.opaque and o.expression not in opaque
        )

    # the first capture of this size, timed on its own and left out of the medians, as
    # the baseline's first materialization is: it warms the code paths capture takes
    # (Python modules, NumPy's first large allocations, the server's analysis of new plan
    # shapes) and, the first of the process, compiles capture's JVM helper
    progress(f"[{n_orders:,} orders] first capture (warms capture, timed on its own) …")
    first_run, first_capture, _ = capture_once()
    note_opaque(first_run)
    first_run.forget()
    for turn in range(repeat):
        progress(f"[{n_orders:,} orders] capture {turn + 1}/{repeat} …")
        baselines.append(materialize())
        if background:
            # the notebook's case: the block, then an action on its output at once
            t0 = time.perf_counter()
            bg_run, held, bg_frames = capture_once(bg=True)
            bg_frames["out"].write.format("noop").mode("overwrite").save()
            acteds.append(time.perf_counter() - t0)
            helds.append(held)
            bg_captures.append(bg_run.wait().seconds)
            note_opaque(bg_run)
            bg_run.forget()
        run, seconds, frames = capture_once()
        captures.append(seconds)
        note_opaque(run)
        if turn < repeat - 1:
            run.forget()
    baseline, capture = float(np.median(baselines)), float(np.median(captures))
    big, joined, priced, out = (frames[k] for k in ("big", "joined", "priced", "out"))
    if opaque:
        progress(f"[{n_orders:,} orders] NOT TRACED record by record: {opaque}")
    join_op = next((op for op in run.operations if op.method == "join"), None)
    join_rows = (run.store.datasets[join_op.output].n_rows or 0) if join_op else 0
    peaks = (_peak_mb(os.getpid()), _peak_mb(_jvm_pid(spark)))
    spilled = sum(op.nbytes for op in run.operations if op.spilled) / 2**20
    progress(f"[{n_orders:,} orders] save and load the run …")
    saved = _save_and_load(run, folder)

    rng = np.random.default_rng(0)
    n_out = run.dataset(out).n_rows or 1
    n_priced = run.dataset(priced).n_rows or 1
    n_src = run.dataset(orders).n_rows or 1
    progress(f"[{n_orders:,} orders] queries …")
    # warm-up builds the inverse indexes once (counted in nbytes)
    run.backward(priced, rows=[0])
    run.forward(orders, rows=[0], to=out)
    backward = latency(
        lambda r: run.backward(priced, rows=[r]), rng.integers(0, n_priced, queries).tolist()
    )
    forward = latency(
        lambda r: run.forward(orders, rows=[r], to=out), rng.integers(0, n_src, queries).tolist()
    )
    del n_out
    figures = []
    if all_queries:
        from tensprov_lab.bench.queries import query_figures

        progress(f"[{n_orders:,} orders] Q1–Q11, recomputation, what-if …")

        def rerun() -> None:
            b = orders.filter("amount > 20").join(customers, "cust_id")
            b.withColumn("amount_eur", b.amount * 0.92).write.format("noop").mode(
                "overwrite"
            ).save()

        dfs = {"orders": orders, "customers": customers, "big": big, "joined": joined,
               "priced": priced, "out": out}  # fmt: skip
        figures = query_figures(
            run, dfs, rerun, queries=min(queries, 200), progress=lambda m: progress(m)
        )
        if getattr(run._tracker, "client_replays", False):  # over Connect: say what the
            from tensprov_lab.replay._client import server_only  # server alone replayed

            for d, why in server_only(run._tracker).items():
                progress(f"  replays of {run.store.datasets[d].label} ran on the server: {why}")
    # after the queries (the inverse indexes they built are held in memory): every run's
    # tensors, indexes, column maps and capture's key indexes, as the budget counts them
    tracker = run._tracker
    memory = tracker.budget.held(tracker.store, tracker.nodes.values())
    join_bytes, total_bytes = (join_op.nbytes if join_op else 0), run.nbytes
    tier_figures = []
    if tiers:  # last: the run's tensors leave memory
        tier_figures = _tier_latencies(run, orders, priced, out, n_priced, n_src, queries, progress)
    return EngineResult(
        rows=n_orders,
        baseline_s=baseline,
        capture_s=capture,
        first_capture_s=first_capture,
        join_rows=join_rows,
        join_bytes=join_bytes,
        total_bytes=total_bytes,
        backward_ms=backward,
        forward_ms=forward,
        steps=[(op.method, op.seconds) for op in run.operations],
        queries=figures,
        jobs=run._log.jobs,
        opaque=opaque,
        py_peak_mb=peaks[0],
        jvm_peak_mb=peaks[1],
        save_s=saved[0],
        load_s=saved[1],
        save_mb=saved[2],
        budget_mb=None if budget is None else budget / 2**20,
        spilled_mb=spilled,
        memory_mb=memory / 2**20,
        held_s=float(np.median(helds)) if helds else None,
        acted_s=float(np.median(acteds)) if acteds else None,
        background_capture_s=float(np.median(bg_captures)) if bg_captures else None,
        tiers=tier_figures,
    )


def _tier_latencies(
    run: Any,
    orders: Any,
    priced: Any,
    out: Any,
    n_priced: int,
    n_src: int,
    queries: int,
    progress: Any,
) -> list[tuple[str, float, float, float, int, float]]:
    """Single-record backward / forward p50 of ``run`` as captured, then with every
    tensor moved to local disk, then into Spark (fewer queries there: each is a job)."""
    from tensprov_lab.capture.memory._resident import SparkTensor

    rng = np.random.default_rng(1)
    figures = []
    moves = [
        ("as captured", None, queries),
        ("on local disk", "disk", queries),
        ("in Spark", "spark", 5),
    ]
    for tier, to, n in moves:
        t0 = time.perf_counter()
        if to is not None:
            progress(f"[{n_src:,} orders] move the run's tensors to {to} …")
            run.spill(to=to)
        moved_s = time.perf_counter() - t0
        progress(f"[{n_src:,} orders] queries on tensors {tier} …")
        bwd = latency(
            lambda r: run.backward(priced, rows=[r]), rng.integers(0, n_priced, n).tolist()
        )
        fwd = latency(
            lambda r: run.forward(orders, rows=[r], to=out), rng.integers(0, n_src, n).tolist()
        )
        tensors = [t for op in run.operations for t in op.tensors or []]
        if to == "spark":
            kept = sum(t.disk_nbytes() for t in tensors if isinstance(t, SparkTensor))
        elif to == "disk":
            kept = sum(os.path.getsize(p) for op in run.operations for p in op.spilled or [])
        else:
            kept = sum(t.nbytes for t in tensors)
        figures.append((tier, moved_s, bwd[0], fwd[0], n, kept / 2**20))
    return figures


def _save_and_load(run: Any, folder: str) -> tuple[float, float, float]:
    """Seconds to save ``run``, to load it back (checksums verified), and MB saved."""
    import tensprov_lab

    path = os.path.join(folder, f"saved-{run.id}")
    info = tensprov_lab.save(path, runs=run)
    t0 = time.perf_counter()
    (loaded,) = tensprov_lab.load(path)
    load_s = time.perf_counter() - t0
    loaded.forget()
    shutil.rmtree(path, ignore_errors=True)
    return info.seconds, load_s, info.nbytes / 2**20


def _jvm_pid(spark: Any) -> int | None:
    try:
        return int(spark._jvm.java.lang.ProcessHandle.current().pid())
    except Exception:  # noqa: BLE001 - a JVM elsewhere (a cluster's driver): not measured
        return None


def _peak_mb(pid: int | None) -> float:
    """Peak resident memory of process ``pid`` in MB (Linux ``VmHWM``; 0 elsewhere)."""
    if pid is None:
        return 0.0
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def format_table(results: list[EngineResult]) -> str:
    head = (
        f"{'orders':>11} {'baseline s':>10} {'capture s':>10} {'ratio':>6} {'first s':>7} "
        f"{'jobs':>4} "
        f"{'join rows':>10} {'B/join row':>10} {'store MB':>9} {'py peak MB':>10} "
        f"{'JVM peak MB':>11} {'bwd p50 ms':>10} {'bwd p99':>8} {'fwd p50 ms':>10} {'fwd p99':>8}"
    )
    lines = [head, "-" * len(head)]
    for r in results:
        # a capture that fell back to coarse lineage is not a figure of this engine
        mark = "*" if r.opaque else " "
        lines.append(
            f"{r.rows:>10,}{mark} {r.baseline_s:>10.2f} {r.capture_s:>10.2f} {r.ratio:>6.2f} "
            f"{r.first_capture_s:>7.2f} {r.jobs:>4} {r.join_rows:>10,} "
            f"{r.bytes_per_join_row:>10.2f} "
            f"{r.total_bytes / 2**20:>9.2f} {r.py_peak_mb:>10.0f} {r.jvm_peak_mb:>11.0f} "
            f"{r.backward_ms[0]:>10.3f} {r.backward_ms[1]:>8.3f} "
            f"{r.forward_ms[0]:>10.3f} {r.forward_ms[1]:>8.3f}"
        )
    for r in results:
        if r.opaque:
            lines.append(
                f"* {r.rows:,} orders: NOT a record-level figure, these operations fell "
                f"back to coarse lineage: {'; '.join(r.opaque)}"
            )
    for r in results:
        steps = ", ".join(f"{m} {sec:.2f}" for m, sec in r.steps)
        lines.append(f"capture of {r.rows:,} orders, seconds per operation: {steps}")
    for r in results:
        if r.budget_mb is not None:
            lines.append(
                f"budget {r.budget_mb:.2f} MB: {r.spilled_mb:.2f} MB of the {r.rows:,}-order "
                f"run's tensors spilled to disk (memory-mapped), {r.memory_mb:.2f} MB held in "
                "memory after the queries (tensors, indexes, column maps, capture's keys); "
                "its query figures are on the spilled tensors"
            )
    for r in results:
        for tier, moved, bwd, fwd, n, mb in r.tiers:
            how = f"moved there in {moved:.2f} s, " if tier != "as captured" else ""
            lines.append(
                f"tensors of the {r.rows:,}-order run {tier}: {how}{mb:.2f} MB; "
                f"backward p50 {bwd:.3f} ms, forward p50 {fwd:.3f} ms ({n} queries each)"
            )
    for r in results:
        if r.held_s is not None and r.acted_s is not None:
            added = (r.acted_s - r.baseline_s) / r.baseline_s
            lines.append(
                f"background capture of {r.rows:,} orders: the block held {r.held_s:.2f} s "
                f"(held / baseline {r.held_s / r.baseline_s:.2f}); block + the sink's write "
                f"right after {r.acted_s:.2f} s, added {added:.2f}"
                f" × baseline (foreground: {r.ratio:.2f}); the capture took "
                f"{r.background_capture_s:.2f} s beside the write"
            )
    for r in results:
        lines.append(
            f"save/load of the {r.rows:,}-order run: save {r.save_s:.2f} s, load "
            f"{r.load_s:.2f} s (checksums verified), {r.save_mb:.2f} MB on disk"
        )
    lines.append(
        "baseline, capture: medians of --repeat turns taken in alternation; ratio = capture /"
        " baseline; the baseline after one untimed warm-up, capture after its first: first s,"
        " left out of the medians (the first of the process also compiles capture's JVM"
        " helper)"
    )
    lines.append(
        "targets: ratio ≤ 0.5 at 5M rows; ≤ 5 bytes per join row; backward/forward p50 ≤ 1 ms"
    )
    from tensprov_lab.bench.queries import format_queries

    for r in results:
        if r.queries:
            lines.append("")
            lines.append(format_queries(r.rows, r.queries))
    return "\n".join(lines)


def _section(args: Any) -> tuple[str, str]:
    """The key and title of a run's section: one per size list and session kind."""
    from tensprov_lab.bench._markdown import pyspark_minor

    how = "connect" if args.connect else "cluster" if args.master else "local"
    flags = (("budget", args.budget), ("background", args.background),
             ("server-reads", args.server_reads))  # fmt: skip
    extra = [f for f, on in flags if on]
    version = pyspark_minor()
    key = "-".join(["engine", how, args.rows.replace(",", "+"), *extra, f"pyspark{version}"])
    title = f"Engine bench, {args.rows} orders" + (
        " over Spark Connect" if args.connect else " on a standalone cluster" if args.master else ""
    )
    title += f", pyspark {version}"
    if extra:
        title += " (" + ", ".join(f"--{f}" for f in extra) + ")"
    return key, title


def markdown_body(results: list[EngineResult]) -> str:
    """The figures of :func:`format_table` as a Markdown table, its notes below it."""
    from tensprov_lab.bench._markdown import table

    rows = [
        [
            f"{r.rows:,}" + (" (coarse)" if r.opaque else ""), f"{r.baseline_s:.2f}",
            f"{r.capture_s:.2f}", f"**{r.ratio:.2f}**", r.jobs, f"{r.bytes_per_join_row:.2f}",
            f"{r.total_bytes / 2**20:.2f}",
            f"{r.backward_ms[0]:.3f} / {r.forward_ms[0]:.3f}",
        ]
        for r in results
    ]  # fmt: skip
    head = ["orders", "baseline s", "capture s", "ratio", "jobs", "B/join row", "store MB",
            "bwd / fwd p50 ms"]  # fmt: skip
    # the footer explaining the columns is said once, at the top of the file
    notes = [
        line for line in format_table(results).splitlines()[2 + len(results) :]
        if not line.startswith(("baseline, capture: medians", "targets: "))
    ]  # fmt: skip
    from tensprov_lab.bench.queries import brief_queries

    notes = brief_queries(notes)  # (one line for Q1–Q11: the file keeps today's figures)
    return table(head, rows) + "\n\n```text\n" + "\n".join(notes).strip() + "\n```"


def _parse_rows(text: str) -> list[int]:
    out = []
    for part in text.split(","):
        part = part.strip().lower()
        scale = 1
        if part.endswith("m"):
            scale, part = 1_000_000, part[:-1]
        elif part.endswith("k"):
            scale, part = 1_000, part[:-1]
        out.append(int(float(part) * scale))
    return out


#: the benchmarks ``tensprov-lab bench --suite`` runs
SUITES = ["engine", "paper", "notebook", "tpch", "pandas", "examples"]


def main(argv: list[str] | None = None) -> int:
    suite = argparse.ArgumentParser(add_help=False)
    suite.add_argument("--suite", choices=SUITES, default="engine")
    chosen, rest = suite.parse_known_args(argv)
    if chosen.suite == "tpch":
        from tensprov_lab.bench.tpch import main as tpch

        return tpch(rest)
    if chosen.suite == "paper":
        from tensprov_lab.bench.paper import main as paper

        return paper(rest)
    if chosen.suite == "notebook":
        from tensprov_lab.bench.notebook import main as notebook

        return notebook(rest)
    if chosen.suite == "pandas":
        from tensprov_lab.bench.pandas_api import main as pandas_api

        return pandas_api(rest)
    if chosen.suite == "examples":
        from tensprov_lab.bench.examples import main as examples

        return examples(rest)
    parser = argparse.ArgumentParser(prog="tensprov-lab bench", description=__doc__)
    parser.add_argument(
        "--suite",
        choices=SUITES,
        default="engine",
        help="engine (this benchmark, default), paper (the TensProv paper's evaluation; "
        "see --suite paper --help), notebook (cells timed in a kernel: the first "
        "capture, and a tracked cell ending with an action), tpch (the 22 TPC-H "
        "queries, one a process; see --suite tpch --help), pandas (five pandas API "
        "on Spark pipelines: what capture records of them, and its cost) or examples "
        "(pyspark's documented examples, untracked then tracked)",
    )
    parser.add_argument("--rows", default="1M,5M", help="order rows, e.g. 1M,5M (default)")
    parser.add_argument("--queries", type=int, default=1000, help="queries per latency figure")
    parser.add_argument(
        "--repeat", type=int, default=3, help="turns of baseline and capture (medians)"
    )
    parser.add_argument(
        "--capture-only",
        action="store_true",
        help="time capture and single-record queries only (no Q1–Q11, recomputation or "
        "what-if figures): for the scale curve",
    )
    parser.add_argument("--data", default=None, help="folder for the synthetic parquet data")
    parser.add_argument(
        "--budget",
        default=None,
        metavar="SIZE",
        help="capture with this memory budget (e.g. 20MB): tensors past it spill to disk",
    )
    parser.add_argument(
        "--tiers",
        action="store_true",
        help="after the queries, move the run's tensors to disk, then into Spark, and time "
        "single-record queries on each (on by default with --budget)",
    )
    parser.add_argument(
        "--background",
        action="store_true",
        help="also time capture in the background: the block held, and the block plus "
        "the sink's write right after it (the notebook's case)",
    )
    parser.add_argument(
        "--connect",
        action="store_true",
        help="run the pipeline over Spark Connect (a server on loopback, from pyspark's own jars)",
    )
    parser.add_argument(
        "--server-reads",
        action="store_true",
        help="with --connect: the client reads no source file itself, as when the server "
        "runs on another machine (capture reads through the server, and replays on the "
        "client fetch their sources from it)",
    )
    parser.add_argument(
        "--master",
        default=None,
        metavar="URL",
        help="run on this Spark master (e.g. spark://HOST:PORT) instead of local mode; "
        "'local-cluster' starts a standalone cluster on loopback (a master and two 1-core "
        "workers, executors in JVMs of their own) for the run. The data folder must be "
        "readable by the executors under the same path",
    )
    parser.add_argument("--cores", default="*", help="local Spark cores (default: all)")
    parser.add_argument(
        "--markdown",
        default=None,
        metavar="FILE",
        help="also write the figures into FILE (e.g. docs/benchmarks.md): this benchmark's "
        "section is replaced (or appended), with the command, date, commit and machine",
    )
    args = parser.parse_args(argv)
    import contextlib

    import tensprov_lab
    from tensprov_lab._api import parse_size
    from tensprov_lab._spark import local_cluster, local_connect_server, local_spark, session

    stack = contextlib.ExitStack()
    if args.master is not None and args.connect:
        parser.error("--master and --connect are two ways to reach Spark: give one")
    if args.server_reads and not args.connect:
        parser.error("--server-reads is about Spark Connect: give --connect too")
    if args.master is not None:
        master = args.master
        if master == "local-cluster":
            master = stack.enter_context(local_cluster(2, 1, "3g"))
        spark = session(master, app="tensprov-lab-bench")
    elif args.connect:
        from pyspark.sql import SparkSession

        url = stack.enter_context(local_connect_server(args.cores))
        spark = SparkSession.builder.remote(url).create()
        if args.server_reads:
            from tensprov_lab._registry import _tracker

            _tracker(spark).direct_reads = False
    else:
        spark = local_spark(args.cores, app="tensprov-lab-bench")
    folder = args.data or tempfile.mkdtemp(prefix="tensprov-bench-")
    try:
        results = []
        for n in _parse_rows(args.rows):
            results.append(
                run_engine_bench(
                    spark,
                    n,
                    folder,
                    args.queries,
                    all_queries=not args.capture_only,
                    repeat=args.repeat,
                    budget=parse_size(args.budget),
                    background=args.background,
                    tiers=args.tiers or args.budget is not None,
                )  # fmt: skip
            )
            # queries and captures of one size must not hold the memory of the next
            tensprov_lab.forget()
        print(format_table(results))
        if args.markdown:
            from tensprov_lab.bench._markdown import about_this_run, command_line, refresh

            key, title = _section(args)
            refresh(
                args.markdown, key, title, command_line(argv), markdown_body(results),
                about_this_run(spark),
            )  # fmt: skip
            print(f"figures written to {args.markdown} (section {key})")
    finally:
        if args.data is None:
            shutil.rmtree(folder, ignore_errors=True)
        spark.stop()
        stack.close()
    return 0
