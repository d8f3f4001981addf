"""The same tracked pipeline on a real Spark standalone cluster (a master and two workers on
loopback, executors in their own JVMs) gives the same tensors, recomputed records and
what-if previews as in local mode."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tests._partition_probe import probe

pytestmark = pytest.mark.spark


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _alive_workers(master_log: Path) -> int:
    """Workers the master counts, asked at the web UI port its log names: the port we
    chose may have been taken meanwhile (another Spark on this machine), and Spark then
    binds the next one."""
    found = re.search(r"MasterWebUI.* started at https?://[^:\s]+:(\d+)", master_log.read_text())
    if found is None:
        return 0
    try:
        url = f"http://127.0.0.1:{found.group(1)}/json/"
        with urllib.request.urlopen(url, timeout=2) as r:
            return int(json.load(r).get("aliveworkers", 0))
    except (OSError, ValueError):
        return 0


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of a standalone master with two 1-core workers (executors in two JVMs of their
    own), stopped afterwards."""
    import pyspark

    home = Path(pyspark.__file__).resolve().parent
    env = dict(os.environ, SPARK_HOME=str(home), PYSPARK_PYTHON=sys.executable)
    logs = tmp_path_factory.mktemp("spark-logs")
    port, ui = _free_port(), _free_port()
    url = f"spark://127.0.0.1:{port}"
    cls = str(home / "bin" / "spark-class")
    master_args = ["--host", "127.0.0.1", "--port", str(port), "--webui-port", str(ui)]
    worker_args = ["--host", "127.0.0.1", "--cores", "1", "--memory", "2g", "--webui-port", "0"]
    workers = ("worker1", "worker2")
    procs = []
    try:
        for name, args in [
            ("master", [cls, "org.apache.spark.deploy.master.Master", *master_args]),
            *(
                (w, [cls, "org.apache.spark.deploy.worker.Worker", *worker_args, url])
                for w in workers
            ),
        ]:
            log = open(logs / f"{name}.log", "w")  # noqa: SIM115 (closed with the process)
            own = dict(env, SPARK_WORKER_DIR=str(tmp_path_factory.mktemp(f"spark-{name}")))
            procs.append((subprocess.Popen(args, env=own, stdout=log, stderr=log), log))
        deadline = time.monotonic() + 120
        while _alive_workers(logs / "master.log") < len(workers):
            dead = [p for p, _ in procs if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                text = "".join((logs / f"{n}.log").read_text() for n in ("master", *workers))
                raise RuntimeError(f"standalone cluster did not start:\n{text[-3000:]}")
            time.sleep(0.5)
        yield url
    finally:
        for p, log in procs[::-1]:
            p.terminate()
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
            log.close()


def test_a_standalone_cluster_gives_the_local_results(standalone: str, tmp_path: Path) -> None:
    local = probe(tmp_path, "local[2]", "3", "local")
    cluster = probe(tmp_path, standalone, "3", "cluster")
    assert len(local) > 20 and "recomputed_twice" in local and "what_if_removed_rows" in local
    assert local.keys() == cluster.keys()
    for key in local:
        assert np.array_equal(local[key], cluster[key]), key


def test_spark_resident_tensors_answer_on_the_cluster(standalone: str, tmp_path: Path) -> None:
    """The run's tensors moved into Spark tables: the cluster's executors read them
    (lineage queries and whole tensors), with the answers of the local run in memory."""
    local = probe(tmp_path, "local[2]", "3", "local")
    cluster = probe(tmp_path, standalone, "3", "cluster-spark", storage="spark")
    assert any(k.startswith("backward_") for k in local)
    assert local.keys() == cluster.keys()
    for key in local:
        assert np.array_equal(local[key], cluster[key]), key


def test_an_executor_killed_mid_capture_changes_no_lineage(standalone: str, tmp_path: Path) -> None:
    """A fault a cluster user meets: one executor dies (SIGKILL) while the tracked
    block's capture runs, after earlier operations' jobs cached their results there.
    Spark reruns the lost tasks on the other executor and the new one its worker
    starts; the tensors, lineage answers, recomputed records and what-if preview are
    those of an undisturbed local capture."""
    local = probe(tmp_path, "local[2]", "3", "local")
    cluster = probe(tmp_path, standalone, "3", "cluster-killed", kill_at=6)
    assert local.keys() == cluster.keys()
    for key in local:
        assert np.array_equal(local[key], cluster[key]), key
