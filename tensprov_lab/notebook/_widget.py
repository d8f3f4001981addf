"""The interactive lineage explorer: an anywidget drawing the run's DAG with cytoscape.js.

Python owns the state and the queries; the front end (``js/src/explorer.js``, bundled
into ``tensprov_lab/static/explorer.js``) only draws the synced traits and reports
clicks, so every interaction can be tested without a browser:

- the front end sets ``selected``, ``coarse``, ``focus`` and ``search`` (traits), and
  sends ``{"type": "page", "page": n}``, ``{"type": "record", "row": r}``,
  ``{"type": "lineage_rows", "node": id}`` and ``{"type": "clear"}`` messages;
- Python answers by setting ``graph``, ``details``, ``records``, ``lineage`` and
  ``matches``.

Where widgets cannot render (GitHub, nbviewer, exported HTML), the mimebundle also holds
the static SVG of :mod:`._svg` and a text summary.
"""

from __future__ import annotations

import decimal
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
)
from tensprov_lab.notebook._svg import view_to_svg

__all__ = ["LineageExplorer", "explore"]

STATIC = Path(__file__).resolve().parent.parent / "static"
PAGE_SIZE = 20
#: reached row indices listed per dataset in the lineage panel (the count is exact)
LISTED_ROWS = 100


def explore(run: Any) -> LineageExplorer:
    """The lineage explorer of ``run`` (what ``Run.explore()`` returns)."""
    return LineageExplorer(run)


