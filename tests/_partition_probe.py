"""Run a fixed pipeline under one Spark configuration and save every tensor.

Used by test_partition_invariance.py in a subprocess (one SparkContext per process):
``python -m tests._partition_probe MASTER SHUFFLE_PARTITIONS OUT.npz`` (``probe`` runs it).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np


def pipeline(spark, F, Window, folder=None, background=False):  # noqa: ANN001, ANN201, N803
    """The probe's tracked pipeline; with ``folder``, over the same records written
    there as files and read back (orders as Parquet, customers as CSV); with
    ``background``, captured in the background (queries wait for it)."""
    rng = np.random.default_rng(7)
    n = 3000
    orders = spark.createDataFrame(
        [
            (int(i), int(c), float(a), str(t))
            for i, c, a, t in zip(
                range(n),
                rng.integers(0, 60, n),
                rng.integers(0, 100, n),
                rng.choice(["a", "b", "c", "d"], n),
            )
        ],
        "order_id long, cust_id long, amount double, tag string",
    )
    customers = spark.createDataFrame(
        [(int(c), f"r{c % 5}") for c in range(0, 70, 1) if c % 7], "cust_id long, region string"
    )
    if folder is not None:
        orders.coalesce(2).write.parquet(f"{folder}/orders")
        orders = spark.read.parquet(f"{folder}/orders")
        customers.coalesce(1).write.csv(f"{folder}/customers", header=True)
        customers = spark.read.csv(
            f"{folder}/customers", header=True, schema="cust_id long, region string"
        )
    import tensprov_lab

    with tensprov_lab.track(spark, name="probe", background=background) as run:
        big = orders.filter(F.col("amount") > 30)
        joined = big.join(customers, "cust_id", "left")
        w = joined.withColumn("rank", F.count("*").over(Window.partitionBy("region")))
        agg = w.groupBy("region", "tag").agg(
            F.sum("amount").alias("total"), F.count("*").alias("n")
        )
        srt = agg.orderBy(F.col("total").desc())
        top = srt.limit(5)
        u = big.select("cust_id", "tag").union(customers.select("cust_id", "region"))
        d = u.distinct()
        dd = orders.dropDuplicates(["cust_id", "tag"]).select("cust_id", "tag")
        e = big.select("order_id", F.explode(F.array("cust_id", "order_id")).alias("x"))
        full = customers.join(agg, customers.region == agg.region, "full")
        semi = customers.join(big, "cust_id", "left_semi")
        # an inner join nothing contextual reads: not materialized, so recomputed by replay
        pairs = big.join(customers, "cust_id").withColumn("twice", F.col("amount") * 2)
        high = pairs.filter(F.col("twice") > 150)
        del w, top, d, dd, e, full, semi, high
    return run, orders, pairs, agg


def replayed(run, orders, pairs, agg) -> dict[str, np.ndarray]:  # noqa: ANN001
    """Records recomputed by replay (checked against the whole dataset here) and a
    what-if preview, as arrays that must not depend on where the pipeline ran."""
    import pandas as pd

    picks = [0, 5, 17, 40, 41, 300]
    assert not run.dataset(pairs).materialized
    got = run.rows(pairs, rows=picks)
    assert got.attrs["recomputed"] is True
    everything = run.rows(pairs)
    want = everything[everything["_row"].isin(picks)].reset_index(drop=True)
    pd.testing.assert_frame_equal(got, want, check_dtype=False)
    dropped = run.backward(pairs, rows=picks[:3])[orders]
    preview = run.what_if(drop={orders: dropped}, to=[pairs, agg])
    removed = preview.removed["pairs"]
    assert sorted(removed["_row"]) == picks[:3]
    # the window between joined and agg sees its whole partition: no preview by replay
    assert "agg" in preview.not_previewable
    return {
        "recomputed_rows": got["_row"].to_numpy(),
        "recomputed_twice": got["twice"].to_numpy(float),
        "what_if_removed_rows": removed["_row"].to_numpy(),
    }


def _kill_an_executor(app_id: str) -> int:
    """SIGKILL one executor JVM of the application ``app_id`` (a standalone worker's
    ``CoarseGrainedExecutorBackend``); its pid, once it is gone."""
    import os
    import signal
    import time

    for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().decode(errors="replace")
        except OSError:
            continue
        if "CoarseGrainedExecutorBackend" in cmd and app_id in cmd:
            os.kill(pid, signal.SIGKILL)
            while os.path.exists(f"/proc/{pid}"):
                time.sleep(0.05)
            return pid
    raise AssertionError(f"no executor of {app_id} to kill")


def _kill_mid_capture(spark, at: int) -> list[int]:  # noqa: ANN001
    """Kill an executor when capture starts on its ``at``-th operation (after earlier
    operations' jobs ran and cached what they cache on the executors)."""
    from tensprov_lab.capture.recording._tracker import Tracker

    killed: list[int] = []
    original = Tracker._capture_operation
    calls = [0]

    def capture_operation(self, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        calls[0] += 1
        if calls[0] == at:
            killed.append(_kill_an_executor(spark.sparkContext.applicationId))
        return original(self, *args, **kwargs)

    Tracker._capture_operation = capture_operation  # type: ignore[method-assign]
    return killed


def probe(
    folder: Path, master: str, shuffle: str, name: str, storage: str = "memory",
    kill_at: int = 0, background: bool = False,
) -> dict[str, np.ndarray]:  # fmt: skip
    """Run the probe in a subprocess (one SparkContext per process); its arrays.
    ``storage="spark"`` moves the run's tensors to Spark-resident tables before they
    and the lineage answers are read (then by Spark jobs); ``storage="files"`` writes
    the sources as files and tracks the pipeline over them read back.  ``kill_at``: kill one
    executor when capture reaches that operation (a cluster's worker then starts
    another); ``background``: capture in the background."""
    import os
    import subprocess

    again = (master, shuffle, storage, kill_at, background)
    if again in _PROBED:  # the same run gives the same arrays (what these tests check)
        return dict(_PROBED[again])
    out = folder / f"{name}.npz"
    args = [master, shuffle, str(out), storage, str(kill_at), str(int(background))]
    proc = subprocess.run(
        [sys.executable, "-m", "tests._partition_probe", *args],
        cwd=Path(__file__).resolve().parent.parent,
        env=dict(os.environ, PYSPARK_PYTHON=sys.executable),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    with np.load(out) as z:
        _PROBED[again] = {k: z[k] for k in z.files}
    return dict(_PROBED[again])


#: the arrays of each configuration probed in this test session: the cluster tests
#: compare with one local run, probed once
_PROBED: dict[tuple, dict[str, np.ndarray]] = {}


def main(argv: list[str]) -> None:
    master, shuffle, out, storage, kill_at, background = [*argv, "memory", "0", "0"][:6]
    from pyspark.sql import SparkSession, Window
    from pyspark.sql import functions as F

    spark = (
        SparkSession.builder.master(master)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", shuffle)
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    killed = _kill_mid_capture(spark, int(kill_at)) if int(kill_at) else []
    folder = None
    if storage == "files":
        import tempfile

        folder = tempfile.mkdtemp(prefix="tensprov-probe-")
    run, orders, pairs, agg = pipeline(spark, F, Window, folder, background == "1")
    run.wait()  # a background capture: what follows reads its log
    if folder is not None:
        # the sources' files were read by the driver, not by a Spark job
        assert run._log.file_reads > 0, run._log
    assert bool(killed) == bool(int(kill_at)), "the executor was not killed mid-capture"
    arrays = replayed(run, orders, pairs, agg)
    if storage == "spark":
        moved = run.spill(to="spark")
        assert len(moved) > 5 and all(
            any(t.kind == "spark" for t in op.tensors) for op in moved if op.method != "withColumn"
        ), [(op.method, [t.kind for t in op.tensors]) for op in moved]
    for ds in run.datasets:
        for r in range(0, ds.n_rows or 0, max((ds.n_rows or 1) // 5, 1)):
            found = run.backward(ds.id, rows=[r]).to_dict()
            arrays[f"backward_{ds.id}_{r}"] = np.array(
                sorted((name, int(i)) for name, rows in found.items() for i in rows), dtype=object
            ).astype(str)
    for k, op in enumerate(run.operations):
        assert not op.opaque, op.warnings
        for j, t in enumerate(op.tensors):
            m = t.to_sparse().tocoo()
            order = np.lexsort((m.col, m.row))
            arrays[f"op{k}_{op.method}_in{j}"] = np.stack([m.row[order], m.col[order]])
            arrays[f"op{k}_{op.method}_in{j}_shape"] = np.array(m.shape)
    np.savez(out, **arrays)
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
