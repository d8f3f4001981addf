"""Catalyst expressions read from JSON, and the input cells a value comes from.

:mod:`._attributes` reads each plan node as Catalyst's JSON; an :class:`Expr` is one
expression tree of it, and a :class:`Lin` the input cells (input occurrence, column) an
output column's values come from (*contributing*) or that decide where its record is
(*influencing*).  The attribute rules of :mod:`.rules` combine them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Cell", "Expr", "Lin", "added", "exprs", "ids", "tree"]

Cell = tuple[int, int]  # (input occurrence, input column)


@dataclass
class Lin:
    contrib: frozenset[Cell] = frozenset()
    infl: frozenset[Cell] = frozenset()

    def all(self) -> frozenset[Cell]:
        return self.contrib | self.infl


@dataclass
class Expr:
    cls: str
    fields: dict[str, Any]
    kids: list[Expr] = field(default_factory=list)

    def refs(self) -> set[int]:
        out: set[int] = set()
        stack = [self]
        while stack:
            e = stack.pop()
            if e.cls == "AttributeReference":
                out.add(int(e.fields["exprId"]["id"]))
            stack.extend(e.kids)
        return out

    def named_id(self) -> int | None:
        ident = self.fields.get("exprId")
        return int(ident["id"]) if isinstance(ident, dict) else None

    def find(self, cls: str) -> list[Expr]:
        found, stack = [], [self]
        while stack:
            e = stack.pop()
            if e.cls == cls:
                found.append(e)
            else:
                stack.extend(e.kids)
        return found


def added(expr_id: int, refs: list[int]) -> Expr:
    """A new column of a projection as far as lineage needs it: its id and what it reads."""
    kids = [Expr("AttributeReference", {"exprId": {"id": r}}) for r in refs]
    return Expr("Alias", {"exprId": {"id": expr_id}}, kids)


def tree(items: list[dict[str, Any]]) -> Expr:
    """A Catalyst expression from its pre-order JSON list."""
    pos = 0

    def build() -> Expr:
        nonlocal pos
        d = items[pos]
        pos += 1
        kids = [build() for _ in range(int(d.get("num-children", 0)))]
        return Expr(str(d["class"]).rsplit(".", 1)[-1], d, kids)

    return build()


def exprs(value: Any) -> list[Expr]:
    """Expressions held by one JSON field: one expression, a sequence of them, or none."""
    if not isinstance(value, list) or not value:
        return []
    if isinstance(value[0], dict) and "class" in value[0]:
        return [tree(value)]
    return [e for v in value for e in exprs(v)]


def ids(value: Any) -> list[int]:
    return [i for e in exprs(value) if (i := e.named_id()) is not None]
