"""The README's commands run end to end (each in its own process: its own Spark), and the
pieces of ``tensprov-lab demo`` that need no JVM."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tensprov_lab import cli, demo

ROOT = Path(__file__).resolve().parent.parent


def _run(*args: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "tensprov_lab.cli", *args],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


# ---------------------------------------------------------------------------------------------
# demo: no JVM


def test_shipped_quickstart_is_the_repository_notebook() -> None:
    """The package's copy (what `tensprov-lab demo` opens after a plain pip install) must be
    the notebook the repository documents and tests."""
    repo = (ROOT / "notebooks" / "quickstart.ipynb").read_bytes()
    assert demo.quickstart_notebook() == repo, (
        "tensprov_lab/_demo/quickstart.ipynb differs from notebooks/quickstart.ipynb: "
        "cp notebooks/quickstart.ipynb tensprov_lab/_demo/"
    )
    assert json.loads(repo)["cells"]  # a real notebook, not an empty placeholder


def test_lab_command_runs_this_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    workdir = Path("/somewhere/demo")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    cmd = demo.lab_command(workdir, port=None, open_browser=True)
    assert cmd[:3] == [sys.executable, "-m", "jupyterlab"]
    assert f"--ServerApp.root_dir={workdir}" in cmd and "quickstart.ipynb" in cmd
    assert not {"--no-browser", "--allow-root"} & set(cmd)
    assert not any(a.startswith("--port") for a in cmd)

    monkeypatch.setattr(os, "geteuid", lambda: 0)
    cmd = demo.lab_command(workdir, port=9123, open_browser=False)
    assert {"--no-browser", "--port=9123", "--allow-root"} <= set(cmd)


def test_workdir_keeps_the_users_copy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nb = demo.prepare_workdir(tmp_path)
    assert nb == tmp_path / "quickstart.ipynb" and nb.read_bytes() == demo.quickstart_notebook()
    spec = json.loads((tmp_path / ".jupyter/kernels/python3/kernel.json").read_text())
    assert spec["argv"][:3] == [sys.executable, "-m", "ipykernel_launcher"]

    nb.write_text(nb.read_text().replace("five minutes", "ten minutes"))  # the user's edits
    demo.prepare_workdir(tmp_path)
    assert "ten minutes" in nb.read_text()
    assert "existing copy" in capsys.readouterr().out


def test_demo_without_jupyterlab_says_how_and_falls_back(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ran: list[str] = []

    def terminal() -> int:
        ran.append("terminal")
        return 0

    monkeypatch.setattr(demo, "missing_lab_modules", lambda: ["jupyterlab"])
    monkeypatch.setattr(demo, "terminal_demo", terminal)
    monkeypatch.setattr(demo, "lab_demo", lambda *a, **k: pytest.fail("started JupyterLab"))
    assert cli.main(["demo"]) == 0
    assert ran == ["terminal"]
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and 'pip install "tensprov-lab[notebook]"' in err[0], err


# ---------------------------------------------------------------------------------------------
# demo and bench end to end


@pytest.mark.spark
def test_terminal_demo_finds_the_duplicated_customer() -> None:
    out = _run("demo", "--terminal")
    assert "tensprov-lab run retail" in out
    # the 'west' total comes from order 5 through the duplicated customer 13
    assert re.search(r"-- orders\n.*\n\s*4\s+5\s+13\s+310\.0", out), out
    assert "forward lineage of order 5 reaches out rows [" in out


@pytest.mark.spark
def test_bench_on_a_local_standalone_cluster(tmp_path: Path) -> None:
    """The README's ``bench --master local-cluster``: a master and two workers on
    loopback start, the pipeline runs on them, capture reads the Parquet sources from
    their files (no Spark job)."""
    out = _run(
        "bench", "--master", "local-cluster", "--rows", "20k", "--capture-only",
        "--queries", "10", "--repeat", "1", "--data", str(tmp_path),
    )  # fmt: skip
    row = next(line for line in out.splitlines() if line.strip().startswith("20,000"))
    figures = row.split()
    assert figures[0] == "20,000" and "NOT a record-level figure" not in out
    assert float(figures[1]) > 0 and float(figures[2]) > 0 and int(figures[5]) == 0, out


@pytest.mark.spark
@pytest.mark.connect
def test_bench_over_connect_records_the_servers_java(tmp_path: Path) -> None:
    """``bench --connect --markdown``: the section's line about the run names the Java
    the Connect server runs (this process has no JVM to ask)."""
    md = tmp_path / "benchmarks.md"
    out = _run(
        "bench", "--connect", "--rows", "20k", "--capture-only", "--queries", "10",
        "--repeat", "1", "--data", str(tmp_path), "--markdown", str(md),
    )  # fmt: skip
    assert "figures written to" in out, out
    line = re.search(r"· Java (\S+) · pyspark", md.read_text())
    assert line is not None, md.read_text()
    assert int(line.group(1).split(".")[0]) >= 17, line.group(0)


@pytest.mark.spark  # checks Java before starting JupyterLab (the server itself needs no JVM)
def test_demo_serves_the_quickstart_in_jupyterlab(tmp_path: Path) -> None:
    if demo.missing_lab_modules():
        pytest.fail(f"the notebook extra is missing: {demo.LAB_FIX}", pytrace=False)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    token = "tensprov-demo-test"
    workdir = tmp_path / "demo"
    env = {
        **os.environ,
        "JUPYTER_TOKEN": token,  # jupyter_server reads it: the test can call the API
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
        "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "workspaces"),
    }
    cmd = [sys.executable, "-m", "tensprov_lab.cli", "demo", "--no-browser", "--port", str(port)]
    log_path = tmp_path / "demo.log"
    with open(log_path, "wb") as log:
        # a session of its own: the demo and the JupyterLab it starts end together below
        proc = subprocess.Popen(
            [*cmd, "--dir", str(workdir)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:

            def get(path: str) -> dict:
                req = urllib.request.Request(
                    f"http://127.0.0.1:{port}{path}", headers={"Authorization": f"token {token}"}
                )
                with urllib.request.urlopen(req, timeout=5) as r:
                    return json.loads(r.read())

            deadline = time.monotonic() + 120
            while True:
                assert proc.poll() is None, f"demo exited: {log_path.read_text()[-3000:]}"
                try:
                    model = get("/api/contents/quickstart.ipynb")
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        pytest.fail(f"no answer in 120 s: {log_path.read_text()[-3000:]}")
                    time.sleep(0.5)
            shipped = json.loads(demo.quickstart_notebook())["cells"]
            served = model["content"]["cells"]
            assert model["type"] == "notebook"
            # the API joins each cell's source lines into one string
            assert [(c["cell_type"], c["source"]) for c in served] == [
                (c["cell_type"], "".join(c["source"])) for c in shipped
            ]
            assert (workdir / "quickstart.ipynb").read_bytes() == demo.quickstart_notebook()
            # the notebook's python3 kernel is this interpreter (it can import tensprov_lab)
            spec = get("/api/kernelspecs")["kernelspecs"]["python3"]["spec"]
            assert spec["argv"][0] == sys.executable, spec
        finally:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=30)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
    assert "opening" in log_path.read_text()


@pytest.mark.spark
def test_bench_smoke_prints_every_figure(tmp_path: Path) -> None:
    out = _run("bench", "--rows", "20k", "--queries", "50")
    row = next(line for line in out.splitlines() if line.strip().startswith("20,000"))
    figures = row.split()
    assert len(figures) == 15
    # a record-level capture (no operation fell back to coarse lineage: no `*` mark)
    assert figures[0] == "20,000" and "NOT a record-level figure" not in out
    baseline, capture, ratio, first = (float(x) for x in figures[1:5])
    assert baseline > 0 and capture > 0
    # ratio = capture / baseline, each printed to 0.01 s: the ratio of the unrounded
    # figures lies in the range the printed ones allow (a warm 20k capture takes ~0.1 s,
    # where the rounding alone moves the ratio by 0.02)
    h = 0.005
    assert (capture - h) / (baseline + h) - h <= ratio <= (capture + h) / (baseline - h) + h
    jobs, py_peak, jvm_peak = int(figures[5]), float(figures[9]), float(figures[10])
    # the bench's sources are local Parquet files: their fused reads come from the files
    # (capture/sources/_direct.py), no Spark job
    assert first > 0 and jobs == 0 and py_peak > 0 and jvm_peak > 0
    assert out.count("capture 3/3") == 1  # three turns by default
    # the first capture (JVM helper, Python imports, first plan shapes) is timed on its
    # own before the turns, as the baseline's first materialization is left out
    assert out.count("first capture (warms capture") == 1
    assert out.index("first capture (warms capture") < out.index("capture 1/3")
    # --markdown: the figures replace this benchmark's section of the file, the rest kept
    md = tmp_path / "benchmarks.md"
    import pyspark

    key = f"engine-local-20k-background-pyspark{'.'.join(pyspark.__version__.split('.')[:2])}"
    md.write_text(f"# Benchmarks\n\nhand-written text\n\n<!-- bench:{key} -->\nold figures\n"
                  f"<!-- /bench:{key} -->\n\n## after\n")  # fmt: skip
    one = _run(
        "bench", "--rows", "20k", "--queries", "20", "--capture-only", "--repeat", "1",
        "--background", "--tiers", "--markdown", str(md),
    )  # fmt: skip
    assert "capture 1/1" in one and "capture 2/" not in one
    text = md.read_text()
    assert "old figures" not in text and "hand-written text" in text and "## after" in text
    assert text.count(f"<!-- bench:{key} -->") == 1
    assert "`tensprov-lab bench --rows 20k --queries 20 --capture-only --repeat 1" in text
    assert re.search(r"\d{4}-\d\d-\d\d · commit \S+ · \d+ cores, .* · pyspark \d", text)
    assert re.search(r"\| 20,000 \| [\d.]+ \| [\d.]+ \| \*\*[\d.]+\*\* \| 0 \|", text), text
    bg = re.search(
        r"background capture of 20,000 orders: the block held ([\d.]+) s \(held / baseline "
        r"([\d.]+)\); block \+ the sink's write right after ([\d.]+) s, added (-?[\d.]+) × "
        r"baseline \(foreground: ([\d.]+)\); the capture took ([\d.]+) s beside the write",
        one,
    )
    assert bg is not None, one
    held, acted, took = float(bg.group(1)), float(bg.group(3)), float(bg.group(6))
    assert 0 < held < acted and took > 0
    assert "background capture" not in out  # only with --background
    # --tiers: the same run's queries with its tensors in memory, on disk, in Spark
    tiers = re.findall(
        r"tensors of the 20,000-order run (as captured|on local disk|in Spark): "
        r"(?:moved there in ([\d.]+) s, )?([\d.]+) MB; backward p50 ([\d.]+) ms, forward "
        r"p50 ([\d.]+) ms \((\d+) queries each\)",
        one,
    )
    assert [t[0] for t in tiers] == ["as captured", "on local disk", "in Spark"], one
    assert all(float(t[2]) > 0 and float(t[3]) > 0 and float(t[4]) > 0 for t in tiers)
    assert tiers[0][1] == "" and float(tiers[2][1]) > 0
    assert [int(t[5]) for t in tiers] == [20, 20, 5]
    assert "tensors of the" not in out  # only with --tiers or --budget
    saved = re.search(r"save/load of the 20,000-order run: save ([\d.]+) s, load ([\d.]+) s "
                      r"\(checksums verified\), ([\d.]+) MB on disk", out)  # fmt: skip
    assert saved is not None and float(saved.group(3)) > 0
    assert "targets:" in out


def test_bench_options_that_do_not_go_together_say_so(capsys: pytest.CaptureFixture[str]) -> None:
    from tensprov_lab.bench.engine import main

    for argv, says in (
        (["--server-reads"], "--server-reads is about Spark Connect: give --connect too"),
        (["--connect", "--master", "local-cluster"], "two ways to reach Spark: give one"),
    ):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
        assert says in capsys.readouterr().err
