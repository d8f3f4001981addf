"""Package basics: a cheap import and a documented public API (no JVM needed)."""

from __future__ import annotations

import subprocess
import sys

import tensprov_lab


def _in_a_fresh_process(code: str) -> str:
    """What ``code`` prints when run by a new Python process."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return done.stdout


def test_import_is_cheap() -> None:
    code = (
        "import sys, tensprov_lab; "
        "heavy = ('pyspark', 'IPython', 'pandas', 'anywidget'); "
        "print(sorted(m for m in heavy if m in sys.modules))"
    )
    assert _in_a_fresh_process(code).strip() == "[]"


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
    out = _in_a_fresh_process(code)
    assert "nothing has been tracked yet" in out and "track" in out


def test_layers_hold() -> None:
    """The import-linter contracts of pyproject.toml: runs above capture above query
    above store, capture's rooms one way, no Spark or IPython in store/query, no notebook
    or bench in the engine."""
    from pathlib import Path

    lint = Path(sys.executable).with_name("lint-imports")
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run([str(lint)], cwd=root, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 kept, 0 broken" in done.stdout
    assert "capture's rooms, one way" in done.stdout


def test_capture_is_in_rooms() -> None:
    """capture/ holds rooms, not modules: each a package whose docstring says what it is
    for and what it may import, none with more than 15 modules."""
    from pathlib import Path

    capture = Path(tensprov_lab.__file__).parent / "capture"
    loose = [p.name for p in capture.glob("*.py") if p.name != "__init__.py"]
    assert loose == []
    rooms = [d for d in capture.iterdir() if (d / "__init__.py").exists()]
    assert len(rooms) >= 8
    for room in rooms:
        doc = (room / "__init__.py").read_text(encoding="utf-8")
        assert doc.startswith('"""') and "import" in doc.split('"""')[1].lower(), room.name
        modules = list(room.glob("*.py"))
        assert len(modules) - 1 <= 15, (room.name, len(modules))


def test_what_cannot_be_tracked_says_so() -> None:
    import pytest

    before = len(tensprov_lab.runs())
    with pytest.raises(TypeError, match="track\\(\\) needs a pyspark SparkSession, got"):
        tensprov_lab.track("spark").__enter__()
    assert len(tensprov_lab.runs()) == before  # nothing half-begun
