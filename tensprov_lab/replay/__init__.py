"""Recomputation and what-if: queries over captured runs that replay operations in Spark.

They sit above capture (they read what it kept: annotated plans, key indexes, cached
inputs) and below the runs (:mod:`tensprov_lab._run` asks them), and capture never
imports them (docs/architecture.md).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tensprov_lab.replay._replay import (
    NotPreviewable,
    WhatIf,
    frontier,
    replay_records,
    what_if,
)

__all__ = ["NotPreviewable", "WhatIf", "frontier", "read_records", "replay_records", "what_if"]


def read_records(tracker: Any, ds_id: int, rows: np.ndarray | None, where: str | None) -> Any:
    """Records of a dataset as a pandas DataFrame with its ``_row`` column: some records
    of a derived dataset not kept whole are recomputed by replaying their lineage
    (``attrs["recomputed"]``), anything else is read by capture
    (``tracker.records``)."""
    replayable = getattr(tracker, "replayable", None)
    if rows is not None and where is None and replayable is not None and replayable(ds_id):
        # no DataFrame of the whole dataset: its analysis alone costs a few ms
        return replay_records(tracker, ds_id, rows)
    return tracker.records(ds_id, rows, where)
