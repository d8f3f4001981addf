"""``tensprov-lab demo``: the quickstart notebook in JupyterLab (``--terminal``: the same
story printed in the terminal).

The notebook ships inside the package (``tensprov_lab/_demo/quickstart.ipynb``, a copy of
``notebooks/quickstart.ipynb`` kept identical by a test), so the demo works from a plain
``pip install``. It is copied to a working folder (default ``~/tensprov-lab-demo``) before
JupyterLab opens it: running it saves outputs, which must never touch the installed package
or the repository.
"""

from __future__ import annotations

import argparse
import importlib.resources
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = ["main", "build_demo", "terminal_demo", "quickstart_notebook", "lab_command"]

NOTEBOOK = "quickstart.ipynb"
DEFAULT_DIR = Path("~/tensprov-lab-demo")
#: what the JupyterLab demo needs in this interpreter (the ``notebook`` extra)
LAB_MODULES = ("jupyterlab", "ipykernel", "anywidget")
LAB_FIX = 'pip install "tensprov-lab[notebook]"'


def build_demo(spark: Any) -> tuple[Any, Any]:
    """Create the demo sources (a customer id typo sneaks orders into the wrong region)."""
    orders = spark.createDataFrame(
        [
            (1, 10, 120.0),
            (2, 11, 35.5),
            (3, 10, 80.0),
            (4, 12, 64.0),
            (5, 13, 310.0),
            (6, 11, 99.0),
            (7, 99, 15.0),
            (8, 12, 220.0),
        ],  # fmt: skip
        "order_id long, cust_id long, amount double",
    )
    customers = spark.createDataFrame(
        [(10, "north"), (11, "south"), (12, "north"), (13, "east"), (13, "west")],
        "cust_id long, region string",
    )
    return orders, customers


def terminal_demo() -> int:
    """Trace the demo pipeline in an embedded Spark and print what lineage shows."""
    from pyspark.sql import functions as F

    import tensprov_lab
    from tensprov_lab._spark import local_spark

    print("starting an embedded Spark (local mode) …")
    spark = local_spark(2, app="tensprov-lab-demo")
    orders, customers = build_demo(spark)
    with tensprov_lab.track(spark, name="retail") as run:
        big = orders.filter(F.col("amount") > 50)
        joined = big.join(customers, "cust_id")
        out = joined.groupBy("region").agg(F.sum("amount").alias("total"))
    print(run.summary())
    print("\nregion totals (canonical row index in _row):")
    print(run.rows(out).to_string(index=False))
    row = int(run.rows(out, where="region = 'west'")["_row"].iloc[0])
    print(f"\nwhy does 'west' have a total? backward lineage of out row {row}:")
    lin = run.backward(out, rows=[row])
    for name, table in lin.to_pandas().items():  # type: ignore[union-attr]
        print(f"-- {name}\n{table.to_string(index=False)}")
    print("\ncustomer 13 appears twice (east and west): order 5 is counted in both regions.")
    fwd = run.forward(orders, where="order_id = 5", to=out)
    print(f"forward lineage of order 5 reaches out rows {fwd[out].tolist()}")
    spark.stop()
    return 0


def quickstart_notebook() -> bytes:
    """The quickstart notebook shipped in the package."""
    return (importlib.resources.files("tensprov_lab") / "_demo" / NOTEBOOK).read_bytes()


def missing_lab_modules() -> list[str]:
    """The modules of the ``notebook`` extra this interpreter cannot import."""
    return [m for m in LAB_MODULES if importlib.util.find_spec(m) is None]


def prepare_workdir(workdir: Path) -> Path:
    """Copy the quickstart into ``workdir`` (an existing copy is the user's: kept) and write a
    kernelspec that runs this interpreter.

    The kernelspec matters: a ``python3`` kernel installed with ``ipykernel install --user``
    for another Python would otherwise win, and its kernel could not import tensprov_lab.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    notebook = workdir / NOTEBOOK
    shipped = quickstart_notebook()
    if not notebook.exists():
        notebook.write_bytes(shipped)
    elif notebook.read_bytes() != shipped:
        print(f"opening your existing copy {notebook} (delete it to start from a fresh one)")
    spec_dir = workdir / ".jupyter" / "kernels" / "python3"
    spec_dir.mkdir(parents=True, exist_ok=True)
    (spec_dir / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "Python 3 (tensprov-lab)",
                "language": "python",
            },
            indent=1,
        )
    )
    return notebook


def lab_command(workdir: Path, *, port: int | None, open_browser: bool) -> list[str]:
    """``jupyter lab`` from this interpreter, serving ``workdir`` and opening the quickstart."""
    cmd = [sys.executable, "-m", "jupyterlab", f"--ServerApp.root_dir={workdir}", NOTEBOOK]
    if not open_browser:
        cmd.append("--no-browser")
    if port is not None:
        cmd.append(f"--port={port}")
    # Jupyter refuses to start as root without it (containers, CI, binder-like machines)
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")
    return cmd


def lab_demo(workdir: Path, *, port: int | None, open_browser: bool) -> int:
    """Start JupyterLab on the quickstart and wait until it stops (Ctrl-C, as usual)."""
    from tensprov_lab._spark import check_java

    # the notebook's first cell starts Spark: say what is missing now, not in a traceback there
    check_java()
    workdir = workdir.expanduser().resolve()
    notebook = prepare_workdir(workdir)
    env = dict(os.environ)
    env["JUPYTER_PATH"] = os.pathsep.join(
        filter(None, [str(workdir / ".jupyter"), os.environ.get("JUPYTER_PATH")])
    )
    # Spark's Python workers: the kernel's interpreter, not whatever `python3` is on PATH
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    where = "" if open_browser else " (open the URL it prints, then quickstart.ipynb)"
    print(f"opening {notebook} in JupyterLab{where}; Ctrl-C twice stops it …", flush=True)
    cmd = lab_command(workdir, port=port, open_browser=open_browser)
    proc = subprocess.Popen(cmd, cwd=workdir, env=env)
    while True:
        try:
            rc = proc.wait()
            break
        except KeyboardInterrupt:
            # Ctrl-C reaches JupyterLab too (same process group): it asks to confirm, then
            # shuts its kernels down; wait for that instead of orphaning it
            continue
    # killed by a signal: the shell's convention (130 for SIGINT), not sys.exit(-2) == 254
    return 128 - rc if rc < 0 else rc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="tensprov-lab demo",
        description="Open the quickstart notebook (a pipeline with a data-quality bug, "
        "traced) in JupyterLab.",
    )
    parser.add_argument(
        "--terminal", action="store_true", help="print the demo in the terminal instead"
    )
    parser.add_argument(
        "--no-browser", action="store_true", help="start JupyterLab without opening a browser"
    )
    parser.add_argument("--port", type=int, help="JupyterLab's port (default: Jupyter's, 8888)")
    parser.add_argument(
        "--dir",
        type=Path,
        default=DEFAULT_DIR,
        help=f"working folder the notebook is copied to (default: {DEFAULT_DIR})",
    )
    args = parser.parse_args(argv)
    if args.terminal:
        return terminal_demo()
    missing = missing_lab_modules()
    if missing:
        print(
            f"tensprov-lab demo: {', '.join(missing)} not installed, fix: {LAB_FIX} "
            "(showing the terminal demo instead)",
            file=sys.stderr,
        )
        return terminal_demo()
    return lab_demo(args.dir, port=args.port, open_browser=not args.no_browser)
