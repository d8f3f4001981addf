"""The compiled expressions of a direct read (:mod:`._direct`): what a node is, and the
Spark type of the value it gives."""

from __future__ import annotations

from typing import Any

__all__ = ["Node", "columns_of", "node_type"]

#: an expression, compiled: ("col", name, type), ("lit", value, type), ("cmp", op, a, b),
#: ("and_kleene"|"or_kleene", a, b), ("not", a), ("isnull"|"isnotnull", a),
#: ("in", a, values, type), ("atleast", n, values), ("cast", a, type) (an exact widening),
#: ("round", a, type) (a decimal to a smaller scale, see _direct_arith.round_decimal),
#: ("year", a, "int"), ("substr", a, "string", start, stop), ("like", a, pattern),
#: ("arith", kernel, a, b, type) (see _direct_arith); evaluated by _direct.evaluate
Node = tuple[Any, ...]

#: the nodes whose type is their third item; ``arith`` gives its type last
_TYPED = ("col", "lit", "cast", "round", "year", "substr")


def node_type(node: Node) -> str:
    """The Spark type of a compiled value (a condition's: ``boolean``).

    >>> node_type(("arith", "add_checked", ("col", "k", "bigint"), ("lit", 1, "bigint"), "bigint"))
    'bigint'
    """
    if node[0] in _TYPED:
        return str(node[2])
    if node[0] == "arith":
        return str(node[4])
    return "boolean"


def columns_of(node: Node, used: dict[str, str]) -> None:
    """Note the file columns a compiled expression reads, with their Spark type."""
    kind = node[0]
    if kind == "col":
        used[node[1]] = node[2]
    elif kind == "cmp":
        columns_of(node[2], used)
        columns_of(node[3], used)
    elif kind in ("and_kleene", "or_kleene"):
        columns_of(node[1], used)
        columns_of(node[2], used)
    elif kind == "arith":
        columns_of(node[2], used)
        columns_of(node[3], used)
    elif kind in ("not", "isnull", "isnotnull", "in", "cast", "round", "year", "substr", "like"):
        columns_of(node[1], used)
    elif kind == "atleast":
        for kid in node[2]:
            columns_of(kid, used)
