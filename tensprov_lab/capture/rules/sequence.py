"""AttachDistributedSequence: each record numbered by its position (``zipWithIndex``).

The default index of the pandas API on Spark (``df.pandas_api()``, ``ps.from_pandas``,
``reset_index``: "distributed-sequence") and ``DataFrame.zipWithIndex`` put a column of
consecutive numbers in front of the child's records, in the child's order.
Record rule: the keys pass through and the tensor is the identity (every record is
kept, in its place); over a child whose order is not stable (after a shuffle) the
numbers may differ between executions, and the operation says so.  Attribute rule: the
number is made from no column (what decides it is the records before it, not a
value).  Replay: a record's number counts the records before it, so it is
*contextual*, and dropping a record renumbers every later one: a what-if replays such
an operation whole.  Spark Connect has no such relation (its pandas API numbers
records through a window).

Examples
--------
>>> from tensprov_lab.capture.rules import rule_for
>>> rule = rule_for("AttachDistributedSequence")
>>> rule.keeps_records, rule.contextual, rule.same_output
(True, True, False)
"""

from __future__ import annotations

from typing import Any

from tensprov_lab.capture.plan._exprs import Lin, ids
from tensprov_lab.capture.plan._stable import plan_is_stable
from tensprov_lab.capture.rules._base import Rule
from tensprov_lab.capture.rules._classic import PlanNode, Rewriting, Walked, Walking
from tensprov_lab.capture.spark._jvm import Jvm

__all__ = ["Sequence"]


class Sequence(Rule):
    nodes = ("AttachDistributedSequence",)
    keeps_records = True
    contextual = True

    def annotate(self, rw: Rewriting, node: Any, kids: list[Any], results: list[Walked]) -> Walked:
        if not plan_is_stable(rw.jvm, kids[0]):
            rw.info.renumbers = True
        return super().annotate(rw, node, kids, results)

    def attributes(self, w: Walking, n: PlanNode) -> dict[int, Lin]:
        return {i: Lin() for i in ids(n.d.get("sequenceAttr"))}

    def replay_blocker(self, jvm: Jvm, node: Any) -> str | None:
        return (
            "it numbers records by position (a pandas-on-Spark default index or "
            "zipWithIndex): dropping one renumbers every later record"
        )
