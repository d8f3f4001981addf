"""The same pipeline on the same data gives identical tensors whatever the partitioning."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests._partition_probe import probe

pytestmark = pytest.mark.spark

CONFIGS = [("local[1]", "1"), ("local[2]", "7"), ("local[2]", "1")]


def test_tensors_identical_across_partitioning(tmp_path: Path) -> None:
    results = [probe(tmp_path, m, s, f"{m}_{s}") for m, s in CONFIGS]
    base = results[0]
    assert len(base) > 20  # every operation of the probe produced tensors
    for other in results[1:]:
        assert base.keys() == other.keys()
        for key in base:
            assert np.array_equal(base[key], other[key]), key
