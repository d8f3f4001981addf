"""``tensprov-lab bench --suite notebook``: what a notebook user waits for.

Cells run in a real IPython kernel (``jupyter_client``), as JupyterLab runs them, each
timed from the request to the kernel's reply:

- **first capture**: the quickstart's 11-row pipeline tracked three times in a fresh
  kernel once Spark is up (the first capture of a process, then later ones): the
  capture's own seconds (the summary's figure) and the tracked cell until the run
  answers a query;
- **a cell that ends with an action**: the engine bench's pipeline over ``--rows`` orders
  (Parquet), written to a no-op sink, untracked and in a ``%%provtrack`` cell in turns
  (medians of ``--repeat``); then a lineage query right after the tracked cell.

Examples
--------
::

    tensprov-lab bench --suite notebook --rows 5M --repeat 3 --data /tmp/benchdata
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

__all__ = ["main"]

SETUP = """\
import time, pandas as pd
import tensprov_lab
from pyspark.sql import functions as F
spark = tensprov_lab.local_spark({cores})
%load_ext tensprov_lab
"""

QUICK_DATA = """\
orders = spark.createDataFrame(pd.DataFrame({
    "order_id": list(range(1, 12)), "cust_id": [10, 11, 10, 12, 13, 11, 14, 12, 13, 14, 15],
    "amount": [120.0, 35.5, 80.0, 64.0, 310.0, 99.0, 45.0, 220.0, 150.0, 60.0, 75.0],
    "status": ["shipped"] * 10 + ["returned"]}))
customers = spark.createDataFrame(pd.DataFrame({"cust_id": [10, 11, 12, 13, 14, 15, 13],
    "region": ["north", "south", "east", "east", "west", "north", "west"]}))
