"""Window functions: ``F.lag(...).over(w)``, ``F.sum(...).over(w)``, ``row_number()``.

Record rule: every output record is its input record (identity tensor, the paper's
localized view); the operation is *contextual*: its value depends on other records of
the partition, so replays read its input whole.  Attribute rule: the function's
arguments contribute, the partition and order columns influence.

Examples
--------
>>> from tensprov_lab.capture.rules import rule_for
>>> rule_for("Window").contextual
True
"""

from __future__ import annotations

from typing import Any

from tensprov_lab.capture._exprs import Lin, exprs, ids
from tensprov_lab.capture.rules._base import Rule, Walking

__all__ = ["Window"]


class Window(Rule):
    nodes = ("Window",)
    keeps_records = True
    contextual = True

    def output_ids(self, d: dict[str, Any], kid_ids: list[list[int]]) -> list[int] | None:
        return kid_ids[0] + ids(d["windowExpressions"])

    def attributes(
        self,
        w: Walking,
        d: dict[str, Any],
        env: dict[int, Lin],
        envs: list[dict[int, Lin]],
        kid_ids: list[list[int]],
        out_ids: list[int],
    ) -> dict[int, Lin]:
        spec = Lin()
        for key in ("partitionSpec", "orderSpec"):
            for e in exprs(d[key]):
                got = w.lin(env, e.refs())
                spec = Lin(spec.contrib | got.contrib, spec.infl | got.infl)
        new = {}
        for e in exprs(d["windowExpressions"]):
            fn = Lin()
            for we in e.find("WindowExpression"):
                got = w.lin(env, we.kids[0].refs())
                fn = Lin(fn.contrib | got.contrib, fn.infl | got.infl)
            ident = e.named_id()
            if ident is not None:
                new[ident] = Lin(fn.contrib, fn.infl | spec.all())
        return new
