"""The interactive lineage explorer: an anywidget drawing the run's DAG with cytoscape.js.

Python owns the state and the queries; the front end (``js/src/explorer.js``, bundled
into ``tensprov_lab/static/explorer.js``) only draws the synced traits and reports
clicks, so every interaction can be tested without a browser:

- the front end sets ``selected``, ``coarse``, ``focus`` and ``search`` (traits), and
  sends ``{"type": "page", "page": n}``, ``{"type": "record", "row": r}`` (a click on a
  row number), ``{"type": "cell", "row": r, "column": c}`` (a click on a value),
  ``{"type": "lineage_rows", "node": id}``, ``{"type": "clear"}``,
  ``{"type": "drop", "node": id, "row": r, "on": bool}`` (a what-if checkbox of a
  source's record), ``{"type": "edit", "node": id, "row": r, "column": c, "value":
  text}`` (a value typed into a source's records table: converted to the column's
  type, ``""`` is null, the original value forgets the edit; ``"unmark": true`` instead
  of a value forgets it too), ``{"type": "what_if"}`` (the preview button) and
  ``{"type": "clear_what_if"}`` messages;
- Python answers by setting ``graph``, ``details``, ``records``, ``lineage``,
  ``matches``, ``dropped``, ``edited``, ``what_if`` and ``error`` (a refused edit says
  why there, never raises into the comm).

A lineage highlight and a what-if preview are never on show together: both recolour the
same nodes, so starting one clears the other (the records marked to drop and the values
edited stay marked).

Where widgets cannot render (GitHub, nbviewer, exported HTML), the mimebundle also holds
the static SVG of :mod:`._svg` and a text summary.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import anywidget
import networkx as nx
import numpy as np
import traitlets

from tensprov_lab.notebook._graph_view import (
    GraphView,
    build_graph,
    dataset_node,
    focus_graph,
    layout_view,
    matching_nodes,
    node_ref,
    operation_node,
)
from tensprov_lab.notebook._rollup import rollup as rolled_up
from tensprov_lab.notebook._source_panel import SourcePanel
from tensprov_lab.notebook._svg import view_to_svg
from tensprov_lab.notebook._values import (  # noqa: F401 - _convert, _edit_json: tests use them here
    LISTED_ROWS,
    _convert,
    _edit_json,
    _jsonable,
)
from tensprov_lab.notebook._what_if_panel import WhatIfPanel
from tensprov_lab.store._sets import unique

__all__ = ["LineageExplorer", "explore"]

STATIC = Path(__file__).resolve().parent.parent / "static"
PAGE_SIZE = 20


def explore(run: Any, rollup: bool = True) -> LineageExplorer:
    """The lineage explorer of ``run`` (what ``Run.explore()`` returns)."""
    return LineageExplorer(run, rollup=rollup)


class LineageExplorer(WhatIfPanel, SourcePanel, anywidget.AnyWidget):  # type: ignore[misc]
    """Interactive view of a run's provenance graph.

    Parameters
    ----------
    run : Run
        The run to explore (its store holds every dataset the queries may reach).
    coarse : bool, default False
        Start in coarse mode (datasets only).

    Examples
    --------
    >>> w = run.explore()                      # doctest: +SKIP
    >>> w.selected = "d8"  # what a click on dataset 8 does  # doctest: +SKIP
    >>> w.records["rows"][0]                   # doctest: +SKIP
    >>> w.select_record(0)  # backward + forward lineage of row 0  # doctest: +SKIP
    >>> w.select_cell(0, "total")  # ... of one cell: contributing/influencing  # doctest: +SKIP
    >>> w.mark_drop(3, node="d0"); w.preview_what_if()  # doctest: +SKIP
    >>> w.mark_edit(5, "region", "west", node="d2"); w.preview_what_if()  # doctest: +SKIP
    """

    _esm = STATIC / "explorer.js"
    _css = STATIC / "explorer.css"

    #: nodes (position, size, style, schema ...) and edges (bend points) to draw
    graph = traitlets.Dict().tag(sync=True)
    #: id of the selected node ("" for none), set by a click
    selected = traitlets.Unicode("").tag(sync=True)
    #: the details panel of the selected node
    details = traitlets.Dict().tag(sync=True)
    #: a page of records of the selected dataset
    records = traitlets.Dict().tag(sync=True)
    #: record-level lineage of the picked record: counts per node, rows per dataset
    lineage = traitlets.Dict().tag(sync=True)
    #: datasets only (True) or datasets and operations (False)
    coarse = traitlets.Bool(False).tag(sync=True)
    #: chains of row-preserving steps drawn as one stage node each (expand on demand)
    rollup = traitlets.Bool(True).tag(sync=True)
    #: node whose ancestors and descendants alone are shown ("" for the whole graph)
    focus = traitlets.Unicode("").tag(sync=True)
    #: attribute search text
    search = traitlets.Unicode("").tag(sync=True)
    #: nodes whose schema holds the searched attribute
    matches = traitlets.List(traitlets.Unicode()).tag(sync=True)
    #: records of sources marked to drop in a what-if preview: node id -> sorted rows
    dropped = traitlets.Dict().tag(sync=True)
    #: values of source records edited in a what-if preview: node id -> {row: {column:
    #: value}} (values converted to the column's type, as JSON: dates as ISO text; the
    #: front end sees the rows as strings)
    edited = traitlets.Dict().tag(sync=True)
    #: the what-if preview of dropping and editing them: per downstream dataset, what changes
    what_if = traitlets.Dict().tag(sync=True)
    #: last error of a query, shown by the front end
    error = traitlets.Unicode("").tag(sync=True)

    def __init__(self, run: Any, *, coarse: bool = False, diff: Any = None, **kwargs: Any) -> None:
        self._run = run
        # a RunDiff whose ``after`` run this is: its changes are marked on the graph
        self._diff = diff
        self._view: GraphView | None = None
        self._full: nx.DiGraph = nx.DiGraph()
        # lineage of the picked record, per dataset id, kept so that it can be projected
        # again onto the nodes after a coarse/fine toggle or a focus change
        self._picked: dict[str, Any] | None = None
        # the last what-if preview (dataset ids, not node ids), kept for the same reason
        self._preview: dict[str, Any] | None = None
        # original values of the edited cells, (dataset, row, column) -> JSON value
        self._originals: dict[tuple[int, int, str], Any] = {}
        # stages drawn step by step (expanded by the user)
        self._expanded: set[str] = set()
        super().__init__(coarse=coarse, **kwargs)
        self.on_msg(self._on_msg)
        self._refresh_graph()

    # -- graph -----------------------------------------------------------------------------
    def _refresh_graph(self) -> None:
        full = build_graph(self._run, coarse=self.coarse)
        self._full = full
        G = full
        if self.rollup and not self.coarse:
            G = rolled_up(full, self._expanded)
        if self.focus:
            fid = self._visible_id(self.focus, G)
            if fid != self.focus:
                self.focus = fid  # re-enters through the observer with a valid id
                return
            if fid:
                G = focus_graph(G, fid)
        view = layout_view(G, coarse=self.coarse)
        self._view = view
        payload = view.to_payload()
        for node in payload["nodes"]:
            node["focus"] = node["id"] == self.focus
        payload["focus"] = self.focus
        payload["title"] = self._title()
        if self._diff is not None:
            self._mark_diff(payload)
        self.graph = payload
        self.matches = matching_nodes(G, self.search)
        if self.selected and self.selected not in G:
            self.selected = self._visible_id(self.selected, G)
        self._project_lineage()
        self._project_what_if()

    def _visible_id(self, nid: str, G: nx.DiGraph) -> str:
        """The node of ``G`` standing for ``nid`` ("" when there is none).

        In coarse mode an operation stands for its output dataset, so a focus or a
        selection on an operation survives the toggle.
        """
        if not nid or nid in G:
            return nid
        kind, ref = node_ref(nid)
        stage_of = G.graph.get("stage_of", {})
        if kind == "stage":  # expanded: the step (or the part of it) it is named after
            nid = operation_node(ref)
            if nid in G:
                return nid
        stage = stage_of.get(nid)
        if stage is not None and stage in G:  # rolled up into a stage
            return str(stage)
        if kind == "operation":
            op = self._run.store.operations.get(ref)
            if op is not None and dataset_node(op.output) in G:
                return dataset_node(op.output)
        return ""

    def _mark_diff(self, payload: dict[str, Any]) -> None:
        """Mark the nodes a diff says were added or changed (``node["diff"]``), and list
        what the earlier run had and this one has not (``payload["diff"]``)."""
        d = self._diff
        change = dict(zip(d.operations["dataset"], d.operations["change"]))
        store = self._run.store
        G = self._view.graph if self._view is not None else self._full
        for node in payload["nodes"]:
            kind, ref = node_ref(node["id"])
            if kind == "stage":
                steps = [node_ref(s)[1] for s in G.nodes[node["id"]]["steps"]]
            else:
                steps = [ref] if kind == "operation" else []
            outs = [store.operations[o].output for o in steps] or [ref]
            found = {change.get(store.datasets[ds].label, "same") for ds in outs}
            status = next((s for s in ("added", "changed") if s in found), "")
            node["diff"] = status
        removed = d.operations[d.operations["change"] == "removed"]
        counts = d.operations["change"].value_counts()
        payload["diff"] = {
            "summary": (
                f"changes from {d.before.name or d.before.id}: "
                f"{int(counts.get('changed', 0))} changed, {int(counts.get('added', 0))} "
                f"added, {int(counts.get('removed', 0))} removed"
            ),
            "removed": [
                {"dataset": str(r["dataset"]), "expression": str(r["before"] or "")}
                for _, r in removed.iterrows()
            ],
        }

    def _title(self) -> str:
        summary = getattr(self._run, "summary", None)
        return str(summary()) if callable(summary) else "tensprov-lab lineage"

    @traitlets.observe("coarse", "focus", "rollup")
    def _on_shape_change(self, change: dict[str, Any]) -> None:
        self._refresh_graph()

    @traitlets.observe("search")
    def _on_search(self, change: dict[str, Any]) -> None:
        self.matches = matching_nodes(self._view.graph if self._view else self._full, self.search)

    @traitlets.observe("selected")
    def _on_select(self, change: dict[str, Any]) -> None:
        nid = change["new"]
        self.error = ""
        if not nid:
            self.details = {}
            return
        if self._view is None or nid not in self._view.graph:
            self.details = {}
            self.error = f"no node {nid!r} in the graph"
            return
        kind, ref = node_ref(nid)
        if kind == "stage":
            self.details = self._stage_details(nid)
        elif kind == "operation":
            self.details = self._operation_details(ref)
        else:
            self.details = self._dataset_details(nid, ref)
            self.show_records(nid, page=0)

    # -- details ---------------------------------------------------------------------------
    def _ds_summary(self, ds_id: int) -> dict[str, Any]:
        ds = self._run.store.datasets[ds_id]
        nid = dataset_node(ds_id)
        shown = self._view is not None and nid in self._view.graph
        return {
            "node": nid if shown else "",
            "id": ds.id,
            "label": self._label(ds_id),
            "rows": ds.n_rows,
            "schema": [[c, t] for c, t in zip(ds.columns, ds.dtypes)],
            # why its records are kept whole; "" when they are recomputed on demand
            "materialized": _kept(ds),
        }

    def _label(self, ds_id: int) -> str:
        nid = dataset_node(ds_id)
        if nid in self._full:
            return str(self._full.nodes[nid]["label"])
        return str(self._run.store.datasets[ds_id].label)

    def _operation_details(self, op_id: int) -> dict[str, Any]:
        store = self._run.store
        op = store.operations[op_id]
        return {
            "type": "operation",
            "node": f"o{op.id}",
            "id": op.id,
            "method": op.method,
            "category": op.category,
            "expression": op.expression,
            "contextual": op.contextual,
            "opaque": op.opaque,
            "nondeterministic": op.nondeterministic,
            "trivial": op.trivial,
            "seconds": op.seconds,
            "entries": op.entries,
            "nbytes": op.nbytes,
            "rows_in": [store.datasets[i].n_rows for i in op.inputs],
            "rows_out": store.datasets[op.output].n_rows,
            "inputs": [self._ds_summary(i) for i in op.inputs],
            "output": self._ds_summary(op.output),
            "warnings": list(op.warnings),
        }

    def _dataset_details(self, nid: str, ds_id: int) -> dict[str, Any]:
        store = self._run.store
        ds = store.datasets[ds_id]
        attrs = self._full.nodes[nid] if nid in self._full else {}
        producer = store.producer(ds_id)
        return {
            **self._ds_summary(ds_id),
            "type": "dataset",
            "node": nid,
            "kind": attrs.get("kind", ds.role),
            "role": ds.role,
            "origin": ds.origin,
            "produced_by": None
            if producer is None
            else {
                "node": f"o{producer.id}",
                "method": producer.method,
                "expression": producer.expression,
            },
            "consumed_by": [
                {"node": f"o{op.id}", "method": op.method, "expression": op.expression}
                for op in store.consumers(ds_id)
            ],
            # hidden datasets (after repartition, cache ...) drawn as this node
            "aliases": [store.datasets[a].label for a in attrs.get("aliases", [])],
            "droppable": self._droppable(ds_id),
        }

    def _droppable(self, ds_id: int) -> bool:
        """Whether a what-if preview can drop records of the dataset: only records of
        sources (no producing operation in the store) can be dropped, since a derived
        record is dropped by dropping the source records it comes from."""
        return self._run.store.producer(ds_id) is None

    # -- records ---------------------------------------------------------------------------
    def show_records(self, nid: str, page: int = 0, *, only_lineage: bool = False) -> None:
        """Put one page of a dataset's records into ``records``.

        Parameters
        ----------
        nid : str
            Dataset node id (``"d<id>"``).
        page : int
            Page number, from 0; clipped to the existing pages.
        only_lineage : bool
            Page through the rows of this dataset reached by the current lineage only.
        """
        kind, ds_id = node_ref(nid)
        if kind != "dataset":
            raise ValueError(f"{nid} is not a dataset")
        ds = self._run.store.datasets[ds_id]
        subset: np.ndarray | None = None
        if only_lineage and self._picked is not None and ds_id in self._picked["rows"]:
            subset = self._picked["rows"][ds_id]
        total = int(len(subset) if subset is not None else (ds.n_rows or 0))
        pages = max(1, math.ceil(total / PAGE_SIZE))
        page = min(max(int(page), 0), pages - 1)
        lo, hi = page * PAGE_SIZE, min(total, (page + 1) * PAGE_SIZE)
        rows = subset[lo:hi] if subset is not None else np.arange(lo, hi, dtype=np.int64)
        base = {
            "node": nid,
            "dataset": ds_id,
            "label": self._label(ds_id),
            "page": page,
            "pages": pages,
            "page_size": PAGE_SIZE,
            "total": total,
            "lineage_only": subset is not None,
        }
        try:
            table = self._run.rows(ds_id, rows=rows) if len(rows) else None
        except Exception as exc:  # shown in the panel: the kernel must not raise on a click
            self.records = {**base, "columns": ["_row"], "rows": [], "error": str(exc)}
            return
        if table is None:
            columns = ["_row", *ds.columns]
            data: list[list[Any]] = []
        else:
            columns = [str(c) for c in table.columns]
            data = [[_jsonable(v) for v in rec] for rec in table.itertuples(index=False)]
        types = dict(zip(ds.columns, ds.dtypes))
        self.records = {
            **base,
            "columns": columns,
            # Spark type of each column (None for _row): what an edited value becomes
            "types": [types.get(c) for c in columns],
            "rows": data,
            # not read but replayed from the provenance-related input records: the
            # front end says so, since such a page costs a Spark job per page
            "recomputed": bool(table is not None and table.attrs.get("recomputed", False)),
            "materialized": _kept(ds),
            "droppable": self._droppable(ds_id),
            "marks": self._marks(ds_id, [int(r) for r in rows]),
        }

    def _marks(self, ds_id: int, rows: list[int]) -> dict[str, dict[str, list[int]]]:
        """Cells of the picked cell's lineage among ``rows`` of the dataset, per kind and
        column, so that the records table can colour them (empty without a cell pick)."""
        p = self._picked
        cells = None if p is None else p.get("cells", {}).get(ds_id)
        if cells is None or not rows:
            return {}
        page = np.asarray(rows, dtype=np.int64)
        out: dict[str, dict[str, list[int]]] = {}
        for kind, by_col in cells.items():
            for col, r in by_col.items():
                hit = page[np.isin(page, r)]
                if len(hit):
                    out.setdefault(kind, {})[col] = [int(x) for x in hit]
        return out

    def _refresh_marks(self) -> None:
        """Recolour the records on show after the lineage changed (no new Spark read)."""
        r = self.records
        if not r.get("node") or "rows" not in r:
            return
        marks = self._marks(int(r["dataset"]), [int(rec[0]) for rec in r["rows"]])
        if marks != r.get("marks"):
            self.records = {**r, "marks": marks}

    def show_page(self, page: int) -> None:
        """Another page of the records on show."""
        if self.records.get("node"):
            self.show_records(
                self.records["node"], page, only_lineage=bool(self.records.get("lineage_only"))
            )

    # -- lineage ---------------------------------------------------------------------------
    def _origin(self, node: str | None) -> tuple[str, int]:
        nid = node or self.records.get("node") or self.selected
        kind, ds_id = node_ref(nid)
        if kind != "dataset":
            raise ValueError(f"{nid} is not a dataset")
        return nid, ds_id

    def _trace(
        self, ds_id: int, row: int, targets: list[int], columns: list[str] | None = None
    ) -> tuple[Any, Any] | None:
        """Backward and forward lineage of one record (or cell); None after reporting why
        it failed (an out-of-range row, an unknown column, an unreadable dataset)."""
        try:
            back = self._run.backward(ds_id, rows=[row], columns=columns, to=targets)
            fwd = self._run.forward(ds_id, rows=[row], columns=columns, to=targets)
        except Exception as exc:
            self._lineage_failed(exc)
            return None
        return back, fwd

    def _targets(self) -> list[int]:
        """Every dataset drawn in the full graph: the datasets a lineage query reports."""
        return [int(a["ref"]) for _, a in self._full.nodes(data=True) if a["kind"] != "operation"]

    def select_record(self, row: int, node: str | None = None) -> None:
        """Backward and forward lineage of one record, highlighted on the graph.

        Parameters
        ----------
        row : int
            Canonical row index (``_row``) of the record.
        node : str, optional
            Its dataset node; default: the dataset whose records are on show.
        """
        _, ds_id = self._origin(node)
        self.error = ""
        targets = self._targets()
        traced = self._trace(ds_id, int(row), targets)
        if traced is None:
            return
        back, fwd = traced
        rows: dict[int, np.ndarray] = {}
        direction: dict[int, str] = {}
        for res, name in ((back.result, "backward"), (fwd.result, "forward")):
            for d, r in res.rows.items():
                if d != ds_id:
                    rows[d] = np.asarray(r, dtype=np.int64)
                    direction[d] = name
        rows[ds_id] = np.asarray([int(row)], dtype=np.int64)
        direction[ds_id] = "origin"
        blocked = sorted(set(back.result.blocked) | set(fwd.result.blocked))
        self._set_picked(
            {
                "dataset": ds_id,
                "row": int(row),
                "rows": rows,
                "direction": direction,
                "blocked": blocked,
            }
        )
        if self._run.store.producer(ds_id) is None:
            # a source record: where did it go?  Asked after the highlight is on show
            # (reading the deciding values back takes a Spark job)
            self._where_it_went(ds_id, int(row), rows)

    def select_cell(self, row: int, column: str, node: str | None = None) -> None:
        """Backward and forward lineage of one cell (attribute-value level).

        Per reached dataset, the cells are split into *contributing* ones (their values
        flow into the picked cell, or it flows into them) and *influencing* ones (filter
        and join conditions, group and sort keys deciding whether or where it exists).

        Parameters
        ----------
        row : int
            Canonical row index (``_row``) of the record.
        column : str
            Column of the cell.
        node : str, optional
            Its dataset node; default: the dataset whose records are on show.
        """
        _, ds_id = self._origin(node)
        self.error = ""
        targets = self._targets()
        traced = self._trace(ds_id, int(row), targets, columns=[column])
        if traced is None:
            return
        back, fwd = traced
        names = self._run.store.datasets
        cells: dict[int, dict[str, dict[str, np.ndarray]]] = {}
        direction: dict[int, str] = {}
        for res, name in ((back.result, "backward"), (fwd.result, "forward")):
            for kind in ("contributing", "influencing"):
                for d, by_col in getattr(res, kind).items():
                    if d == ds_id or not by_col:
                        continue  # the start cell is added below; {}: reached no cell
                    cols = names[d].columns
                    got = cells.setdefault(d, {"contributing": {}, "influencing": {}})
                    for c, r in by_col.items():
                        got[kind][cols[c]] = np.asarray(r, dtype=np.int64)
                    direction[d] = name
        start = np.asarray([int(row)], dtype=np.int64)
        cells[ds_id] = {"contributing": {str(column): start}, "influencing": {}}
        direction[ds_id] = "origin"
        rows = {
            d: unique(np.concatenate([r for k in c.values() for r in k.values()]))
            for d, c in cells.items()
        }
        self._set_picked(
            {
                "dataset": ds_id,
                "row": int(row),
                "column": str(column),
                "rows": rows,
                "cells": cells,
                "direction": direction,
                "blocked": sorted(set(back.result.blocked) | set(fwd.result.blocked)),
                "approximate": sorted(set(back.result.approximate) | set(fwd.result.approximate)),
            }
        )

    def _set_picked(self, picked: dict[str, Any]) -> None:
        if self._preview is not None:  # one highlight at a time (see the module text)
            self._preview = None
            self.what_if = {}
        self._picked = picked
        self._project_lineage()
        self._refresh_marks()

    def _lineage_failed(self, exc: Exception) -> None:
        self.error = str(exc)
        self._picked = None
        self.lineage = {"error": str(exc)}
        self._refresh_marks()

    def clear_lineage(self) -> None:
        """Forget the picked record or cell."""
        self._picked = None
        self.lineage = {}
        self._refresh_marks()

    def _project_lineage(self) -> None:
        """Counts of the picked record's (or cell's) lineage on the nodes and edges on show.

        A node's count is the number of its records on the lineage, or for a picked cell
        the number of its cells (a cell both contributing and influencing counts once).
        """
        if self._picked is None or self._view is None:
            self.lineage = {}
            return
        G = self._view.graph
        p = self._picked
        cells = p.get("cells")
        size = {d: int(len(r)) for d, r in p["rows"].items()}
        if cells is not None:
            size = {d: _cell_count(c) for d, c in cells.items()}
        counts: dict[str, int] = {}
        where: dict[str, str] = {}
        for d in p["rows"]:
            nid = dataset_node(d)
            if nid in G and size[d]:
                counts[nid] = size[d]
                where[nid] = p["direction"][d]
        # an operation is on the lineage when its output and one of its inputs are: its
        # count is the number of its output records (cells) taking part
        for nid, attrs in G.nodes(data=True):
            if attrs["kind"] != "operation":
                continue
            out = attrs["output"]
            if out in counts and any(i in counts for i in attrs["inputs"]):
                counts[nid] = counts[out]
                where[nid] = "backward" if where[out] in ("backward", "origin") else "forward"
        origin = dataset_node(p["dataset"])
        edges = []
        for u, v in G.edges:
            if u in counts and v in counts and _flows(where[u], where[v]):
                edges.append(f"{u}->{v}")
        store = self._run.store
        listed = []
        for d, r in sorted(p["rows"].items(), key=lambda kv: (kv[0] != p["dataset"], kv[0])):
            entry = {
                "node": dataset_node(d) if dataset_node(d) in G else "",
                "id": d,
                "label": self._label(d),
                "direction": p["direction"][d],
                "count": int(len(r)),
                "rows": [int(x) for x in r[:LISTED_ROWS]],
                "truncated": len(r) > LISTED_ROWS,
            }
            if cells is not None:
                entry["cells"] = size[d]
                # in the dataset's column order, so the panel reads like its schema
                order = store.datasets[d].columns
                for kind in ("contributing", "influencing"):
                    by_col = cells[d][kind]
                    entry[kind] = [
                        {
                            "column": c,
                            "count": int(len(by_col[c])),
                            "rows": [int(x) for x in by_col[c][:LISTED_ROWS]],
                            "truncated": len(by_col[c]) > LISTED_ROWS,
                        }
                        for c in order
                        if c in by_col
                    ]
            listed.append(entry)
        origin_info: dict[str, Any] = {
            "node": origin,
            "dataset": p["dataset"],
            "row": p["row"],
            "label": self._label(p["dataset"]),
        }
        if cells is not None:
            origin_info["column"] = p["column"]
        self.lineage = {
            "mode": "cell" if cells is not None else "record",
            "origin": origin_info,
            "counts": counts,
            "direction": where,
            "edges": edges,
            "datasets": listed,
            "blocked": [
                {
                    "node": f"o{o}",
                    "method": store.operations[o].method,
                    "expression": store.operations[o].expression,
                }
                for o in p["blocked"]
            ],
            # column lineage through these is a superset (their attribute maps are not exact)
            "approximate": [
                {
                    "node": f"o{o}",
                    "method": store.operations[o].method,
                    "expression": store.operations[o].expression,
                }
                for o in p.get("approximate", [])
            ],
            # a source record: the sinks it does not reach, and where it stopped
            "why_not": [
                {**w, "node": w["node"] if w["node"] in G else ""} for w in p.get("why_not", [])
            ],
        }

    # -- messages from the front end -------------------------------------------------------
    def _on_msg(self, widget: Any, content: Any, buffers: Any) -> None:
        if not isinstance(content, dict):
            return
        kind = content.get("type")
        try:
            if kind == "page":
                self.show_page(int(content.get("page", 0)))
            elif kind == "record":
                self.select_record(int(content["row"]), content.get("node"))
            elif kind == "cell":
                self.select_cell(int(content["row"]), str(content["column"]), content.get("node"))
            elif kind == "lineage_rows":
                self.show_records(str(content["node"]), 0, only_lineage=True)
            elif kind == "clear":
                self.clear_lineage()
            elif kind == "expand":
                self.expand_stage(str(content["node"]))
            elif kind == "drop":
                self.mark_drop(int(content["row"]), bool(content.get("on", True)),
                               content.get("node"))  # fmt: skip
            elif kind == "edit":
                self._on_edit(content)
            elif kind == "what_if":
                self.preview_what_if()
            elif kind == "clear_what_if":
                self.clear_what_if(keep_marks=bool(content.get("keep_marks", False)))
        except Exception as exc:  # a bad message must not kill the comm: show it instead
            self.error = f"{type(exc).__name__}: {exc}"

    def _on_edit(self, content: dict[str, Any]) -> None:
        """An edit typed in the browser; a refused one says why in ``error`` (no trace)."""
        self.error = ""  # a repeated refusal must show again
        try:
            row, column = int(content["row"]), str(content["column"])
            if content.get("unmark"):
                self.unmark_edit(row, column, content.get("node"))
            else:
                self.mark_edit(row, column, content.get("value"), content.get("node"))
        except (ValueError, IndexError) as exc:
            self.error = str(exc)

    # -- fallbacks -------------------------------------------------------------------------
    def to_svg(self) -> str:
        """The graph on show (coarse/fine, focus) as a static SVG."""
        if self._view is None:
            self._refresh_graph()
        assert self._view is not None
        return view_to_svg(self._view)

    def _repr_mimebundle_(self, **kwargs: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        # Front ends that run widgets pick the widget view; GitHub, nbviewer and exported
        # HTML cannot, and fall back to the richest type they can show: the SVG.
        bundle = super()._repr_mimebundle_(**kwargs)
        data, meta = bundle if isinstance(bundle, tuple) else (bundle or {}, {})
        data = dict(data)
        data["image/svg+xml"] = self.to_svg()
        data["text/plain"] = self._title()
        return data, dict(meta or {})


def _flows(a: str, b: str) -> bool:
    """Whether an edge from a node reached as ``a`` to one reached as ``b`` carries the
    lineage: both upstream of the record, both downstream, or through the record itself."""
    return (a == b) or (a == "backward" and b == "origin") or (a == "origin" and b == "forward")


def _cell_count(cells: dict[str, dict[str, np.ndarray]]) -> int:
    """Distinct cells of one dataset: a cell both contributing and influencing (``amount``
    summed after ``amount > 50`` kept its record) is one cell."""
    by_col: dict[str, list[np.ndarray]] = {}
    for kind in cells.values():
        for col, r in kind.items():
            by_col.setdefault(col, []).append(r)
    return sum(int(len(unique(np.concatenate(parts)))) for parts in by_col.values())


def _kept(ds: Any) -> str:
    """Why a dataset's records are kept whole, for the explorer: a source is read where
    it is (a cache for faster recomputation does not change that)."""
    return "" if ds.role == "source" else str(ds.materialized)
