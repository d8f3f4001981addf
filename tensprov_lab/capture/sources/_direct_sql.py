"""Conditions written as SQL text, and comparisons typed as Spark types them, compiled to
the expressions :mod:`._direct` evaluates over a source's files.

Over Spark Connect a filter's condition reaches the client unresolved: ``filter("amount >
20")`` as its SQL text, ``filter(F.col("amount") > 20)`` as functions of names and
literals (:mod:`tensprov_lab.capture.connect._direct`).  Neither says the types Spark
will compare in, so this module gives each side the type Spark's coercion would: a
literal takes its column's type where Spark would cast the literal, and a column is
widened only where the widening is exact (``tinyint`` to ``int``, ``float`` to
``double``, ...).  Anything else (arithmetic, functions, a comparison of a string with a
number, a cast that could round) raises :class:`Unreadable`: the read goes through Spark.

The SQL read is a small subset of Spark's grammar: names (plain or in backquotes),
integer, decimal, double and string literals, ``TRUE``/``FALSE``/``NULL``, the
comparisons ``= == != <> < <= > >=``, ``AND``/``OR``/``NOT``, ``IS [NOT] NULL``,
``[NOT] IN (...)`` and ``[NOT] BETWEEN ... AND ...``, with parentheses.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

from tensprov_lab.capture.sources._direct_files import Unreadable
from tensprov_lab.capture.sources._direct_nodes import Node
from tensprov_lab.capture.sources._direct_nodes import node_type as _type

__all__ = ["boolean", "coerce", "compare", "in_list", "parse_condition"]


#: numeric types in Spark's order of precedence (the wider of two is the later)
_NUMERIC = ["tinyint", "smallint", "int", "bigint", "float", "double"]
_INTS = {"tinyint": 8, "smallint": 16, "int": 32, "bigint": 64}
#: widenings of a column whose values pyarrow converts exactly
_EXACT = {
    ("tinyint", "smallint"), ("tinyint", "int"), ("tinyint", "bigint"),
    ("smallint", "int"), ("smallint", "bigint"), ("int", "bigint"),
    ("tinyint", "float"), ("smallint", "float"),
    ("tinyint", "double"), ("smallint", "double"), ("int", "double"), ("float", "double"),
}  # fmt: skip
_OPS = {
    "=": "equal", "==": "equal", "<": "less", "<=": "less_equal", ">": "greater",
    ">=": "greater_equal",
}  # fmt: skip


def _literal_as(node: Node, target: str) -> Node:
    """Literal ``node`` cast to ``target`` as Spark casts a literal (exactly, or raise)."""
    value = node[1]
    if value is None:
        return ("lit", None, target)
    kind = _type(node)
    if kind == target:
        return node
    if target in _INTS and kind in _INTS:
        bits = _INTS[target]
        if not -(2 ** (bits - 1)) <= int(value) < 2 ** (bits - 1):
            raise Unreadable("a literal out of its column's range")
        return ("lit", int(value), target)
    if target in ("float", "double") and (kind in _INTS or kind in ("decimal", "float", "double")):
        if kind in _INTS and abs(int(value)) >= 2**53:
            raise Unreadable("an integer literal a double rounds")
        number = float(value)
        if number != number:
            raise Unreadable("a NaN constant (Spark orders NaN above every number)")
        return ("lit", number, target)
    raise Unreadable(f"a {kind} literal compared with a {target}")


def _wider(a: str, b: str) -> str:
    """The type Spark compares a ``a`` and a ``b`` in (decimal literals: double)."""
    if a == b:
        return a
    if a == "decimal" or b == "decimal":
        other = b if a == "decimal" else a
        if other in ("float", "double"):
            return "double"
        raise Unreadable("a decimal literal compared with a non-floating column")
    if a in _NUMERIC and b in _NUMERIC:
        return max(a, b, key=_NUMERIC.index)
    raise Unreadable(f"a {a} compared with a {b}")


def coerce(node: Node, target: str) -> Node:
    """``node`` as a value of type ``target``: a literal cast, a column widened exactly."""
    kind = _type(node)
    if kind == target:
        return node
    if node[0] == "lit":
        return _literal_as(node, target)
    if (kind, target) in _EXACT:
        return ("cast", node, target)
    raise Unreadable(f"a {kind} value Spark would cast to {target}")


def compare(op: str, a: Node, b: Node) -> Node:
    """Spark's comparison ``op`` (``equal``, ``less``, ...) of ``a`` and ``b``, both made
    the type Spark compares them in.

    >>> compare("greater", ("col", "x", "double"), ("lit", 20, "int"))
    ('cmp', 'greater', ('col', 'x', 'double'), ('lit', 20.0, 'double'))
    """
    ta, tb = _type(a), _type(b)
    if a[0] == "lit" and a[1] is None and tb != "void":
        ta = tb
    if b[0] == "lit" and b[1] is None and ta != "void":
        tb = ta
    target = _wider(ta, tb)
    if target in ("void", "decimal"):
        raise Unreadable("a comparison of constants")
    return ("cmp", op, coerce(a, target), coerce(b, target))


def in_list(value: Node, items: list[Node]) -> Node:
    """Spark's ``value IN (items)``, the items constants cast to the value's type."""
    kind = _type(value)
    if kind in ("void", "decimal") or any(i[0] != "lit" for i in items):
        raise Unreadable("IN over a list that is not constants")
    known: list[Any] = []
    for item in items:
        if item[1] is None:
            known.append(None)
            continue
        if _wider(kind, _type(item)) != kind:
            raise Unreadable("IN with an item of a wider type")
        known.append(_literal_as(item, kind)[1])
    return ("in", value, tuple(known), kind)


# -- SQL text ---------------------------------------------------------------------------------
_TOKEN = re.compile(
    r"\s*(?:(?P<num>\d+(?:\.\d*)?(?:[eE][+-]?\d+)?[lLdD]?|\.\d+(?:[eE][+-]?\d+)?[dD]?)"
    r"|(?P<str>'[^'\\]*'|\"[^\"\\]*\")"
    r"|(?P<quoted>`[^`]+`)"
    r"|(?P<name>[A-Za-z_][A-Za-z_0-9]*)"
    r"|(?P<op><=>|==|!=|<>|<=|>=|[=<>(),\-]))"
)


def _tokens(text: str) -> list[tuple[str, str]]:
    out, at = [], 0
    text = text.rstrip()
    while at < len(text):
        m = _TOKEN.match(text, at)
        if m is None or m.end() == at:
            raise Unreadable(f"SQL the client does not read: {text[at : at + 20]!r}")
        kind = m.lastgroup
        assert kind is not None
        out.append((kind, m.group(kind)))
        at = m.end()
    return out


class _Parser:
    def __init__(self, text: str, columns: dict[str, tuple[str, str]]) -> None:
        self.toks = _tokens(text)
        self.at = 0
        self.columns = columns

    def peek(self, k: int = 0) -> tuple[str, str]:
        i = self.at + k
        return self.toks[i] if i < len(self.toks) else ("end", "")

    def word(self, *words: str) -> bool:
        kind, text = self.peek()
        if kind == "name" and text.upper() in words:
            self.at += 1
            return True
        return False

    def op(self, text: str) -> bool:
        if self.peek() == ("op", text):
            self.at += 1
            return True
        return False

    def expect(self, text: str) -> None:
        if not self.op(text):
            raise Unreadable(f"SQL the client does not read (expected {text!r})")

    def condition(self) -> Node:
        node = self.conjunction()
        while self.word("OR"):
            node = ("or_kleene", boolean(node), boolean(self.conjunction()))
        return node

    def conjunction(self) -> Node:
        node = self.negation()
        while self.word("AND"):
            node = ("and_kleene", boolean(node), boolean(self.negation()))
        return node

    def negation(self) -> Node:
        if self.word("NOT"):
            return ("not", boolean(self.negation()))
        return self.predicate()

    def predicate(self) -> Node:
        left = self.value()
        kind, text = self.peek()
        if kind == "op" and text in _OPS:
            self.at += 1
            return compare(_OPS[text], left, self.value())
        if kind == "op" and text in ("!=", "<>"):
            self.at += 1
            return ("not", compare("equal", left, self.value()))
        if self.word("IS"):
            negated = self.word("NOT")
            if not self.word("NULL"):
                raise Unreadable("IS other than IS [NOT] NULL")
            return ("isnotnull" if negated else "isnull", left)
        negated = self.word("NOT")
        if self.word("IN"):
            self.expect("(")
            items = [self.value()]
            while self.op(","):
                items.append(self.value())
            self.expect(")")
            node = in_list(left, items)
        elif self.word("BETWEEN"):
            low = self.value()
            if not self.word("AND"):
                raise Unreadable("BETWEEN without AND")
            high = self.value()
            node = ("and_kleene", compare("greater_equal", left, low),
                    compare("less_equal", left, high))  # fmt: skip
        elif negated:
            raise Unreadable("NOT in a place the client does not read")
        else:
            return left
        return ("not", node) if negated else node

    def value(self) -> Node:
        kind, text = self.peek()
        self.at += 1
        if kind == "op" and text == "(":
            node = self.condition()
            self.expect(")")
            return node
        if kind == "op" and text == "-" and self.peek()[0] == "num":
            node = self.value()
            return ("lit", -node[1], node[2])
        if kind == "num":
            return _number(text)
        if kind == "str":
            return ("lit", text[1:-1], "string")
        if kind == "quoted":
            return self.column(text[1:-1])
        if kind == "name":
            upper = text.upper()
            if upper in ("TRUE", "FALSE"):
                return ("lit", upper == "TRUE", "boolean")
            if upper == "NULL":
                return ("lit", None, "void")
            if self.peek() == ("op", "(") or upper in _RESERVED:
                raise Unreadable(f"SQL the client does not read: {text}")
            return self.column(text)
        raise Unreadable(f"SQL the client does not read: {text!r}")

    def column(self, name: str) -> Node:
        found = self.columns.get(name.lower())
        if found is None:
            raise Unreadable(f"column {name!r} is read through Spark")
        return ("col", found[0], found[1])


_RESERVED = {
    "AND", "OR", "NOT", "IS", "IN", "BETWEEN", "LIKE", "RLIKE", "CASE", "WHEN", "THEN",
    "ELSE", "END", "CAST", "INTERVAL", "DATE", "TIMESTAMP", "X", "EXISTS", "DIV", "ILIKE",
}  # fmt: skip


def boolean(node: Node) -> Node:
    """``node``, when it is a condition."""
    if _type(node) != "boolean":
        raise Unreadable("a condition that is not boolean")
    return node


def _number(text: str) -> Node:
    """A numeric literal typed as Spark's parser types it."""
    suffix = text[-1].upper()
    if suffix == "L":
        return ("lit", int(text[:-1]), "bigint")
    if suffix == "D" or "e" in text.lower():
        return ("lit", float(text.rstrip("dD")), "double")
    if "." in text:
        return ("lit", Decimal(text), "decimal")
    value = int(text)
    if -(2**31) <= value < 2**31:
        return ("lit", value, "int")
    if -(2**63) <= value < 2**63:
        return ("lit", value, "bigint")
    raise Unreadable("an integer literal wider than a bigint")


def parse_condition(text: str, columns: dict[str, tuple[str, str]], condition: bool = True) -> Node:
    """SQL condition ``text`` compiled over ``columns`` (lower-case name -> (name, Spark
    type)); :class:`Unreadable` for anything outside the subset this module reads.

    >>> cols = {"amount": ("amount", "double"), "region": ("region", "string")}
    >>> parse_condition("amount > 20 AND region IN ('EU', 'US')", cols)[0]
    'and_kleene'
    >>> parse_condition("Amount >= 20.5", cols)
    ('cmp', 'greater_equal', ('col', 'amount', 'double'), ('lit', 20.5, 'double'))
    """
    parser = _Parser(text, columns)
    node = parser.condition() if not condition else boolean(parser.condition())
    if parser.peek()[0] != "end":
        raise Unreadable("SQL the client does not read after the condition")
    return node
