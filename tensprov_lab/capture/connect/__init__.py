"""Capture over Spark Connect: the client's plan, rewritten to carry record keys.

A Connect client has no py4j and no driver JVM: :class:`ConnectTracker` records the
block's DataFrame calls like the classic tracker, and traces each operation by running
a rewrite of its plan (:mod:`._rewrite`) that carries record keys as columns.

The top room of capture: it may import every other room (it reuses the classic
tracker's recording and the rules' descriptions), none of them imports it.
"""

from __future__ import annotations

from tensprov_lab.capture.connect._tracker import ConnectTracker, is_connect

__all__ = ["ConnectTracker", "is_connect"]
