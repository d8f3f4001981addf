"""Provenance queries over the in-memory store (pure numpy/scipy)."""

from tensprov_lab.query._cells import CellResult, cell_lineage
from tensprov_lab.query._colineage import (
    co_contributors,
    co_dependents,
    meeting_points,
    transformations,
)
from tensprov_lab.query._columns import column_lineage
from tensprov_lab.query._how import Path, how
from tensprov_lab.query._lineage import LineageResult, backward, forward, mapping
from tensprov_lab.query._whynot import Drop, WhyNot, why_not

__all__ = [
    "Drop",
    "WhyNot",
    "why_not",
    "CellResult",
    "LineageResult",
    "Path",
    "backward",
    "cell_lineage",
    "co_contributors",
    "column_lineage",
    "co_dependents",
    "forward",
    "how",
    "mapping",
    "meeting_points",
    "transformations",
]
