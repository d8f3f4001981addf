"""The values of a fused aggregate's output that its capture computes from its groups
(see :mod:`._fused_groups`), not read through Spark.

An aggregate whose output the steps over it read (a ``HAVING``, a grouping, join or
sort of its groups) is a dataset of its own.  Of its columns these are known from the
groups the capture built, exactly as Spark computes them:

- a grouping value (the group *is* its values);
- ``count(*)`` and ``count(x)``: how many members there are, or have ``x`` not null
  (TPC-H Q13's ``c_count``); ``count(DISTINCT x, ...)`` of integers, decimals, dates,
  strings and booleans: how many distinct ``x, ...`` without a null the members have
  (Q16's ``supplier_cnt``; not of floats, whose ``-0.0`` and NaNs Spark normalizes);
- ``sum(e)`` of an integer or decimal expression ``e`` that a direct read evaluates
  (:mod:`._direct`: ``l_extendedprice * (1 - l_discount)``, TPC-H Q3, Q5, Q10, Q18's
  ``sum(l_quantity)``): summed as the exact integers behind the values, null for a
  group with no value; a sum whose total could pass 63 bits, or the result type's
  precision, is read through Spark (where Spark's own sum would overflow);
- ``min(e)`` and ``max(e)`` of integers, decimals, dates and strings (TPC-H Q2's
  ``min(ps_supplycost)``, Q15's ``max(total_revenue)``);
- an expression over such values that a direct read evaluates (Q20's ``0.5 *
  sum(l_quantity)``, Q11's ``sum(...) * 0.0001``, rounded as Spark rounds decimals).

A global aggregate of fused records (one group) is computed the same way when a step
compares its value as an uncorrelated scalar subquery's (Q11's and Q15's ``HAVING`` /
``WHERE ... = (SELECT max(...) ...)``): its operation, a context input of that step,
is captured first, and the comparison is evaluated when the step reads it.

A sort of the groups by such values, one of them not a grouping value, sorts records
by values read (no job).  Any other column (a sum or an average of floats, whose value
depends on the order Spark adds them in) is read through Spark.
"""

from __future__ import annotations

import contextlib
from decimal import Decimal
from typing import Any

import numpy as np

from tensprov_lab.capture.plan._equijoin import arrow_codes, combine_codes
from tensprov_lab.capture.plan._keyed import key_name
from tensprov_lab.capture.plan._keys import KeyError_
from tensprov_lab.capture.sources._direct import compile_expr, evaluate
from tensprov_lab.capture.sources._direct_files import Unreadable, arrow_type

__all__ = ["Computing", "distinct_counts", "group_extremes", "group_sums", "traced_value"]

JObject = Any


def traced_value(jvm: Any, plan: JObject, eid: int) -> tuple[JObject, JObject] | None:
    """What output attribute ``eid`` of ``plan`` (projections, aliases and views over an
    aggregate) is: the aggregate, and the grouping attribute or aggregate expression of
    it that the attribute names (None: a value computed above the aggregate, or no
    aggregate below).  TPC-H Q13's ``c_orders (c_custkey, c_count)`` renames both.
    """
    while jvm.cls(plan) in ("Project", "SubqueryAlias", "View"):
        if jvm.cls(plan) == "Project":
            item = next(
                (e for e in jvm.lst(plan.projectList()) if int(e.exprId().id()) == eid), None
            )
            if item is not None and jvm.cls(item) == "Alias":
                item = item.child()
            if item is None or jvm.cls(item) != "AttributeReference":
                return None
            eid = int(item.exprId().id())
        plan = jvm.children(plan)[0]
    if jvm.cls(plan) != "Aggregate":
        return None
    for e in jvm.lst(plan.aggregateExpressions()):
        if int(e.exprId().id()) == eid:
            return plan, (e.child() if jvm.cls(e) == "Alias" else e)
    return None


