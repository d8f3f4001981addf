"""A missing or old Java is reported with a fix, not a py4j stack trace (no JVM needed)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tensprov_lab import cli
from tensprov_lab._spark import JavaMissing, check_java


def _fake_java(folder: Path, version_line: str) -> Path:
    java = folder / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text(f"#!/bin/sh\necho '{version_line}' 1>&2\n")
    java.chmod(java.stat().st_mode | stat.S_IEXEC)
    return folder


def test_no_java_says_how_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(JavaMissing, match="openjdk-17"):
        check_java()


def test_old_java_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    home = _fake_java(tmp_path, 'openjdk version "1.8.0_392"')
    monkeypatch.setenv("JAVA_HOME", str(home))
    with pytest.raises(JavaMissing, match="found Java 8"):
        check_java()


def test_java_17_is_accepted(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    home = _fake_java(tmp_path, 'openjdk version "17.0.15" 2025-04-15')
    monkeypatch.setenv("JAVA_HOME", str(home))
    assert "17.0.15" in check_java()


def test_cli_reports_missing_java(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path) + os.pathsep + "/nonexistent")
    assert cli.main(["demo"]) == 2
    err = capsys.readouterr().err
    assert "Java 17" in err and "Traceback" not in err
