"""Spark's ``+``, ``-`` and ``*`` of integers and decimals for :mod:`._direct`, exactly.

TPC-H sorts and filters by sums of ``l_extendedprice * (1 - l_discount)`` (Q3, Q5,
Q10): decimals, whose every value Spark computes exactly in the result type the
analyzer gave the expression.  Arrow's checked kernels compute the same exact value
(the precision and scale of a decimal sum or product are Spark's rules before any
adjustment); the value is then cast, safely, to Spark's result type.  Where Spark
would round (a result past 38 digits whose scale it cuts), overflow (an integer past
its type; a decimal past its precision: null, or an error under ANSI) or otherwise
differ, Arrow raises and the value is :class:`Unreadable` here, so Spark computes it.
Floating-point arithmetic is left to Spark (its NaN orders above every number).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from tensprov_lab.capture.sources._direct_files import Unreadable
from tensprov_lab.capture.sources._direct_nodes import Node

__all__ = ["arith_node", "evaluate_arith"]


_KERNELS = {"Add": "add_checked", "Subtract": "subtract_checked", "Multiply": "multiply_checked"}
_INTEGERS = ("tinyint", "smallint", "int", "bigint")


def arith_node(cls: str, left: Node, right: Node, types: tuple[str, str, str]) -> Node:
    """The compiled ``left <cls> right`` of Spark result type ``types[2]`` (``types``:
    the operands' types, then the result's); :class:`Unreadable` for another operator
    or type.

    >>> a, b = ("col", "p", "decimal(15,2)"), ("lit", 1, "decimal(1,0)")
    >>> arith_node("Subtract", b, a, ("decimal(1,0)", "decimal(15,2)", "decimal(16,2)"))[:2]
    ('arith', 'subtract_checked')
    """
    kernel = _KERNELS.get(cls)
    if kernel is None:
        raise Unreadable(f"{cls} is evaluated by Spark")
    lt, rt, out = types
    decimals = all(t.startswith("decimal(") for t in types)
    integers = lt == rt == out and out in _INTEGERS
    if not (decimals or integers):
        raise Unreadable(f"{cls} of {lt} and {rt} is evaluated by Spark")
    return ("arith", kernel, left, right, out)


def evaluate_arith(node: Node, left: Any, right: Any, kind: pa.DataType) -> Any:
    """The value of an :func:`arith_node` (``kind``: its result's Arrow type) over its
    operands' values (arrays or scalars): exact, or :class:`Unreadable`."""
    try:
        value = getattr(pc, node[1])(left, right)
        return pc.cast(value, kind, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        # (an overflow, a rounding Spark does and Arrow refuses, a decimal too wide)
        raise Unreadable(f"arithmetic Spark computes itself: {exc}") from exc
