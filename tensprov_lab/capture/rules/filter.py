"""``filter`` / ``where`` (and ``dropna``, which Spark plans as a filter).

Record rule: the surviving records keep their keys (a mask of the input; a fused
capture evaluates the condition in its one scan, see :mod:`.._fused`).  Attribute rule:
the columns the condition reads influence every output column.  Replay: a filter
distributes over union (dropping a record never lets another one through).  Over
Spark Connect: the ``filter`` and ``drop_na`` relations pass the keys on; the columns
the condition (or ``dropna``'s subset) reads influence every output column.

Examples
--------
>>> from tensprov_lab.capture.rules import rule_for
>>> rule = rule_for("Filter")
>>> rule.same_output, rule.keeps_records
(True, False)
"""

from __future__ import annotations

from typing import Any

from tensprov_lab.capture.plan import _proto as P
from tensprov_lab.capture.plan._connect import Keyed
from tensprov_lab.capture.plan._exprs import Lin
from tensprov_lab.capture.rules._base import Keying, Mapping, Rule
from tensprov_lab.capture.rules._classic import PlanNode, Walking
from tensprov_lab.capture.rules.project import keyed_na

__all__ = ["Filter"]


class Filter(Rule):
    nodes = ("Filter",)
    drops_vanish = True
    methods = ("filter", "where", "dropna")
    same_output = True
    relations = ("filter", "drop_na")

    def attributes(self, w: Walking, n: PlanNode) -> dict[int, Lin]:
        refs = n.d.get("condition_refs")
        if refs is not None:  # read without JSON (see _attributes: _narrow_filter)
            w.row |= w.lin(n.env, set(refs)).all()
        else:
            w.influence(n.env, n.d.get("condition"))
        return {}

    def keyed(self, a: Keying, rel: Any) -> Keyed:
        if P.kind(rel) == "drop_na":
            return keyed_na(a, rel)
        return super().keyed(a, rel)

    def maps(self, m: Mapping, rel: Any) -> None:
        if len(m.in_cols) != 1:
            return m.everything()
        m.identity()
        if P.kind(rel) == "filter":
            m.influence(rel.filter.condition)
        else:
            cols = list(rel.drop_na.cols) or m.in_cols[0]
            m.influence(*[P.col(c) for c in cols])
