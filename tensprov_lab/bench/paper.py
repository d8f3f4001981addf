"""Paper suite: the TensProv paper's evaluation (Tables IX–XI, Fig. 4–6) on this machine.

``tensprov-lab bench --suite paper`` measures, in one run:

- Table IX: provenance memory of the German, COMPAS and Census pipelines (both variants of
  :mod:`tensprov_lab.pipelines`), ours against an observation-based capture in the style of
  Chapman et al. (:mod:`tensprov_lab.bench._baseline`);
- Table X: capture overhead (capture seconds / seconds to materialize the pipeline once
  without capture) and our speed-up over the observation-based capture;
- Table XI / Fig. 6: size and capture time of the join's tensors on TPC-DI-like
  customers ⨝ accounts (:mod:`tensprov_lab.bench._tpcdi`) per scale factor, and the latency
  of why-queries on one join output row;
- Fig. 4 / 5: query latency on Census (record and attribute level, how-provenance,
  co-contribution, co-dependency; records of intermediate datasets by recomputation).

The paper's published figures are printed beside ours.  Tables go to stdout, progress
lines to stderr.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tensprov_lab.bench._paper_report import (  # noqa: F401 - the report
    _MB,
    PAPER,
    JoinResult,
    PipelineResult,
    QueryResult,
    _mb,
    format_join,
    format_pipelines,
    format_queries,
)
from tensprov_lab.bench.queries import latency

__all__ = ["PAPER", "PipelineResult", "JoinResult", "QueryResult", "main"]


_T0 = time.perf_counter()


def _progress(message: str) -> None:
    print(f"[paper {time.perf_counter() - _T0:7.1f} s] {message}", file=sys.stderr, flush=True)


def _materialize_s(make: Callable[[], Any]) -> float:
    """Seconds to run a pipeline to its end once without capture (after one warm-up run)."""
    make().write.format("noop").mode("overwrite").save()
    t0 = time.perf_counter()
    make().write.format("noop").mode("overwrite").save()
    return time.perf_counter() - t0


def _latency(fn: Callable[[int], Any], rows: Sequence[int]) -> tuple[float, float]:
    return latency(lambda r: fn(int(r)), list(rows))


def _same(a: Any, b: Any) -> bool:
    """Whether two sparse row mappings have the same ones."""
    a, b = a.astype(bool), b.astype(bool)
    return bool(a.shape == b.shape and (a != b).nnz == 0)


def _session(cores: str) -> tuple[Any, bool]:
    """The active SparkSession (left as it is), else a new local one that we stop later."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active, False
    from tensprov_lab._spark import local_spark

    return local_spark(cores, app="tensprov-lab-bench-paper"), True


