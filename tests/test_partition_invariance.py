"""The same pipeline on the same data gives identical tensors whatever the partitioning."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.spark

CONFIGS = [("local[1]", "1"), ("local[2]", "7"), ("local[2]", "1")]


def _probe(tmp_path: Path, master: str, shuffle: str) -> dict[str, np.ndarray]:
    cores = master.removeprefix("local[").removesuffix("]")
    out = tmp_path / f"{cores}_{shuffle}.npz"
    root = Path(__file__).resolve().parent.parent
    proc = subprocess.run(
        [sys.executable, "-m", "tests._partition_probe", master, shuffle, str(out)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    with np.load(out) as z:
        return {k: z[k] for k in z.files}


def test_tensors_identical_across_partitioning(tmp_path: Path) -> None:
    results = [_probe(tmp_path, m, s) for m, s in CONFIGS]
    base = results[0]
    assert len(base) > 20  # every operation of the probe produced tensors
    for other in results[1:]:
        assert base.keys() == other.keys()
        for key in base:
            assert np.array_equal(base[key], other[key]), key
