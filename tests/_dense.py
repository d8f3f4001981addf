"""Which joins a capture matched by ``dense_pairs`` (shared by the fused-capture tests,
classic and Connect)."""

from __future__ import annotations

from typing import Any

import pytest

from tensprov_lab.capture.plan._equijoin import dense_pairs


def watch_dense_pairs(monkeypatch: pytest.MonkeyPatch, module: Any) -> list[bool]:
    """Wrap ``module.dense_pairs``; the list returned gets, for each call, whether it
    matched the join (False: it declined and the general path took it)."""
    used: list[bool] = []

    def watched(*args: Any) -> Any:
        got = dense_pairs(*args)
        used.append(got is not None)
        return got

    monkeypatch.setattr(module, "dense_pairs", watched)
    return used
