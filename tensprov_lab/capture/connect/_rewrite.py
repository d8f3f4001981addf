"""Record keys carried through a Connect plan: the rewrite, dispatched to the rules.

:meth:`Annotator.annotate` rewrites the client's plan of a dataset so that every record
also carries the keys of the records it comes from: a source gets a column of
``monotonically_increasing_id()`` (increasing in scan order, so its order is the
source's canonical order), and each relation kind passes keys on as its rule says
(:meth:`Rule.keyed <tensprov_lab.capture.rules.Rule.keyed>`, one module per kind in
:mod:`tensprov_lab.capture.rules`): filters, projections and sorts keep them, a join
puts both sides' side by side, a union gives each side the other's as nulls and a
column saying which side a record comes from, an aggregate or a deduplication keeps the
keys of its smallest member.  The server runs the rewritten plan; capture reads only the
key columns back (:mod:`._tracker`).  A relation kind without a rule raises
:class:`Unsupported`, and the operation becomes opaque.

The rewrite leaves every relation of the user's plan in place with its plan id (a
wrapper takes the id of what it wraps), so the user's expressions resolve as before.
"""

from __future__ import annotations

from typing import Any

from tensprov_lab.capture.plan import _proto as P
from tensprov_lab.capture.plan._connect import (
    Keyed,
    Unsupported,
    grouping_sets,
    keyed_source,
    pb_aggregate,
    source_key,
)
from tensprov_lab.capture.rules import CONNECT_OPAQUE, connect_rule_for

__all__ = ["Annotator"]


class Annotator:
    """Rewrites the plans of one tracked block (memoized by plan id)."""

    def __init__(
        self, spark: Any, sources: dict[int, Any], nodes: set[int],
        frontier: dict[int, Any] | None = None, columns: dict[int, list[str]] | None = None,
    ) -> None:  # fmt: skip
        self.spark = spark
        #: plan id -> the relation to key as a source (the user's, or a pinned copy)
        self.sources = sources
        #: plan ids of the block's datasets (their identity is noted in ``Keyed.ids``)
        self.nodes = nodes
        #: plan id -> a relation standing for that keyed source, its key column as
        #: :func:`source_key` names it (a replay's records of it: tensprov_lab.replay)
        self.frontier = frontier or {}
        self._memo: dict[int, Keyed] = {}
        #: column names by plan id (may be shared by annotators of the same plans)
        self._columns: dict[int, list[str]] = {} if columns is None else columns

    def columns(self, rel: Any) -> list[str]:
        """The column names of a relation (one schema request, memoized)."""
        pid = P.plan_id(rel)
        got = self._columns.get(pid) if pid is not None else None
        if got is None:
            got = list(P.dataframe(self.spark, rel).columns)
            if pid is not None:
                self._columns[pid] = got
        return got

    def user_columns(self, rel: Any) -> list[str]:
        """The user's column names of a rewritten relation (its keys left out)."""
        return [c for c in self.columns(rel) if not c.startswith(P.KEY_PREFIX)]

    def rekey(self, ident: int, rel: Any) -> None:
        """Key dataset ``ident`` as a source from now on (its rewrite failed: an
        opaque operation's output)."""
        self._memo.pop(ident, None)
        self.sources[ident] = rel

    def annotate(self, rel: Any) -> Keyed:
        pid = P.plan_id(rel)
        if pid is not None and pid in self._memo:
            return self._memo[pid]
        if pid is not None and pid in self.sources:
            keyed = self._source(pid, self.sources[pid])
        else:
            kind = P.kind(rel)
            rule = connect_rule_for(kind)
            if rule is None:
                raise Unsupported(
                    CONNECT_OPAQUE.get(kind) or f"a {kind.replace('_', ' ')} relation"
                )
            keyed = rule.keyed(self, rel)
        if pid is not None and pid in self.nodes:
            keyed.ids = {**keyed.ids, pid: list(keyed.keys)}
        if pid is not None:
            self._memo[pid] = keyed
        return keyed

    def kids(self, rel: Any) -> tuple[Any, list[Keyed]]:
        """A copy of ``rel`` whose children are rewritten, and their rewrites."""
        new = type(rel).FromString(rel.SerializeToString())
        inner = P.body(new)
        done = []
        present = {f.name for f, _ in inner.ListFields()}
        for name in ("input", "left", "right", "left_input", "right_input"):
            if name in present:
                k = self.annotate(getattr(inner, name))
                getattr(inner, name).CopyFrom(k.rel)
                done.append(k)
        return new, done

    def _source(self, pid: int, rel: Any) -> Keyed:
        if pid in self.frontier:
            return Keyed(self.frontier[pid], [source_key(pid)])
        return keyed_source(pid, rel)

    # -- what a group is made of ----------------------------------------------------------
    def members(self, rel: Any) -> tuple[Any, Keyed]:
        """For an aggregate or deduplication: a relation with one row per group holding
        the key tuples of its members (``__tp_m``: a list of structs), grouped exactly as
        the user's relation groups; and the rewrite of its input."""
        kid = self.annotate(P.children(rel)[0])
        collect = P.alias(
            P.fn("collect_list", P.fn("struct", *[P.col(k) for k in kid.keys])),
            f"{P.KEY_PREFIX}m",
        )
        if P.kind(rel) == "aggregate" and grouping_sets(rel):
            # grouped as the user's relation groups, each group with its set's id
            sets = type(rel).FromString(rel.SerializeToString())
            sets.aggregate.input.CopyFrom(kid.rel)
            del sets.aggregate.aggregate_expressions[:]
            sets.aggregate.aggregate_expressions.extend(
                [collect, P.alias(P.fn("grouping_id"), f"{P.KEY_PREFIX}s")]
            )
            return P.with_id(sets, None), kid
        if P.kind(rel) == "aggregate":
            grouping = list(rel.aggregate.grouping_expressions)
        else:
            d = rel.deduplicate
            names = list(d.column_names) if len(d.column_names) and not d.all_columns_as_keys \
                else self.user_columns(kid.rel)  # fmt: skip
            grouping = [P.col(n) for n in names]
        return pb_aggregate(kid.rel, grouping, [collect]), kid
