"""Run history and diffs: what changed between two runs of a pipeline.

Two runs of the same cell (or of ``track(name=...)``) are versions of one pipeline;
:func:`diff` compares them by dataset name: which operations changed, which schemas
and row counts, and, for an output, which records appear, disappear or change.  Records
are matched by their source lineage (the source records they derive from), not by
position: a fix that drops one bad order shifts every later row but changes only the
records that order reached.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

    from tensprov_lab._run import Run
    from tensprov_lab.store import Store

__all__ = ["RunDiff", "diff", "history"]


def history(name: str) -> list[Run]:
    """Every kept run named ``name`` (its versions), oldest first.

    Examples
    --------
    >>> tensprov_lab.history("retail")  # doctest: +SKIP
    [<Run tensprov-lab run retail: ...>, <Run tensprov-lab run retail: ...>]
    """
    from tensprov_lab._registry import runs

    return [r for r in runs() if r.name == name]


def _involved(run: Run) -> dict[str, int]:
    """The datasets a run made or read, by label (a later run's label wins)."""
    store = run.store
    ids = list(run._log.datasets)
    for o in run._log.operations:
        ids += store.operations[o].inputs
    return {store.datasets[d].label: d for d in ids}


def _sources(store: Store, ds: int) -> list[int]:
    """The datasets without a producer upstream of ``ds``."""
    seen, todo, out = {ds}, [ds], []
    while todo:
        d = todo.pop()
        op = store.producer(d)
        if op is None:
            out.append(d)
            continue
        for i in op.inputs:
            if i not in seen:
                seen.add(i)
                todo.append(i)
    return sorted(out)


@dataclass
class RunDiff:
    """What changed from run ``before`` to run ``after`` (:func:`diff`)."""

    before: Run
    after: Run
    #: one row per dataset name: change ("added", "removed", "changed", "same") of the
    #: operation producing it, with both expressions
    operations: pd.DataFrame
    #: datasets whose columns or types changed
    schemas: pd.DataFrame
    #: rows per dataset in both runs
    rows: pd.DataFrame
    #: per compared output: status ("appears", "disappears", "changed", "same"), the
    #: row in each run, changed columns and values
    records: dict[str, pd.DataFrame] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def summary(self) -> str:
        ops = self.operations
        counts = {c: int((ops["change"] == c).sum()) for c in ("changed", "added", "removed")}
        lines = [
            f"diff {_name(self.before)} -> {_name(self.after)}: operations "
            + ", ".join(f"{n} {c}" for c, n in counts.items())
            + f"; {len(self.schemas)} schema change(s)"
        ]
        for _, r in ops[ops["change"] != "same"].iterrows():
            lines.append(f"  {r['change']:>8} {r['dataset']}: {r['before']!s} -> {r['after']!s}")
        for _, r in self.rows[self.rows["before"] != self.rows["after"]].iterrows():
            lines.append(f"  rows of {r['dataset']}: {r['before']} -> {r['after']}")
        for label, table in self.records.items():
            status = table["status"].value_counts()
            parts = [f"{int(status.get(s, 0))} {s}" for s in ("appears", "disappears", "changed")]
            lines.append(f"  records of {label}: {', '.join(parts)}")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.summary()

    def explore(self) -> Any:
        """The lineage explorer of ``after`` with the changes marked: operations and
        datasets added or changed since ``before`` are outlined, and what ``before``
        had and ``after`` has not is listed above the graph."""
        from tensprov_lab.notebook._widget import LineageExplorer

        return LineageExplorer(self.after, diff=self)


def _name(run: Run) -> str:
    label = run.name or f"#{run.id}"
    return f"{label}@{run.version}" if run.name else label


def diff(before: Run, after: Run, output: Any = None) -> RunDiff:
    """Compare two runs (e.g. two versions of a cell) by dataset name.

    Parameters
    ----------
    before, after : Run
    output : DataFrame, dataset name, or list of them, optional
        The datasets whose records to compare (default: the outputs of ``after``, the
        datasets nothing in it reads, that ``before`` has too).  A record is matched
        by its source lineage (source records matched by source name and row): in
        ``after`` only, it *appears*; in ``before`` only, it *disappears*; in both, it
        is *changed* when a value differs (compared when both runs can read records).

    Examples
    --------
    >>> d = tensprov_lab.diff(*tensprov_lab.history("retail")[-2:])  # doctest: +SKIP
    >>> d.records["out"].query("status != 'same'")  # doctest: +SKIP
    """
    import pandas as pd

    for r in (before, after):
        r._check()
    a_sets, b_sets = _involved(before), _involved(after)
    sa, sb = before.store, after.store
    op_rows, schema_rows, count_rows = [], [], []
    for label in sorted(set(a_sets) | set(b_sets), key=lambda x: (x not in b_sets, x)):
        da, db = a_sets.get(label), b_sets.get(label)
        pa_ = sa.producer(da) if da is not None else None
        pb = sb.producer(db) if db is not None else None
        ea = (pa_.expression or pa_.method) if pa_ is not None else None
        eb = (pb.expression or pb.method) if pb is not None else None
        if da is None:
            change = "added"
        elif db is None:
            change = "removed"
        else:
            change = "same" if ea == eb else "changed"
        op_rows.append({"dataset": label, "change": change, "before": ea, "after": eb})
        if da is not None and db is not None:
            xa, xb = sa.datasets[da], sb.datasets[db]
            ta, tb = dict(zip(xa.columns, xa.dtypes)), dict(zip(xb.columns, xb.dtypes))
            added = [c for c in xb.columns if c not in ta]
            removed = [c for c in xa.columns if c not in tb]
            retyped = [f"{c}: {ta[c]} -> {tb[c]}" for c in xb.columns if c in ta and ta[c] != tb[c]]
            if added or removed or retyped:
                schema_rows.append({"dataset": label, "added": added, "removed": removed,
                                    "retyped": retyped})  # fmt: skip
            count_rows.append({"dataset": label, "before": xa.n_rows, "after": xb.n_rows})
    result = RunDiff(
        before, after,
        pd.DataFrame(op_rows, columns=["dataset", "change", "before", "after"]),
        pd.DataFrame(schema_rows, columns=["dataset", "added", "removed", "retyped"]),
        pd.DataFrame(count_rows, columns=["dataset", "before", "after"]),
    )  # fmt: skip
    if output is None:
        consumed = {d for o in after._log.operations for d in sb.operations[o].inputs}
        labels = [
            sb.datasets[d].label for d in after._log.datasets
            if d not in consumed and sb.producer(d) is not None
        ]  # fmt: skip
        labels = [x for x in labels if x in a_sets]
    else:
        refs = output if isinstance(output, (list, tuple)) else [output]
        labels = [r if isinstance(r, str) else after.dataset(r).label for r in refs]
    for label in labels:
        if label not in a_sets or label not in b_sets:
            result.notes.append(f"{label} is not in both runs: its records are not compared")
            continue
        table = _records(before, after, a_sets[label], b_sets[label], result.notes)
        if table is not None:
            result.records[label] = table
    return result


def _signatures(run: Run, ds: int, sources: dict[str, int]) -> list[tuple[Any, ...]]:
    """Per record of ``ds``: the source records it derives from, per source name."""
    from tensprov_lab.query import mapping

    n = run.store.datasets[ds].n_rows or 0
    parts: list[list[tuple[int, ...]]] = []
    for label in sorted(sources):
        m = mapping(run.store, sources[label], ds).tocsr()
        m.sort_indices()
        parts.append([tuple(m.indices[m.indptr[o] : m.indptr[o + 1]].tolist()) for o in range(n)])
    return [tuple(p[o] for p in parts) for o in range(n)]


def _records(before: Run, after: Run, da: int, db: int, notes: list[str]) -> pd.DataFrame | None:
    import pandas as pd

    sa, sb = before.store, after.store
    label = sb.datasets[db].label
    src_a = {sa.datasets[s].label: s for s in _sources(sa, da)}
    src_b = {sb.datasets[s].label: s for s in _sources(sb, db)}
    shared = {}
    for name in sorted(set(src_a) & set(src_b)):
        na, nb = sa.datasets[src_a[name]].n_rows, sb.datasets[src_b[name]].n_rows
        if sa is sb and src_a[name] == src_b[name] or na == nb:
            shared[name] = (src_a[name], src_b[name])
        else:
            notes.append(
                f"source {name} has {na} rows before and {nb} after: its records cannot be "
                f"matched by position, so {label}'s records are matched without it"
            )
    if not shared:
        notes.append(f"{label}: no source in common, its records are not compared")
        return None
    try:
        sig_a = _signatures(before, da, {k: v[0] for k, v in shared.items()})
        sig_b = _signatures(after, db, {k: v[1] for k, v in shared.items()})
    except ValueError as exc:
        notes.append(f"{label}: records not compared ({exc})")
        return None
    where_a: dict[tuple[Any, ...], list[int]] = {}
    for o, s in enumerate(sig_a):
        where_a.setdefault(s, []).append(o)
    pairs: list[tuple[int | None, int | None]] = []
    for o, s in enumerate(sig_b):
        rows = where_a.get(s)
        pairs.append((rows.pop(0) if rows else None, o))
    pairs += [(o, None) for rows in where_a.values() for o in rows]
    values = _values(before, after, da, db, notes)
    out = []
    for ra, rb in pairs:
        status, cols, old, new = "same", [], {}, {}
        if ra is None:
            status = "appears"
        elif rb is None:
            status = "disappears"
        elif values is not None:
            va, vb = values[0].iloc[ra], values[1].iloc[rb]
            cols = [c for c in values[1].columns if c in va.index and not _equal(va[c], vb[c])]
            if cols:
                status = "changed"
                old, new = {c: va[c] for c in cols}, {c: vb[c] for c in cols}
        out.append({"status": status, "row_before": ra, "row_after": rb, "columns": cols,
                    "before": old, "after": new})  # fmt: skip
    table = pd.DataFrame(out, columns=["status", "row_before", "row_after", "columns",
                                       "before", "after"])  # fmt: skip
    return table.astype({"row_before": "Int64", "row_after": "Int64"})


def _values(
    before: Run, after: Run, da: int, db: int, notes: list[str]
) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """Both datasets' records in canonical order, or None (with a note) when a run
    cannot read them (loaded from a save, say)."""
    from tensprov_lab.capture.plan._nodes import ROW

    try:
        a = before.rows(da).sort_values(ROW).drop(columns=[ROW]).reset_index(drop=True)
        b = after.rows(db).sort_values(ROW).drop(columns=[ROW]).reset_index(drop=True)
    except (LookupError, ValueError) as exc:
        label = after.store.datasets[db].label
        notes.append(f"values of {label} not compared: {str(exc).splitlines()[0]}")
        return None
    return a, b


def _equal(x: Any, y: Any) -> bool:
    try:
        if x is None or y is None or (np.isscalar(x) and np.isscalar(y)):
            both_nan = x != x and y != y  # noqa: PLR0124 - NaN equals NaN here
            return bool(x == y or both_nan)
        return bool(np.array_equal(np.asarray(x), np.asarray(y)))
    except (TypeError, ValueError):
        return str(x) == str(y)
