"""Fused reads over Spark Connect: a source's keys, its filters' conditions and its join
keys in one job, and filters, equi-joins and the grouping values after them in NumPy.

Without this, every traced dataset takes a job that runs its plan again up to it and
reads its keys back: a filter re-reads its source, a join re-runs both sides and the
join itself.  As the classic capture does (:mod:`tensprov_lab.capture.sources._fused`),
:func:`plan` walks a block's operations before they are captured and, for the shapes
below, notes per source the columns their rules need.  The source's key read then
reads those columns too, and:

- a *filter* (one ``filter`` relation, deterministic, naming columns by name) of a
  source or of such a filter keeps the records whose condition, read on the source, is
  true;
- an *equi-join* (inner or outer, ``using`` columns or equalities of plain columns, of
  types Spark and Arrow compare alike) of two such datasets of different sources
  pairs their key columns in NumPy (:func:`~tensprov_lab.capture.plan._equijoin.join_pairs`),
  in canonical (left, right) order;
- an aggregate whose grouping values ride along that join (:class:`._groups.Ride`) takes them
  from the sources' columns.

Anything else is traced by its own job as before; the lineage is the same (the Connect
oracle and operation tests run both paths).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tensprov_lab.capture.connect._ahead import Prefetch
from tensprov_lab.capture.connect._direct import file_schema
from tensprov_lab.capture.connect._index import KeyIndex
from tensprov_lab.capture.plan import _proto as P
from tensprov_lab.capture.plan._equijoin import (
    EXACT_KEY_TYPES,
    arrow_codes,
    dense_pairs,
    groups_through,
    join_pairs,
    key_codes,
)

__all__ = ["Fusion", "plan"]

#: join types whose pairs :func:`join_pairs` makes: which unmatched records are kept
_JOINS = {
    "JOIN_TYPE_INNER": (False, False),
    "JOIN_TYPE_LEFT_OUTER": (True, False),
    "JOIN_TYPE_RIGHT_OUTER": (False, True),
    "JOIN_TYPE_FULL_OUTER": (True, True),
}


@dataclass
class _Scan:
    """A dataset of a source's records in scan order: the source, and the filters'
    flags (columns of the source's read) that keep its records."""

    base: int
    flags: list[str] = field(default_factory=list)


@dataclass
class _Join:
    sides: tuple[int, int]
    keys: tuple[list[str], list[str]]
    keep: tuple[bool, bool]
    using: list[str] = field(default_factory=list)
    #: per key read as int instead of bigint (see _narrowed): its side and the column
    #: that says which records' keys did not fit
    wide: list[tuple[int, str]] = field(default_factory=list)


class Wide(Exception):
    """A join key read as int did not fit one: the join takes its own job."""


#: the range of int: a bigint key in it is read in half the bytes
_INT = (-(2**31), 2**31 - 1)


def _narrowed(key: Any) -> tuple[Any, Any]:
    """A bigint key as int where it fits (null elsewhere), and whether it did not fit
    (true: the read cannot be used).  Keys through gRPC cost by their bytes: at 5M
    records, a bigint key read in 1.53 s, as int in 1.29 s.  The cast is evaluated only
    where the value fits, so it never fails, with or without ANSI mode."""
    fits = P.fn("and", P.fn(">=", key, P.literal(_INT[0])), P.fn("<=", key, P.literal(_INT[1])))
    value = P.fn("when", fits, P.cast(key, "int"))
    wide = P.fn("and", P.fn("isnotnull", key), P.fn("not", fits))
    return value, wide


class Fusion:
    """What one block reads with its sources' keys, and the records derived from it."""

    def __init__(self) -> None:
        self.scans: dict[int, _Scan] = {}
        self.joins: dict[int, _Join] = {}
        #: per source ident: the columns to read with its keys (name -> expression)
        self.reads: dict[int, dict[str, Any]] = {}
        #: per source ident: the columns read, in the source's canonical order
        self.columns: dict[int, dict[str, Any]] = {}
        self._rows: dict[int, np.ndarray] = {}
        self._n: dict[int, int] = {}
        #: per fused join: its (left, right) record pairs
        self._pairs: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        #: per ride (by ``id``) along a fused join: each grouping column's side and read
        self.ride_reads: dict[int, list[tuple[int, str]]] = {}
        #: per source ident: its reads that narrow a bigint join key (see _narrowed), as
        #: ("narrow" | "wide", column) by the read's name, for reads made on the client
        #: (:mod:`._direct`)
        self.narrowed: dict[int, dict[str, tuple[str, str]]] = {}
        #: the session's file-layout settings, asked once a capture (:mod:`._direct`)
        self.layout: Any = None
        #: the session (a file source's schema is read from its files: :mod:`._direct`)
        self.spark: Any = None
        #: the datasets' schema fields asked so far, by ``id`` of the DataFrame
        #: (:meth:`schema`)
        self.fields: dict[int, list[Any]] = {}
        #: the block's round trips asked at once (:func:`plan`)
        self.prefetch = Prefetch()

    def schema(self, nodes: dict[int, Any], node: Any) -> list[Any]:
        """Dataset ``node``'s schema fields (``nodes``: the tracked ones, by ident).  A
        schema is a round trip to the server (~47 ms, more for a source's first, whose
        files' footers are read); a filter of a source has the source's, asked once."""
        scan = self.scans.get(node.ident)
        base = nodes.get(scan.base) if scan is not None else None
        df = base.df if base is not None else node.df
        got = self.fields.get(id(df))
        if got is None:
            if base is not None and self.spark is not None:
                got = file_schema(self.spark, df)  # a Parquet source's, from its files
            if got is None and node.ident in self.joins:
                got = self._join_schema(nodes, self.joins[node.ident])
            if got is None:
                got = list(self.prefetch.schema(df).fields)
            self.fields[id(df)] = got
        return got

    def _join_schema(self, nodes: dict[int, Any], j: _Join) -> list[Any] | None:
        """A fused join's fields from its sides' (as Spark's analyzer makes them: the
        using columns first, from the left side, the right's for a right join)."""
        left, right = (self.schema(nodes, nodes[s]) for s in j.sides)
        if not j.using:
            return left + right
        low = [u.lower() for u in j.using]
        keys = right if j.keep == (False, True) else left
        first = [next(f for f in keys if f.name.lower() == u) for u in low]
        return first + [f for f in left + right if f.name.lower() not in low]

    def _ask(self, base: int, name: str, expr: Any) -> str:
        self.reads.setdefault(base, {})[name] = expr
        return name

    # -- after the source's read ----------------------------------------------------------
    def took(self, base: int, table: Any, order: np.ndarray | None) -> None:
        """The source ``base``'s read (``order``: its rows in canonical order; None: in
        that order already)."""
        import pyarrow as pa

        names = self.reads.get(base, {})
        if order is None:
            self.columns[base] = {n: table.column(n) for n in names}
        else:
            idx = pa.array(order)
            self.columns[base] = {n: table.column(n).take(idx) for n in names}
        self._n[base] = table.num_rows

    def ready(self, ident: int) -> bool:
        """Whether dataset ``ident``'s records come from reads made already."""
        if ident in self.joins:
            return all(self.ready(s) for s in self.joins[ident].sides)
        scan = self.scans.get(ident)
        return scan is not None and scan.base in self.columns

    def rows(self, ident: int) -> np.ndarray:
        """The source rows (canonical positions) a scan-ordered dataset holds, in order."""
        got = self._rows.get(ident)
        if got is None:
            scan = self.scans[ident]
            if not scan.flags:  # the source's own records
                got = self._rows[ident] = np.arange(self._n[scan.base])
                return got
            keep = np.ones(self._n[scan.base], dtype=bool)
            for flag in scan.flags:
                col = self.columns[scan.base][flag]
                keep &= np.asarray(col.fill_null(False).to_numpy(zero_copy_only=False), bool)
            got = self._rows[ident] = np.flatnonzero(keep)
        return got

    def filter(self, out: int, inp: int, base_index: KeyIndex) -> tuple[np.ndarray, KeyIndex]:
        """A filter's kept records (positions in its input) and its key index."""
        rows = self.rows(out)
        if not self.scans[inp].flags:  # of the source itself: its rows are the positions
            return rows, KeyIndex(base_index.table[rows])
        before = self.rows(inp)
        kept = rows if len(before) == base_index.n else np.searchsorted(before, rows)
        return kept, KeyIndex(base_index.table[rows])

    def join(self, out: int) -> tuple[np.ndarray, np.ndarray]:
        """A join's (left, right) record pairs in canonical order (-1: none)."""
        j = self.joins[out]
        (lb, rb), (lk, rk) = [self.scans[s].base for s in j.sides], j.keys
        import pyarrow.compute as pc

        for side, name in j.wide:
            if pc.any(self.columns[(lb, rb)[side]][name]).as_py():
                raise Wide("a join key does not fit an int")
        lrows, rrows = self.rows(j.sides[0]), self.rows(j.sides[1])
        import pyarrow as pa

        dense = None
        if len(lk) == 1 and not j.keep[1]:
            left, right = self.columns[lb][lk[0]], self.columns[rb][rk[0]]
            dense = dense_pairs(left, lrows, right, rrows, j.keep[0])
        if dense is not None:
            li, ri = dense
        else:
            lcols = [self.columns[lb][k].take(pa.array(lrows)) for k in lk]
            rcols = [self.columns[rb][k].take(pa.array(rrows)) for k in rk]
            lc, rc = key_codes(lcols, rcols)
            li, ri = join_pairs(lc, rc, *j.keep)
        # matched pairs come in (left, right) order, an outer join's others after them
        if any(j.keep) or (dense is None and bool(np.any(li[1:] < li[:-1]))):
            order = np.lexsort((ri, li))
            li, ri = li[order], ri[order]
        self._pairs[out] = (li, ri)
        return li, ri

    def groups(self, out: int, sources: list[tuple[int, str]]) -> tuple[np.ndarray, int] | None:
        """The groups of a fused join's records by columns ``sources`` (``(side,
        name)``), numbered by first appearance, when the columns all come from one side
        (None: from both): the values are numbered over that side's records first
        (:func:`groups_through`)."""
        sides = {side for side, _ in sources}
        if len(sides) != 1:
            return None
        (side,) = sides
        ident = self.joins[out].sides[side]
        rows = self.rows(ident)
        columns = self.columns[self.scans[ident].base]
        coded = []
        for _, name in sources:
            codes, width = arrow_codes(columns[name])
            coded.append((codes[rows], width))
        return groups_through(coded, self._pairs[out][side])

    def values(self, out: int, sources: list[tuple[int, str]]) -> list[Any]:
        """Columns of a fused join's sides in its record order (``(side, name)``), as
        Arrow dictionary arrays: each side's values are encoded once over its source's
        records (a dimension table's few) and only their codes follow the join's
        records, not a string a record."""
        import pyarrow as pa

        j = self.joins[out]
        li, ri = self._pairs[out]
        got = []
        for side, name in sources:
            ident = j.sides[side]
            at = li if side == 0 else ri
            rows = self.rows(ident)
            column = self.columns[self.scans[ident].base][name]
            if hasattr(column, "chunks"):
                column = column.combine_chunks()
            encoded = column.dictionary_encode()
            codes = np.asarray(encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False))
            picked = codes[rows][np.maximum(at, 0)] if len(rows) else \
                np.full(len(at), -1, dtype=codes.dtype)  # fmt: skip
            # a missing record (an outer join's other side) or a null value: null
            indices = pa.array(picked, mask=(at < 0) | (picked < 0))
            got.append(pa.DictionaryArray.from_arrays(indices, encoded.dictionary))
        return got


