"""``limit``, ``offset`` and ``sample``: a subset of the input's records, in order.

Record rule: the records kept carry their keys (a mask).  A limit right after a sort of
already sorted records cannot say which tied records it kept (the tracker checks it).
Attribute rule: no column decides which records a limit keeps beyond their order.
Replay: a limit or offset does not distribute over union (dropping a record lets another
one in), so a what-if cannot be previewed through it.

Examples
--------
>>> from tensprov_lab.capture.rules import rule_for
>>> rule_for("GlobalLimit").replay_blocker(None, None)
'a limit lets other records in (not distributive)'
>>> rule_for("Sample").replay_blocker(None, None) is None
True
"""

from __future__ import annotations

from typing import Any

from tensprov_lab.capture.rules._base import Rule
from tensprov_lab.capture.spark._jvm import Jvm

__all__ = ["Limit", "Sample"]


class Limit(Rule):
    nodes = ("GlobalLimit", "LocalLimit", "Offset")
    methods = ("limit", "offset")
    same_output = True

    def replay_blocker(self, jvm: Jvm, node: Any) -> str | None:
        return "a limit lets other records in (not distributive)"


class Sample(Rule):
    nodes = ("Sample",)
    methods = ("sample",)
    same_output = True
