"""Lineage results: the rows (or cells) a query reached, per dataset, in the user's
names, with how-provenance and the records themselves.  ``run`` arguments are
:class:`tensprov_lab.Run` objects (not imported: the Run makes these)."""

from __future__ import annotations

import html
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from tensprov_lab.capture.plan._nodes import ROW
from tensprov_lab.query import CellResult, LineageResult, Path
from tensprov_lab.replay import read_records
from tensprov_lab.store import Dataset, Operation
from tensprov_lab.store._sets import unique

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Lineage", "CellLineage"]


class _Reached:
    """What a query reached, in a run: its direction and where it stopped."""

    def __init__(
        self, run: Any, result: LineageResult | CellResult, paths: list[Path] | None = None
    ) -> None:
        self.run = run
        self.result = result
        self.paths = paths

    @property
    def direction(self) -> str:
        return self.result.direction

    @property
    def blocked(self) -> list[Operation]:
        """Opaque operations where record-level lineage stopped."""
        return [self.run.store.operations[o] for o in self.result.blocked]


class Lineage(_Reached):
    """Rows reached by a lineage query, per dataset (sorted int64 arrays)."""

    result: LineageResult

    @property
    def how(self) -> pd.DataFrame:
        """How-provenance: one row per (reached record, path of operations)."""
        return _how_table(self.run, self.paths, self.result.direction)

    def _targets(self) -> dict[int, np.ndarray]:
        return {d: r for d, r in self.result.rows.items() if d != self.result.start}

    def __getitem__(self, ref: Any) -> np.ndarray:
        ds_id = self.run._ds_id(ref)
        if ds_id not in self.result.rows:
            raise KeyError(f"{self.run.store.datasets[ds_id].label} is not in this lineage")
        return self.result.rows[ds_id]

    def __iter__(self) -> Iterator[Dataset]:
        return (self.run.store.datasets[d] for d in self._targets())

    def __len__(self) -> int:
        return len(self._targets())

    def items(self) -> Iterable[tuple[str, np.ndarray]]:
        return [(self.run.store.datasets[d].label, r) for d, r in self._targets().items()]

    def to_dict(self) -> dict[str, list[int]]:
        return {label: r.tolist() for label, r in self.items()}

    def to_pandas(self, dataset: Any = None) -> pd.DataFrame | dict[str, pd.DataFrame]:
        """The reached records: one table (when one dataset is reached or named), else a
        dict of tables keyed by dataset name."""
        targets = self._targets()
        if dataset is not None:
            ds_id = self.run._ds_id(dataset)
            return read_records(self.run._tracker, ds_id, self.result.rows[ds_id], None)
        tables = {
            self.run.store.datasets[d].label: read_records(self.run._tracker, d, r, None)
            for d, r in targets.items()
        }
        if len(tables) == 1:
            return next(iter(tables.values()))
        return tables

    def __repr__(self) -> str:
        start = self.run.store.datasets[self.result.start].label
        parts = ", ".join(f"{label}: {_short(r)}" for label, r in self.items())
        extra = f" (stopped at {len(self.blocked)} opaque operation(s))" if self.blocked else ""
        return f"<Lineage {self.direction} from {start}: {parts}{extra}>"

    def _repr_html_(self) -> str:
        start = html.escape(self.run.store.datasets[self.result.start].label)
        items = "".join(
            f"<li><b>{html.escape(label)}</b>: {len(r)} row(s) {html.escape(_short(r))}</li>"
            for label, r in self.items()
        )
        warn = ""
        if self.blocked:
            ops = ", ".join(html.escape(o.expression) for o in self.blocked)
            warn = f"<p>⚠ record lineage stops at opaque operation(s): {ops}</p>"
        return f"<div><p>{self.direction} lineage from {start}</p><ul>{items}</ul>{warn}</div>"