def _plain_condition(cond: Any) -> bool:
    """Whether a filter condition reads columns by name only (so it means the same on
    the source), deterministically, without subqueries."""
    refs, _ = P.references(cond)
    if any(plan is not None for _, plan in refs):
        return False
    if P.nondeterministic(cond):
        return False
    proto = P._pb()
    return not any(
        isinstance(m, proto.Expression) and m.WhichOneof("expr_type") == "subquery_expression"
        for m in P.messages(cond)
    )


def _equalities(cond: Any, sides: tuple[int, int]) -> tuple[list[str], list[str]] | None:
    """The key columns of a join condition made only of ``left.a == right.b`` (ANDed),
    each naming its side's DataFrame (None: any other condition)."""
    terms, found = [cond], ([], [])  # type: ignore[var-annotated]
    while terms:
        e = terms.pop()
        if e.WhichOneof("expr_type") != "unresolved_function":
            return None
        f = e.unresolved_function
        name = f.function_name.lower()
        if name == "and" and len(f.arguments) == 2:
            terms.extend(f.arguments)
            continue
        if name != "==" or len(f.arguments) != 2:
            return None
        pair = {}
        for a in f.arguments:
            if a.WhichOneof("expr_type") != "unresolved_attribute":
                return None
            ua = a.unresolved_attribute
            col = ua.unparsed_identifier
            if not ua.HasField("plan_id") or "." in col or "`" in col:
                return None
            pair[int(ua.plan_id)] = col
        if set(pair) != set(sides):
            return None
        found[0].append(pair[sides[0]])
        found[1].append(pair[sides[1]])
    return found if found[0] else None