def _err(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


# -------------------------------------------------------------------------------------------
# Tables IX and X: the three pipelines


def run_pipeline(
    spark: Any,
    name: str,
    variant: str,
    path: str | None,
    rows: int | None,
    baseline: bool = True,
    repeat: int = 1,
    background: bool = False,
) -> PipelineResult:
    """Measure one pipeline: materialize, capture with our engine, observe with the baseline.

    With ``repeat`` > 1, materialization, build and capture are each timed that many
    times (in turns) and the medians kept: single timings of a second or two vary by a
    third on a small machine.
    """
    import tensprov_lab
    from tensprov_lab import datasets, pipelines
    from tensprov_lab.bench import _baseline

    res = PipelineResult(name, variant)
    raw = datasets.load(spark, name, path=path, rows=rows)
    # categories are found before the tracked block (one Spark job), as a user would
    cats = pipelines.categories(name, raw) if variant == "dataframe" else None
    res.rows_in, res.cols_in = raw.count(), len(raw.columns)

    def make() -> Any:
        return pipelines.build(name, raw, variant=variant, categories=cats)

    times: dict[str, list[float]] = {
        "materialize": [], "build": [], "capture": [], "held": [], "background": []
    }  # fmt: skip
    for i in range(max(repeat, 1)):
        turn = f" ({i + 1}/{repeat})" if repeat > 1 else ""
        if i:
            # read anew: a source the tracker knows from the previous turn would not be
            # captured again, and each turn must cost what the first did
            raw = datasets.load(spark, name, path=path, rows=rows)
        _progress(f"{name}/{variant}: materialize without capture{turn} …")
        times["materialize"].append(_materialize_s(make))
        t0 = time.perf_counter()
        make()
        times["build"].append(time.perf_counter() - t0)

        _progress(f"{name}/{variant}: capture{turn} …")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            t0 = time.perf_counter()
            with tensprov_lab.track(spark, name=f"paper-{name}-{variant}") as run:
                out = pipelines.build(name, raw, variant=variant, categories=cats)
            times["capture"].append(time.perf_counter() - t0)
        if background:
            # the same block with its capture in the background (a source of its own)
            raw_bg = datasets.load(spark, name, path=path, rows=rows)
            t0 = time.perf_counter()
            with tensprov_lab.track(spark, name=f"paper-{name}-bg", background=True) as bg_run:
                pipelines.build(name, raw_bg, variant=variant, categories=cats)
            times["held"].append(time.perf_counter() - t0)
            times["background"].append(bg_run.wait().seconds)
            bg_run.forget()
    res.materialize_s = statistics.median(times["materialize"])
    res.build_s = statistics.median(times["build"])
    res.capture_s = statistics.median(times["capture"])
    if times["held"]:
        res.held_s = statistics.median(times["held"])
        res.background_capture_s = statistics.median(times["background"])
    res.repeat = max(repeat, 1)
    res.capture_warnings = len(caught)
    res.operations = len(run.operations)
    res.engine_bytes = run.nbytes
    res.opaque = [op.method for op in run.operations if op.opaque]
    res.rows_out, res.cols_out = run.dataset(out).n_rows or 0, len(out.columns)

    if baseline:
        _progress(f"{name}/{variant}: observation-based baseline …")
        obs: Any = None
        try:
            t0 = time.perf_counter()
            obs, _ = _baseline.observe_function(
                pipelines.build, name, raw, variant=variant, categories=cats
            )
            res.baseline_s = time.perf_counter() - t0
            res.baseline_steps = len(obs.steps)
            res.baseline_snapshot_bytes = obs.snapshot_nbytes
            res.baseline_pair_bytes = obs.pairs_nbytes
            res.baseline_bytes = obs.nbytes
            last = obs.steps[-1].name
            res.agrees = _same(run.mapping(raw, out), obs.mapping("source0", last))
        except Exception as exc:  # the baseline failing must not lose our measurements
            res.error = f"baseline: {_err(exc)}"
        finally:
            del obs  # snapshots can be large: free them before the next measurement
            gc.collect()
    return res


# -------------------------------------------------------------------------------------------
# Table XI / Fig. 6: the TPC-DI-like join


def run_join(
    spark: Any,
    sf: float,
    folder: str,
    queries: int,
    baseline: bool,
    seed: int = 0,
    order: str = "chronological",
) -> JoinResult:
    """Capture customers ⨝ accounts at one scale factor; why-queries; optional baseline."""
    import tensprov_lab
    from tensprov_lab.bench import _baseline, _tpcdi

    res = JoinResult(sf, order=order)
    _progress(f"SF {sf:g}: generating customers and accounts ({order}) …")
    tables = _tpcdi.load(spark, sf, folder, seed=seed, accounts=order)
    cust, acct = tables["customers"], tables["accounts"]
    res.customers, res.accounts = _tpcdi.sizes(sf)

    def join(c: Any, a: Any) -> Any:
        return c.join(a, c.c_id == a.ca_c_id)

    _progress(f"SF {sf:g}: materialize the join without capture …")
    res.materialize_s = _materialize_s(lambda: join(cust, acct))
    _progress(f"SF {sf:g}: capture …")
    t0 = time.perf_counter()
    with tensprov_lab.track(spark, name=f"paper-tpcdi-sf{sf:g}") as run:
        joined = cust.join(acct, cust.c_id == acct.ca_c_id)
    res.capture_s = time.perf_counter() - t0
    op = next(o for o in run.operations if o.category == "join")
    res.join_op_s = op.seconds
    res.join_bytes = op.nbytes
    res.join_rows = run.dataset(joined).n_rows or 0

    _progress(f"SF {sf:g}: {queries} why-queries …")
    rng = np.random.default_rng(seed)
    run.backward(joined, rows=[0])  # builds nothing lazily for backward, but warms caches
    res.why_ms = _latency(
        lambda r: run.backward(joined, rows=[r]),
        rng.integers(0, max(res.join_rows, 1), queries).tolist(),
    )
    res.join_index_bytes = op.index_nbytes

    if baseline:
        _progress(f"SF {sf:g}: observation-based baseline …")
        obs: Any = None
        try:
            t0 = time.perf_counter()
            obs = _baseline.observe(
                {"customers": cust, "accounts": acct},
                [_baseline.Step("join", join, ["customers", "accounts"], kind="join")],
            )
            res.baseline_s = time.perf_counter() - t0
            res.baseline_bytes = obs.nbytes
            res.agrees = _same(run.mapping(cust, joined), obs.mapping("customers", "join")) and (
                _same(run.mapping(acct, joined), obs.mapping("accounts", "join"))
            )
        except (_baseline.Unexplained, MemoryError) as exc:
            res.baseline_note = f"failed: {_err(exc)}"
        finally:
            del obs
            gc.collect()
    return res


# -------------------------------------------------------------------------------------------
# Fig. 4 / 5: queries on Census


def run_queries(
    spark: Any, path: str | None, rows: int | None, queries: int, seed: int = 0
) -> list[QueryResult]:
    """Latency of the paper's Q1–Q11 on Census joined with an education lookup table."""
    import tensprov_lab
    from tensprov_lab import datasets, pipelines

    raw = datasets.load(spark, "census", path=path, rows=rows)
    cats = pipelines.categories("census", raw)
    levels = sorted(r[0] for r in raw.select("education-num").distinct().collect())
    # the paper adds a join to Census for Q10/Q11: here each education level gets a label
    lookup = spark.createDataFrame(
        [(int(v), "basic" if v < 9 else "school" if v < 13 else "degree") for v in levels],
        "`education-num` int, edu_level string",
    )
    _progress("census queries: capture …")
    with tensprov_lab.track(spark, name="paper-census-queries") as run:
        out = pipelines.build("census", raw, categories=cats)
        enriched = out.join(lookup, "education-num")
    n_out = run.dataset(out).n_rows or 1
    n_raw = run.dataset(raw).n_rows or 1
    rng = np.random.default_rng(seed)
    out_rows = rng.integers(0, n_out, queries).tolist()
    raw_rows = rng.integers(0, n_raw, queries).tolist()
    results: list[QueryResult] = []

    def measure(
        query: str, description: str, fn: Callable[[int], Any], rows: Sequence[int]
    ) -> None:
        _progress(f"census queries: {query} ({len(rows)}) …")
        try:
            fn(int(rows[0]))  # warm-up builds lazy inverse indexes once
            p50, p99 = _latency(fn, rows)
            results.append(QueryResult(query, description, p50, p99, len(rows)))
        except Exception as exc:  # the extended query API is still moving: report, go on
            results.append(QueryResult(query, description, note=_err(exc)))

    measure("Q1", "forward, record", lambda r: run.forward(raw, rows=[r], to=out), raw_rows)
    measure("Q2", "backward, record", lambda r: run.backward(out, rows=[r]), out_rows)
    col_out = "age"
    extended = hasattr(run, "co_contributors")
    if extended:
        r_any: Any = run
        measure(
            "Q3",
            "forward, attribute value",
            lambda r: r_any.forward(raw, rows=[r], to=out, columns=[col_out]),
            raw_rows,
        )
        measure(
            "Q4",
            "backward, attribute value",
            lambda r: r_any.backward(out, rows=[r], columns=[col_out]),
            out_rows,
        )
        measure(
            "Q5", "how, forward, record", lambda r: r_any.forward(raw, rows=[r], to=out, how=True),
            raw_rows,
        )  # fmt: skip
        measure(
            "Q6", "how, backward, record", lambda r: r_any.backward(out, rows=[r], how=True),
            out_rows,
        )  # fmt: skip
        measure(
            "Q7",
            "how, forward, attribute value",
            lambda r: r_any.forward(raw, rows=[r], to=out, columns=[col_out], how=True),
            raw_rows,
        )
        measure(
            "Q8",
            "how, backward, attribute value",
            lambda r: r_any.backward(out, rows=[r], columns=[col_out], how=True),
            out_rows,
        )
        measure("Q9", "all transformations", lambda r: r_any.transformations(out), out_rows)
        measure(
            "Q10",
            "co-contributors (census ⨝ lookup)",
            lambda r: r_any.co_contributors(raw, [r], lookup),
            raw_rows,
        )
        measure(
            "Q11",
            "co-dependents (output → joined)",
            lambda r: r_any.co_dependents(out, [r], enriched),
            out_rows,
        )
    else:
        for q in ("Q3", "Q4", "Q5", "Q6", "Q7", "Q8", "Q9", "Q10", "Q11"):
            results.append(
                QueryResult(q, "", note="not available yet (run.co_contributors missing)")
            )

    # Fig. 5: records rather than indices; intermediate datasets are recomputed
    few = max(1, min(queries, 20))
    middle = [d for d in run.datasets if d.role != "source" and d.id != run.dataset(out).id]
    measure(
        "Q2+records",
        "backward, source records read back",
        lambda r: run.backward(out, rows=[r]).to_pandas(raw),
        out_rows[:few],
    )
    if middle:
        mid = middle[len(middle) // 2]
        n_mid = mid.n_rows or 1
        measure(
            "records(mid)",
            f"records of intermediate {mid.label} (recomputed)",
            lambda r: run.rows(mid, rows=[r % n_mid]),
            out_rows[:few],
        )
    return results


# -------------------------------------------------------------------------------------------
# printing


# -------------------------------------------------------------------------------------------
# plotting (optional: matplotlib is not a dependency)


def plot(report: dict[str, Any], path: str) -> str:
    """Draw the suite's figures into ``path`` (PNG or SVG); returns a one-line status."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed: no plot (pip install matplotlib)"
    fig, axes = plt.subplots(2, 2, figsize=(12, 9))
    pipes = report["pipelines"]
    ax = axes[0][0]
    labels = [f"{p['pipeline']}\n{p['variant']}" for p in pipes]
    x = np.arange(len(pipes))
    ax.bar(x - 0.2, [p["engine_bytes"] / _MB for p in pipes], 0.4, label="ours")
    ax.bar(x + 0.2, [(p["baseline_bytes"] or 0) / _MB for p in pipes], 0.4, label="baseline")
    ax.set_yscale("log")
    for i, p in enumerate(pipes):
        if not p["engine_bytes"]:  # identity tensors only: nothing to draw on a log axis
            ax.annotate("0 B", (i - 0.2, 0), xycoords=("data", "axes fraction"), ha="center")
    ax.set_xticks(x, labels)
    ax.set_ylabel("MB")
    ax.set_title("Table IX: provenance memory")
    ax.legend()
    ax = axes[0][1]
    ax.bar(x - 0.2, [p["capture_s"] for p in pipes], 0.4, label="ours")
    ax.bar(x + 0.2, [p["baseline_s"] or 0 for p in pipes], 0.4, label="baseline")
    ax.set_xticks(x, labels)
    ax.set_ylabel("s")
    ax.set_title("Table X: capture time")
    ax.legend()
    joins = report["join"]
    ax = axes[1][0]
    ax2 = ax.twinx()
    for order in dict.fromkeys(j["order"] for j in joins):
        mine = [j for j in joins if j["order"] == order]
        sfs = [j["sf"] for j in mine]
        ax.plot(sfs, [j["join_bytes"] / _MB for j in mine], "o-", label=f"ours ({order}): MB")
        ax2.plot(sfs, [j["capture_s"] for j in mine], "^:", label=f"ours ({order}): capture s")
        base = [(j["sf"], j["baseline_s"]) for j in mine if j["baseline_s"]]
        if base:
            ax2.plot(*zip(*base), "v:", label=f"baseline ({order}) s")
    psf = sorted(PAPER["table_xi"])
    ax.plot(psf, [PAPER["table_xi"][s]["tensprov_mb"] for s in psf], "s--", label="paper MB")
    ax.set_xlabel("scale factor")
    ax.set_ylabel("MB")
    ax2.set_ylabel("s")
    ax.set_title("Table XI / Fig. 6: join")
    ax.legend(loc="upper left")
    ax2.legend(loc="lower right")
    ax = axes[1][1]
    qs = [q for q in report["queries"] if q["p50_ms"] is not None]
    ax.bar([q["query"] for q in qs], [q["p50_ms"] for q in qs], label="p50")
    ax.scatter([q["query"] for q in qs], [q["p99_ms"] for q in qs], color="k", label="p99")
    ax.set_yscale("log")
    ax.set_ylabel("ms")
    ax.set_title("Fig. 4/5: Census queries")
    ax.tick_params(axis="x", rotation=45)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return f"plot written to {path}"


# -------------------------------------------------------------------------------------------
# command line


def _join_row(
    spark: Any, sf: float, folder: str, queries: int, baseline_max_sf: float, order: str
) -> JoinResult:
    """:func:`run_join`, with a failure kept as the row's error instead of ending the run."""
    try:
        res = run_join(spark, sf, folder, queries, baseline=sf <= baseline_max_sf, order=order)
    except Exception as exc:
        _progress(f"SF {sf:g} ({order}) failed: {_err(exc)}")
        res = JoinResult(sf, order=order, error=_err(exc))
    if sf > baseline_max_sf:
        res.baseline_note = (
            f"not run above SF {baseline_max_sf:g} (--baseline-max-sf); "
            "the paper's Chapman et al. failed at SF 15 and 20"
        )
    return res


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x.strip()]


def _names(text: str, allowed: Sequence[str], what: str) -> list[str]:
    names = [x.strip() for x in text.split(",") if x.strip()]
    bad = [n for n in names if n not in allowed]
    if bad:
        raise SystemExit(f"unknown {what} {', '.join(bad)}; choose from {', '.join(allowed)}")
    return names


def _jsonable(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        d = {f.name: _jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
        for prop in ("overhead", "added", "speedup", "bytes_per_row"):
            if hasattr(obj, prop):
                d[prop] = _jsonable(getattr(obj, prop))
        return d
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, float) and np.isnan(obj):
        return None
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


def _write_markdown(
    args: Any,
    argv: list[str] | None,
    spark: Any,
    names: list[str],
    sfs: list[float],
    results: tuple[list[PipelineResult], list[JoinResult], list[QueryResult]],
    described: str,
) -> None:
    """The suite's tables as printed, in their own section of ``args.markdown``."""
    from tensprov_lab.bench._markdown import about_this_run, command_line, pyspark_minor, refresh

    pipes, joins, queries = results
    tables = [t for t in (pipes and format_pipelines(pipes), format_join(joins),
                          format_queries(queries)) if t]  # fmt: skip
    # the tables without their column notes (said once, at the top of the file)
    notes = ("ours = ", "overhead = ", "materialize, build", "accounts = ", "paper (Fig")
    lines = [ln for ln in "\n\n".join(tables).strip().splitlines() if not ln.startswith(notes)]
    body = f"Data: {described}.\n\n```text\n" + "\n".join(lines) + "\n```"
    sizes = ",".join(f"{sf:g}" for sf in sfs)
    key = f"paper-{'+'.join(names)}-sf{sizes.replace(',', '+')}-pyspark{pyspark_minor()}"
    title = f"Paper suite ({', '.join(names)}; TPC-DI SF {sizes}), pyspark {pyspark_minor()}"
    command = command_line(["--suite", "paper", *(argv if argv is not None else [])])
    refresh(args.markdown, key, title, command, body, about_this_run(spark))
    print(f"figures written to {args.markdown} (section {key})")


def main(argv: list[str] | None = None) -> int:
    """``tensprov-lab bench --suite paper``: the paper's evaluation, measured here."""
    parser = argparse.ArgumentParser(prog="tensprov-lab bench --suite paper", description=__doc__)
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument(
        "--sf", default="3,5,10,20", help="TPC-DI scale factors (default 3,5,10,20)"
    )
    parser.add_argument(
        "--accounts", default="chronological",
        help="orders of the TPC-DI accounts table, each a join row per SF: chronological "
        "(as TPC-DI writes them) and/or random (the worst case); default chronological",
    )  # fmt: skip
    parser.add_argument(
        "--pipelines", default="german,compas,census", help="pipelines for Tables IX/X"
    )
    parser.add_argument("--variants", default="dataframe,ml", help="pipeline variants")
    parser.add_argument("--queries", type=int, default=500, help="queries per latency figure")
    parser.add_argument(
        "--data", default=None, help="folder with german.csv, compas.csv, census.csv "
        "(default: TENSPROV_DATA, else synthetic data of the published size)",
    )  # fmt: skip
    parser.add_argument(
        "--baseline-max-sf", type=float, default=20.0,
        help="run the observation-based baseline on the join up to this SF (default 20)",
    )  # fmt: skip
    parser.add_argument("--cache", default=None, help="keep generated TPC-DI parquet here")
    parser.add_argument("--cores", default="*", help="local Spark cores (default: all)")
    parser.add_argument(
        "--repeat", type=int, default=3,
        help="turns of materialize / build / capture per pipeline, medians kept (default 3)",
    )  # fmt: skip
    parser.add_argument(
        "--background",
        action="store_true",
        help="also time each pipeline's block with its capture in the background",
    )
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI")
    parser.add_argument("--json", default=None, help="write every result to this JSON file")
    parser.add_argument("--plot", default=None, help="draw figures (PNG/SVG; needs matplotlib)")
    parser.add_argument(
        "--markdown",
        default=None,
        metavar="FILE",
        help="also write the tables into FILE (e.g. docs/benchmarks.md), replacing this "
        "benchmark's section",
    )
    args = parser.parse_args(argv)

    from tensprov_lab import datasets, pipelines
    from tensprov_lab.bench._tpcdi import ACCOUNT_ORDERS

    sfs = [0.05] if args.smoke else _floats(args.sf)
    queries = min(args.queries, 5) if args.smoke else args.queries
    repeat = 1 if args.smoke else max(args.repeat, 1)
    # smoke runs the pipelines on a few hundred records (synthetic or the file's first ones)
    rows = 300 if args.smoke else None
    names = _names(args.pipelines, pipelines.PIPELINES, "pipeline")
    variants = _names(args.variants, pipelines.VARIANTS, "variant")
    orders = _names(args.accounts, ACCOUNT_ORDERS, "accounts order")
    data = args.data
    source = datasets.data_dir(data)
    described = f"published CSV files in {source}" if source else "synthetic data"
    if rows:
        described += f" (first {rows} records)"

    spark, owned = _session(args.cores)
    folder = args.cache or tempfile.mkdtemp(prefix="tensprov-paper-")
    report: dict[str, Any] = {
        "suite": "paper",
        "smoke": args.smoke,
        "data": described,
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "spark": spark.version,
            "spark_cores": spark.sparkContext.defaultParallelism,
        },
        "paper": PAPER,
        "pipelines": [],
        "join": [],
        "queries": [],
    }
    started = time.perf_counter()
    try:
        pipe_results: list[PipelineResult] = []
        for name in names:
            for variant in variants:
                try:
                    pipe_results.append(
                        run_pipeline(
                            spark,
                            name,
                            variant,
                            data,
                            rows,
                            repeat=repeat,
                            background=args.background,
                        )  # fmt: skip
                    )
                except Exception as exc:
                    _progress(f"{name}/{variant} failed: {_err(exc)}")
                    pipe_results.append(PipelineResult(name, variant, error=_err(exc)))
        report["pipelines"] = pipe_results
        if pipe_results:
            print(f"Data: {described}; {report['machine']['cpus']} CPUs\n")
            print(format_pipelines(pipe_results), flush=True)
            print()

        join_results: list[JoinResult] = []
        for sf in sfs:
            for order in orders:
                join_results.append(
                    _join_row(spark, sf, folder, queries, args.baseline_max_sf, order)
                )
                gc.collect()
        report["join"] = join_results
        print(format_join(join_results), flush=True)
        print()

        try:
            q = run_queries(spark, data, rows, queries)
        except Exception as exc:
            _progress(f"census queries failed: {_err(exc)}")
            q = [QueryResult("all", "", note=f"failed: {_err(exc)}")]
        report["queries"] = q
        print(format_queries(q), flush=True)
        if args.markdown:
            _write_markdown(
                args, argv, spark, names, sfs, (pipe_results, join_results, q), described
            )
    finally:
        if args.cache is None:
            shutil.rmtree(folder, ignore_errors=True)
        if owned:
            spark.stop()
    report["seconds"] = time.perf_counter() - started
    out = _jsonable(report)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=2)
        _progress(f"results written to {args.json}")
    if args.plot:
        print(plot(out, args.plot))
    return 0
