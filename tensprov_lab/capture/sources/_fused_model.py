"""What a fused capture (:mod:`._fused`) notes of a block's datasets and operations."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["NO_RULE", "Refused", "Rule", "Scan", "parts_of"]


@dataclass
class Scan:
    """A scan-ordered dataset: the source it restricts and how."""

    base: int
    #: the dataset it filters or equals (None: it is the source itself)
    parent: int | None = None
    #: the column of ``parent``'s reads that holds the filter's condition
    flag: tuple[int, str] | None = None


@dataclass
class Rule:
    """The fused rule that covers one operation, and the columns it reads."""

    #: "filter" | "join-filter" | "join" | "semi" | "anti" | "group" | "global" | "sort"
    #: | "limit"
    kind: str
    inputs: list[int]
    #: join: per side, its key columns; group: the grouping columns
    columns: list[list[tuple[int, str]]] = field(default_factory=list)
    #: the scan-ordered dataset whose records each column is read over (per side, for
    #: a join): the input itself, or for a join's output one of the joined datasets
    over: list[list[int]] = field(default_factory=list)
    keep: tuple[bool, bool] = (False, False)
    #: a join's: per input, the dataset its records are: the input, or for a copy of a
    #: source (its table read again by a statement) the copy, so that a statement that
    #: joins a table twice (TPC-H Q7's two nations) tells one side's columns from the
    #: other's (empty: the inputs)
    parts: list[int] = field(default_factory=list)


NO_RULE = Rule("none", [])


class Refused(Exception):
    """A read no fused rule takes (planning gives the operation up)."""


def parts_of(rule: Rule) -> list[int]:
    """Per input of a join rule, the dataset its records are (see :attr:`Rule.parts`)."""
    return rule.parts or rule.inputs