def plan(tracker: Any, pending: list[Any], chain: Any, rides: Sequence[Any] = ()) -> Fusion:
    """The fused reads of one block's ``pending`` items (``chain(rel, idents)``: the
    relation kinds of one operation), and of the grouping values of ``rides`` along a
    fused join."""
    from pyspark.sql.connect import proto

    fusion = Fusion()
    fusion.spark = tracker.spark
    fusion.prefetch = _ahead(fusion, tracker, pending)
    made: dict[int, Any] = {}
    for item in pending:
        if not hasattr(item, "out"):  # a source of this block
            if P.kind(P.relation(item.df)) != "sql":
                fusion.scans[item.ident] = _Scan(item.ident)
            continue
        p = item
        made[p.out.ident] = p
        rel = P.relation(p.out.df)
        ids = [n.ident for n in p.inputs]
        try:
            kinds = chain(rel, set(ids))
        except Exception:  # noqa: BLE001 - not fused
            continue
        if kinds == {"filter"} and len(ids) == 1 and ids[0] in fusion.scans:
            cond = rel.filter.condition
            if P.plan_id(rel.filter.input) != ids[0] or not _plain_condition(cond):
                continue
            before = fusion.scans[ids[0]]
            flag = fusion._ask(before.base, f"{P.KEY_PREFIX}f{p.out.ident}", cond)
            fusion.scans[p.out.ident] = _Scan(before.base, [*before.flags, flag])
        elif kinds == {"join"} and len(ids) == 2 and all(i in fusion.scans for i in ids):
            j = rel.join
            kind = proto.Join.JoinType.Name(j.join_type)
            bases = [fusion.scans[i].base for i in ids]
            if kind not in _JOINS or bases[0] == bases[1]:
                continue
            if [P.plan_id(j.left), P.plan_id(j.right)] != ids:
                continue
            if len(j.using_columns) and not j.HasField("join_condition"):
                keys = (list(j.using_columns), list(j.using_columns))
            elif j.HasField("join_condition") and not len(j.using_columns):
                found = _equalities(j.join_condition, (ids[0], ids[1]))
                if found is None:
                    continue
                keys = found
            else:
                continue
            types = _exact_keys(fusion, tracker, [n for n in p.inputs], keys)
            if types is None:
                continue
            names = ([], [])  # type: ignore[var-annotated]
            wide = []
            for s in (0, 1):
                for k, t in zip(keys[s], types):
                    expr = P.col(k)
                    name = f"{P.KEY_PREFIX}j{k}"
                    if t == "bigint":
                        expr, over = _narrowed(expr)
                        flag = fusion._ask(bases[s], f"{P.KEY_PREFIX}w{s}{k}", over)
                        wide.append((s, flag))
                        shapes = fusion.narrowed.setdefault(bases[s], {})
                        shapes[flag], shapes[name] = ("wide", k), ("narrow", k)
                    names[s].append(fusion._ask(bases[s], name, expr))
            fusion.joins[p.out.ident] = _Join(
                (ids[0], ids[1]), names, _JOINS[kind], list(j.using_columns), wide
            )
    for r in rides:
        j = fusion.joins.get(r.root)
        if j is None:
            continue
        inputs = [tracker.nodes[s] for s in j.sides]
        sides = [_side_of(fusion, tracker, j, inputs, name) for name in r.names]
        picked = [f for f in sides if f is not None]
        if len(picked) == len(sides):
            fusion.ride_reads[id(r)] = [
                (side, fusion._ask(fusion.scans[j.sides[side]].base, f"{P.KEY_PREFIX}v{name}",
                                   P.col(name)))
                for side, name in picked
            ]  # fmt: skip
    return fusion


