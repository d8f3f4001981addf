"""What a rule is given on a classic session: the rewrite, the attribute walk and the
capture, as protocols (the Connect counterparts are :class:`._base.Keying` and
:class:`._base.Mapping`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from tensprov_lab.capture.plan._exprs import Expr, Lin
from tensprov_lab.capture.plan._keyed import Block, Rewrite
from tensprov_lab.capture.plan._keys import KeyIndex, ScanKeyIndex
from tensprov_lab.capture.spark._jvm import Jvm

__all__ = ["Captured", "JObject", "PlanNode", "Reading", "Rewriting", "Walked", "Walking"]

JObject = Any
#: a child of a node in the rewrite: its rewritten plan and the key blocks it carries
Walked = tuple[JObject, list[Block]]
#: an operation's output size, its tensors (one per input occurrence) and key index
Captured = tuple[int, list[Any], KeyIndex]


@dataclass
class PlanNode:
    """One plan node as the attribute walk reads it."""

    #: the node's Catalyst JSON (children emptied)
    d: dict[str, Any]
    #: every input cell each expression id of its children's outputs comes from
    env: dict[int, Lin]
    #: the same per child (a union reads each child's on its own)
    envs: list[dict[int, Lin]]
    #: output expression ids of each child, and of the node
    kid_ids: list[list[int]]
    out_ids: list[int]


class Rewriting(Protocol):
    """The record-level rewrite of one operation's plan (:mod:`.._annotate`)."""

    jvm: Jvm
    #: what the nodes met so far told the record rules
    info: Rewrite


class Walking(Protocol):
    """The attribute walk of one operation's plan (:mod:`.._attributes`)."""

    jvm: Jvm
    #: input cells deciding whether or where a record exists: they influence every column
    row: set[tuple[int, int]]
    #: an aggregate's columns as what-if can update them (AttributeMaps.decomposition)
    decomposition: dict[int, tuple[str, int | None] | None] | None

    def input_column(self, ref: int) -> int | None: ...
    def lin(self, env: dict[int, Lin], refs: set[int]) -> Lin: ...
    def influence(self, env: dict[int, Lin], value: Any) -> None: ...
    def named(self, env: dict[int, Lin], exprs: list[Expr]) -> dict[int, Lin]: ...


class Reading(Protocol):
    """What a record rule may ask of the capture (the tracker) when it needs a job."""

    jvm: Jvm

    def _index_deferred(self, nodes: list[Any]) -> None: ...
    def _note(self, message: str) -> None: ...
    def _set_index(self, node: Any, ki: ScanKeyIndex) -> None: ...
    def _collect_keys(
        self, plan: Any, names: list[str], keep: bool = False, ident: int | None = None
    ) -> np.ndarray: ...
    def _functional(
        self,
        rw: Rewrite,
        occ: list[Any],
        raw: np.ndarray | None,
        runs: np.ndarray | None = None,
        given: list[np.ndarray] | None = None,
        canonical: bool = False,
    ) -> Captured: ...
