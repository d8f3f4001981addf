"""Recomputation and what-if: queries over captured runs that replay operations in Spark.

They sit above capture (they read what it kept: annotated plans, key indexes, cached
inputs) and below the runs (:mod:`tensprov_lab._run` asks them), and capture never
imports them (docs/architecture.md).  A classic session replays JVM plans
(:mod:`._replay`), a Spark Connect session Connect plans (:mod:`._connect`), or a few
records on the client (:mod:`._client`); where a
replay starts (:mod:`._frontier`) and what-if (:mod:`._what_if`) are shared.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from tensprov_lab.replay._frontier import NotPreviewable, frontier
from tensprov_lab.replay._what_if import Engine, WhatIf
from tensprov_lab.replay._what_if import what_if as _what_if

__all__ = [
    "NotPreviewable", "WhatIf", "engine", "frontier", "read_records", "replay_records",
    "what_if",
]  # fmt: skip


def engine(tracker: Any) -> Engine:
    """The replay engine of ``tracker``'s session: JVM plans on a classic session,
    Connect plans over Spark Connect (whose tracker has no JVM)."""
    if getattr(tracker, "jvm", None) is None:
        if getattr(tracker, "client_replays", False):
            from tensprov_lab.replay._client import ClientReplay

            return ClientReplay(tracker)
        from tensprov_lab.replay._connect import ConnectReplay

        return ConnectReplay(tracker)
    from tensprov_lab.replay._replay import Classic

    return Classic(tracker)


@contextlib.contextmanager
def _jobs(tracker: Any) -> Iterator[None]:
    """The replay's Spark jobs in the capture's job group (a classic session's): on
    Ctrl-C they are cancelled and, on pyspark 3.5, the Python workers a killed task
    leaves closed are dropped, so the user's next Python job runs (SPARK-54217)."""
    group = getattr(tracker, "_job_group", None)
    if group is None:
        yield
        return
    with group.running():
        yield


def replay_records(tracker: Any, ds_id: int, rows: np.ndarray) -> Any:
    """Recompute ``rows`` of ``ds_id`` from their provenance-related records only."""
    with _jobs(tracker):
        return engine(tracker).records(ds_id, rows)


def what_if(
    tracker: Any,
    drop: dict[int, np.ndarray],
    edit: dict[int, dict[int, dict[str, Any]]],
    to: list[int] | None = None,
) -> WhatIf:
    """Preview dropping and editing records of source datasets (:mod:`._what_if`)."""
    with _jobs(tracker):
        return _what_if(tracker, engine(tracker), drop, edit, to)


def read_records(tracker: Any, ds_id: int, rows: np.ndarray | None, where: str | None) -> Any:
    """Records of a dataset as a pandas DataFrame with its ``_row`` column: some records
    of a derived dataset not kept whole are recomputed by replaying their lineage
    (``attrs["recomputed"]``), anything else is read by capture
    (``tracker.records``)."""
    replayable = getattr(tracker, "replayable", None)
    if rows is not None and where is None and replayable is not None and replayable(ds_id):
        # no DataFrame of the whole dataset: its analysis alone costs a few ms
        return replay_records(tracker, ds_id, rows)
    with _jobs(tracker):
        return tracker.records(ds_id, rows, where)
