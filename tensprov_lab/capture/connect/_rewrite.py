"""Record keys carried through a Connect plan, one rule per relation kind.

:meth:`Annotator.annotate` rewrites the client's plan of a dataset so that every record
also carries the keys of the records it comes from: a source gets a column of
``monotonically_increasing_id()`` (increasing in scan order, so its order is the
source's canonical order), and each relation kind passes keys on as its rule says:
filters, projections and sorts keep them, a join puts both sides' side by side, a
union gives each side the other's as nulls and a column saying which side a record
comes from, an aggregate or a deduplication keeps the keys of its smallest member.
The server runs the rewritten plan; capture reads only the key columns back
(:mod:`._tracker`).  A relation kind without a rule raises :class:`Unsupported`, and
the operation becomes opaque.

The rewrite leaves every relation of the user's plan in place with its plan id (a
wrapper takes the id of what it wraps), so the user's expressions resolve as before.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tensprov_lab.capture.connect import _proto as P

__all__ = [
    "Annotator",
    "Keyed",
    "keyed_source",
    "STABLE_KINDS",
    "Unsupported",
    "global_aggregate",
    "grouping_sets",
    "pivot_of",
    "plain_names",
    "sorted_input",
    "source_key",
    "stable",
]

#: relation kinds whose records Spark returns in the same order every time (over
#: stable leaves, with deterministic expressions)
STABLE_KINDS = {
    "read", "range", "local_relation", "cached_local_relation", "cached_remote_relation",
    "chunked_cached_local_relation", "project", "filter", "with_columns",
    "with_columns_renamed", "drop", "to_df", "subquery_alias", "hint", "drop_na",
    "fill_na", "replace",
}  # fmt: skip
#: relation kinds that keep their input's columns and pass every key on unchanged
_PASS = {"filter", "subquery_alias", "hint", "repartition", "repartition_by_expression",
         "with_columns_renamed", "drop", "with_columns"}  # fmt: skip
#: explodes of one column, and the same with each record's position
_EXPLODES = {"explode": "posexplode", "explode_outer": "posexplode_outer"}
#: generators that give each record's position in its input's array
_POSITIONS = {"posexplode", "posexplode_outer"}
#: the ``na`` relations: with no column list they act on every column (the keys too)
_NA = {"drop_na", "fill_na", "replace"}


class Unsupported(Exception):
    """A relation capture cannot carry keys through (the operation becomes opaque)."""


@dataclass
class Keyed:
    """A rewritten relation and the key columns its records carry."""

    rel: Any
    #: the key columns, in order: together they tell its records apart
    keys: list[str]
    #: per dataset (plan id) whose records' identity it carries: the key columns
    ids: dict[int, list[str]] = field(default_factory=dict)
    #: its records in canonical order are its key tuples in ascending order
    monotone: bool = True
    #: a union's column saying which side (0 left, 1 right) a record comes from
    tag: str | None = None
    #: the plan ids of its relation's sides (join, union), as the rule met them
    sides: list[int | None] = field(default_factory=list)
    #: an explode's key column: each generated record's position in its input's array
    pos: str | None = None
    #: a semi or anti join: whether it is anti, and the same join as an inner join
    #: whose rows are the (left, right) pairs that matched, with both sides' keys
    semi: tuple[bool, Any, Keyed, Keyed] | None = None
    #: Spark gives its records in canonical order (a sort's output, and filters or
    #: projections of it): what a later sort needs when the keys do not tell that order
    returned: bool = False
    #: a join: each side's key columns per dataset (a self-join carries one dataset's
    #: identity on both sides, under other names on the right)
    side_ids: list[dict[int, list[str]]] = field(default_factory=list)


def source_key(pid: int) -> str:
    """The key column of the source (or opaque output) of plan id ``pid``: its records'
    ``monotonically_increasing_id()``."""
    return f"{P.KEY_PREFIX}k{pid}"


def keyed_source(pid: int, rel: Any) -> Keyed:
    """The relation ``rel`` of plan id ``pid`` keyed as a source: its records with their
    ``monotonically_increasing_id()`` (increasing in scan order) as :func:`source_key`."""
    key = source_key(pid)
    mid = P.alias(P.fn("monotonically_increasing_id"), key)
    return Keyed(P.with_id(P.wrap("project", rel, expressions=[P.star(), mid]), pid), [key])


def stable(rel: Any) -> bool:
    """Whether Spark gives ``rel``'s records in the same order, in the same partitions,
    every time: only relations of :data:`STABLE_KINDS` with deterministic expressions
    down to its leaves."""
    stack = [rel]
    while stack:
        r = stack.pop()
        if P.kind(r) not in STABLE_KINDS or any(
            P.nondeterministic(e) for e in P.own_expressions(r)
        ):
            return False
        stack.extend(P.children(r))
    return True


def global_aggregate(rel: Any) -> bool:
    """Whether ``rel`` is a select of aggregate functions (``df.select(F.sum("x"))``):
    one record made of every input record."""
    if P.kind(rel) != "project":
        return False
    names, readable = P.calls(*rel.project.expressions)
    return readable and bool(names & P.AGGREGATES) and not names & P.GENERATORS


#: relation kinds that give their input's records in the order they come (a window
#: function in a projection sorts them by its partitions: checked apart)
_ORDER_KEEPING = {"filter", "subquery_alias", "hint", "with_columns_renamed", "drop",
                  "with_columns", "project", "to_df", "drop_na", "fill_na", "replace"}  # fmt: skip


def _keeps_order(rel: Any) -> bool:
    """Whether ``rel`` gives its input's records in the order they come."""
    if P.kind(rel) not in _ORDER_KEEPING:
        return False
    for e in P.own_expressions(rel):
        which = e.WhichOneof("expr_type")
        if which == "window":
            return False
        if which == "expression_string" and "over" in e.expression_string.expression.lower():
            return False
    return True


