"""A local SparkSession for demos, benchmarks and tests, with a clear Java check."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from typing import Any

__all__ = ["JavaMissing", "check_java", "local_spark"]


class JavaMissing(RuntimeError):
    """Spark needs Java 17 or newer."""


_FIX = (
    "Spark needs Java 17 or newer. Install it, e.g. `sudo apt-get install -y "
    "openjdk-17-jre-headless` (Debian/Ubuntu) or `brew install openjdk@17` (macOS), "
    "or set JAVA_HOME to a JDK 17+."
)


def check_java() -> str:
    """Return the Java version string, or raise :class:`JavaMissing` saying how to fix it."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not java or not os.path.exists(java):
        raise JavaMissing(f"no `java` found on PATH{' or in JAVA_HOME' if home else ''}. {_FIX}")
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except OSError as exc:
        raise JavaMissing(f"`{java} -version` failed ({exc}). {_FIX}") from None
    text = out.stderr + out.stdout
    m = re.search(r'version "(\d+)(?:\.(\d+))?', text)
    if not m:
        raise JavaMissing(f"cannot read the Java version from {text.strip()!r}. {_FIX}")
    major = int(m.group(1))
    if major == 1 and m.group(2):
        major = int(m.group(2))
    if major < 17:
        raise JavaMissing(f"found Java {major} at {java}. {_FIX}")
    return text.strip().splitlines()[0]


def local_spark(cores: int | str = "*", app: str = "tensprov-lab", **conf: Any) -> Any:
    """An embedded local SparkSession with quiet logs and small shuffles: Spark logs
    only warnings and errors (``tensprov_lab/_log4j2.properties``), and binds to
    loopback unless ``SPARK_LOCAL_IP`` says otherwise."""
    check_java()
    from importlib import resources

    from pyspark.sql import SparkSession

    # a laptop's hostname often resolves to loopback: Spark warns and binds there anyway
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    log4j = resources.files("tensprov_lab").joinpath("_log4j2.properties")
    java_opts = f"-Dlog4j2.configurationFile={log4j}"
    if "spark.driver.extraJavaOptions" in conf:
        java_opts = f"{conf.pop('spark.driver.extraJavaOptions')} {java_opts}"
    builder = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", os.environ.get("TENSPROV_DRIVER_MEMORY", "4g"))
        .config("spark.driver.extraJavaOptions", java_opts)
    )
    for k, v in conf.items():
        builder = builder.config(k, str(v))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
