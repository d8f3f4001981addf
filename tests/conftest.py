"""Shared fixtures: one local SparkSession for the whole test session."""

from __future__ import annotations

import os
import sys

import pytest

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def _spark(cores: int, shuffle: int) -> object:
    from tensprov_lab._spark import local_spark

    return local_spark(
        cores,
        app="tensprov-lab-tests",
        **{
            "spark.sql.shuffle.partitions": shuffle,
            "spark.default.parallelism": cores,
            "spark.driver.memory": "3g",
        },
    )


@pytest.fixture(scope="session")
def spark():
    session = _spark(2, 2)
    yield session
    session.stop()
