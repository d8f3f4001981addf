"""Column lineage of a dataset: which source columns each of its columns comes from,
composed along the operation graph from the operations' attribute maps (prospective
provenance; the record-level tensors are not needed).  Pure Python/numpy."""

from __future__ import annotations

from tensprov_lab.store import Store

__all__ = ["column_lineage", "INDIRECT_SUBTYPES"]

#: what makes a column influence another, by the category of the operation it happens in
#: (OpenLineage's transformation subtypes)
INDIRECT_SUBTYPES = {
    "horizontal_reduction": "FILTER",
    "join": "JOIN",
    "aggregate": "GROUP_BY",
    "dedup": "GROUP_BY",
    "sort": "SORT",
    "window": "WINDOW",
}

#: (source dataset id, source column) -> {(type, subtype)}, type DIRECT or INDIRECT
Origins = dict[tuple[int, str], set[tuple[str, str | None]]]


def column_lineage(store: Store, ds_id: int) -> dict[str, Origins]:
    """Per column of dataset ``ds_id``, the columns of the datasets without a producer
    (sources) it derives from.  ``DIRECT``: the source values flow into the column along
    the whole way (subtype ``AGGREGATION`` when an aggregate combined them, else none);
    ``INDIRECT``:
    somewhere on the way the source column decided whether, where or in which group a
    record exists (a filter or join condition, a group or sort key: the subtype says
    which).  An operation whose attribute maps could not be read makes every input
    column contribute (a superset, as in the store).

    Examples
    --------
    >>> import numpy as np
    >>> from tensprov_lab.store import Store, MaskTensor
    >>> s = Store()
    >>> a = s.add_dataset("a", n_rows=3, columns=["x", "y"], role="source")
    >>> b = s.add_dataset("b", n_rows=1, columns=["x", "y"])
    >>> _ = s.add_operation("filter", "horizontal_reduction", [a.id], b.id,
    ...     [MaskTensor.from_kept([2], 3)], contributing=[np.eye(2, dtype=bool)],
    ...     influencing=[np.array([[False, True], [False, True]])])
    >>> sorted(column_lineage(s, b.id)["x"].items())
    [((0, 'x'), {('DIRECT', None)}), ((0, 'y'), {('INDIRECT', 'FILTER')})]
    """
    memo: dict[tuple[int, int], Origins] = {}

    def origins(d: int, col: int) -> Origins:
        key = (d, col)
        if key in memo:
            return memo[key]
        memo[key] = {}  # a cycle cannot happen in a store; this guards the recursion
        ds = store.datasets[d]
        op = store.producer(d)
        out: Origins = {}
        if op is None:
            out[(d, ds.columns[col])] = {("DIRECT", None)}
            memo[key] = out
            return out
        for k, src in enumerate(op.inputs):
            n_in = len(store.datasets[src].columns)
            contributing = op.contributing[k][col] if op.contributing is not None else None
            influencing = op.influencing[k][col] if op.influencing is not None else None
            for j in range(n_in):
                flows = bool(contributing[j]) if contributing is not None else True
                decides = bool(influencing[j]) if influencing is not None else False
                if not (flows or decides):
                    continue
                for where, kinds in origins(src, j).items():
                    into = out.setdefault(where, set())
                    for kind, subtype in kinds:
                        if kind == "INDIRECT":
                            into.add((kind, subtype))
                            continue
                        if flows:
                            into.add(("DIRECT", _direct(op.category, subtype)))
                        if decides:
                            into.add(("INDIRECT", INDIRECT_SUBTYPES.get(op.category)))
        memo[key] = out
        return out

    columns = store.datasets[ds_id].columns
    return {name: origins(ds_id, i) for i, name in enumerate(columns)}


def _direct(category: str, upstream: str | None) -> str | None:
    """The subtype of a value that flowed through an operation of ``category``: an
    aggregate's, or none (the attribute maps do not tell a copied value from a computed
    one, and a wrong ``IDENTITY`` would be worse than none)."""
    return "AGGREGATION" if category == "aggregate" or upstream == "AGGREGATION" else None