def group_sums(values: Any, parent: np.ndarray, n_groups: int, result: str) -> Any:
    """Each group's sum of ``values`` (an Arrow integer or decimal array, one value per
    member; ``parent``: each member's group) as Spark's ``sum`` of type ``result``
    gives it: exact, null for a group whose every value is null; :class:`KeyError_`
    where an exact total does not fit in 63 bits or in ``result``.

    >>> import pyarrow as pa, decimal
    >>> v = pa.array([decimal.Decimal("1.25"), None, decimal.Decimal("-0.05")],
    ...              pa.decimal128(15, 2))
    >>> group_sums(v, np.array([0, 1, 0]), 2, "decimal(25,2)").to_pylist()
    [Decimal('1.20'), None]
    >>> group_sums(pa.array([4, None, -1]), np.array([0, 1, 0]), 2, "bigint").to_pylist()
    [3, None]
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    values = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    kind = arrow_type(result)
    if kind is None:
        raise KeyError_(f"a sum of type {result}")
    valid = np.asarray(pc.is_valid(values).to_numpy(zero_copy_only=False), dtype=bool)
    units = _units(values)
    members, units = parent[valid], units[valid]
    # (a bound on every partial sum, in floats with room to spare: int64 sums exact)
    if len(units) and float(np.abs(units.astype(np.float64)).sum()) >= 2.0**62:
        raise KeyError_("a sum that may not fit in 63 bits")
    totals = np.zeros(n_groups, dtype=np.int64)
    np.add.at(totals, members, units)
    present = np.bincount(members, minlength=n_groups) > 0
    if not isinstance(kind, pa.Decimal128Type):
        if not pa.types.is_int64(kind):
            raise KeyError_(f"a sum of type {result}")
        return pa.array(totals, type=kind, mask=~present)
    if len(totals) and int(np.abs(totals).max()) >= 10**kind.precision:
        raise KeyError_("a sum past its type's precision (Spark's own would overflow)")
    words = np.empty((n_groups, 2), dtype=np.int64)  # decimal128: low, then high word
    words[:, 0], words[:, 1] = totals, totals >> 63
    dense = pa.Array.from_buffers(kind, n_groups, [None, pa.py_buffer(words.tobytes())])
    return pc.if_else(pa.array(~present), pa.scalar(None, kind), dense)


def distinct_counts(
    parent: np.ndarray, columns: list[Any], valid: np.ndarray, n_groups: int
) -> np.ndarray:
    """How many distinct rows of ``columns`` (Arrow) the members of each group have
    (``parent``: each member's group), counting the members ``valid`` flags.

    >>> import pyarrow as pa
    >>> distinct_counts(np.array([0, 0, 0, 1]), [pa.array([5, 5, 6, 5])],
    ...                 np.ones(4, dtype=bool), 3).tolist()
    [2, 1, 0]
    """
    import pandas as pd
    import pyarrow as pa

    flags = pa.array(valid)
    values = combine_codes([arrow_codes(col.filter(flags)) for col in columns])
    # the members' (group, distinct value) pairs, as one int64 below n_groups * n
    dense = pd.factorize(values)[0].astype(np.int64)
    pairs = parent[valid].astype(np.int64) * max(len(dense), 1) + dense
    return np.bincount(pd.unique(pairs) // max(len(dense), 1), minlength=n_groups)


def _units(values: Any) -> np.ndarray:
    """The integers behind an Arrow integer or decimal array's values (a decimal's
    unscaled value; nulls as 0), as int64; :class:`KeyError_` past 64 bits."""
    import pyarrow as pa
    import pyarrow.compute as pc

    values = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    if pa.types.is_integer(values.type):
        return np.asarray(pc.fill_null(values, 0).cast(pa.int64()).to_numpy(), dtype=np.int64)
    if not isinstance(values.type, pa.Decimal128Type):
        raise KeyError_(f"a sum of {values.type}")
    raw = np.frombuffer(values.buffers()[1], dtype=np.int64)
    words = raw[2 * values.offset : 2 * (values.offset + len(values))].reshape(-1, 2)
    low, high = words[:, 0], words[:, 1]
    valid = np.asarray(pc.is_valid(values).to_numpy(zero_copy_only=False), dtype=bool)
    if np.any((high != (low >> 63)) & valid):
        raise KeyError_("a decimal past 64 bits")
    return np.where(valid, low, 0)


def group_averages(values: Any, parent: np.ndarray, n_groups: int, result: str) -> Any:
    """Each group's ``avg`` of ``values`` (an Arrow integer or decimal array, one value
    per member; ``parent``: each member's group) as Spark's of type ``result`` gives it,
    null for a group without a value; :class:`KeyError_` where it might not.

    A decimal(p,s)'s average is its exact sum over the count, rounded half away from
    zero to scale s+4.  Spark divides to a scale of its own first (38 in Spark 4;
    28-p+s in 3.5) and rounds again: the two roundings agree with one wherever a group
    has under 10**(24-p) values (a quotient of the count is further from a tie of scale
    s+4 than the first rounding moves it), so past that Spark computes it.  An integer
    average is a double: Spark's sum of doubles is exact below 2**53, and then its
    quotient is the one division of two exact doubles.

    >>> import pyarrow as pa, decimal
    >>> v = pa.array([decimal.Decimal(x) for x in ("1.00", "2.00", "2.00", "-0.01")],
    ...              pa.decimal128(15, 2))
    >>> group_averages(v, np.array([0, 0, 0, 1]), 3, "decimal(19,6)").to_pylist()
    [Decimal('1.666667'), Decimal('-0.010000'), None]
    >>> group_averages(pa.array([1, 2, None]), np.array([0, 0, 0]), 1, "double").to_pylist()
    [1.5]
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    values = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    valid = np.asarray(pc.is_valid(values).to_numpy(zero_copy_only=False), dtype=bool)
    units = _units(values)[valid]
    members = parent[valid]
    spread = float(np.abs(units.astype(np.float64)).sum()) if len(units) else 0.0
    counts = np.bincount(members, minlength=n_groups).astype(np.int64)
    totals = np.zeros(n_groups, dtype=np.int64)
    present = counts > 0
    if pa.types.is_integer(values.type):
        if result != "double" or spread >= 2.0**53:
            raise KeyError_(f"an average of {values.type} as {result}")
        np.add.at(totals, members, units)
        means = totals.astype(np.float64) / np.maximum(counts, 1)
        return pa.array(means, type=pa.float64(), mask=~present)
    kind = values.type
    p, s = kind.precision, kind.scale
    if not isinstance(kind, pa.Decimal128Type) or p > 18 or result != f"decimal({p + 4},{s + 4})":
        raise KeyError_(f"an average of {kind} as {result}")
    # (the sum's type, decimal(p+10,s), holds every partial sum; int64 holds them too)
    if spread >= min(2.0**62, 10.0 ** (p + 10)) or int(counts.max(initial=0)) >= 10 ** (24 - p):
        raise KeyError_("an average Spark may round otherwise")
    np.add.at(totals, members, units)
    whole, rest = np.divmod(np.abs(totals), np.maximum(counts, 1))
    tail, left = np.divmod(rest * 10**4, np.maximum(counts, 1))
    up = 2 * left >= np.maximum(counts, 1)  # (half away from zero, as Java's HALF_UP)
    out = pa.decimal128(p + 4, s + 4)
    if len(whole) and int(whole.max()) >= 2**63 // 10**4 - 1:  # (past 63 bits: in Python)
        exact = [
            None if not n else (-1 if t < 0 else 1) * (int(w) * 10**4 + int(f) + int(u))
            for w, f, u, t, n in zip(whole, tail, up, totals, counts)
        ]
        return pa.array([None if v is None else Decimal(v).scaleb(-(s + 4)) for v in exact], out)
    scaled = whole * 10**4 + tail + up
    scaled = np.where(totals < 0, -scaled, scaled)
    words = np.empty((n_groups, 2), dtype=np.int64)  # decimal128: low, then high word
    words[:, 0], words[:, 1] = scaled, scaled >> 63
    dense = pa.Array.from_buffers(out, n_groups, [None, pa.py_buffer(words.tobytes())])
    return pc.if_else(pa.array(~present), pa.scalar(None, out), dense)


