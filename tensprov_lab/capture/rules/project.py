"""``select``, ``withColumn``, ``drop``, renames, casts, UDFs: projections.

Record rule: every output record is its input record (identity); the keys are added to
the projection's list.  Attribute rule: each new column's values come from the columns
its expression references (read from the analyzed plan's expression ids; wide
projections are read narrowly by :class:`.._attributes._Walker`).

Examples
--------
>>> from tensprov_lab.capture.rules import rule_for
>>> rule_for("Project").keeps_records
True
"""

from __future__ import annotations

from typing import Any

from tensprov_lab.capture.plan._exprs import Lin, exprs, ids
from tensprov_lab.capture.rules._base import (
    PlanNode,
    Rewriting,
    Rule,
    Walked,
    Walking,
    attrs,
    single,
)

__all__ = ["Project"]


class Project(Rule):
    nodes = ("Project",)
    drops_vanish = True
    methods = (
        "select", "selectExpr", "withColumn", "withColumns", "withColumnRenamed",
        "withColumnsRenamed", "drop", "toDF", "fillna", "replace", "withMetadata", "to",
    )  # fmt: skip
    keeps_records = True

    def annotate(self, rw: Rewriting, node: Any, kids: list[Any], results: list[Walked]) -> Walked:
        child, blocks = single(results)
        return rw.jvm.reproject(node, attrs(blocks), child), blocks

    def output_ids(self, d: dict[str, Any], kid_ids: list[list[int]]) -> list[int] | None:
        return ids(d["projectList"])

    def attributes(self, w: Walking, n: PlanNode) -> dict[int, Lin]:
        return w.named(n.env, n.d["parsed"] if "parsed" in n.d else exprs(n.d["projectList"]))
