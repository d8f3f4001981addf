"""A Spark Connect session to a server of its own on loopback, for the modules that run
tests over Connect (their module-scoped fixture: one server per module)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

import tensprov_lab


@contextlib.contextmanager
def connect_session(**settings: Any) -> Iterator[Any]:
    """Start pyspark's own Connect server on loopback (``settings``: more of its Spark
    settings), yield a session to it, and stop both, every run forgotten. pyspark
    builds Connect columns (``F.col``) once a Connect session was made in the process
    (``SPARK_CONNECT_MODE_ENABLED``): it is unset again so that the classic session of
    the other tests builds classic columns."""
    from pyspark.sql import SparkSession

    from tensprov_lab._spark import local_connect_server

    had = os.environ.get("SPARK_CONNECT_MODE_ENABLED")
    conf = {"spark.sql.shuffle.partitions": 2, "spark.driver.memory": "1g", **settings}
    with local_connect_server(2, **conf) as url:
        session = SparkSession.builder.remote(url).create()
        try:
            yield session
        finally:
            tensprov_lab.forget()
            session.stop()
            if had is None:
                os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)


@contextlib.contextmanager
def classic_code() -> Iterator[None]:
    """pyspark builds Connect columns (``F.col``) while a Connect session was made in
    the process (``SPARK_CONNECT_MODE_ENABLED``): classic code runs without it."""
    had = os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)
    try:
        yield
    finally:
        if had is not None:
            os.environ["SPARK_CONNECT_MODE_ENABLED"] = had
