"""Spark's ``+``, ``-`` and ``*`` of integers and decimals for :mod:`._direct`, exactly.

TPC-H sorts and filters by sums of ``l_extendedprice * (1 - l_discount)`` (Q3, Q5,
Q10): decimals, whose every value Spark computes exactly in the result type the
analyzer gave the expression.  Arrow's checked kernels compute the same exact value
(the precision and scale of a decimal sum or product are Spark's rules before any
adjustment); the value is then cast, safely, to Spark's result type.  Where the
analyzer cut the result's scale (a type past 38 digits: TPC-H Q11's ``sum(...) *
0.0001``), Spark rounds the exact value half away from zero (Java's ``HALF_UP``) to
that scale, and so does :func:`round_decimal`, on an exact value of at most 38 digits
(one that Spark's own arithmetic holds without rounding first).  Where Spark would
overflow (an integer past its type; a decimal past its precision: null, or an error
under ANSI) or otherwise differ, Arrow raises and the value is :class:`Unreadable`
here, so Spark computes it.  Floating-point arithmetic is left to Spark (its NaN
orders above every number).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from tensprov_lab.capture.sources._direct_files import Unreadable
from tensprov_lab.capture.sources._direct_nodes import Node

__all__ = ["arith_node", "evaluate_arith", "round_decimal"]


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
        if not isinstance(kind, pa.Decimal128Type):
            raise Unreadable(f"arithmetic Spark computes itself: {exc}") from exc
    # a decimal whose exact value is wider than its type: computed in 256 bits, then
    # rounded to the result's scale as Spark rounds it
    try:
        wide = [pc.cast(v, pa.decimal256(v.type.precision, v.type.scale)) for v in (left, right)]
        value = getattr(pc, node[1])(*wide)
        # (at most 38 digits: Spark's own arithmetic holds it exactly)
        pc.cast(value, pa.decimal256(38, value.type.scale), safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError) as exc:
        raise Unreadable(f"arithmetic Spark computes itself: {exc}") from exc
    return round_decimal(value, kind)


def round_decimal(value: Any, kind: pa.Decimal128Type) -> Any:
    """Arrow decimals ``value`` (an array or a scalar) as Spark's cast to the decimal
    type ``kind`` gives them: rounded half away from zero to its scale;
    :class:`Unreadable` where a value does not fit it (Spark's null, or an error under
    ANSI).

    >>> import decimal
    >>> v = pa.array([decimal.Decimal("1.2345"), decimal.Decimal("-1.2345")],
    ...              pa.decimal128(10, 4))
    >>> round_decimal(v, pa.decimal128(10, 3)).to_pylist()
    [Decimal('1.235'), Decimal('-1.235')]
    """
    try:
        if value.type.scale > kind.scale:
            # in 256 bits with a digit to spare: pyarrow 26 gives 0 for a value of an
            # array whose rounding passes its precision (alone it raises), so each
            # value is checked to be within half a unit of its rounding too
            wide = pa.decimal256(min(value.type.precision + 1, 76), value.type.scale)
            value = pc.cast(value, wide)
            rounded = pc.round(value, ndigits=kind.scale, round_mode="half_towards_infinity")
            unit = pa.decimal256(kind.scale + 2, kind.scale + 1)
            half = pa.scalar(Decimal(5).scaleb(-kind.scale - 1), unit)
            off = pc.greater(pc.abs(pc.subtract_checked(value, rounded)), half)
            if pc.any(off).as_py():
                raise Unreadable(f"a decimal rounded past {kind}")
            value = rounded
        return pc.cast(value, kind, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise Unreadable(f"a decimal past {kind}: {exc}") from exc
