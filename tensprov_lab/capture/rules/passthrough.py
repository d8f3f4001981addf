"""Nodes that neither make, drop nor reorder records: repartitions, aliases, hints.

``df.repartition(8)``, ``df.alias("o")``, ``df.hint("broadcast")``, a view over a
DataFrame, ``df.observe(...)``, ``df.withWatermark(...)`` on a batch DataFrame (a no-op
there).  Record rule: the keys pass through, the tensor is the identity.  Attribute
rule: the columns are the child's.  Replay: nothing to say (distributive).  Over Spark
Connect: the ``subquery_alias``, ``hint``, ``repartition``, ``repartition_by_expression``
and ``with_watermark`` relations the same; ``observe`` is not traced there yet.

Examples
--------
>>> from tensprov_lab.capture.rules import rule_for
>>> rule_for("Repartition").trivial, rule_for("SubqueryAlias").same_output
(True, True)
"""

from __future__ import annotations

from typing import Any

from tensprov_lab.capture.rules._base import Mapping, Rule

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
        "EventTimeWatermark",
    )
    relations = (
        "subquery_alias", "hint", "repartition", "repartition_by_expression", "with_watermark",
    )  # fmt: skip
    connect_opaque = {
        "collect_metrics": "observe (a collect-metrics relation)",
    }
    methods = (
        "alias", "repartition", "repartitionByRange", "coalesce", "hint", "observe",
        "withWatermark",
    )  # fmt: skip
    keeps_records = True
    trivial = True
    drops_vanish = True
    same_output = True

    def maps(self, m: Mapping, rel: Any) -> None:
        if len(m.in_cols) != 1:
            return m.everything()
        m.identity()
