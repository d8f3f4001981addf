"""Nodes that neither make, drop nor reorder records: repartitions, aliases, hints.

``df.repartition(8)``, ``df.alias("o")``, ``df.hint("broadcast")``, a view over a
DataFrame, ``df.observe(...)``: the keys pass through, the tensor is the identity, the
columns are the child's.

Examples
--------
>>> from tensprov_lab.capture.rules import rule_for
>>> rule_for("Repartition").trivial, rule_for("SubqueryAlias").same_output
(True, True)
"""

from __future__ import annotations

from tensprov_lab.capture.rules._base import Rule

__all__ = ["PassThrough"]


class PassThrough(Rule):
    nodes = (
        "Repartition",
        "RepartitionByExpression",
        "RebalancePartitions",
        "ResolvedHint",
        "SubqueryAlias",
        "View",
        "CollectMetrics",
    )
    keeps_records = True
    trivial = True
    same_output = True
