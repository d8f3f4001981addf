"""``limit``, ``offset`` and ``sample``: a subset of the input's records, in order.

Record rule: the records kept carry their keys (a mask).  A limit right after a sort of
already sorted records cannot say which tied records it kept (the tracker checks it).
Attribute rule: no column decides which records a limit keeps beyond their order.
Replay: a limit or offset does not distribute over union (dropping a record lets another
one in), so a what-if cannot be previewed through it.  Over Spark Connect: a ``limit``
of a global sort's output, or of records Spark reads in the same partitions and order
every time, and a seeded ``sample`` without replacement of such records, pass the keys
on (the rewrite keeps the same records); the columns are the input's.  ``offset`` and
``tail`` are not traced there yet.

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

from tensprov_lab.capture.plan._connect import Keyed, Unsupported, sorted_input, stable
from tensprov_lab.capture.rules._base import Keying, Mapping, Rule
from tensprov_lab.capture.spark._jvm import Jvm

__all__ = ["Limit", "Sample"]


class _SameColumns(Rule):
    def maps(self, m: Mapping, rel: Any) -> None:
        if len(m.in_cols) != 1:
            return m.everything()
        m.identity()


class Limit(_SameColumns):
    nodes = ("GlobalLimit", "LocalLimit", "Offset")
    relations = ("limit",)
    connect_opaque = {"offset": "an offset", "tail": "a tail"}
    methods = ("limit", "offset")
    same_output = True

    def replay_blocker(self, jvm: Jvm, node: Any) -> str | None:
        return "a limit lets other records in (not distributive)"

    def keyed(self, a: Keying, rel: Any) -> Keyed:
        """A limit of a global sort's output keeps its first records in the sort's
        order (ties in input order: the tracker checks that no tie straddles the limit,
        see ``ConnectTracker._check_limit``).  A limit of records in no fixed order
        keeps whichever Spark reads first: the rewrite (the same plan with keys beside)
        reads the same ones when Spark reads its input in the same partitions and order
        every time (the tracker flags it as not deterministic, as the classic capture
        does); over a shuffle it may read others."""
        if not sorted_input(rel) and not stable(rel.limit.input):
            raise Unsupported(
                "a limit of records in no fixed order after a shuffle: which records "
                "Spark keeps can change from one execution to the next (sort first)"
            )
        new, (kid,) = a.kids(rel)
        return kid.passed(new)


class Sample(_SameColumns):
    nodes = ("Sample",)
    relations = ("sample",)
    methods = ("sample",)
    same_output = True

    def keyed(self, a: Keying, rel: Any) -> Keyed:
        """A sample without replacement, seeded, over records Spark reads in the same
        partitions and order every time: the rewrite (the same plan with keys beside)
        draws the same records, since Spark draws per partition by position."""
        smp = rel.sample
        if smp.with_replacement:
            raise Unsupported("a sample with replacement (records drawn twice)")
        if not smp.HasField("seed"):
            raise Unsupported("a sample without a seed")
        # (a source that had to be pinned is unstable in the user's own plan, checked
        # here: its pinned copy is read in partitions of its own)
        if not stable(smp.input):
            raise Unsupported(
                "a sample of records Spark may read in another order or partitioning "
                "(after a shuffle): the records it draws could be others"
            )
        new, (kid,) = a.kids(rel)
        return Keyed(new, list(kid.keys), dict(kid.ids), kid.monotone)