def group_extremes(values: Any, parent: np.ndarray, n_groups: int, largest: bool) -> Any:
    """Each group's ``min`` (``max`` when ``largest``) of ``values`` (an Arrow array of
    integers, decimals, dates or strings, one value per member; ``parent``: each
    member's group) as Spark's gives it: nulls skipped, null for a group without a
    value.  Arrow orders these types as Spark does (strings by their bytes).

    >>> import pyarrow as pa
    >>> v = pa.array(["b", None, "a", "c"])
    >>> group_extremes(v, np.array([0, 1, 0, 0]), 2, False).to_pylist()
    ['a', None]
    >>> group_extremes(pa.array([3, 9, None]), np.array([0, 0, 1]), 2, True).to_pylist()
    [9, None]
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    values = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    valid = np.asarray(pc.is_valid(values).to_numpy(zero_copy_only=False), dtype=bool)
    members = parent[valid].astype(np.int64, copy=False)
    kept = values.filter(pa.array(valid))
    order = np.asarray(
        pc.sort_indices(
            pa.table({"g": members, "v": kept}),
            sort_keys=[("g", "ascending"), ("v", "descending" if largest else "ascending")],
        )
    )
    grouped = members[order]
    first = np.flatnonzero(np.r_[True, grouped[1:] != grouped[:-1]]) if len(order) else order
    at = np.full(n_groups, -1, dtype=np.int64)
    at[grouped[first]] = order[first]
    return kept.take(pa.array(at, mask=at < 0))


def _whole(value: Any, n: int) -> Any:
    """An evaluated expression as an array of ``n`` values (a constant repeated)."""
    import pyarrow as pa

    return pa.repeat(value, n) if isinstance(value, pa.Scalar) else value


#: the aggregate functions whose values are computed from the groups
_FUNCTIONS = {"Count": "count", "Sum": "sum", "Min": "min", "Max": "max", "Average": "avg"}
#: the kinds of computed column read over an aggregate's members (see _computed_read)
MEMBER_KINDS = ("count", "countd", "sum", "min", "max", "avg")
#: the types whose values a count(DISTINCT ...) tells apart here as Spark does
_DISTINCT_TYPES = ("tinyint", "smallint", "int", "bigint", "date", "string", "boolean")
#: the types whose min and max are taken here (with decimals: Arrow orders them as
#: Spark does)
_EXTREME_TYPES = {"tinyint", "smallint", "int", "bigint", "date", "string"}


class Computing:
    """The computed values of :class:`._fused.Fusion`'s aggregates (a mixin: the
    attributes below are the fusion's)."""

    jvm: Any
    plans: dict[int, JObject]
    rules: dict[int, Any]
    size_of: Any
    _aggregated: dict[int, tuple[int, JObject]]
    _globals: set[int]
    _specs: dict[int, dict[str, tuple[Any, ...]]]
    _computed: dict[int, dict[str, Any]]
    _computed_names: dict[tuple[int, int], str]
    _grouping_leaf: Any
    _read: Any
    _raw: Any
    _over: Any
    column: Any

    def _value_kind(self, ident: int, eid: int) -> tuple[str, JObject] | None:
        """Whether output ``eid`` of the fused aggregate ``ident`` (a dataset the steps
        over it read) is known from its groups without a read through Spark (see
        :meth:`_expr_kind`); None for any other value."""
        found = traced_value(self.jvm, self.plans[ident], eid)
        return None if found is None else self._expr_kind(*found)

    def _expr_kind(self, agg: JObject, expr: JObject) -> tuple[str, JObject] | None:
        """What result expression ``expr`` of aggregate ``agg`` is, when its groups give
        it: ``("key", i)`` for its ``i``-th grouping value, ``("count" | "countd",
        function)`` (``countd``: a count of distinct values),
        ``("sum" | "min" | "max" | "avg", aggregate expression)``, or ``("expr", expr)``
        for a value computed over such values (TPC-H Q20's ``0.5 * sum(l_quantity)``)."""
        jvm = self.jvm
        cls = jvm.cls(expr)
        if cls == "AttributeReference":
            ids = [int(g.exprId().id()) for g in jvm.lst(agg.groupingExpressions())]
            at = int(expr.exprId().id())
            return ("key", ids.index(at)) if at in ids else None
        if cls != "AggregateExpression":
            parts = self._parts(expr)
            if not parts or any(self._expr_kind(agg, p) is None for p in parts):
                return None
            return "expr", expr
        if bool(expr.filter().isDefined()):
            return None
        function = expr.aggregateFunction()
        kind = _FUNCTIONS.get(jvm.cls(function))
        if bool(expr.isDistinct()):
            args = jvm.lst(function.children())
            if kind != "count" or not args:
                return None
            for a in args:
                type_name = str(a.dataType().simpleString())
                exact = type_name in _DISTINCT_TYPES or type_name.startswith("decimal(")
                if jvm.cls(a) != "AttributeReference" or not exact:
                    return None
            return "countd", function
        if kind == "count":
            return kind, function
        if kind is None or len(jvm.lst(function.children())) != 1:
            return None
        result = str(expr.dataType().simpleString())
        if kind == "sum":  # (a sum of floats depends on the order Spark adds them in)
            exact = result == "bigint"
        elif kind == "avg":  # (of integers: exact below 2**53, see group_averages)
            argument = str(function.children().head().dataType().simpleString())
            exact = result == "double" and argument in ("tinyint", "smallint", "int", "bigint")
        else:
            exact = result in _EXTREME_TYPES
        return (kind, expr) if exact or result.startswith("decimal(") else None

    def _parts(self, expr: JObject) -> list[JObject] | None:
        """The grouping attributes and aggregate expressions a deterministic result
        expression is computed from; None for a non-deterministic one."""
        jvm = self.jvm
        if not bool(expr.deterministic()):
            return None
        found, stack = [], [expr]
        while stack:
            e = stack.pop()
            if jvm.cls(e) in ("AttributeReference", "AggregateExpression"):
                found.append(e)
            else:
                stack.extend(jvm.lst(e.children()))
        return found

    def _computed_value(self, ident: int, expr: JObject) -> str | None:
        """The name of ``expr`` over fused aggregate ``ident``'s records as a column its
        capture computes: an attribute :meth:`_computed_read` gives, or an expression
        over such attributes (TPC-H Q18's ``HAVING sum(l_quantity) > 300``) and the
        values of uncorrelated scalar subqueries over a global aggregate of fused
        records (Q11's ``HAVING ... > (SELECT sum(...) * 0.0001 ...)``) that a direct
        read evaluates; None for anything else."""
        jvm = self.jvm
        if jvm.cls(expr) == "AttributeReference":
            key = (ident, int(expr.exprId().id()))
            name = self._computed_names.get(key)
            if name is None:
                name = self._computed_read(*key)
            if name is not None:
                self._computed_names[key] = name
            return name
        if not bool(expr.deterministic()):
            return None
        scope: dict[int, Any] = {}
        names = []
        for attr in jvm.lst(expr.references().toSeq()):
            type_name = str(attr.dataType().simpleString())
            name = self._computed_value(ident, attr)
            if name is None or arrow_type(type_name) is None:
                return None
            scope[int(attr.exprId().id())] = ("col", name, type_name)
            names.append(name)
        compiled = self._compile_over_scalars(expr, scope, self._scalar_subqueries(expr))
        if compiled is None:
            return None
        name = key_name("c")
        self._specs.setdefault(ident, {})[name] = ("expr", names, *compiled)
        return name

    def _subquery_read(
        self, ds: int, plan: JObject, expr: JObject, owner: int
    ) -> tuple[int, str] | None:
        """``expr`` over dataset ``ds``'s records when it compares the values of
        uncorrelated scalar subqueries over fused global aggregates (TPC-H Q22's
        ``c_acctbal > (SELECT avg(c_acctbal) ...)``): the attributes it names read, the
        expression evaluated when a step reads it (:meth:`_late_value`); else None."""
        jvm = self.jvm
        if "scalar-subquery" not in str(expr.toString()):
            return None  # (one call, not a walk of every read's tree: most have none)
        subs = self._scalar_subqueries(expr)
        if not subs or not bool(expr.deterministic()):
            return None
        scope: dict[int, Any] = {}
        reads: list[tuple[int, str]] = []
        for attr in jvm.lst(expr.references().toSeq()):
            type_name = str(attr.dataType().simpleString())
            if arrow_type(type_name) is None:
                return None
            scope[int(attr.exprId().id())] = ("col", f"m{len(reads)}", type_name)
            reads.append(self._read(ds, plan, attr, owner))
        compiled = self._compile_over_scalars(expr, scope, subs)
        if compiled is None:
            return None
        name = key_name("c")
        self._specs.setdefault(ds, {})[name] = ("late", reads, *compiled)
        return ds, name

    def _compile_over_scalars(
        self, expr: JObject, scope: dict[int, Any], subs: list[JObject]
    ) -> tuple[Any, dict[str, tuple[int, str]]] | None:
        """``expr`` compiled over ``scope`` and the values of its scalar subqueries
        ``subs``, each a column named in the map returned with it to where its value
        is computed (:meth:`_scalar_value`); None where one is not known or the
        expression cannot be evaluated here."""
        scalars: dict[str, tuple[int, str]] = {}
        for sub in subs:
            type_name = str(sub.dataType().simpleString())
            value = self._scalar_value(sub)
            if value is None or arrow_type(type_name) is None:
                return None
            name = key_name("v")
            scalars[name] = value
            scope[int(sub.exprId().id())] = ("col", name, type_name)
        try:
            return compile_expr(self.jvm, expr, scope), scalars
        except Exception:  # noqa: BLE001 - Unreadable (or another build): Spark reads it
            return None

    def _scalar_subqueries(self, expr: JObject) -> list[JObject]:
        """The scalar subqueries in ``expr`` (not inside them)."""
        jvm = self.jvm
        found, stack = [], [expr]
        while stack:
            e = stack.pop()
            if jvm.cls(e) == "ScalarSubquery":
                found.append(e)
            else:
                stack.extend(jvm.lst(e.children()))
        return found

    def _scalar_value(self, sub: JObject) -> tuple[int, str] | None:
        """Where the value of uncorrelated scalar subquery ``sub`` is computed: the
        global aggregate of fused records its plan is (its operation, a context input
        of the step that compares it, is captured first), and its column's name."""
        jvm = self.jvm
        if bool(jvm.lst(sub.outerAttrs())):
            return None
        ctx = jvm.ident(sub.plan())
        outputs = jvm.lst(sub.plan().output())
        if ctx not in self._globals or len(outputs) != 1:
            return None
        name = self._computed_value(ctx, outputs[0])
        return None if name is None else (ctx, name)

    def _computed_read(self, ident: int, eid: int) -> str | None:
        """The name of a column of the fused aggregate ``ident`` that its capture
        computes from its groups (:meth:`_value_kind`; the columns a count, sum, min, max
        or avg reads are read over the aggregate's input, by its capture); None when it
        is not such a column or what it reads cannot be read or evaluated here."""
        found = traced_value(self.jvm, self.plans[ident], eid)
        return None if found is None else self._spec_of(ident, *found)

    def _spec_of(self, ident: int, agg: JObject, expr: JObject) -> str | None:
        """:meth:`_computed_read` of result expression ``expr`` of ``agg``."""
        jvm = self.jvm
        kind = self._expr_kind(agg, expr)
        if kind is None:
            return None
        spec: tuple[Any, ...] = kind
        if kind[0] == "expr":
            scope: dict[int, Any] = {}
            names = []
            for part in self._parts(expr) or []:
                type_name = str(part.dataType().simpleString())
                name = self._spec_of(ident, agg, part)
                if name is None or arrow_type(type_name) is None:
                    return None
                aggregate = jvm.cls(part) == "AggregateExpression"
                at = part.resultId() if aggregate else part.exprId()
                scope[int(at.id())] = ("col", name, type_name)
                names.append(name)
            try:
                spec = ("expr", names, compile_expr(jvm, expr, scope), {})
            except Exception:  # noqa: BLE001 - Unreadable (or another build): Spark reads it
                return None
        elif kind[0] != "key":
            counted = kind[0] in ("count", "countd")
            function = kind[1] if counted else kind[1].aggregateFunction()
            got = self._member_reads(ident, jvm.children(agg)[0], function)
            if got is None:
                return None
            reads, leaves, node = got
            if counted:
                spec = (kind[0], reads, leaves)
            else:
                spec = (kind[0], reads, leaves, node, str(kind[1].dataType().simpleString()))
        name = key_name("c")
        self._specs.setdefault(ident, {})[name] = spec
        return name

    def _member_reads(
        self, ident: int, below: JObject, function: JObject
    ) -> tuple[list[Any], list[int], Any] | None:
        """What a count, sum, min, max or avg of aggregate ``ident`` (``below``: the
        aggregate's child) reads of its members: the reads of the attributes its
        arguments name, their leaves, and but for a count its argument compiled over
        them (:mod:`._direct`)."""
        jvm = self.jvm
        src, src_plan = self._aggregated[ident]
        args = jvm.lst(function.children())
        valued = jvm.cls(function) != "Count"
        if not valued and any(jvm.cls(a) not in ("Literal", "AttributeReference") for a in args):
            return None
        if not valued and any(jvm.cls(a) == "Literal" and a.value() is None for a in args):
            return None  # (count(NULL): rare enough for Spark to read)
        reads: list[Any] = []
        leaves: list[int] = []
        scope: dict[int, Any] = {}
        for arg in args:
            for attr in jvm.lst(arg.references().toSeq()):
                eid = int(attr.exprId().id())
                if eid in scope:
                    continue
                type_name = str(attr.dataType().simpleString())
                if valued and arrow_type(type_name) is None:
                    return None
                at = self._grouping_leaf(src, below, attr)
                if at is None:
                    return None
                leaf, value = at
                over = src_plan if leaf == src else self.plans[leaf]
                scope[eid] = ("col", f"m{len(reads)}", type_name)
                reads.append(self._read(leaf, over, value, ident))
                leaves.append(leaf)
        if not valued:
            return reads, leaves, None
        try:
            node = compile_expr(jvm, args[0], scope)
        except Exception:  # noqa: BLE001 - Unreadable (or another build): Spark reads it
            return None
        return reads, leaves, node

    def _sorted_by_computed(self, sort: JObject, ident: int) -> bool:
        """Whether a global ``sort`` of fused aggregate ``ident``'s groups (a dataset
        the steps over it read) sorts by values its capture computes, a count or a sum
        among them (TPC-H Q13's ``ORDER BY custdist DESC, c_count DESC``, Q3's
        ``ORDER BY revenue DESC, o_orderdate``): then it is a sort of records by
        values read, without a job."""
        jvm = self.jvm
        if ident not in self._aggregated or ident in self._globals:
            return False
        kinds = []
        for o in jvm.lst(sort.order()):
            child = o.child()
            if jvm.cls(child) != "AttributeReference":
                return False
            kind = self._value_kind(ident, int(child.exprId().id()))
            if kind is None or self._computed_value(ident, child) is None:
                return False
            kinds.append(kind[0])
        return any(k != "key" for k in kinds)

    def compute_global(self, ident: int) -> None:
        """The computed columns of global aggregate ``ident`` (one group of every
        record of its input), once its input's records are known, when a step reads
        them (a scalar subquery's value)."""
        if ident not in self._specs or ident in self._computed:
            return
        (src,) = self.rules[ident].inputs
        n = self.size_of(src)
        for spec in self._specs[ident].values():
            if spec[0] in MEMBER_KINDS and spec[1]:
                n = len(self._over(src, spec[2], spec[1])[0])
                break
        if n is None:
            raise KeyError_("a global aggregate's input was not counted")
        self._compute(ident, np.zeros(n, dtype=np.int64), 1, [])

    def _late_value(self, ident: int, name: str) -> Any:
        """A computed expression of aggregate ``ident`` over a scalar subquery's value,
        evaluated when a step reads it (the subquery's own aggregate is captured after
        ``ident``'s groups: TPC-H Q11's)."""
        import pyarrow as pa

        spec = self._specs[ident][name]
        got = self._computed.get(ident, {})
        if spec[0] == "late":  # (over the records of a dataset, see _subquery_read)
            columns = {f"m{i}": self.column(ident, read) for i, read in enumerate(spec[1])}
            n_groups = self.size_of(ident) if not columns else len(columns["m0"])
            if n_groups is None:
                raise KeyError_("a filter's input was not counted")
        elif spec[0] != "expr" or not spec[3] or not spec[1] or not all(n in got for n in spec[1]):
            raise KeyError_("a fused aggregate's values were not computed")
        else:
            n_groups = len(got[spec[1][0]])
            columns = {n: got[n] for n in spec[1]}
        for other, (ctx, ctx_name) in spec[3].items():
            value, _ = self._raw(ctx, (ctx, ctx_name))
            if len(value) != 1:
                raise KeyError_("a scalar subquery of more than one record")
            columns[other] = pa.repeat(value[0], n_groups)
        try:
            value = _whole(evaluate(spec[2], pa.table(columns)), n_groups)
        except Unreadable as exc:
            raise KeyError_(str(exc)) from exc
        got[name] = value
        self._computed[ident] = got
        return value

    def _compute(self, ident: int, parent: np.ndarray, n_groups: int, values: list[Any]) -> None:
        """The columns of :meth:`_computed_read` of aggregate ``ident``, groups in
        canonical order (``parent``: each member's group; ``values``: the groups'
        grouping values).  A column that cannot be computed exactly is left out: the
        step that reads it takes a job of its own (see ``Fusion._raw``)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        specs = self._specs.get(ident)
        if not specs:
            return
        (src,) = self.rules[ident].inputs
        got = {}
        for name, spec in specs.items():
            if spec[0] == "key":
                got[name] = values[spec[1]]
                continue
            if spec[0] == "expr":  # (over the columns computed before it)
                if not spec[3] and all(n in got for n in spec[1]):
                    with contextlib.suppress(Unreadable):
                        got[name] = _whole(evaluate(spec[2], pa.table(got)), n_groups)
                continue
            kind, reads, leaves = spec[:3]
            columns = self._over(src, leaves, reads) if reads else []
            if kind in ("count", "countd"):
                valid = np.ones(len(parent), dtype=bool)
                for col in columns:
                    valid &= np.asarray(pc.is_valid(col).to_numpy(zero_copy_only=False))
                if kind == "count":
                    counts = np.bincount(parent[valid], minlength=n_groups)
                else:
                    counts = distinct_counts(parent, columns, valid, n_groups)
                got[name] = pa.array(counts.astype(np.int64))
                continue
            table = pa.table({f"m{i}": col for i, col in enumerate(columns)})
            try:
                value = _whole(evaluate(spec[3], table), len(parent))
                if kind == "sum":
                    got[name] = group_sums(value, parent, n_groups, spec[4])
                elif kind == "avg":
                    got[name] = group_averages(value, parent, n_groups, spec[4])
                else:
                    got[name] = group_extremes(value, parent, n_groups, kind == "max")
            except (Unreadable, KeyError_):
                continue  # (an overflow, say: Spark reads it)
        self._computed[ident] = got
