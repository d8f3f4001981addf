"""The same tracked pipeline on a real Spark standalone cluster (a master and two workers on
loopback, executors in their own JVMs) gives the same tensors, recomputed records and
what-if previews as in local mode."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from tests._partition_probe import probe

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of a standalone master with two 1-core workers (executors in two JVMs of their
    own), stopped afterwards."""
    from tensprov_lab._spark import local_cluster

    with local_cluster(2, 1, "2g", logs=str(tmp_path_factory.mktemp("spark-logs"))) as url:
        yield url


def test_a_standalone_cluster_gives_the_local_results(standalone: str, tmp_path: Path) -> None:
    """Captured on the cluster, the run's tensors, recomputed records and what-if
    preview are the local run's; its tensors then moved into Spark tables, the
    cluster's executors read them (lineage queries and whole tensors) with the answers
    of the local run in memory (one cluster run checks both: the records and preview
    are read before the move, the lineage and tensors after it)."""
    local = probe(tmp_path, "local[2]", "3", "local")
    cluster = probe(tmp_path, standalone, "3", "cluster-spark", storage="spark")
    assert len(local) > 20 and "recomputed_twice" in local and "what_if_removed_rows" in local
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


def test_sources_read_from_files_on_the_cluster(standalone: str, tmp_path: Path) -> None:
    """Sources read from files (Parquet and CSV), captured in the background on the
    cluster (as the magic does in a notebook) and in the foreground locally: on the
    cluster, as locally, capture reads their columns straight from the files the driver
    listed (no Spark job), and the tensors, lineage, recomputed records and what-if
    preview are the local ones."""
    local = probe(tmp_path, "local[2]", "3", "local-files", storage="files")
    cluster = probe(tmp_path, standalone, "3", "cluster-files", storage="files", background=True)
    assert local.keys() == cluster.keys()
    for key in local:
        assert np.array_equal(local[key], cluster[key]), key