orders.count(), customers.count()
"""

QUICK = """\
%%provtrack --name quick
shipped = orders.filter(F.col("status") == "shipped")
joined = shipped.join(customers, "cust_id")
priced = joined.withColumn("gross", F.round(F.col("amount") * 1.2, 2))
totals = priced.groupBy("region").agg(F.count("*").alias("orders"), F.sum("gross").alias("revenue"))
"""

BIG_DATA = """\
from tensprov_lab.bench.engine import make_data
o_path, c_path = make_data(spark, {rows}, {customers}, {folder!r})
big_orders, big_customers = spark.read.parquet(o_path), spark.read.parquet(c_path)
"""

BIG = """\
big = big_orders.filter(F.col("amount") > 20)
joined = big.join(big_customers, "cust_id")
priced = joined.withColumn("amount_eur", F.col("amount") * 0.92)
out = priced.groupBy("region", "segment").agg(
    F.sum("amount_eur").alias("total"), F.count("*").alias("n")
)
out.write.format("noop").mode("overwrite").save()
"""

QUERY = "tensprov_lab.last_run().backward(out, rows=[0])"


class _Kernel:
    """A kernel running this Python, cells executed one at a time and timed."""

    def __init__(self) -> None:
        from jupyter_client.manager import start_new_kernel

        self.manager, self.client = start_new_kernel(kernel_name="python3")

    def run(self, code: str) -> tuple[float, str]:
        """Execute ``code``; its wall seconds (request → reply) and its text output."""
        t0 = time.perf_counter()
        msg_id = self.client.execute(code)
        reply = self.client.get_shell_msg(timeout=1800)
        while reply["parent_header"].get("msg_id") != msg_id:
            reply = self.client.get_shell_msg(timeout=1800)
        seconds = time.perf_counter() - t0
        text: list[str] = []
        while True:  # the cell's outputs, up to its idle status
            msg = self.client.get_iopub_msg(timeout=60)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "stream":
                text.append(content["text"])
            elif kind in ("execute_result", "display_data", "update_display_data"):
                text.append(str(content["data"].get("text/plain", "")) + "\n")
            elif kind == "error":
                raise RuntimeError(f"the benchmark cell failed: {content['ename']}: "
                                   f"{content['evalue']}\n{code}")  # fmt: skip
            elif kind == "status" and content["execution_state"] == "idle":
                break
        if reply["content"]["status"] != "ok":
            raise RuntimeError(f"the benchmark cell failed:\n{code}")
        return seconds, "".join(text)

    def value(self, expr: str) -> str:
        return self.run(f"print({expr})")[1].strip()

    def close(self) -> None:
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=True)


def _rows(text: str) -> int:
    text = text.strip().upper()
    scale = {"K": 10**3, "M": 10**6}.get(text[-1:], 1)
    return int(float(text.rstrip("KM")) * scale)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tensprov-lab bench --suite notebook",
                                     description=__doc__.split("\n\n")[0])  # fmt: skip
    parser.add_argument("--suite", default="notebook", help=argparse.SUPPRESS)
    parser.add_argument("--rows", default="5M", help="order rows of the big cell (default 5M)")
    parser.add_argument("--repeat", type=int, default=3, help="turns (medians)")
    parser.add_argument("--cores", default="2", help="local Spark cores (default 2)")
    parser.add_argument("--data", default=None, help="folder for the synthetic Parquet data")
    parser.add_argument(
        "--markdown",
        default=None,
        metavar="FILE",
        help="also write the figures into FILE (e.g. docs/benchmarks.md), replacing this "
        "benchmark's section",
    )
    args = parser.parse_args(argv)
    rows = _rows(args.rows)
    folder = args.data or os.path.join(tempfile.gettempdir(), "tensprov-bench-data")
    os.makedirs(folder, exist_ok=True)

    kernel = _Kernel()
    try:
        print("starting Spark in the kernel …", flush=True)
        kernel.run(SETUP.format(cores=args.cores))
        kernel.run(QUICK_DATA)
        print("first capture of the process (quickstart pipeline, 11 rows):")
        firsts = []
        for turn in range(3):
            cell, _ = kernel.run(QUICK)
            queried, _ = kernel.run("tensprov_lab.last_run().backward(totals, rows=[0])")
            capture = float(kernel.value("tensprov_lab.last_run().seconds"))
            label = "first" if turn == 0 else f"then ({turn + 1})"
            firsts.append((label, capture, cell, queried))
            print(f"  {label:10s} capture {capture:.2f} s; tracked cell {cell:.2f} s, "
                  f"then a query {queried:.2f} s")  # fmt: skip

        print(f"writing {rows:,} orders …", flush=True)
        kernel.run(BIG_DATA.format(rows=rows, customers=max(rows // 50, 100), folder=folder))
        kernel.run(BIG)  # warm: JVM, file cache
        plain, tracked, query, captures = [], [], [], []
        for turn in range(args.repeat):
            print(f"turn {turn + 1}/{args.repeat} …", flush=True)
            plain.append(kernel.run(BIG)[0])
            tracked.append(kernel.run("%%provtrack --name big\n" + BIG)[0])
            query.append(kernel.run(QUERY)[0])
            captures.append(float(kernel.value("tensprov_lab.last_run().seconds")))
            kernel.run("tensprov_lab.forget()")
        med = statistics.median
        print(f"a cell over {rows:,} orders ending with an action (medians of {args.repeat}):")
        print(f"  untracked {med(plain):.2f} s; %%provtrack {med(tracked):.2f} s "
              f"(x{med(tracked) / med(plain):.2f}); a query right after {med(query):.2f} s "
              f"(capture {med(captures):.2f} s in the background)")  # fmt: skip
        if args.markdown:
            from tensprov_lab.bench._markdown import (
                about_this_run,
                command_line,
                pyspark_minor,
                refresh,
                table,
            )

            java = str(kernel.value("spark._jvm.java.lang.System.getProperty('java.version')"))
            first = table(
                ["quickstart cell (11 rows)", "capture s", "tracked cell s", "query after s"],
                [[label, f"{c:.2f}", f"{t:.2f}", f"{q:.2f}"] for label, c, t, q in firsts],
            )
            big = table(
                ["orders", "untracked s", "%%provtrack s", "ratio", "query after s",
                 "capture s (background)"],
                [[f"{rows:,}", f"{med(plain):.2f}", f"{med(tracked):.2f}",
                  f"**{med(tracked) / med(plain):.2f}**", f"{med(query):.2f}",
                  f"{med(captures):.2f}"]],
            )  # fmt: skip
            body = (
                f"Cells run in turns in one IPython kernel (jupyter_client); medians of "
                f"{args.repeat} turns for the big cell.\n\n{first}\n\n{big}"
            )
            key = f"notebook-{args.rows}-pyspark{pyspark_minor()}"
            title = (
                "In a notebook: the first capture, and a tracked cell ending with an "
                f"action, pyspark {pyspark_minor()}"
            )
            refresh(args.markdown, key, title, command_line(["--suite", "notebook", *(
                argv if argv is not None else [])]), body, about_this_run(java=java))  # fmt: skip
            print(f"figures written to {args.markdown} (section {key})")
    finally:
        kernel.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
