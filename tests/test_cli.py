"""The README's commands run end to end (each in its own process: its own Spark)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

pytestmark = pytest.mark.spark


def _run(*args: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "tensprov_lab.cli", *args],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_demo_finds_the_duplicated_customer() -> None:
    out = _run("demo")
    assert "tensprov-lab run retail" in out
    # the 'west' total comes from order 5 through the duplicated customer 13
    assert re.search(r"-- orders\n.*\n\s*4\s+5\s+13\s+310\.0", out), out
    assert "forward lineage of order 5 reaches out rows [" in out


def test_bench_smoke_prints_every_figure() -> None:
    out = _run("bench", "--rows", "20k", "--queries", "50")
    row = next(line for line in out.splitlines() if line.strip().startswith("20,000"))
    figures = row.split()
    assert len(figures) == 11
    baseline, capture, ratio = (float(x) for x in figures[1:4])
    assert baseline > 0 and capture > 0 and abs(ratio - capture / baseline) < 0.02 * ratio + 0.01
    assert "targets:" in out
