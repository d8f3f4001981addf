"""What a rule is: its record, attribute and replay rule, on a classic session (given
what :mod:`._classic` describes) and over Spark Connect (given :class:`Keying` and
:class:`Mapping`, the relations' keys in :mod:`tensprov_lab.capture.plan._connect`)."""

from __future__ import annotations

from typing import Any, ClassVar, Protocol

import numpy as np

from tensprov_lab.capture.plan._connect import Keyed, keeps_order
from tensprov_lab.capture.plan._exprs import Lin
from tensprov_lab.capture.plan._keyed import Block, Rewrite, Unsupported
from tensprov_lab.capture.rules._classic import (
    Captured,
    JObject,
    PlanNode,
    Reading,
    Rewriting,
    Walked,
    Walking,
)
from tensprov_lab.capture.spark._jvm import Jvm

__all__ = [
    "Captured", "Keying", "Mapping", "PlanNode", "Reading", "Rewriting", "Rule", "Walking",
    "attrs", "single",
]  # fmt: skip


class Keying(Protocol):
    """The key rewrite of one tracked block's Connect plans, as a rule's
    :meth:`Rule.keyed` sees it
    (:class:`~tensprov_lab.capture.connect._rewrite.Annotator`)."""

    def annotate(self, rel: Any) -> Keyed: ...
    def kids(self, rel: Any) -> tuple[Any, list[Keyed]]: ...
    def columns(self, rel: Any) -> list[str]: ...
    def user_columns(self, rel: Any) -> list[str]: ...


class Mapping(Protocol):
    """The attribute maps of one Connect operation being filled in, as a rule's
    :meth:`Rule.maps` sees them
    (:class:`~tensprov_lab.capture.connect._attributes.Maps`)."""

    in_cols: list[list[str]]
    out_cols: list[str]
    ids: list[int]
    contributing: list[np.ndarray]

    def contribute(self, out: int, *exprs: Any) -> None: ...
    def influence(self, *exprs: Any) -> None: ...
    def make(self, out: int, expr: Any) -> None: ...
    def identity(self, side: int = 0, outs: list[int] | None = None) -> None: ...
    def positional(self, side: int, outs: range, start: int = 0) -> None: ...
    def everything(self) -> None: ...


class Rule:
    """How capture traces one kind of Catalyst logical-plan node.

    A rule holds the three things capture needs of a node kind:

    - the **record rule**: :meth:`annotate` carries the record keys of the node's
      inputs through it (the default passes them on unchanged: the node keeps, drops or
      reorders records but never makes one from several), and, when the node decides
      the shape of the operation's tensors (a grouping, a join matched in NumPy, a
      sort), :meth:`tensors` builds them;
    - the **attribute rule**: :meth:`output_ids` and :meth:`attributes` say where each
      output column's values come from and which input columns decide its records;
    - over **Spark Connect**, the same for the client's relations of the kinds
      :attr:`relations` names: :meth:`keyed` carries record keys through such a
      relation (the default passes them on), :meth:`maps` fills in its attribute maps;
      :attr:`connect_opaque` names the relation kinds of the rule's operations that
      Connect does not trace, with why (each an opaque operation with that warning);
    - the **replay rule**: :meth:`replay_blocker` says why dropping input records
      cannot be previewed by replaying lineage-related records through the node
      (SystemL's distributivity test), :attr:`contextual` that an output record
      depends on records outside its lineage, and :attr:`drops_vanish` that dropping
      input records only removes the records made from them.

    Examples
    --------
    >>> from tensprov_lab.capture.rules import rule_for
    >>> rule_for("Filter").keeps_records, rule_for("Aggregate").keeps_records
    (False, False)
    >>> rule_for("Project").keeps_records
    True
    >>> rule_for("MapInPandas") is None  # not traced record by record: an opaque operation
    True
    """

    #: the Catalyst logical-plan node classes (simple names) the rule handles
    nodes: ClassVar[tuple[str, ...]] = ()
    #: the DataFrame methods that make such a node (capture records their calls)
    methods: ClassVar[tuple[str, ...]] = ()
    #: alone in an operation, its output is its input's records in their order
    #: (identity tensor)
    keeps_records: ClassVar[bool] = False
    #: never changes which records exist, nor their order (an operation of such nodes
    #: only is shown as trivial)
    trivial: ClassVar[bool] = False
    #: its output attributes are its (first) child's
    same_output: ClassVar[bool] = False
    #: an output record depends on input records outside its tensors (a window)
    contextual: ClassVar[bool] = False
    #: replay rule: dropping input records removes exactly the output records made from
    #: them and changes no other (a what-if need not replay the rest; not so for an
    #: outer join, which pads, or a grouping, which shrinks a group)
    drops_vanish: ClassVar[bool] = False
    #: Spark Connect: the relation kinds (fields of ``Relation``) the rule traces
    relations: ClassVar[tuple[str, ...]] = ()
    #: Spark Connect: relation kinds of the rule's operations not traced there, and why
    connect_opaque: ClassVar[dict[str, str]] = {}

    # -- record rule --------------------------------------------------------------------
    def annotate(
        self, rw: Rewriting, node: JObject, kids: list[JObject], results: list[Walked]
    ) -> Walked:
        """The node over its rewritten children, and the key blocks its output carries."""
        plan = node.withNewChildren(rw.jvm.seq([p for p, _ in results]))
        return plan, results[0][1]

    def tensors(self, reader: Reading, rw: Rewrite, occ: list[Any]) -> Captured | None:
        """The operation's tensors when this node decides their shape (None: it does
        not, or not this time; the next rule, then the generic functional rule, is
        asked)."""
        return None

    # -- attribute rule -----------------------------------------------------------------
    def output_ids(self, d: dict[str, Any], kid_ids: list[list[int]]) -> list[int] | None:
        """The expression ids of the node's output from its JSON ``d`` (None: ask Spark)."""
        return kid_ids[0] if self.same_output and kid_ids else None

    def attributes(self, w: Walking, n: PlanNode) -> dict[int, Lin]:
        """The lineage of the columns the node makes (the rest pass on unchanged), and,
        through ``w.influence`` / ``w.row``, the input cells that decide its records."""
        return {}

    # -- over Spark Connect --------------------------------------------------------------
    def keyed(self, a: Keying, rel: Any) -> Keyed:
        """The relation ``rel`` (of a kind in :attr:`relations`) over its rewritten
        children, and the keys its records carry (default: its child's, unchanged)."""
        new, (kid,) = a.kids(rel)
        return kid.passed(new, kid.returned and keeps_order(rel))

    def maps(self, m: Mapping, rel: Any) -> None:
        """Fill in the attribute maps of ``rel`` (default: every input column may make
        every output column, not exact)."""
        m.everything()

    # -- replay rule --------------------------------------------------------------------
    def replay_blocker(self, jvm: Jvm, node: JObject) -> str | None:
        """Why dropping records cannot be previewed by replay through ``node`` (None:
        the node distributes over union of its input records).  A rule whose answer
        depends on what :meth:`annotate` reads anyway appends it to
        ``rw.info.replay_blockers`` there instead (a py4j round trip saved)."""
        return None


def attrs(blocks: list[Block]) -> list[JObject]:
    """The key attributes of ``blocks``, in order."""
    return [a for b in blocks for a in b.attrs]


def single(results: list[Walked]) -> Walked:
    """The one rewritten child of a unary node."""
    if len(results) != 1:
        raise Unsupported("expected one child")
    return results[0]
