"""Execute every notebook in ``notebooks/`` headless, top to bottom, and check the quickstart.

The notebook kernel is a separate process (with its own local Spark) started from a
``python3`` kernelspec written to a temporary ``JUPYTER_PATH`` so that it runs this
interpreter (``sys.executable``), whatever kernelspecs the machine has.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.spark

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOK_FILES = sorted(NOTEBOOKS.glob("*.ipynb"))


@pytest.fixture(scope="module")
def kernel_env(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A ``python3`` kernelspec running ``sys.executable``, first on ``JUPYTER_PATH``."""
    root = tmp_path_factory.mktemp("jupyter")
    spec_dir = root / "kernels" / "python3"
    spec_dir.mkdir(parents=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (tensprov-lab tests)",
        "language": "python",
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    env = {
        "JUPYTER_PATH": os.pathsep.join(filter(None, [str(root), os.environ.get("JUPYTER_PATH")])),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        # the kernel's Spark needs little memory: keep two JVMs (tests + kernel) light
        "TENSPROV_DRIVER_MEMORY": os.environ.get("TENSPROV_DRIVER_MEMORY", "1g"),
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield env
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _execute(path: Path) -> Any:
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb,
        kernel_name="python3",
        timeout=600,
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()
    return nb


def _text(cell: Any) -> str:
    """Everything a cell showed, as text (stream output, plain and HTML representations).

    Consecutive pieces of one stream are one text, as a notebook shows them: the kernel
    flushes a stream whenever another thread publishes a display (the background
    capture's summary), which may fall between the writes of one ``print``."""
    parts = []
    stream = None
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            if stream == out.get("name") and parts:
                parts[-1] += out.get("text", "")
            else:
                parts.append(out.get("text", ""))
            stream = out.get("name")
            continue
        stream = None
        data = out.get("data", {})
        for mime in ("text/plain", "text/html"):
            if mime in data:
                parts.append(data[mime])
    return "\n".join(parts)


def _errors(nb: Any) -> list[str]:
    return [
        f"cell {i}: {out.get('ename')}: {out.get('evalue')}"
        for i, cell in enumerate(nb.cells)
        for out in cell.get("outputs", [])
        if out.get("output_type") == "error"
    ]


def _cell(nb: Any, marker: str) -> Any:
    found = [c for c in nb.cells if c.cell_type == "code" and marker in c.source]
    assert found, f"no code cell contains {marker!r}"
    return found[0]


_executed: dict[Path, Any] = {}


def _run(path: Path) -> Any:
    if path not in _executed:
        _executed[path] = _execute(path)
    return _executed[path]


def test_notebooks_exist() -> None:
    assert (NOTEBOOKS / "quickstart.ipynb") in NOTEBOOK_FILES


@pytest.mark.parametrize("path", NOTEBOOK_FILES, ids=[p.name for p in NOTEBOOK_FILES])
def test_notebook_runs_clean(path: Path, kernel_env: Any) -> None:
    stored = nbformat.read(path, as_version=4)
    nbformat.validate(stored)
    assert stored.metadata.get("kernelspec", {}).get("name") == "python3"
    assert all(
        not c.get("outputs") and c.get("execution_count") is None
        for c in stored.cells
        if c.cell_type == "code"
    ), f"{path.name}: commit notebooks with outputs cleared"
    # nbclient raises CellExecutionError on the first failing cell; check anyway
    nb = _run(path)
    assert _errors(nb) == []


def test_quickstart_story(kernel_env: Any) -> None:
    nb = _run(NOTEBOOKS / "quickstart.ipynb")

    # the tracked cell prints its one-line summary
    tracked = _text(_cell(nb, "%%provtrack --name retail\n"))
    assert "tensprov-lab run retail: " in tracked
    assert "operations" in tracked and "tensor entries" in tracked
    fixed = _text(_cell(nb, "%%provtrack --name retail-fixed"))
    assert "tensprov-lab run retail-fixed: " in fixed
    # the customers' dedup (a window, a filter on its rank, a drop: one step) is traced
    # frame by frame: no warning in any summary, and nothing on stderr anywhere
    assert "warning" not in fixed.lower() and "warning" not in tracked.lower()
    assert not [c for c in nb.cells if "TensProvWarning" in _text(c)]
    stderr = [
        out.get("text", "")
        for c in nb.cells
        if c.cell_type == "code"
        for out in c.get("outputs", [])
        if out.get("output_type") == "stream" and out.get("name") == "stderr"
    ]
    assert stderr == []

    # the totals are wrong before the fix: 552.00 of double-counted revenue
    check = _text(_cell(nb, "before = run.rows(totals)"))
    assert "1,894.20" in check and "1,342.20" in check

    # the mapping finds the double-counted orders: 5 and 9, both customer 13
    twice = _text(_cell(nb, "regions_per_order"))
    assert "310.0" in twice and "150.0" in twice

    # %provtrace reaches both records of the duplicated customer 13 (east and west)
    trace = _text(_cell(nb, "%provtrace priced"))
    assert "customers: 2 record(s)" in trace
    assert "Dee" in trace and "east" in trace and "west" in trace

    # run.backward(...).to_pandas(): the west total comes from Dee's second record only
    west = _text(_cell(nb, "run.backward(totals, where=\"region = 'west'\")"))
    assert "Dee" in west and "2024-06-15" in west and "2024-03-02" not in west

    # forward from the stale record reaches the east total only
    stale = _text(_cell(nb, "stale = run.forward("))
    assert "east" in stale and "west" not in stale

    # after deduplicating, the regions add up again
    after = _text(_cell(nb, "after = tensprov_lab.last_run()"))
    lines = [ln for ln in after.splitlines() if "add up to" in ln or "shipped orders" in ln]
    assert len(lines) == 2 and lines[0].split()[-1] == lines[1].split()[-1] == "1,342.20"

    # cell lineage of the west revenue: Dee's second record's amount contributes
    cells = _text(_cell(nb, 'columns=["revenue"]'))
    assert "contributing" in cells and "influencing" in cells and "amount" in cells

    # what-if: dropping the stale record takes the east revenue back to the true figure
    preview = _text(_cell(nb, "preview = run.what_if("))
    assert "642.0" in preview and "90.0" in preview


def test_background_capture_in_a_real_kernel(kernel_env: Any, tmp_path: Path) -> None:
    """``%%provtrack --background`` in ipykernel: the cell ends with a "capturing …
    (in the background)" line that the capture thread turns into the summary, and the
    next cell's query waits for the capture."""
    cells = [
        "import tensprov_lab\n"
        "spark = tensprov_lab.local_spark(2)\n%load_ext tensprov_lab\nsrc = spark.range(1000)",
        "%%provtrack --background --name bg\n"
        "df = src.withColumnRenamed('id', 'k')\n"
        "big = df.filter('k % 7 = 3')\n"
        "out = big.groupBy((big.k % 5).alias('g')).count()",
        "run = tensprov_lab.last_run()\n"
        "print(run.name, run.capturing, run.dataset(big).n_rows)\n"
        "print(sorted(run.backward(out, rows=[0])[src].tolist())[:3])\n"
        # the summary's update must leave the kernel while a cell runs: nbclient
        # (unlike JupyterLab) drops a message that comes between two cells
        "magics = get_ipython().magics_manager.magics['cell']['provtrack'].__self__\n"
        "magics.progress.summarizer.join(60)",
        "print(run.summary())",
    ]
    nb = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell(c) for c in cells],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3"}},
    )
    path = tmp_path / "background.ipynb"
    nbformat.write(nb, path)
    done = _execute(path)
    assert _errors(done) == []
    tracked, query, summary = (_text(c) for c in done.cells[1:4])
    # the query waited: the run is whole (k % 7 = 3 for 143 of 0..999); (while it
    # waited, a progress line said so: emptied when the capture ended)
    assert [ln for ln in query.splitlines() if ln.strip()] == ["bg False 143", "[3, 38, 73]"]
    line = summary.strip().splitlines()[-1]
    assert line.startswith("tensprov-lab run bg: ") and "tensor entries" in line

    # the tracked cell's line was updated in place to that summary (its bytes may be
    # fewer: the query in between built an inverse index, which the run then counts)
    def without_bytes(text: str) -> list[str]:
        return [part for part in text.split(", ") if not part.endswith("B")]

    assert tracked.strip().startswith("tensprov-lab run bg: ")
    assert without_bytes(tracked.strip()) == without_bytes(line)