class CellLineage(_Reached):
    """Cells reached by a cell-lineage query: per dataset, the rows of every column,
    split into contributing cells (their values flow into the start cells) and
    influencing cells (they decide whether, where or in which group those exist)."""

    result: CellResult

    @property
    def approximate(self) -> list[Operation]:
        """Operations whose column lineage is a superset (plan step not understood)."""
        return [self.run.store.operations[o] for o in self.result.approximate]

    def _datasets(self) -> list[int]:
        ids = set(self.result.contributing) | set(self.result.influencing)
        return sorted(d for d in ids if d != self.result.start)

    def __iter__(self) -> Iterator[Dataset]:
        return (self.run.store.datasets[d] for d in self._datasets())

    def __len__(self) -> int:
        return len(self._datasets())

    def __getitem__(self, ref: Any) -> dict[str, dict[str, np.ndarray]]:
        """``{"contributing": {column: rows}, "influencing": {column: rows}}``."""
        ds_id = self.run._ds_id(ref)
        if ds_id not in self.result.contributing and ds_id not in self.result.influencing:
            raise KeyError(f"{self.run.store.datasets[ds_id].label} is not in this lineage")
        names = self.run.store.datasets[ds_id].columns
        return {
            kind: {names[c]: r for c, r in getattr(self.result, kind).get(ds_id, {}).items()}
            for kind in ("contributing", "influencing")
        }

    def rows(self, ref: Any) -> np.ndarray:
        """Every row holding a reached cell of the dataset."""
        parts = [r for cols in self[ref].values() for r in cols.values()]
        return unique(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.int64)

    def columns(self, ref: Any) -> dict[str, list[str]]:
        return {kind: list(cols) for kind, cols in self[ref].items()}

    def to_pandas(self) -> pd.DataFrame:
        """One row per reached cell: dataset, row, column, kind."""
        import pandas as pd

        frames = []
        for d in self._datasets():
            label = self.run.store.datasets[d].label
            for kind, cols in self[d].items():
                for col, r in cols.items():
                    frames.append(
                        pd.DataFrame({"dataset": label, "row": r, "column": col, "kind": kind})
                    )
        if not frames:
            return pd.DataFrame(columns=["dataset", "row", "column", "kind"])
        return pd.concat(frames, ignore_index=True)

    def values(self, ref: Any) -> pd.DataFrame:
        """The reached records of a dataset, restricted to the reached columns."""
        ds_id = self.run._ds_id(ref)
        cols = self.columns(ds_id)
        keep = list(dict.fromkeys(cols["contributing"] + cols["influencing"]))
        table = read_records(self.run._tracker, ds_id, self.rows(ds_id), None)
        return table[[ROW, *keep]]

    @property
    def how(self) -> pd.DataFrame:
        """How-provenance: one row per (reached cell, path of operations)."""
        return _how_table(self.run, self.paths, self.result.direction, cells=True)

    def _reached(self) -> list[tuple[str, np.ndarray, dict[str, list[str]]]]:
        """Per reached dataset: its label, rows and columns."""
        labels = self.run.store.datasets
        return [(labels[d].label, self.rows(d), self.columns(d)) for d in self._datasets()]

    def __repr__(self) -> str:
        start = self.run.store.datasets[self.result.start].label
        parts = "; ".join(
            f"{label}: {len(rows)} row(s), contributing {c['contributing']}, "
            f"influencing {c['influencing']}"
            for label, rows, c in self._reached()
        )
        return f"<CellLineage {self.direction} from {start}: {parts}>"

    def _repr_html_(self) -> str:
        start = html.escape(self.run.store.datasets[self.result.start].label)
        items = "".join(
            f"<li><b>{html.escape(label)}</b>: {len(rows)} row(s) {html.escape(_short(rows))}; "
            f"contributing: {html.escape(', '.join(c['contributing']) or '—')}; "
            f"influencing: {html.escape(', '.join(c['influencing']) or '—')}</li>"
            for label, rows, c in self._reached()
        )
        return f"<div><p>{self.direction} cell lineage from {start}</p><ul>{items}</ul></div>"


def _how_table(
    run: Any, paths: list[Path] | None, direction: str, cells: bool = False
) -> pd.DataFrame:
    import pandas as pd

    if paths is None:
        raise ValueError("how-provenance was not computed: query again with how=True")
    store = run.store
    frames = []
    for p in paths:
        # data-flow order: from the source side to the output side
        edges = p.edges[::-1] if direction == "backward" else p.edges
        ops = tuple(store.operations[o] for o, _ in edges)
        text = " → ".join(f"{op.category}: {op.expression}" for op in ops)
        ids = tuple(op.id for op in ops)
        # which input of each operation the path goes through (0: left, 1: right of a
        # join; a self-join's two sides are two paths that differ only here)
        sides = tuple(int(pos) for _, pos in edges)
        label = store.datasets[p.dataset].label

        def frame(
            rows: np.ndarray,
            label: str = label,
            text: str = text,
            ids: tuple = ids,
            sides: tuple = sides,
            **extra: str,
        ) -> pd.DataFrame:
            f = pd.DataFrame({"dataset": label, "row": rows, **extra, "path": text})
            f["operations"] = [ids] * len(f)
            f["inputs"] = [sides] * len(f)
            return f

        if not cells:
            frames.append(frame(p.rows))
            continue
        names = store.datasets[p.dataset].columns
        for kind, got in (("contributing", p.contributing), ("influencing", p.influencing)):
            for c, r in (got or {}).items():
                frames.append(frame(r, column=names[c], kind=kind))
    cols = ["dataset", "row", *(["column", "kind"] if cells else []), "path", "operations"]
    cols.append("inputs")
    if not frames:
        return pd.DataFrame(columns=cols)
    return pd.concat(frames, ignore_index=True)[cols]


def _flags(op: Operation) -> str:
    flags = [
        name
        for name, on in (
            ("opaque", op.opaque),
            ("non-deterministic", op.nondeterministic),
            ("contextual", op.contextual),
        )
        if on
    ]
    return ", ".join(flags)


def _as_rows(rows: Any) -> np.ndarray:
    if rows is None:
        return None  # type: ignore[return-value]
    if isinstance(rows, (int, np.integer)):
        rows = [int(rows)]
    arr = np.asarray(rows)
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"rows must be integers, got {arr.dtype}")
    return arr.astype(np.int64).ravel()


def _short(rows: np.ndarray, limit: int = 8) -> str:
    head = ", ".join(str(int(r)) for r in rows[:limit])
    return f"[{head}{', …' if len(rows) > limit else ''}]"


def _human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"
