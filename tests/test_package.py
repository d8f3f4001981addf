"""Package basics: a cheap import and a documented public API (no JVM needed)."""

from __future__ import annotations

import subprocess
import sys

import tensprov_lab


def test_import_is_cheap() -> None:
    code = (
        "import sys, tensprov_lab; "
        "heavy = ('pyspark', 'IPython', 'pandas', 'anywidget'); "
        "print(sorted(m for m in heavy if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_public_names_exist_and_are_documented() -> None:
    for name in tensprov_lab.__all__:
        obj = getattr(tensprov_lab, name)
        assert obj.__doc__, name


def test_last_run_before_tracking_says_what_to_do() -> None:
    # a fresh process: nothing tracked yet
    code = (
        "import tensprov_lab\n"
        "try:\n    tensprov_lab.last_run()\n"
        "except LookupError as exc:\n    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "nothing has been tracked yet" in out.stdout and "track" in out.stdout


def test_layers_hold() -> None:
    """The import-linter contracts of pyproject.toml: runs above capture above query
    above store, no Spark or IPython in store/query, no notebook or bench in the engine."""
    from pathlib import Path

    lint = Path(sys.executable).with_name("lint-imports")
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run([str(lint)], cwd=root, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 kept, 0 broken" in done.stdout


def test_what_cannot_be_tracked_says_so() -> None:
    import pytest

    before = len(tensprov_lab.runs())
    with pytest.raises(TypeError, match="track\\(\\) needs a pyspark SparkSession, got"):
        tensprov_lab.track("spark").__enter__()
    assert len(tensprov_lab.runs()) == before  # nothing half-begun
