"""Shared by the replay tests: one replay run in the driver and as a Spark job."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

Replayed = tuple[pd.DataFrame, np.ndarray]


def driver_and_job(run: Any, df: Any, rows: np.ndarray) -> tuple[Replayed, Replayed] | None:
    """Records of ``rows`` of ``df`` replayed in the driver and as a Spark job, each with
    its canonical rows and sorted by them; None when the driver path does not apply."""
    from tensprov_lab.replay import _replay

    got = _replay._local(run._tracker, run.dataset(df).id, rows)
    if got is None:
        return None
    return by_row(got), by_row(job_replay(run, df, rows))


def job_replay(run: Any, df: Any, rows: np.ndarray) -> Replayed:
    """Records of ``rows`` of ``df`` replayed as a Spark job, and their canonical rows."""
    from tensprov_lab.replay import _replay

    tracker, ds = run._tracker, run.dataset(df).id
    return _replay._read(tracker, ds, *_replay._restricted(tracker, ds, rows))


def by_row(replayed: Replayed) -> Replayed:
    """Replayed records sorted by their canonical rows."""
    frame, idx = replayed
    order = np.argsort(idx, kind="stable")
    return frame.iloc[order].reset_index(drop=True), idx[order]
