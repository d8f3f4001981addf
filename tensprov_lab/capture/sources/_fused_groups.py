"""A fused capture's aggregates (see :mod:`._fused`): the groups of a grouping over
scan-ordered records or a join's output (by attributes, or by values a projection
computes over one joined table), the grouping values a sort of the groups or a step
over the aggregate's output reads, and those sorts.

An aggregate's output is a dataset the steps over it read (a correlated scalar
subquery's join and comparison, a ``HAVING``, a grouping or a sort by a count).  Its
grouping values, counts and exact sums are known from its groups and computed in NumPy
(:mod:`._fused_computed`); any other column is read through Spark, which returns the
records in an order of its own, and put in canonical order by their grouping values (a
group *is* its values: :func:`._fused_sort.group_rows`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tensprov_lab.capture.plan._equijoin import arrow_codes, combine_codes, groups_through
from tensprov_lab.capture.plan._keys import KeyError_, row_dtype
from tensprov_lab.capture.sources._fused_computed import traced_value
from tensprov_lab.capture.sources._fused_model import Rule, Scan
from tensprov_lab.capture.sources._fused_residual import values_of
from tensprov_lab.capture.sources._fused_sort import (
    first_members,
    group_rows,
    group_values,
    sort_permutation,
    sorted_records,
)

__all__ = ["Grouping"]

JObject = Any

#: grouping value types whose equality Arrow's dictionary encoding reproduces exactly
_EXACT_GROUP_TYPES = {
    "integer", "long", "short", "byte", "string", "boolean", "date", "decimal",
}  # fmt: skip


#: expressions whose value is null when a value they read is (grouping values computed
#: over one joined table, see Grouping._null_in_null_out)
_NULL_THROUGH = {
    "Alias", "Cast", "Extract", "Year", "Month", "DayOfMonth", "Quarter", "Substring",
    "Upper", "Lower",
}  # fmt: skip


class Grouping:
    """The aggregates and sorts of :class:`._fused.Fusion` (a mixin: the attributes
    below are the fusion's)."""

    jvm: Any
    rules: dict[int, Rule]
    scans: dict[int, Scan]
    plans: dict[int, JObject]
    tables: dict[int, Any]
    composite: dict[int, int]
    grouping: dict[int, list[JObject]]
    record_sorts: dict[int, Any]
    size_of: Any
    _values: dict[int, list[Any] | None]
    _sorters: dict[int, int]
    _sorts: dict[int, tuple[JObject, JObject]]
    _group_reads: dict[int, list[tuple[int, str]] | None]
    _group_values: dict[int, list[Any]]
    _group_rows: dict[int, np.ndarray]
    _aggregated: dict[int, tuple[int, JObject]]
    _globals: set[int]
    _specs: dict[int, dict[str, tuple[Any, ...]]]
    _computed: dict[int, dict[str, Any]]
    _attr_leaf: Any
    _read: Any
    _raw: Any
    column: Any
    _rows_by_leaf: Any
    _over: Any
    _compute: Any
    _out_ids: Any

    def _grouping_leaf(self, ds: int, plan: JObject, attr: JObject) -> tuple[int, JObject] | None:
        """The scan-ordered dataset at or below ``ds`` to read grouping attribute ``attr``
        over, and what to read: the attribute, or the expression a projection of
        ``plan`` (the aggregate's child) defines it as, over one joined dataset's
        columns (TPC-H Q7's ``year(l_shipdate) AS l_year``, ``n1.n_name AS
        supp_nation``); None when it is neither."""
        jvm = self.jvm
        eid = int(attr.exprId().id())
        leaf = self._attr_leaf(ds, eid)
        if leaf is not None:
            return leaf, attr
        while jvm.cls(plan) in ("Project", "SubqueryAlias", "View"):
            if jvm.cls(plan) == "Project":
                for item in jvm.lst(plan.projectList()):
                    if jvm.cls(item) == "Alias" and int(item.exprId().id()) == eid:
                        return self._defined_leaf(ds, jvm.children(plan)[0], item.child())
            plan = jvm.children(plan)[0]
        return None

    def _defined_leaf(self, ds: int, plan: JObject, expr: JObject) -> tuple[int, JObject] | None:
        """:meth:`_grouping_leaf` of a projection's expression ``expr`` over ``plan``."""
        jvm = self.jvm
        if jvm.cls(expr) == "AttributeReference":
            return self._grouping_leaf(ds, plan, expr)
        if not bool(expr.deterministic()) or not self._null_in_null_out(expr):
            return None
        refs = jvm.lst(expr.references().toSeq())
        at = {self._attr_leaf(ds, int(a.exprId().id())) for a in refs}
        if len(at) != 1 or None in at:
            return None  # (over two joined datasets, or over a projection's own values)
        (leaf,) = at
        assert leaf is not None
        return leaf, expr

    def _null_in_null_out(self, expr: JObject) -> bool:
        """Whether ``expr`` is null where a column it reads is (its value is read over a
        joined table's records, and a record of an outer join without one of that
        table takes a null: the value Spark gives it only when null goes through)."""
        jvm = self.jvm
        cls = jvm.cls(expr)
        if cls in ("AttributeReference", "Literal"):
            return True
        if cls not in _NULL_THROUGH:
            return False
        return all(self._null_in_null_out(kid) for kid in jvm.lst(expr.children()))

    def _aggregate(self, out: int, src: Any, agg: JObject, plan: JObject) -> None:
        jvm = self.jvm
        grouping = jvm.lst(agg.groupingExpressions())
        if src.ident not in self.scans and src.ident not in self.composite:
            return
        if not grouping:
            # a global aggregate takes every record without a job already; its values
            # are computed from its records when a step compares them (an uncorrelated
            # scalar subquery's: TPC-H Q11, Q15)
            self.rules[out] = Rule("global", [src.ident], [[]], [[]])
            self.plans.setdefault(out, plan)
            self._aggregated[out] = (src.ident, src.plan)
            self._globals.add(out)
            return
        columns, leaves = [], []
        for g in grouping:
            if jvm.cls(g) != "AttributeReference" or str(g.name()) == "spark_grouping_id":
                return
            if str(g.dataType().typeName()).split("(")[0] not in _EXACT_GROUP_TYPES:
                return  # (a decimal's type name is "decimal(p,s)")
            found = self._grouping_leaf(src.ident, jvm.children(agg)[0], g)
            if found is None:
                return
            leaf, value = found
            over = src.plan if leaf == src.ident else self.plans[leaf]
            columns.append(self._read(leaf, over, value, out))
            leaves.append(leaf)
        self.rules[out] = Rule("group", [src.ident], [columns], [leaves])
        named = self._grouped_outputs(plan, grouping)
        self.grouping[out] = grouping if named is None else named
        if named is not None:
            # its groups are its records: a dataset the steps over it read (see _order
            # and _computed_read)
            self.scans[out] = Scan(out)
            self.plans[out] = plan
            self._group_reads[out] = None
            self._aggregated[out] = (src.ident, src.plan)

    def _grouped_outputs(self, plan: JObject, grouping: list[JObject]) -> list[JObject] | None:
        """The output attribute of ``plan`` (an aggregate under projections) that is each
        grouping attribute: itself, or a name of it (TPC-H Q15's ``l_suppkey AS
        supplier_no``, Q13's ``c_orders (c_custkey, c_count)``); None when one is not
        among the outputs."""
        jvm = self.jvm
        by_id = {int(g.exprId().id()): i for i, g in enumerate(grouping)}
        named: dict[int, JObject] = {}
        for attr in jvm.lst(plan.output()):
            found = traced_value(jvm, plan, int(attr.exprId().id()))
            if found is not None and jvm.cls(found[1]) == "AttributeReference":
                at = by_id.get(int(found[1].exprId().id()))
                if at is not None:
                    named.setdefault(at, attr)
        if len(named) != len(grouping):
            return None
        return [named[i] for i in range(len(grouping))]

    def groups(self, ident: int) -> tuple[np.ndarray, int]:
        """An aggregate's group of every input record, numbered by smallest member."""
        import pandas as pd

        rule = self.rules[ident]
        (src,) = rule.inputs
        (leaves,) = rule.over
        rows = self._rows_by_leaf(src, leaves)
        at = rows[leaves[0]]
        if at is not None and len(rows) == 1:
            # every grouping column from one joined dataset: numbered over its records
            coded = []
            for read in rule.columns[0]:
                # coded as read, then picked through the positions (no taken copy of
                # the column: a 16M-record side's values are not copied in Arrow)
                col, pos = self._raw(leaves[0], read)
                codes, width = arrow_codes(col)
                coded.append((codes if pos is None else codes[pos], width))
            parent, n_groups = groups_through(coded, at)
            self._check_members(src, len(parent))
            self._keep_values(ident, parent, n_groups, rows)
            return parent, n_groups
        columns = []
        for read, leaf in zip(rule.columns[0], leaves):
            codes, width = arrow_codes(self.column(leaf, read))
            at = rows[leaf]
            if at is not None:
                # row -1 (no record on this side of an outer join) picks the null code
                codes = np.append(codes, 0)[at]
            columns.append((codes, width))
        combined = combine_codes(columns)
        # factorize numbers values in order of first appearance: by smallest member
        parent, uniq = pd.factorize(combined)
        self._check_members(src, len(parent))
        self._keep_values(ident, parent, len(uniq), rows)
        return parent.astype(row_dtype(len(uniq)), copy=False), len(uniq)

    def _order(self, ident: int) -> np.ndarray:
        """Where each group of a fused aggregate is among the records of its read (read
        through Spark, which returns them in an order of its own): matched by grouping
        values, which the aggregate's capture kept."""
        got = self._group_rows.get(ident)
        if got is None:
            values = self._group_values.get(ident)
            reads = self._group_reads[ident]
            if values is None or reads is None:
                raise KeyError_("an aggregate's grouping values were not kept")
            table = self.tables[ident]
            got = group_rows(values, [table.column(name) for _, name in reads])
            self._group_rows[ident] = got
        return got

    def _keep_values(
        self,
        ident: int,
        parent: np.ndarray,
        n_groups: int,
        rows: dict[int, np.ndarray | None],
    ) -> None:
        """Keep the groups' grouping values of an aggregate a fused sort sorts, or
        whose output a later step reads (``rows``: each leaf's record of every input
        record, see :meth:`rows_of`)."""
        read = self._group_reads.get(ident) is not None
        if ident not in self._values and not read and ident not in self._specs:
            return
        rule = self.rules[ident]
        (leaves,) = rule.over
        columns = [self.column(leaf, read) for read, leaf in zip(rule.columns[0], leaves)]
        values = group_values(
            columns, [rows[leaf] for leaf in leaves], first_members(parent, n_groups)
        )
        if ident in self._values:
            self._values[ident] = values
        if read:
            self._group_values[ident] = values
        self._compute(ident, parent, n_groups, values)

    def sorted_groups(self, ident: int) -> np.ndarray:
        """A fused sort's permutation: the group behind each sorted record (one job of
        the plan it sorts, without keys; see :mod:`._fused_sort`), or for a sort of
        records whose sort values are read, those values sorted."""
        (src,) = self.rules[ident].inputs
        if ident in self.record_sorts:
            sort, orders = self.record_sorts[ident]
            n = self.size_of(src)
            if n is None:
                raise KeyError_("a fused sort's input was not counted")
            rows = (np.arange(n),)
            columns = [values_of(self, value, [src], rows) for value in orders]
            return sorted_records(self.jvm.lst(sort.order()), columns)
        values = self._values.get(src)
        self._sorters[src] -= 1
        if not self._sorters[src]:  # the last sort of these groups
            self._values.pop(src, None)
        if values is None:
            raise KeyError_("the sorted groups' values were not kept")
        sort, below = self._sorts[ident]
        return sort_permutation(self.jvm, below, self.grouping[src], sort, values)

    def _check_members(self, src: int, members: int) -> None:
        expected = self.size_of(src)
        if expected is not None and members != expected:
            raise KeyError_(f"a fused aggregate has {members} members of {expected} records")
