"""``tensprov-lab bench --suite notebook``: cells timed in a real kernel print their figures."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark
pytest.importorskip("jupyter_client")
pytest.importorskip("ipykernel")


def test_notebook_bench_prints_its_figures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tensprov_lab.bench.engine import main

    monkeypatch.setenv("TENSPROV_DRIVER_MEMORY", "1g")  # beside the tests' own JVM
    args = ["--suite", "notebook", "--rows", "5K", "--repeat", "1", "--cores", "1"]
    md = tmp_path / "benchmarks.md"
    md.write_text("# Benchmarks\n\nkept\n")
    assert main([*args, "--data", str(tmp_path), "--markdown", str(md)]) == 0
    out = capsys.readouterr().out
    first = re.search(r"first +capture (\d+\.\d\d) s; tracked cell (\d+\.\d\d) s", out)
    assert first and float(first.group(1)) > 0, out
    cell = re.search(
        r"untracked (\d+\.\d\d) s; %%provtrack (\d+\.\d\d) s \(x(\d+\.\d\d)\); "
        r"a query right after (\d+\.\d\d) s",
        out,
    )
    assert cell and all(float(v) > 0 for v in cell.groups()), out
    assert "5,000 orders" in out
    # --markdown: the figures in a section of their own, appended after what was there
    text = md.read_text()
    assert text.startswith("# Benchmarks\n\nkept\n")
    assert re.search(r"<!-- bench:notebook-5K-pyspark\d\.\d+ -->", text)
    assert "`tensprov-lab bench --suite notebook --rows 5K --repeat 1 --cores 1" in text
    assert re.search(r"\| first \| [\d.]+ \| [\d.]+ \| [\d.]+ \|", text), text
    assert re.search(r"\| 5,000 \| [\d.]+ \| [\d.]+ \| \*\*[\d.]+\*\* \|", text), text
    assert re.search(r"· Java \d+[\d.]* ·", text), text