def sorted_input(rel: Any) -> bool:
    """Whether a limit's input is a global sort's output (it keeps the first records in
    that order)."""
    child = rel.limit.input
    return P.kind(child) == "sort" and bool(child.sort.is_global)


def grouping_sets(rel: Any) -> bool:
    """Whether an aggregate relation groups by several grouping sets (a rollup, a cube,
    grouping sets): one input record is then a member of one group per set, and a
    group is told apart by its smallest member together with its set's
    ``grouping_id()``."""
    from pyspark.sql.connect import proto

    if P.kind(rel) != "aggregate":
        return False
    return rel.aggregate.group_type not in (
        proto.Aggregate.GroupType.GROUP_TYPE_GROUPBY,
        proto.Aggregate.GroupType.GROUP_TYPE_PIVOT,
    )


def pivot_of(rel: Any) -> Any:
    """An aggregate relation's pivot (its column and listed values), None if it has
    none."""
    from pyspark.sql.connect import proto

    if P.kind(rel) != "aggregate":
        return None
    if rel.aggregate.group_type != proto.Aggregate.GroupType.GROUP_TYPE_PIVOT:
        return None
    return rel.aggregate.pivot


def plain_names(exprs: Any) -> list[str] | None:
    """The names of plain columns (None: an expression, a nested field, a column of a
    named plan)."""
    names = []
    for e in exprs:
        if e.WhichOneof("expr_type") != "unresolved_attribute":
            return None
        name = e.unresolved_attribute.unparsed_identifier
        if "." in name or "`" in name or e.unresolved_attribute.HasField("plan_id"):
            return None
        names.append(name)
    return names


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
            rule = getattr(self, f"_{P.kind(rel)}", None)
            if rule is None:
                if P.kind(rel) in _PASS:
                    rule = self._pass
                else:
                    raise Unsupported(f"a {P.kind(rel).replace('_', ' ')} relation")
            keyed = rule(rel)
        if pid is not None and pid in self.nodes:
            keyed.ids = {**keyed.ids, pid: list(keyed.keys)}
        if pid is not None:
            self._memo[pid] = keyed
        return keyed

    def _kids(self, rel: Any) -> tuple[Any, list[Keyed]]:
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

    # -- rules ---------------------------------------------------------------------------
    def _source(self, pid: int, rel: Any) -> Keyed:
        if pid in self.frontier:
            return Keyed(self.frontier[pid], [source_key(pid)])
        return keyed_source(pid, rel)

    def _pass(self, rel: Any) -> Keyed:
        new, (kid,) = self._kids(rel)
        return Keyed(new, list(kid.keys), dict(kid.ids), kid.monotone,
                     returned=kid.returned and _keeps_order(rel))  # fmt: skip

    def _na(self, rel: Any) -> Keyed:
        new, (kid,) = self._kids(rel)
        inner = P.body(new)
        if not inner.cols:  # every column: name the user's, so the keys stay as they are
            inner.cols.extend(self._user_columns(kid.rel))
        return Keyed(new, list(kid.keys), dict(kid.ids), kid.monotone, returned=kid.returned)

    _drop_na = _fill_na = _replace = _na

    def _user_columns(self, rel: Any) -> list[str]:
        return [c for c in self.columns(rel) if not c.startswith(P.KEY_PREFIX)]

    def _project(self, rel: Any) -> Keyed:
        new, (kid,) = self._kids(rel)
        exprs = new.project.expressions
        stars = [e for e in exprs if e.WhichOneof("expr_type") == "unresolved_star"]
        if any(s.unresolved_star.HasField("unparsed_target") for s in stars):
            raise Unsupported("a select of `table.*`")
        if global_aggregate(rel):
            # one record made of all: nothing tells records apart, none is needed
            return Keyed(new, [], {}, True)
        pos = self._position(rel, kid, exprs)
        theirs = None if pos else self._their_position(rel, kid, exprs)
        if not stars:
            exprs.extend(P.col(k) for k in kid.keys)
        if theirs is not None:
            # the user's own posexplode: its position, copied to a key of its own
            pos = f"{P.KEY_PREFIX}p{P.plan_id(rel)}"
            new = P.wrap("project", new, expressions=[P.star(), P.alias(P.col(theirs), pos)])
        keys = list(kid.keys) + ([pos] if pos else [])
        return Keyed(new, keys, dict(kid.ids), kid.monotone, pos=pos,
                     returned=kid.returned and _keeps_order(rel))  # fmt: skip

    def _their_position(self, rel: Any, kid: Keyed, exprs: Any) -> str | None:
        """The column of the select's one ``posexplode`` that holds each record's
        position (None: no such generator, or its column is not one of a name)."""
        found = []
        for e in exprs:
            fn = e.alias.expr if e.WhichOneof("expr_type") == "alias" else e
            if fn.WhichOneof("expr_type") == "unresolved_function" and (
                fn.unresolved_function.function_name.lower() in _POSITIONS
            ):
                found.append(e)
        if len(found) != 1:
            return None
        (e,) = found
        if e.WhichOneof("expr_type") == "alias":
            if len(e.alias.name) != 2:
                return None
            name = e.alias.name[0]
        else:
            name = "pos"  # Spark's name for it
        out = [c.lower() for c in self.columns(rel)]
        if out.count(name.lower()) != 1 or name.lower() in [
            c.lower() for c in self.columns(kid.rel)
        ]:
            return None
        return name

    def _position(self, rel: Any, kid: Keyed, exprs: Any) -> str | None:
        """Turn the select's ``explode`` of an array into ``posexplode`` (the same
        records and columns, plus their position, a key of its own), so that records
        generated from one input record are told apart; the position's column name
        (None: no such explode)."""
        found = [
            (i, e) for i, e in enumerate(exprs)
            if (e.alias.expr if e.WhichOneof("expr_type") == "alias" else e).WhichOneof(
                "expr_type") == "unresolved_function"
            and (e.alias.expr if e.WhichOneof("expr_type") == "alias" else e)
            .unresolved_function.function_name.lower() in _EXPLODES
        ]  # fmt: skip
        if len(found) != 1:
            return None
        at, e = found[0]
        if e.WhichOneof("expr_type") == "alias":
            if len(e.alias.name) != 1:
                return None
            fn, name = e.alias.expr, e.alias.name[0]
        else:
            # unnamed: Spark calls an array's elements "col" (a map gives "key",
            # "value": left as it is)
            out = [c.lower() for c in self.columns(rel)]
            if out.count("col") != 1 or "col" in [c.lower() for c in self.columns(kid.rel)]:
                return None
            fn, name = e, "col"
        key = f"{P.KEY_PREFIX}p{P.plan_id(rel)}"
        made = P.fn(_EXPLODES[fn.unresolved_function.function_name.lower()],
                    *fn.unresolved_function.arguments)  # fmt: skip
        named = P.alias(made, key)
        named.alias.name.append(name)
        exprs[at].CopyFrom(named)
        return key

    def _sort(self, rel: Any) -> Keyed:
        """A global sort: ties in the sort order come in input order (DESIGN.md §3),
        which the keys give when they increase with it; over records sorted before, the
        input's records come back in their order, so ids given to them there do."""
        new, (kid,) = self._kids(rel)
        if not new.sort.is_global:
            return Keyed(new, list(kid.keys), dict(kid.ids), kid.monotone)
        if kid.monotone:
            new.sort.order.extend(P.sort_order(P.col(k)) for k in kid.keys)
            return Keyed(new, list(kid.keys), dict(kid.ids), monotone=False, returned=True)
        if not kid.returned:
            raise Unsupported(
                "a sort of records whose order is neither their keys' nor Spark's (a "
                "join, union or grouping of sorted records)"
            )
        at = f"{P.KEY_PREFIX}q{P.plan_id(rel)}"
        numbered = P.wrap("project", kid.rel, expressions=[
            P.star(), P.alias(P.fn("monotonically_increasing_id"), at)
        ])  # fmt: skip
        new.sort.input.CopyFrom(numbered)
        new.sort.order.append(P.sort_order(P.col(at)))
        out = P.wrap("drop", new, column_names=[at])
        return Keyed(out, list(kid.keys), dict(kid.ids), monotone=False, returned=True)

    def _limit(self, rel: Any) -> Keyed:
        """A limit of a global sort's output keeps its first records in the sort's order
        (ties in input order: the tracker checks that no tie straddles the limit, see
        ``ConnectTracker._check_limit``).  A limit of records in no fixed order keeps
        whichever Spark reads first: the rewrite (the same plan with keys beside) reads
        the same ones when Spark reads its input in the same partitions and order every
        time (the tracker flags it as not deterministic, as the classic capture does);
        over a shuffle it may read others."""
        child = rel.limit.input
        if not sorted_input(rel) and not stable(child):
            raise Unsupported(
                "a limit of records in no fixed order after a shuffle: which records "
                "Spark keeps can change from one execution to the next (sort first)"
            )
        new, (kid,) = self._kids(rel)
        return Keyed(new, list(kid.keys), dict(kid.ids), kid.monotone, returned=kid.returned)

    def _sample(self, rel: Any) -> Keyed:
        """A sample without replacement, seeded, over records Spark reads in the same
        partitions and order every time: the rewrite (the same plan with keys beside)
        draws the same records, since Spark draws per partition by position."""
        smp = rel.sample
        if smp.with_replacement:
            raise Unsupported("a sample with replacement (records drawn twice)")
        if not smp.HasField("seed"):
            raise Unsupported("a sample without a seed")
        # (a source that had to be pinned is unstable in the user's own plan, checked
        # here: its pinned copy is read in partitions of its own)
        if not stable(smp.input):
            raise Unsupported(
                "a sample of records Spark may read in another order or partitioning "
                "(after a shuffle): the records it draws could be others"
            )
        new, (kid,) = self._kids(rel)
        return Keyed(new, list(kid.keys), dict(kid.ids), kid.monotone)

    def _join(self, rel: Any) -> Keyed:
        from pyspark.sql.connect import proto

        sides = [P.plan_id(rel.join.left), P.plan_id(rel.join.right)]
        new, (left, right) = self._kids(rel)
        clash = [k for k in right.keys if k in left.keys]
        if clash:  # the same source on both sides: the right side's keys get new names
            renamed = {k: f"{k}_r{P.fresh_id()}" for k in clash}
            entries = []
            for old, name in renamed.items():
                r = proto.WithColumnsRenamed.Rename()
                r.col_name, r.new_col_name = old, name
                entries.append(r)
            new.join.right.CopyFrom(P.wrap("with_columns_renamed", right.rel, renames=entries))
            right = Keyed(
                new.join.right,
                [renamed.get(k, k) for k in right.keys],
                {i: [renamed.get(k, k) for k in ks] for i, ks in right.ids.items()},
                right.monotone,
            )
        semi = rel.join.join_type in (
            proto.Join.JoinType.JOIN_TYPE_LEFT_SEMI,
            proto.Join.JoinType.JOIN_TYPE_LEFT_ANTI,
        )
        if semi:
            inner = type(new).FromString(new.SerializeToString())
            inner.join.join_type = proto.Join.JoinType.JOIN_TYPE_INNER
            P.with_id(inner, None)
            anti = rel.join.join_type == proto.Join.JoinType.JOIN_TYPE_LEFT_ANTI
            return Keyed(new, list(left.keys), dict(left.ids), left.monotone, sides=sides,
                         semi=(anti, inner, left, right))  # fmt: skip
        return Keyed(
            new,
            left.keys + right.keys,
            {**left.ids, **right.ids},
            left.monotone and right.monotone,
            sides=sides,
            side_ids=[dict(left.ids), dict(right.ids)],
        )

    def _set_op(self, rel: Any) -> Keyed:
        from pyspark.sql.connect import proto

        op = rel.set_op
        if op.set_op_type != proto.SetOperation.SetOpType.SET_OP_TYPE_UNION or not op.is_all:
            raise Unsupported("intersect, except and union distinct")
        sides = [P.plan_id(op.left_input), P.plan_id(op.right_input)]
        new, (left, right) = self._kids(rel)
        keys = list(dict.fromkeys(left.keys + right.keys))
        tag = f"{P.KEY_PREFIX}u{P.plan_id(rel)}"
        for side, (name, kid) in enumerate([("left_input", left), ("right_input", right)]):
            getattr(new.set_op, name).CopyFrom(self._union_side(kid, keys, tag, side))
        return Keyed(
            new,
            [tag, *keys],
            {**left.ids, **right.ids},
            left.monotone and right.monotone,
            tag=tag,
            sides=sides,
        )

    def _union_side(self, kid: Keyed, keys: list[str], tag: str, side: int) -> Any:
        """One side of a union: its own columns as they were, then every key of both
        sides (nulls for the other side's), then the side: the same layout on both, for
        a union by position and by name alike."""
        names = self.columns(kid.rel)
        temp = [c if c.startswith(P.KEY_PREFIX) else f"{P.KEY_PREFIX}c{i}" for i, c in
                enumerate(names)]  # fmt: skip
        renamed = P.wrap("to_df", kid.rel, column_names=temp)
        exprs = [
            P.alias(P.col(t), c) for t, c in zip(temp, names) if not c.startswith(P.KEY_PREFIX)
        ]
        exprs += [P.col(k) if k in kid.keys else P.alias(P.null_long(), k) for k in keys]
        exprs.append(P.alias(P.literal(side), tag))
        return P.wrap("project", renamed, expressions=exprs)

    def _aggregate(self, rel: Any) -> Keyed:
        from pyspark.sql.connect import proto

        sets = grouping_sets(rel)
        agg = rel.aggregate
        new, (kid,) = self._kids(rel)
        pid = P.plan_id(rel)
        if pivot_of(rel) is not None:
            return self._pivot(rel, new, kid)
        if not len(agg.grouping_expressions) and not sets:
            # one record: nothing tells records apart, none is needed
            return Keyed(new, [], {}, True)
        rep = f"{P.KEY_PREFIX}r{pid}"
        new.aggregate.aggregate_expressions.append(
            P.alias(P.fn("min", P.fn("struct", *[P.col(k) for k in kid.keys])), rep)
        )
        keys = [f"{P.KEY_PREFIX}g{pid}_{j}" for j in range(len(kid.keys))]
        if sets:  # the smallest member is in one group per grouping set
            keys.append(f"{P.KEY_PREFIX}s{pid}")
            new.aggregate.aggregate_expressions.append(P.alias(P.fn("grouping_id"), keys[-1]))
        fields = []
        for k, name in zip(kid.keys, keys):
            e = proto.Expression()
            e.unresolved_attribute.unparsed_identifier = f"{rep}.{k}"
            fields.append(P.alias(e, name))
        out = P.wrap("with_columns", new, aliases=[f.alias for f in fields])
        out = P.wrap("drop", out, column_names=[rep])
        return Keyed(out, keys, {}, kid.monotone)

    def _pivot(self, rel: Any, new: Any, kid: Keyed) -> Keyed:
        """A pivot: one record per group of its grouping columns, keyed by the group's
        smallest member, read from a plain grouping of the same records joined to the
        pivot's records on the grouping values (null-safe)."""
        from pyspark.sql.connect import proto

        names = plain_names(rel.aggregate.grouping_expressions)
        if not names:
            raise Unsupported("a pivot grouped by computed values")
        pid = P.plan_id(rel)
        rep = f"{P.KEY_PREFIX}r{pid}"
        keys = [f"{P.KEY_PREFIX}g{pid}_{j}" for j in range(len(kid.keys))]
        same = [f"{P.KEY_PREFIX}pg{pid}_{i}" for i in range(len(names))]
        least = P.alias(P.fn("min", P.fn("struct", *[P.col(k) for k in kid.keys])), rep)
        grouped = _pb_aggregate(kid.rel, [P.col(n) for n in names], [least])
        fields = []
        for k, name in zip(kid.keys, keys):
            e = proto.Expression()
            e.unresolved_attribute.unparsed_identifier = f"{rep}.{k}"
            fields.append(P.alias(e, name))
        right = P.wrap("project", grouped, expressions=[
            *[P.alias(P.col(n), g) for n, g in zip(names, same)], *fields
        ])  # fmt: skip
        P.with_id(right, None)
        P.with_id(new, None)
        join = proto.Relation()
        join.join.left.CopyFrom(new)
        join.join.right.CopyFrom(right)
        join.join.join_type = proto.Join.JoinType.JOIN_TYPE_INNER
        cond = [P.fn("<=>", P.col(n), P.col(g)) for n, g in zip(names, same)]
        while len(cond) > 1:
            cond = [P.fn("and", cond[0], cond[1]), *cond[2:]]
        join.join.join_condition.CopyFrom(cond[0])
        P.with_id(join, None)
        out = P.wrap("drop", join, column_names=same)
        return Keyed(P.with_id(out, pid), keys, {}, kid.monotone)

    def _deduplicate(self, rel: Any) -> Keyed:
        """As Spark runs it (an aggregate: the subset's columns are the groups, every
        other column the first value met), with the smallest member's keys."""
        if rel.deduplicate.within_watermark:
            raise Unsupported("dropDuplicatesWithinWatermark")
        kid = self.annotate(P.children(rel)[0])
        d = rel.deduplicate
        user = self._user_columns(kid.rel)
        subset = list(d.column_names) if len(d.column_names) and not d.all_columns_as_keys \
            else user  # fmt: skip
        low = {c.lower() for c in subset}
        pid = P.plan_id(rel)
        rep = f"{P.KEY_PREFIX}r{pid}"
        aggs = [P.alias(P.fn("first", P.col(c)), c) for c in user if c.lower() not in low]
        aggs.append(P.alias(P.fn("min", P.fn("struct", *[P.col(k) for k in kid.keys])), rep))
        group = _pb_aggregate(kid.rel, [P.col(c) for c in subset], aggs)
        keys = [f"{P.KEY_PREFIX}g{pid}_{j}" for j in range(len(kid.keys))]
        exprs = [P.col(c) for c in user]
        for k, name in zip(kid.keys, keys):
            e = P.col(rep)
            e.unresolved_attribute.unparsed_identifier = f"{rep}.{k}"
            exprs.append(P.alias(e, name))
        out = P.wrap("project", group, expressions=exprs)
        return Keyed(P.with_id(out, pid), keys, {}, kid.monotone)

    def _to_df(self, rel: Any) -> Keyed:
        new, (kid,) = self._kids(rel)
        names = iter(list(new.to_df.column_names))
        full = [c if c.startswith(P.KEY_PREFIX) else next(names) for c in self.columns(kid.rel)]
        del new.to_df.column_names[:]
        new.to_df.column_names.extend(full)
        return Keyed(new, list(kid.keys), dict(kid.ids), kid.monotone, returned=kid.returned)

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
                else self._user_columns(kid.rel)  # fmt: skip
            grouping = [P.col(n) for n in names]
        return _pb_aggregate(kid.rel, grouping, [collect]), kid


def _pb_aggregate(child: Any, grouping: list[Any], aggs: list[Any]) -> Any:
    """A group-by relation over ``child``."""
    from pyspark.sql.connect import proto

    out = proto.Relation()
    out.aggregate.input.CopyFrom(child)
    out.aggregate.group_type = proto.Aggregate.GroupType.GROUP_TYPE_GROUPBY
    for g in grouping:
        out.aggregate.grouping_expressions.add().CopyFrom(g)
    for a in aggs:
        out.aggregate.aggregate_expressions.add().CopyFrom(a)
    return P.with_id(out, None)
