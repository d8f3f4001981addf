"""The what-if part of the explorer: records of sources marked to drop, values edited,
and the preview of what that changes downstream (a mixin of
:class:`~._widget.LineageExplorer`, which holds the synced traits)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from tensprov_lab.notebook._graph_view import dataset_node, node_ref
from tensprov_lab.notebook._values import _convert, _edit_json, _jsonable, _short, _table

__all__ = ["WhatIfPanel"]


class WhatIfPanel:
    """Marking records to drop or values to edit, and previewing the change."""

    # what it uses of LineageExplorer (its traits and graph helpers)
    _run: Any
    _originals: dict[tuple[int, int, str], Any]
    _preview: dict[str, Any] | None
    _picked: dict[str, Any] | None
    _view: Any
    dropped: dict[str, Any]
    edited: dict[str, Any]
    what_if: dict[str, Any]
    records: dict[str, Any]
    lineage: dict[str, Any]
    error: str

    if TYPE_CHECKING:

        def _origin(self, node: str | None) -> tuple[str, int]: ...
        def _droppable(self, ds_id: int) -> bool: ...
        def _label(self, ds_id: int) -> str: ...
        def _targets(self) -> list[int]: ...
        def _refresh_marks(self) -> None: ...

    # -- what-if ---------------------------------------------------------------------------
    def _source(self, node: str | None, row: int, verb: str) -> tuple[str, int, Any]:
        """The node id, dataset id and dataset of a source record a what-if may change;
        a clear error for a derived dataset or a row out of range."""
        nid, ds_id = self._origin(node)
        ds = self._run.store.datasets[ds_id]
        if not self._droppable(ds_id):
            raise ValueError(
                f"{self._label(ds_id)} is derived: what-if {verb}s records of sources; "
                f"{verb} the source records it comes from (a click on a row number lists "
                "them)"
            )
        if not 0 <= int(row) < (ds.n_rows or 0):
            raise IndexError(f"row indices must be in 0..{(ds.n_rows or 0) - 1} for {ds.label}")
        return nid, ds_id, ds

    def mark_drop(self, row: int, on: bool = True, node: str | None = None) -> None:
        """Mark (or unmark) a source record to drop in the next what-if preview.

        Parameters
        ----------
        row : int
            Canonical row index (``_row``) of the record.
        on : bool
            Mark (True) or unmark (False).
        node : str, optional
            Its dataset node (a source); default: the dataset whose records are on show.
        """
        nid, _, _ = self._source(node, row, "drop")
        marked = set(self.dropped.get(nid, []))
        if on:
            marked.add(int(row))
        else:
            marked.discard(int(row))
        dropped = {k: v for k, v in self.dropped.items() if k != nid}
        if marked:
            dropped[nid] = sorted(marked)
        self.dropped = dropped

    def mark_edit(self, row: int, column: str, value: Any, node: str | None = None) -> None:
        """Mark a new value of a source record's cell for the next what-if preview.

        The value is converted to the column's Spark type, the way the front end's text
        arrives: ``"42"`` for an ``int``, ``"3.5"`` for a ``double``, ``"true"`` for a
        ``boolean``, ``"2024-03-02"`` for a ``date``; ``""`` (or None) is null. The
        cell's original value forgets the edit (as :meth:`unmark_edit` does).

        Parameters
        ----------
        row, column : int, str
            The cell: its record's canonical row index (``_row``) and its column.
        value : str or a value of the column's type
            The new value.
        node : str, optional
            Its dataset node (a source); default: the dataset whose records are on show.

        Raises
        ------
        ValueError
            For a derived dataset, an unknown column or a value that is not of the
            column's type; the message says what to give instead.

        Examples
        --------
        >>> w.mark_edit(5, "region", "west", node="d2")    # doctest: +SKIP
        >>> w.edited                                        # doctest: +SKIP
        {'d2': {5: {'region': 'west'}}}
        >>> w.mark_edit(3, "amount", "120.5", node="d0")  # a double column: 120.5  # doctest: +SKIP
        >>> w.preview_what_if()                             # doctest: +SKIP
        """
        nid, ds_id, ds = self._source(node, row, "edit")
        col = self._edit_column(ds_id, column)
        where = f"{self._label(ds_id)}.{col}"
        dtype = ds.dtypes[ds.columns.index(col)]
        new = _edit_json(_convert(value, dtype, where))
        old = self._original(nid, ds_id, int(row), col)
        try:
            same = new == _edit_json(_convert(old, dtype, where))
        except ValueError:  # an original no edit could give (a type the widget cannot edit)
            same = False
        if same:
            self._set_edit(nid, ds_id, int(row), col, None)
        else:
            self._originals[(ds_id, int(row), col)] = old
            self._set_edit(nid, ds_id, int(row), col, (new,))

    def unmark_edit(self, row: int, column: str, node: str | None = None) -> None:
        """Forget the edit of a source record's cell (nothing happens without one); the
        parameters are :meth:`mark_edit`'s.

        Examples
        --------
        >>> w.mark_edit(5, "region", "west", node="d2")    # doctest: +SKIP
        >>> w.unmark_edit(5, "region", node="d2"); w.edited  # doctest: +SKIP
        {}
        """
        nid, ds_id = self._origin(node)
        self._set_edit(nid, ds_id, int(row), str(column), None)

    def _set_edit(
        self, nid: str, ds_id: int, row: int, column: str, value: tuple[Any] | None
    ) -> None:
        """Set (a 1-tuple holding the JSON value) or forget (None) one edited cell."""
        by_row = {r: dict(cols) for r, cols in self.edited.get(nid, {}).items()}
        cols = by_row.setdefault(row, {})
        if value is None:
            cols.pop(column, None)
            self._originals.pop((ds_id, row, column), None)
        else:
            cols[column] = value[0]
        edited = {k: v for k, v in self.edited.items() if k != nid}
        kept = {r: c for r, c in sorted(by_row.items()) if c}
        if kept:
            edited[nid] = kept
        self.edited = edited

    def _edit_column(self, ds_id: int, column: Any) -> str:
        """The column of an edit; a clear error naming the dataset's columns otherwise."""
        ds = self._run.store.datasets[ds_id]
        col = str(column)
        if col not in ds.columns:
            raise ValueError(
                f"{self._label(ds_id)} has no column {col!r}: edit one of {', '.join(ds.columns)}"
            )
        return col

    def _original(self, nid: str, ds_id: int, row: int, column: str) -> Any:
        """The unedited value of a source cell (JSON): from the records on show when the
        row is there (a click in the table), else read from the source."""
        r = self.records
        if r.get("node") == nid and column in r.get("columns", []):
            j = r["columns"].index(column)
            for rec in r.get("rows", []):
                if rec[0] == row:
                    return rec[j]
        try:
            table = self._run.rows(ds_id, rows=[row])
            return _jsonable(table[column].iloc[0])
        except Exception as exc:  # a failed read: said in one line, not as a JVM trace
            raise ValueError(
                f"could not read row {row} of {self._label(ds_id)} to edit it: {_short(exc)}"
            ) from exc

    def _edits(self) -> dict[int, dict[int, dict[str, Any]]]:
        """The marked edits for the engine: dataset id -> {row: {column: typed value}}."""
        store = self._run.store
        out: dict[int, dict[int, dict[str, Any]]] = {}
        for nid, by_row in self.edited.items():
            ds_id = node_ref(nid)[1]
            ds = store.datasets[ds_id]
            for row, cols in by_row.items():
                for col, v in cols.items():
                    col = self._edit_column(ds_id, col)
                    dtype = ds.dtypes[ds.columns.index(col)]
                    typed = _convert(v, dtype, f"{self._label(ds_id)}.{col}")
                    out.setdefault(ds_id, {}).setdefault(int(row), {})[col] = typed
        return out

    def preview_what_if(self) -> None:
        """Preview dropping the marked records and editing the marked values:
        ``run.what_if(drop=..., edit=...)``, shown per downstream dataset and highlighted
        on the graph.

        Examples
        --------
        >>> w.mark_drop(3, node="d0"); w.mark_edit(5, "region", "west", node="d2")  # doctest: +SKIP
        >>> w.preview_what_if(); w.what_if["datasets"][0]["changed"]  # doctest: +SKIP
        """
        if not self.dropped and not self.edited:
            raise ValueError(
                "mark records of a source first: tick records to drop (the checkboxes) "
                "or edit values (double-click a value)"
            )
        drop = {node_ref(nid)[1]: list(rows) for nid, rows in self.dropped.items()}
        edit = self._edits()
        store = self._run.store
        drawn = set(self._targets())
        targets = [
            d
            for d in _downstream(store, [*drop, *edit])
            if d in drawn and not store.datasets[d].hidden
        ]
        # WhatIf names its tables by dataset label, and labels repeat (a later run of the
        # same pipeline binds the same variable names, and its datasets are downstream of
        # the same sources too): ask for this run's drawn datasets only, in batches of
        # distinct labels, so that every table belongs to one dataset (one batch as a rule)
        batches: list[list[int]] = []
        for d in targets:
            label = store.datasets[d].label
            free = [b for b in batches if all(store.datasets[x].label != label for x in b)]
            if free:
                free[0].append(d)
            else:
                batches.append([d])
        self.error = ""
        found: list[dict[str, Any]] = []
        try:
            for batch in batches:
                preview = self._run.what_if(drop=drop or None, edit=edit or None, to=batch)
                ids = {store.datasets[d].label: d for d in batch}
                for label in dict.fromkeys(
                    [*preview.removed, *preview.changed, *preview.added, *preview.not_previewable]
                ):
                    tables = {
                        kind: getattr(preview, kind).get(label)
                        for kind in ("removed", "changed", "added")
                    }
                    n = {k: 0 if t is None else int(len(t)) for k, t in tables.items()}
                    reason = preview.not_previewable.get(label, "")
                    status = (
                        "not_previewable" if reason else "changed" if any(n.values()) else "same"
                    )
                    found.append(
                        {"id": ids[label], "status": status, "reason": reason, "n": n, **tables}
                    )
        except Exception as exc:  # a Spark failure while replaying: shown, never raised
            self.error = f"what-if: {_short(exc)}"
            self._preview = None
            self.what_if = {"error": self.error}
            return
        found.sort(key=lambda e: int(e["id"]))
        if self._picked is not None:  # one highlight at a time (see the module text)
            self._picked = None
            self.lineage = {}
            self._refresh_marks()
        edits = [
            {
                "id": d,
                "row": row,
                "column": col,
                "old": self._originals.get((d, row, col)),
                "new": _edit_json(v),
            }
            for d, by_row in sorted(edit.items())
            for row, cols in sorted(by_row.items())
            for col, v in cols.items()
        ]
        self._preview = {"drop": drop, "edit": edits, "datasets": found}
        self._project_what_if()

    def clear_what_if(self, *, keep_marks: bool = False) -> None:
        """Forget the preview (and, unless ``keep_marks``, the records marked to drop and
        the values edited)."""
        self._preview = None
        self.what_if = {}
        if not keep_marks:
            self.dropped = {}
            self.edited = {}
            self._originals = {}

    def _project_what_if(self) -> None:
        """The preview on the nodes on show: the sources with dropped records or edited
        values, the datasets whose records change (and the operations making them), those
        not previewable."""
        if self._preview is None or self._view is None:
            self.what_if = {}
            return
        G = self._view.graph
        nodes: dict[str, str] = {}
        datasets = []
        for e in self._preview["edit"]:
            if dataset_node(e["id"]) in G:
                nodes[dataset_node(e["id"])] = "edited"
        for d in self._preview["drop"]:
            if dataset_node(d) in G:
                nodes[dataset_node(d)] = "dropped"  # drops and edits: drawn as dropped
        for e in self._preview["datasets"]:
            d = e["id"]
            nid = dataset_node(d)
            if nid in G:
                nodes[nid] = e["status"]
            columns = self._run.store.datasets[d].columns
            datasets.append(
                {
                    "node": nid if nid in G else "",
                    "id": d,
                    "label": self._label(d),
                    "status": e["status"],
                    "reason": e["reason"],
                    "counts": e["n"],
                    "removed": _table(e["removed"], columns),
                    "changed": _table(e["changed"], columns, before=True),
                    "added": _table(e["added"], columns),
                }
            )
        for nid, attrs in G.nodes(data=True):
            if attrs["kind"] == "operation" and nodes.get(attrs["output"]) in (
                "changed",
                "not_previewable",
            ):
                nodes[nid] = nodes[attrs["output"]]
        self.what_if = {
            "drop": [
                {
                    "node": dataset_node(d) if dataset_node(d) in G else "",
                    "id": d,
                    "label": self._label(d),
                    "rows": [int(r) for r in rows],
                }
                for d, rows in self._preview["drop"].items()
            ],
            "edit": [
                {
                    **e,
                    "node": dataset_node(e["id"]) if dataset_node(e["id"]) in G else "",
                    "label": self._label(e["id"]),
                }
                for e in self._preview["edit"]
            ],
            "datasets": datasets,
            "nodes": nodes,
        }


def _downstream(store: Any, changed: Iterable[int]) -> list[int]:
    """Every dataset downstream of the given ones (by operations, not by records)."""
    seen: set[int] = set()
    stack = list(changed)
    while stack:
        for op in store.consumers(stack.pop()):
            if op.output not in seen:
                seen.add(op.output)
                stack.append(op.output)
    return sorted(seen)
