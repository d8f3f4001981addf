"""``filter`` / ``where`` (and ``dropna``, which Spark plans as a filter).

Record rule: the surviving records keep their keys (a mask of the input; a fused
capture evaluates the condition in its one scan, see :mod:`.._fused`).  Attribute rule:
the columns the condition reads influence every output column.  Replay: a filter
distributes over union (dropping a record never lets another one through).

Examples
--------
>>> from tensprov_lab.capture.rules import rule_for
>>> rule = rule_for("Filter")
>>> rule.same_output, rule.keeps_records
(True, False)
"""

from __future__ import annotations

from tensprov_lab.capture.plan._exprs import Lin
from tensprov_lab.capture.rules._base import PlanNode, Rule, Walking

__all__ = ["Filter"]


class Filter(Rule):
    nodes = ("Filter",)
    drops_vanish = True
    methods = ("filter", "where", "dropna")
    same_output = True

    def attributes(self, w: Walking, n: PlanNode) -> dict[int, Lin]:
        refs = n.d.get("condition_refs")
        if refs is not None:  # read without JSON (see _attributes: _narrow_filter)
            w.row |= w.lin(n.env, set(refs)).all()
        else:
            w.influence(n.env, n.d.get("condition"))
        return {}
