"""Fused capture: one Spark job per scan-ordered dataset instead of one per operation.

A dataset is *scan-ordered* when Spark returns its records in their canonical order
(DESIGN.md §3): a source whose plan is stable, and a filter or projection of a
scan-ordered dataset.  For such a dataset the position of a record in ``toArrow()``'s
answer is its canonical index, so its records need no key at all: a filter's mask is
its condition evaluated on the input, a column that a later join or aggregate needs is
just read.  Before a block's operations are captured, :func:`plan` walks them in order
and, for the operations one of the rules below covers, notes the columns their rules
need, per dataset.  Each dataset's columns are then read in one job (a column of a
source that a filter of it passes on unchanged is read from the source, so a source, its
filters and the join keys of those filters take one scan).  The capture of each covered
operation then takes its record indices from those columns:

- *filter* of a scan-ordered input: the rows where the condition is true;
- *equi-join* of two scan-ordered inputs: each side's key columns matched in NumPy
  (:mod:`._equijoin`), pairs in canonical (left, right) order;
- *aggregate* grouping by attributes of a scan-ordered input, or of one side of such a
  join (a projection in between keeps them), or by values a projection computes over
  one joined dataset: every input record is a member of the group of its values
  (:mod:`._fused_groups`);
- the rest of docs/fused-capture.md's table: semi and anti joins, join conditions
  beyond the keys and filters of a join's output (:mod:`._fused_residual`), sorts of
  groups or records by values read, their limits (:mod:`._fused_sort`), and the steps
  over an aggregate's output (its records read through Spark, put in canonical order
  by their grouping values).

Anything else (and any of these whose columns could not be read) is captured by its own
job as before.  The result is the same lineage, which the tests that compare captures
across partitionings and against the oracle check.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from tensprov_lab.capture.plan._equijoin import (
    dense_pairs,
    find_equi_join,
    join_pairs,
    key_codes,
    semi_rows,
    with_unmatched,
)
from tensprov_lab.capture.plan._keyed import key_name
from tensprov_lab.capture.plan._keys import KeyError_
from tensprov_lab.capture.plan._pieces import (
    positions_per_piece,
    read_frame_in_pieces,
    row_bytes,
)
from tensprov_lab.capture.sources._direct import direct_read
from tensprov_lab.capture.sources._direct_csv import CheckedFiles
from tensprov_lab.capture.sources._fused_computed import Computing
from tensprov_lab.capture.sources._fused_fetch import Fetching
from tensprov_lab.capture.sources._fused_groups import Grouping
from tensprov_lab.capture.sources._fused_model import NO_RULE, Refused, Rule, Scan, parts_of
from tensprov_lab.capture.sources._fused_release import Releasing
from tensprov_lab.capture.sources._fused_residual import (
    Residual,
    holds_of,
    residual_of,
)
from tensprov_lab.capture.sources._fused_sort import (
    sortable,
)
from tensprov_lab.capture.sources._shapes import (
    below,
    copy_of,
    renames_of,
    reordering_subquery,
    scan_ordered,
    under_projections,
)
from tensprov_lab.capture.spark._jvm import Jvm
from tensprov_lab.store import Tensor, tensor_from_flags

__all__ = ["Fusion", "plan"]

JObject = Any


class Fusion(Fetching, Grouping, Computing, Releasing):
    """The columns one tracked block reads, and the record indices derived from them."""

    def __init__(self, jvm: Jvm) -> None:
        self.jvm = jvm
        self.scans: dict[int, Scan] = {}
        #: a join's output (or a projection of it), by ident: the join output's ident
        self.composite: dict[int, int] = {}
        self.rules: dict[int, Rule] = {}
        #: per dataset read: its plan, and its columns by name
        self.plans: dict[int, JObject] = {}
        self.reads: dict[int, dict[str, JObject]] = {}
        #: the expression of each read column (``reads`` holds it aliased to its name)
        self.exprs: dict[int, dict[str, JObject]] = {}
        #: whether a source's columns may be read straight from its files (see _direct)
        self.direct = True
        #: the CSV files found plain earlier in the capture (see _direct_csv)
        self.checked: CheckedFiles | None = None
        #: the reads that went through Spark (the others were read from files)
        self.spark_reads: set[int] = set()
        self._attr_names: dict[tuple[int, int], str] = {}
        self._ids: dict[int, set[int]] = {}
        self.tables: dict[int, Any] = {}
        #: the operation (by output ident) whose capture runs each read, and its seconds
        self.owner: dict[int, int] = {}
        self.seconds: dict[int, float] = {}
        self.jobs: dict[int, int] = {}
        self._positions: dict[int, np.ndarray | None] = {}
        #: the number of records capture gave each dataset (every column read is
        #: checked against it)
        self.size_of: Any = lambda ident: None
        self._pairs: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        #: a fused semi join's matches until its capture takes them (see matches)
        self._matches: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        #: the copies of each source a statement reads (its table read again: a plan
        #: of its own, with new attribute ids, see copy_of), by ident
        self._copies: dict[int, list[tuple[int, JObject]]] = {}
        #: a fused join's condition beyond its keys (inner, semi and anti joins), and a
        #: fused filter's of a join's output
        self.residuals: dict[int, Residual] = {}
        #: a fused filter of a join's output: the records of its input it keeps
        self._kept: dict[int, np.ndarray] = {}
        #: the records of each read (kept after its table is released)
        self._rows: dict[int, int] = {}
        #: the rules whose capture is over (their reads may be released)
        self._done: set[int] = set()
        #: an aggregate's grouping attributes, and the grouping values of the groups of
        #: those a fused sort sorts (see _fused_sort), until the sort is captured
        self.grouping: dict[int, list[JObject]] = {}
        self._values: dict[int, list[Any] | None] = {}
        self._sorters: dict[int, int] = {}
        #: a fused aggregate whose output a later step reads (its groups are its
        #: records, read through Spark in an order of Spark's: see _order): the reads
        #: of its grouping attributes (None until a step reads it), the groups' grouping
        #: values in canonical order, and where each group is among the read's records
        self._group_reads: dict[int, list[tuple[int, str]] | None] = {}
        self._group_values: dict[int, list[Any]] = {}
        self._group_rows: dict[int, np.ndarray] = {}
        #: such an aggregate's input (ident and plan), and the columns of it that its
        #: capture computes from its groups instead (see _computed_read): by name their
        #: kind and reads, then the columns themselves, groups in canonical order
        self._aggregated: dict[int, tuple[int, JObject]] = {}
        self._specs: dict[int, dict[str, tuple[Any, ...]]] = {}
        self._computed: dict[int, dict[str, Any]] = {}
        self._computed_names: dict[tuple[int, int], str] = {}
        #: the global aggregates of fused records (rule kind "global"): the value of a
        #: scalar subquery over one, which a filter compares, is computed too
        self._globals: set[int] = set()
        #: the fused anti joins of NOT IN (see _equijoin.semi_rows)
        self.null_aware: set[int] = set()
        #: a fused limit's number of records
        self.limits: dict[int, int] = {}
        #: the most pairs a fused join matches in NumPy (16 bytes each, and as much
        #: again for what the steps above take through them); a join past it is
        #: captured by its own job, which reads in pieces or stays coarse past what the
        #: driver holds (a multi-way comma join's steps below its last filter can pair
        #: far more records than the statement returns)
        self.max_pairs = MAX_PAIRS
        #: a fused sort's node and the plan it sorts
        self._sorts: dict[int, tuple[JObject, JObject]] = {}
        #: a fused sort of records whose sort values are read: its node, and each
        #: order's value compiled over the reads
        self.record_sorts: dict[int, tuple[JObject, list[Residual]]] = {}
        #: set when the reads side by side are given up (Ctrl-C): a read in pieces
        #: asks for no more (cancelling the job group stops only the jobs running)
        self._stopped = threading.Event()

    # -- planning --------------------------------------------------------------------
    def _out_ids(self, ident: int, plan: JObject) -> set[int]:
        ids = self._ids.get(ident)
        if ids is None:
            ids = self._ids[ident] = set(self.jvm.expr_ids(plan))
        return ids

    def _read(
        self, ds: int, plan: JObject, expr: JObject, owner: int, *, spark: bool = False
    ) -> tuple[int, str]:
        """Ask for ``expr`` over dataset ``ds``'s records: read from the source ``ds``
        filters when it is an attribute the source has (so the source and its filters
        take one scan), else from ``ds`` itself; a fused aggregate's value its groups
        give is computed from them unless ``spark`` (the grouping values that put its
        records read through Spark in canonical order)."""
        jvm = self.jvm
        target, target_plan = ds, plan
        attr = jvm.cls(expr) == "AttributeReference"
        grouped = self.scans[ds].base in self._group_reads
        copy = self._copy_reading(self.scans[ds].base, expr)
        if copy is not None:  # over a copy of the source (its attributes): the same records
            target, target_plan = copy
        else:
            base = self.scans[ds].base
            base_plan = self.plans.get(base)
            if base != ds and base_plan is not None and self._over_base(expr, base, attr):
                target, target_plan = base, base_plan
        if grouped and target != self.scans[ds].base:
            # (read through Spark over a filter of an aggregate's output, its records
            # would come in Spark's order)
            raise Refused("an expression over a filter of an aggregate's output")
        if attr:
            known = self._attr_names.get((target, int(expr.exprId().id())))
            if known is not None:
                return target, known
        if grouped and not spark and target in self._aggregated:
            # a grouping value, a count, a sum or a condition over them: known from the
            # groups, not read through Spark
            computed = self._computed_value(target, expr)
            if computed is not None:
                return target, computed
        if grouped and self._group_reads[target] is None:
            # the grouping values its records are put in canonical order by
            self._group_reads[target] = []
            self._group_reads[target] = [
                self._read(target, target_plan, g, owner, spark=True) for g in self.grouping[target]
            ]
        if not attr and not grouped:
            late = self._subquery_read(ds, plan, expr, owner)
            if late is not None:
                return late
        name = key_name("f")
        self.plans.setdefault(target, target_plan)
        self.reads.setdefault(target, {})[name] = jvm.alias(expr, name)
        self.exprs.setdefault(target, {})[name] = expr
        self.owner.setdefault(target, owner)
        if attr:
            self._attr_names[(target, int(expr.exprId().id()))] = name
        return target, name

    def _over_base(self, expr: JObject, base: int, attr: bool) -> bool:
        """Whether ``expr`` over a filter of source ``base`` may be read over the source's
        every record instead: an attribute of the source, or an expression over them
        that its files give without Spark (:func:`direct_read`: nothing that can fail on
        a record the filter drops, and one scan for the source and its filters)."""
        jvm = self.jvm
        ids = self._out_ids(base, self.plans[base])
        if attr:
            return int(expr.exprId().id()) in ids
        refs = {int(a.exprId().id()) for a in jvm.lst(expr.references().toSeq())}
        if not self.direct or not refs <= ids or not bool(expr.deterministic()):
            return False
        return direct_read(jvm, self.plans[base], {"x": expr}, self.checked) is not None

    def add_source(self, ident: int, plan: JObject) -> None:
        """A source of the block: scan-ordered when its plan is stable."""
        if scan_ordered(self.jvm, plan):
            self.scans[ident] = Scan(ident)
            self.plans[ident] = plan

    def add_operation(self, out: int, inputs: list[Any], plan: JObject) -> None:
        """Note the rule that covers ``out = f(inputs)``, if one does."""
        try:
            self._add_operation(out, inputs, plan)
        except Refused:
            pass  # (a read no fused rule takes: the operation's own job)

    def _add_operation(self, out: int, inputs: list[Any], plan: JObject) -> None:
        jvm = self.jvm
        idents = [n.ident for n in inputs]
        if len(set(idents)) != len(idents) or reordering_subquery(jvm, plan):
            return
        if len(inputs) == 2 and all(i in self.scans or i in self.composite for i in idents):
            self._join(out, inputs, plan)
            return
        if len(inputs) != 1:
            return
        (src,) = inputs
        if below(jvm, plan, src.ident) is not None:  # projections only: the same records
            if src.ident in self.scans:
                self.scans[out] = Scan(self.scans[src.ident].base, src.ident)
                self.plans.setdefault(out, plan)
            elif src.ident in self.composite:
                self.composite[out] = self.composite[src.ident]
            return
        if not jvm.deterministic(plan):
            return
        if self._projects_copy(plan, src):
            # a projection of a copy of a source (TPC-H Q21's subquery over lineitem
            # again): the source's records, its columns read over the copy
            self.scans[out] = Scan(src.ident, src.ident)
            self.plans.setdefault(out, plan)
            return
        # a SQL statement's step: the projection of its SELECT above the main node, the
        # view and alias of its table below it (the same records either way)
        main = under_projections(jvm, plan)
        cls = jvm.cls(main)
        kids = jvm.children(main)
        if len(kids) != 1:
            return
        if cls != "GlobalLimit" and self._same_records(kids[0], src) is None:
            return
        if cls == "Filter" and src.ident in self.scans:
            flag = self._read(src.ident, src.plan, main.condition(), out)
            self.scans[out] = Scan(self.scans[src.ident].base, src.ident, flag)
            self.plans.setdefault(out, plan)
            self.rules[out] = Rule("filter", [src.ident])
        elif cls == "Filter" and src.ident in self.composite:
            # a filter of a join's output: its condition over the joined datasets'
            # values of each record, as a join's residual condition is evaluated
            residual = residual_of(self, [src], kids, main.condition(), out)
            if residual is not None:
                self.residuals[out] = residual
                self.rules[out] = Rule("join-filter", [src.ident])
                self.composite[out] = out
        elif cls == "Aggregate":
            self._aggregate(out, src, main, plan)
        elif (
            cls == "Sort"
            and bool(getattr(main, "global")())
            and src.ident in self.grouping
            and not self._sorted_by_computed(main, src.ident)
        ):
            grouped = set(self._out_ids(src.ident, src.plan))
            keys = self.grouping[src.ident]
            if all(int(g.exprId().id()) in grouped for g in keys) and sortable(jvm, main):
                self.rules[out] = Rule("sort", [src.ident])
                self._sorts[out] = (main, src.plan)
                self._values.setdefault(src.ident, None)  # (kept when numbered)
                self._sorters[src.ident] = self._sorters.get(src.ident, 0) + 1
        elif (
            cls == "Sort"
            and bool(getattr(main, "global")())
            and (src.ident in self.scans or src.ident in self.composite)
            and sortable(jvm, main)
        ):
            # a sort of records whose sort values are read (a join's output: TPC-H Q2's
            # ORDER BY over its joined tables), sorted as the values of groups are
            values = [residual_of(self, [src], kids, o.child(), out) for o in jvm.lst(main.order())]
            if all(v is not None for v in values):
                self.rules[out] = Rule("sort", [src.ident])
                self.record_sorts[out] = (main, [v for v in values if v is not None])
        elif cls == "GlobalLimit" and self.rules.get(src.ident, NO_RULE).kind == "sort":
            # the first records of sorted groups (a top-k): records Spark returns in
            # their canonical order, so the first k of them
            local = jvm.children(main)[0]
            if jvm.cls(local) == "LocalLimit" and renames_of(
                jvm, jvm.children(local)[0], src.ident
            ):
                self.rules[out] = Rule("limit", [src.ident])
                self.limits[out] = int(main.maxRows().get())

    def _join(self, out: int, inputs: list[Any], plan: JObject) -> None:
        jvm = self.jvm
        ej = find_equi_join(jvm, plan, semi=True, residual=True)
        if ej is None or len(ej.sides) != len(inputs):
            return
        parts = [self._same_records(s, n) for s, n in zip(ej.sides, inputs)]
        if None in parts:
            return  # (a table's view and alias in between keep its records)
        if below(jvm, plan, jvm.ident(ej.node)) is None:
            return
        columns, over = [], []
        for node, keys in zip(inputs, ej.keys):
            found = [self._key_leaf(node.ident, k) for k in keys]
            leaves = [leaf for leaf in found if leaf is not None]
            if len(leaves) != len(found):
                return
            over.append(leaves)
            columns.append([
                self._read(leaf, node.plan if leaf == node.ident else self.plans[leaf], k, out)
                for leaf, k in zip(leaves, keys)
            ])  # fmt: skip
        if ej.residual is not None:
            residual = residual_of(self, inputs, ej.sides, ej.residual, out)
            if residual is None:
                return
            self.residuals[out] = residual
        # a semi (anti) join's records are its left input's that have a match (none):
        # a join whose output has no right record, the matches its right tensor lists
        kind = {"LeftSemi": "semi", "LeftAnti": "anti"}.get(ej.how, "join")
        if ej.null_aware:
            self.null_aware.add(out)
        self.rules[out] = Rule(
            kind, [n.ident for n in inputs], columns, over, ej.keep, [p for p in parts if p]
        )
        self.composite[out] = out

    def _key_leaf(self, ds: int, expr: JObject) -> int | None:
        """The scan-ordered dataset to read ``expr`` over for the records of ``ds``: ``ds``
        itself, or for a join's output the joined dataset that has the attribute (a
        chain of joins, as a statement's multi-way join is, is matched join by join)."""
        if ds in self.scans:
            return ds
        if self.jvm.cls(expr) != "AttributeReference":
            return None  # (an expression over a join's output: not read here)
        return self._attr_leaf(ds, int(expr.exprId().id()))

    def _same_records(self, plan: JObject, node: Any) -> int | None:
        """Whether an operation's ``plan`` below it is its input ``node``'s (under
        aliases and views: ``node``'s ident), or a copy of a source ``node``
        (:func:`copy_of`: the copy's ident), which is then read for the attributes it
        has; None when it is neither."""
        if renames_of(self.jvm, plan, node.ident):
            return int(node.ident)
        scan = self.scans.get(node.ident)
        if scan is None or scan.parent is not None or not copy_of(self.jvm, plan, node.plan):
            return None
        ident = int(self.jvm.ident(plan))
        if all(c != ident for c, _ in self._copies.get(node.ident, [])):
            self._copies.setdefault(node.ident, []).append((ident, plan))
            # (the same records: read over its own attributes where a join names it)
            self.scans[ident] = Scan(ident)
            self.plans[ident] = plan
        return ident

    def _projects_copy(self, plan: JObject, src: Any) -> bool:
        """Whether ``plan`` is projections (deterministic: checked by the caller) of a
        copy of source ``src`` (:meth:`_same_records`)."""
        scan = self.scans.get(src.ident)
        if scan is None or scan.parent is not None:
            return False
        jvm = self.jvm
        node, projected = plan, False
        while jvm.cls(node) in ("Project", "SubqueryAlias", "View", "ResolvedHint"):
            projected = projected or jvm.cls(node) == "Project"
            node = jvm.children(node)[0]
        part = self._same_records(node, src) if projected else None
        return part is not None and part != src.ident

    def _copy_reading(self, ds: int, expr: JObject) -> tuple[int, JObject] | None:
        """The copy of source ``ds`` whose attributes ``expr`` reads (None: none)."""
        copies = self._copies.get(ds)
        if not copies:
            return None
        jvm = self.jvm
        if jvm.cls(expr) == "AttributeReference":
            refs = {int(expr.exprId().id())}
        else:
            refs = {int(a.exprId().id()) for a in jvm.lst(expr.references().toSeq())}
        for ident, plan in copies:
            if refs and refs <= self._out_ids(ident, plan):
                self.plans.setdefault(ident, plan)
                return ident, plan
        return None

    def _attr_leaf(self, ds: int, expr_id: int, part: int | None = None) -> int | None:
        """The scan-ordered dataset at or below ``ds`` whose attribute ``expr_id`` is
        (``part``: the dataset a join reads ``ds`` as, see :attr:`Rule.parts`)."""
        if ds in self.scans:
            if part is not None and part != ds:  # (a copy of source ds)
                return part if expr_id in self._out_ids(part, self.plans[part]) else None
            if expr_id in self._out_ids(ds, self.plans[ds]):
                return ds
            if part is not None:
                return None  # (a join's side that is the source, not a copy of it)
            copies = self._copies.get(ds, [])
            return ds if any(expr_id in self._out_ids(c, p) for c, p in copies) else None
        join = self.composite.get(ds)
        if join is None:
            return None
        rule = self.rules[join]
        found = [self._attr_leaf(i, expr_id, p) for i, p in zip(rule.inputs, parts_of(rule))]
        hits = [f for f in found if f is not None]
        return hits[0] if len(hits) == 1 else None

    def _leaves(self, ds: int) -> set[int]:
        """The scan-ordered datasets a join's output (or ``ds`` itself) is made of."""
        join = self.composite.get(ds)
        if join is None:
            return {ds}
        rule = self.rules[join]
        return {
            leaf
            for i, p in zip(rule.inputs, parts_of(rule))
            for leaf in (self._leaves(i) if i in self.composite else {p})
        }

    # -- reads (the reading itself: _fused_fetch.Fetching) ---------------------------
    def _spark_read(self, ident: int, to_arrow: Any) -> Any:
        """``ident``'s columns read through Spark, each record with its partition, in
        pieces of scan positions when its partitions are large
        (:mod:`tensprov_lab.capture.plan._pieces`).  (A first request without the
        partitions, 4 bytes a record less, cannot tell whether it filled some
        partition's range: a source of many partitions that together reach a piece was
        read twice, 20M orders on a driver of 1 GB in 3.6 s instead of 2.5 s.)"""
        jvm = self.jvm
        exprs = list(self.reads[ident].values())
        names = list(self.reads[ident])
        key = key_name("s")
        mono = jvm.alias(jvm.expression("MonotonicallyIncreasingID")(), key)
        keyed = jvm.to_df(jvm.project([*exprs, mono], self.plans[ident]))
        types = [str(e.dataType().simpleString()) for e in exprs]
        per = positions_per_piece(jvm.spark, row_bytes(types, 4))  # (and the partition)
        return read_frame_in_pieces(keyed, key, names, to_arrow, per, self._stopped)

    def reads_of(self, out: int) -> list[int]:
        """The reads the capture of operation ``out`` runs (the first one that needs them)."""
        return [t for t, o in self.owner.items() if o == out]

    def _whole(self, ident: int) -> list[int]:
        """The reads over a source's every record in scan order: of the source itself,
        or of a projection of it (no filter on the way)."""
        scan = self.scans.get(ident)
        if scan is None or scan.parent is not None:
            return []
        found = []
        for target in self.reads:
            # up through projections only: a filter's records are fewer
            up, step = target, self.scans.get(target)
            while step is not None and step.flag is None and step.parent is not None:
                up, step = step.parent, self.scans.get(step.parent)
            if up == ident:
                found.append(target)
        return found

    def reads_whole(self, ident: int) -> bool:
        """Whether a source is to be read whole in scan order (its :meth:`size` known
        once the read has run)."""
        return bool(self._whole(ident))

    def size(self, ident: int) -> int | None:
        """The number of records of a source read whole (None: not read)."""
        for target in self._whole(ident):
            if target in self._rows:
                return self._rows[target]
        return None

    def positions(self, ident: int) -> np.ndarray | None:
        """Where the records of a scan-ordered dataset are among its source's (None: they
        are the source's, or unknown)."""
        if ident in self._positions:
            return self._positions[ident]
        scan = self.scans[ident]
        pos: np.ndarray | None = None
        if scan.parent is not None:
            up = self.positions(scan.parent)
            if scan.flag is None:
                pos = up
            else:
                rows = self.survivors(ident)
                pos = rows if up is None else up[rows]
        self._positions[ident] = pos
        return pos

    def column(self, ds: int, read: tuple[int, str]) -> Any:
        """The Arrow column ``read`` over the records of dataset ``ds``, in their order."""
        col, pos = self._raw(ds, read)
        return col if pos is None else col.take(pos)

    def _raw(self, ds: int, read: tuple[int, str]) -> tuple[Any, np.ndarray | None]:
        """The Arrow column ``read`` as read, and where dataset ``ds``'s records are in
        it (ascending; None: all of them): :meth:`column` without the copy, for
        :func:`dense_pairs`."""
        target, name = read
        if name in self._specs.get(target, {}):
            if target in self._globals:
                self.compute_global(target)
            col = self._computed.get(target, {}).get(name)
            if col is None:  # (one over a scalar subquery's value, or not computed)
                col = self._late_value(target, name)
        else:
            col = self.tables[target].column(name)
            if target in self._group_reads:
                col = col.take(self._order(target))
        pos = self.positions(ds) if target != ds else None
        expected = self.size_of(ds)
        got = len(col) if pos is None else len(pos)
        if expected is not None and got != expected:
            raise KeyError_(f"a fused read has {got} records where {expected} were counted")
        return col, pos

    def _flags(self, ident: int) -> np.ndarray:
        """A filter's condition on each of its input rows (null: not kept)."""
        scan = self.scans[ident]
        assert scan.parent is not None and scan.flag is not None
        flag = self.column(scan.parent, scan.flag)
        return np.asarray(flag.fill_null(False).to_numpy(), dtype=bool)

    def mask(self, ident: int) -> Tensor:
        """A filter's tensor, packed from its condition's flags: its rows are not
        needed for it (:meth:`positions` finds them when a later read needs them)."""
        if self.rules[ident].kind == "join-filter":
            kept, n = self.kept(ident)
            flags = np.zeros(n, dtype=bool)
            flags[kept] = True
            return tensor_from_flags(flags)
        return tensor_from_flags(self._flags(ident))

    def kept(self, ident: int) -> tuple[np.ndarray, int]:
        """A fused filter of a join's output: the input records it keeps (ascending),
        and how many records its input has."""
        (src,) = self.rules[ident].inputs
        reads = self.residuals[ident].reads
        n = self.size_of(src)
        if n is None and reads:  # (the records of a joined dataset behind each record)
            at = self.rows_of(src, reads[0][1])
            n = None if at is None else len(at)
        if n is None:
            raise KeyError_("a fused filter's input was not counted")
        got = self._kept.get(ident)
        if got is None:
            holds = holds_of(self, ident)
            assert holds is not None
            got = self._kept[ident] = np.flatnonzero(holds(np.arange(n)))
            self._prune()  # (its condition's columns are not read again)
        return got, n

    def survivors(self, ident: int) -> np.ndarray:
        """A filter's surviving input rows."""
        scan = self.scans[ident]
        assert scan.parent is not None
        rows = np.flatnonzero(self._flags(ident))
        if self.scans[scan.parent].parent is None:
            # a filter of the source itself: these are its positions among the source's
            # records too, which a later join's read of the source takes (kept only
            # while a rule needs them, see _prune)
            self._positions[ident] = rows
        return rows

    def pairs(self, ident: int) -> tuple[np.ndarray, np.ndarray]:
        """A join's (left row, right row) pairs in canonical order (-1: no record)."""
        got = self._pairs.get(ident)
        if got is None and self.rules[ident].kind in ("semi", "anti"):
            got = self._pairs[ident] = self._semi(ident)
            self._prune()
        if got is None:
            rule = self.rules[ident]
            dense = None
            scans = all(over == [i] * len(over) for i, over in zip(rule.inputs, rule.over))
            residual = holds_of(self, ident)
            if len(rule.columns[0]) == 1 and not rule.keep[1] and scans and residual is None:
                (lds, rds), ((lread,), (rread,)) = rule.inputs, rule.columns
                dense = dense_pairs(*self._raw(lds, lread), *self._raw(rds, rread), rule.keep[0])
            if dense is not None:
                li, ri = dense
            else:
                left, right = (
                    self._over(i, leaves, cols)
                    for i, cols, leaves in zip(rule.inputs, rule.columns, rule.over)
                )
                codes = key_codes(left, right)
                if residual is not None and any(rule.keep):
                    # an outer join's condition beyond its keys: the key pairs where it
                    # holds, then each side's records left without one
                    li, ri = join_pairs(*codes, False, False, max_pairs=self.max_pairs)
                    ok = residual(li, ri)
                    sizes = (len(left[0]), len(right[0]))
                    li, ri = with_unmatched(li[ok], ri[ok], sizes, rule.keep)
                    residual = None
                else:
                    li, ri = join_pairs(*codes, *rule.keep, max_pairs=self.max_pairs)
            # an inner join's pairs come in canonical order already (both sort matches
            # by left, then right row); an outer join's unmatched rows follow
            if any(rule.keep) or (dense is None and bool(np.any(li[1:] < li[:-1]))):
                order = np.lexsort((ri, li))
                li, ri = li[order], ri[order]
            if residual is not None:  # (an inner join's: its pairs where it holds)
                ok = residual(li, ri)
                li, ri = li[ok], ri[ok]
            got = self._pairs[ident] = (li, ri)
            # the join's key columns are not read again once its pairs are known
            self._prune()
        return got

    def _semi(self, ident: int) -> tuple[np.ndarray, np.ndarray]:
        """A semi or anti join's :meth:`pairs`: the left records it keeps, no right
        record; a semi join's matches are kept for :meth:`matches`."""
        rule = self.rules[ident]
        left, right = (
            self._over(i, leaves, cols)
            for i, cols, leaves in zip(rule.inputs, rule.columns, rule.over)
        )
        lc, rc = key_codes(left, right)
        kept, matched = semi_rows(
            lc,
            rc,
            rule.kind == "anti",
            self.max_pairs,
            holds_of(self, ident),
            ident in self.null_aware,
        )
        if matched is not None:
            self._matches[ident] = matched
        return kept, np.full(len(kept), -1, dtype=kept.dtype)

    def matches(self, ident: int) -> tuple[np.ndarray, np.ndarray] | None:
        """A fused semi join's matches, ``(output record, right record)`` in canonical
        order, once (None: an anti join, whose output matched nothing)."""
        self.pairs(ident)
        return self._matches.pop(ident, None)

    def rows_of(self, ds: int, leaf: int) -> np.ndarray | None:
        """For each record of ``ds``, its record of the joined dataset ``leaf`` (-1: an
        outer join has none); None when ``ds`` is ``leaf`` (each record itself)."""
        if ds == leaf:
            return None
        join = self.composite[ds]
        expected = self.size_of(ds)
        if self.rules[join].kind == "join-filter":
            (src,) = self.rules[join].inputs
            kept, _ = self.kept(join)
            if expected is not None and len(kept) != expected:
                raise KeyError_(
                    f"a fused filter has {len(kept)} records where {expected} were counted"
                )
            inner = self.rows_of(src, leaf)
            assert inner is not None  # (a join's output is none of its leaves)
            return inner[kept]
        pairs = self.pairs(join)
        if expected is not None and len(pairs[0]) != expected:
            raise KeyError_(
                f"a fused join has {len(pairs[0])} records where {expected} were counted"
            )
        rule = self.rules[join]
        for side, (part, read_as) in enumerate(zip(rule.inputs, parts_of(rule))):
            if read_as == leaf:
                return pairs[side]
            if part in self.composite and leaf in self._leaves(part):
                inner = self.rows_of(part, leaf)
                assert inner is not None
                at = pairs[side]
                # (-1 stays -1: no record on that side, so none of what it is made of)
                return np.where(at >= 0, np.append(inner, -1)[at], -1)
        raise KeyError_("a fused join's column is not over one of its inputs")

    def _rows_by_leaf(self, ds: int, leaves: list[int]) -> dict[int, np.ndarray | None]:
        """:meth:`rows_of` for each of ``leaves`` once (columns over one joined dataset
        share its rows: each is a gather per join below)."""
        return {leaf: self.rows_of(ds, leaf) for leaf in dict.fromkeys(leaves)}

    def _over(self, ds: int, leaves: list[int], reads: list[tuple[int, str]]) -> list[Any]:
        """The Arrow columns ``reads`` (each over the records of its leaf) for each
        record of ``ds`` (null where it has no record of that leaf)."""
        import pyarrow as pa

        rows = self._rows_by_leaf(ds, leaves)
        out = []
        for leaf, read in zip(leaves, reads):
            col, at = self.column(leaf, read), rows[leaf]
            out.append(col if at is None else col.take(pa.array(at, mask=at < 0)))
        return out


#: see Fusion.max_pairs
MAX_PAIRS = 10_000_000


def plan(jvm: Jvm, pending: list[Any], pending_cls: Any) -> Fusion:
    """The fused reads of a block's ``pending`` items (source nodes and operations)."""
    fusion = Fusion(jvm)
    for item in pending:
        if isinstance(item, pending_cls):
            if item.out.every_record or item.out.plan is None:
                continue
            for node in item.inputs:
                # a dataset of an earlier run, read again: a source of this block
                known = node.ds_id is not None and node.ki is not None and not node.pinned
                if known and node.ident not in fusion.scans and node.plan is not None:
                    fusion.add_source(node.ident, node.plan)
            # (a scalar subquery's value is no input of the fused rules: the tracker
            # adds its tensor, every output record from its one record)
            inputs = [n for n in item.inputs if not any(n is c for c in item.out.context)]
            fusion.add_operation(item.out.ident, inputs, item.out.plan)
        elif item.plan is not None and item.ann is None:
            fusion.add_source(item.ident, item.plan)
    return fusion