def _ahead(fusion: Fusion, tracker: Any, pending: list[Any]) -> Prefetch:
    """The block's round trips, asked at once: the schemas the capture will ask the
    server for (a source's is read from its files when the client can; a filter's is
    its input's) and, when the client reads sources itself, the file-layout settings."""
    from tensprov_lab.capture.connect._direct import layout_conf

    frames, sources = [], False
    for item in pending:
        if not hasattr(item, "out"):  # a source
            sources = True
            got = file_schema(tracker.spark, item.df)
            if got is not None:
                fusion.fields[id(item.df)] = got
            else:
                frames.append(item.df)
        elif P.kind(P.relation(item.out.df)) != "filter":
            frames.append(item.out.df)
    calls = {}
    if sources and tracker.direct_reads:
        calls["layout"] = lambda: layout_conf(tracker.spark, tracker._layout_cache)
    return Prefetch(frames, calls)


def _side_of(
    fusion: Fusion, tracker: Any, j: _Join, inputs: list[Any], name: str
) -> tuple[int, str] | None:
    """Which side of a fused join a column of its output comes from, and its name
    there, when its values are one side's as they are (of a type Arrow groups as Spark
    does); None otherwise."""
    from tensprov_lab.capture.connect._groups import EXACT_GROUP_TYPES

    low = name.lower()
    if low in {u.lower() for u in j.using}:
        if j.keep == (True, True):
            return None  # a full join's using column: either side's value
        side = 1 if j.keep == (False, True) else 0
    else:
        has = [[f.name.lower() for f in fusion.schema(tracker.nodes, n)].count(low) for n in inputs]
        if sorted(has) != [0, 1]:
            return None
        side = has.index(1)
    field_ = next(f for f in fusion.schema(tracker.nodes, inputs[side]) if f.name.lower() == low)
    if field_.dataType.simpleString() not in EXACT_GROUP_TYPES:
        return None
    return side, field_.name


def _exact_keys(
    fusion: Fusion, tracker: Any, inputs: list[Any], keys: tuple[list[str], list[str]]
) -> list[str] | None:
    """The keys' types, when each key column is one column of its side, of a type Spark
    and Arrow compare alike, the same on both sides (else None)."""
    types = []
    for node, names in zip(inputs, keys):
        got = fusion.schema(tracker.nodes, node)
        fields = {f.name.lower(): f for f in got}
        low = [f.name.lower() for f in got]
        side = []
        for k in names:
            if low.count(k.lower()) != 1:
                return None
            side.append(fields[k.lower()].dataType.simpleString())
        types.append(side)
    if types[0] != types[1] or not all(t in EXACT_KEY_TYPES for t in types[0]):
        return None
    return types[0]