class LineageExplorer(anywidget.AnyWidget):  # type: ignore[misc]
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
    >>> w.selected = "d8"                      # what a click on dataset 8 does
    >>> w.records["rows"][0]                   # doctest: +SKIP
    >>> w.select_record(0)                     # backward + forward lineage of row 0
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
    #: node whose ancestors and descendants alone are shown ("" for the whole graph)
    focus = traitlets.Unicode("").tag(sync=True)
    #: attribute search text
    search = traitlets.Unicode("").tag(sync=True)
    #: nodes whose schema holds the searched attribute
    matches = traitlets.List(traitlets.Unicode()).tag(sync=True)
    #: last error of a query, shown by the front end
    error = traitlets.Unicode("").tag(sync=True)

    def __init__(self, run: Any, *, coarse: bool = False, **kwargs: Any) -> None:
        self._run = run
        self._view: GraphView | None = None
        self._full: nx.DiGraph = nx.DiGraph()
        # lineage of the picked record, per dataset id, kept so that it can be projected
        # again onto the nodes after a coarse/fine toggle or a focus change
        self._picked: dict[str, Any] | None = None
        super().__init__(coarse=coarse, **kwargs)
        self.on_msg(self._on_msg)
        self._refresh_graph()

    # -- graph -----------------------------------------------------------------------------
    def _refresh_graph(self) -> None:
        full = build_graph(self._run, coarse=self.coarse)
        self._full = full
        G = full
        if self.focus:
            fid = self._visible_id(self.focus, full)
            if fid != self.focus:
                self.focus = fid  # re-enters through the observer with a valid id
                return
            if fid:
                G = focus_graph(full, fid)
        view = layout_view(G, coarse=self.coarse)
        self._view = view
        payload = view.to_payload()
        for node in payload["nodes"]:
            node["focus"] = node["id"] == self.focus
        payload["focus"] = self.focus
        payload["title"] = self._title()
        self.graph = payload
        self.matches = matching_nodes(G, self.search)
        if self.selected and self.selected not in G:
            self.selected = self._visible_id(self.selected, G)
        self._project_lineage()

    def _visible_id(self, nid: str, G: nx.DiGraph) -> str:
        """The node of ``G`` standing for ``nid`` ("" when there is none).

        In coarse mode an operation stands for its output dataset, so a focus or a
        selection on an operation survives the toggle.
        """
        if not nid or nid in G:
            return nid
        kind, ref = node_ref(nid)
        if kind == "operation":
            op = self._run.store.operations.get(ref)
            if op is not None and dataset_node(op.output) in G:
                return dataset_node(op.output)
        return ""

    def _title(self) -> str:
        summary = getattr(self._run, "summary", None)
        return str(summary()) if callable(summary) else "tensprov-lab lineage"

    @traitlets.observe("coarse", "focus")
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
        if kind == "operation":
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
        }

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
        self.records = {**base, "columns": columns, "rows": data}

    def show_page(self, page: int) -> None:
        """Another page of the records on show."""
        if self.records.get("node"):
            self.show_records(
                self.records["node"], page, only_lineage=bool(self.records.get("lineage_only"))
            )

    # -- lineage ---------------------------------------------------------------------------
    def select_record(self, row: int, node: str | None = None) -> None:
        """Backward and forward lineage of one record, highlighted on the graph.

        Parameters
        ----------
        row : int
            Canonical row index (``_row``) of the record.
        node : str, optional
            Its dataset node; default: the dataset whose records are on show.
        """
        nid = node or self.records.get("node") or self.selected
        kind, ds_id = node_ref(nid)
        if kind != "dataset":
            raise ValueError(f"{nid} is not a dataset")
        self.error = ""
        targets = [
            int(a["ref"]) for n, a in self._full.nodes(data=True) if a["kind"] != "operation"
        ]
        try:
            back = self._run.backward(ds_id, rows=[int(row)], to=targets)
            fwd = self._run.forward(ds_id, rows=[int(row)], to=targets)
        except Exception as exc:  # an out-of-range row or an unreadable dataset
            self.error = str(exc)
            self._picked = None
            self.lineage = {"error": str(exc)}
            return
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
        self._picked = {
            "dataset": ds_id,
            "row": int(row),
            "rows": rows,
            "direction": direction,
            "blocked": blocked,
        }
        self._project_lineage()

    def clear_lineage(self) -> None:
        """Forget the picked record."""
        self._picked = None
        self.lineage = {}

    def _project_lineage(self) -> None:
        """Counts of the picked record's lineage on the nodes and edges on show."""
        if self._picked is None or self._view is None:
            self.lineage = {}
            return
        G = self._view.graph
        p = self._picked
        counts: dict[str, int] = {}
        where: dict[str, str] = {}
        for d, r in p["rows"].items():
            nid = dataset_node(d)
            if nid in G and len(r):
                counts[nid] = int(len(r))
                where[nid] = p["direction"][d]
        # an operation is on the lineage when its output and one of its inputs are: its
        # count is the number of its output records taking part
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
            listed.append(
                {
                    "node": dataset_node(d) if dataset_node(d) in G else "",
                    "id": d,
                    "label": self._label(d),
                    "direction": p["direction"][d],
                    "count": int(len(r)),
                    "rows": [int(x) for x in r[:LISTED_ROWS]],
                    "truncated": len(r) > LISTED_ROWS,
                }
            )
        self.lineage = {
            "origin": {
                "node": origin,
                "dataset": p["dataset"],
                "row": p["row"],
                "label": self._label(p["dataset"]),
            },
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
            elif kind == "lineage_rows":
                self.show_records(str(content["node"]), 0, only_lineage=True)
            elif kind == "clear":
                self.clear_lineage()
        except Exception as exc:  # a bad message must not kill the comm: show it instead
            self.error = f"{type(exc).__name__}: {exc}"

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


def _jsonable(v: Any) -> Any:
    """A cell value the widget's JSON can carry (NaN/NaT become null, the rest text)."""
    if v is None:
        return None
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return None if math.isnan(float(v)) else float(v)
    if isinstance(v, str):
        return v
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, (list, tuple, np.ndarray)):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    # dates, timestamps and anything else: text, or null for pandas' missing markers
    return None if _missing(v) else str(v)


def _missing(v: Any) -> bool:
    import pandas as pd

    try:
        return bool(pd.isna(v))
    except (TypeError, ValueError):
        return False
