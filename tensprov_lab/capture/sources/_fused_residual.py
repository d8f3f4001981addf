"""A fused join's condition beyond its key equalities, and a fused filter of a join's
output (see :mod:`._fused`).

A join (inner, outer, semi or anti) whose condition has more than key equalities (TPC-H Q19's
``OR`` of branches over both tables once the key is shared out of it, Q21's
``l2.l_suppkey <> l1.l_suppkey``) is still matched in NumPy: the key pairs first, then
the rest of the condition evaluated on each pair's values, read over the joined
datasets like the keys and compiled as a direct read's condition is
(:mod:`._direct`: comparisons, ``AND`` / ``OR`` / ``NOT``, ``IN``, null tests, with
Spark's three-valued logic; a null is no match); an outer join then adds each kept
side's records left without a pair.  A condition outside that subset, or over a column
no joined dataset has, leaves the join to its own job.  A filter of a join's output
(Q7's and Q19's ``OR`` over their joined tables) is such a condition over one input:
its records' values read over the datasets joined below it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from tensprov_lab.capture.plan._keys import KeyError_
from tensprov_lab.capture.sources._direct import compile_expr, evaluate
from tensprov_lab.capture.sources._direct_files import Unreadable, arrow_type

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["Residual", "holds_of", "residual_of", "values_of"]

JObject = Any
#: ``fusion`` below is a ``_fused.Fusion``, which imports this module (so not named)


@dataclass
class Residual:
    """A join's condition beyond its keys, compiled over the columns it reads: per
    column, the join input it is of (0 left, 1 right), the dataset it is read over, the
    read, and its name in the compiled condition."""

    node: tuple[Any, ...]
    reads: list[tuple[int, int, tuple[int, str], str]]


def residual_of(
    fusion: Any, inputs: list[Any], sides: list[JObject], condition: JObject, out: int
) -> Residual | None:
    """The reads (asked of ``fusion`` for operation ``out``) and compiled form of a
    join's ``condition`` beyond its keys (``sides``: the join's two children, over
    ``inputs``; for a filter's condition its one child and input); None when it reads
    a column that no joined dataset has, or that is not evaluated here as Spark
    evaluates it."""
    jvm = fusion.jvm
    scope: dict[int, tuple[Any, ...]] = {}
    reads: list[tuple[int, int, tuple[int, str], str]] = []
    # each column's side by the side's attributes (a table read twice, as by a
    # correlated subquery over its own table, has its columns on both sides' datasets)
    side_ids = [set(jvm.expr_ids(s)) for s in sides]
    for attr in jvm.lst(condition.references().toSeq()):
        eid, kind = int(attr.exprId().id()), str(attr.dataType().simpleString())
        at = [side for side, ids in enumerate(side_ids) if eid in ids]
        if len(at) != 1 or arrow_type(kind) is None:
            return None
        side = at[0]
        leaf = fusion._attr_leaf(inputs[side].ident, eid)
        if leaf is None:
            return None
        plan = inputs[side].plan if leaf == inputs[side].ident else fusion.plans[leaf]
        name = f"r{len(reads)}"
        reads.append((side, leaf, fusion._read(leaf, plan, attr, out), name))
        scope[eid] = ("col", name, kind)
    try:
        return Residual(compile_expr(jvm, condition, scope), reads)
    except Exception:  # noqa: BLE001 - Unreadable (or another build): its own job
        return None


def holds_of(fusion: Any, ident: int) -> Callable[..., np.ndarray] | None:
    """Fused join ``ident``'s condition beyond its keys as a function of its key pairs
    ``(left rows, right rows)`` (None: it has none): whether it is true for each pair,
    over the pair's values (:class:`KeyError_` where it cannot be evaluated here, a
    NaN say: then the join takes its own job).  For a fused filter of a join's output
    (rule kind ``"join-filter"``) it takes one array, rows of its input."""
    residual = fusion.residuals.get(ident)
    if residual is None:
        return None
    import pyarrow.compute as pc

    inputs = fusion.rules[ident].inputs

    def holds(*rows: np.ndarray) -> np.ndarray:
        value = values_of(fusion, residual, inputs, rows)
        return np.asarray(pc.fill_null(value, False).to_numpy(zero_copy_only=False), bool)

    return holds


def values_of(
    fusion: Any, residual: Residual, inputs: list[int], rows: tuple[np.ndarray, ...]
) -> Any:
    """The value of a compiled expression over records picked by ``rows`` of each of
    ``inputs`` (one per side the reads name), as an Arrow array; :class:`KeyError_`
    where it cannot be evaluated here."""
    import pyarrow as pa

    columns = {}
    for side, leaf, read, name in residual.reads:
        # (each side's records of the joined dataset the column is read over)
        at = fusion._rows_by_leaf(inputs[side], [leaf])[leaf]
        picked = rows[side]
        picked = picked if at is None else np.append(at, -1)[picked]
        # (one gather from the column as read, not one to the dataset's records first)
        column, pos = fusion._raw(leaf, read)
        if pos is not None:
            picked = np.append(pos, -1)[picked]
        if pa.types.is_string(column.type) and len(picked) > len(column):
            # strings picked more often than there are records (a dimension table's,
            # once a pair): gathered as dictionary codes, and compared once a distinct
            # string (evaluate's dictionary path; TPC-H Q19's brands and containers)
            column = column.dictionary_encode()
        columns[name] = column.take(pa.array(picked, mask=picked < 0))
    try:
        value = evaluate(residual.node, pa.table(columns))
    except Unreadable as exc:
        raise KeyError_(str(exc)) from exc
    if isinstance(value, pa.Scalar):
        value = pa.repeat(value, len(rows[0]))
    return value
