"""The operator DAG of a run as a networkx graph, laid out, for the SVG and the widget.

Both pictures (:mod:`tensprov_lab.notebook._svg` and the explorer widget) draw the same
graph with the same positions and the same node styles, so everything they share lives
here: which nodes are shown (trivial operations spliced out, coarse mode), their
attributes, the Python Sugiyama layout and the style table.

Node ids are strings, ``"d<dataset id>"``, ``"o<operation id>"`` and ``"s<operation
id>"`` (a stage: a rolled-up chain of row-preserving steps, named after its first
operation), because they travel to JavaScript, where object keys are strings anyway.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import networkx as nx

from tensprov_lab.layout import sugiyama_layout_with_edges
from tensprov_lab.store import Dataset, Operation, Store

__all__ = [
    "GraphView",
    "build_graph",
    "coarsen",
    "dataset_node",
    "fit_label",
    "focus_graph",
    "graph_columns",
    "layout_view",
    "matching_nodes",
    "node_style",
    "node_ref",
    "operation_node",
    "set_kinds",
]

# Sizes in pixels; the layout spaces layers and nodes so that these never overlap.
DATASET_SIZE = (156.0, 44.0)
OPERATION_SIZE = (132.0, 34.0)
LAYER_GAP = 200.0
COARSE_LAYER_GAP = 260.0  # coarse edges carry the operation name as a label
NODE_GAP = 68.0
#: longest label drawn in a node; the full text is in the tooltip / details panel
LABEL_CHARS = 22

#: fill colour of an operation by category (colour-blind friendly pastel tones)
CATEGORY_COLORS: dict[str, str] = {
    "transformation": "#fde68a",
    "vertical_reduction": "#fcd34d",
    "vertical_augmentation": "#fbbf24",
    "horizontal_reduction": "#bfdbfe",
    "join": "#c4b5fd",
    "append": "#ddd6fe",
    "aggregate": "#fbcfe8",
    "dedup": "#f9a8d4",
    "window": "#fecdd3",
    "sort": "#a7f3d0",
    "explode": "#99f6e4",
    "ml_transform": "#d9f99d",
    "ml_fit": "#bef264",
    "trivial": "#e5e7eb",
    "opaque": "#d1d5db",
    "stage": "#fef3c7",
}
DEFAULT_OP_COLOR = "#fef9c3"


def dataset_node(nid: str | int) -> str:
    """The graph node id of a dataset (accepts a node id or a dataset id)."""
    return nid if isinstance(nid, str) else f"d{int(nid)}"


def operation_node(oid: int) -> str:
    """The graph node id of an operation."""
    return f"o{int(oid)}"


def node_ref(nid: str) -> tuple[str, int]:
    """``"d3"`` -> ``("dataset", 3)``; ``"o7"`` -> ``("operation", 7)``; ``"s7"`` ->
    ``("stage", 7)`` (the stage starting with operation 7).

    Raises
    ------
    ValueError
        For anything that is not a node id.
    """
    if len(nid) < 2 or nid[0] not in "dos" or not nid[1:].isdigit():
        raise ValueError(f"not a node id: {nid!r}")
    return {"d": "dataset", "o": "operation", "s": "stage"}[nid[0]], int(nid[1:])


#: a dataset node's shape, fill, border colour, width and line, and text colour: a
#: source's, a sink's and an intermediate dataset's (None)
_DATASET_STYLES: dict[Any, tuple[str, str, str, float, str, str]] = {
    "source": ("rectangle", "#dcfce7", "#15803d", 2.5, "solid", "#14532d"),
    "sink": ("rectangle", "#dbeafe", "#1d4ed8", 4.0, "double", "#1e3a8a"),
    None: ("rectangle", "#ffffff", "#475569", 1.5, "solid", "#0f172a"),
}


def node_style(attrs: dict[str, Any]) -> dict[str, Any]:
    """Shape, colours and border of a node (shared by the SVG and cytoscape).

    ``shape`` is a cytoscape shape name; the SVG draws the same shapes. Precedence of the
    operation flags is opaque > contextual > non-deterministic, because opaque stops
    record lineage altogether, which matters most to a reader.
    """
    kind = attrs.get("kind")
    if kind != "operation":
        shape, fill, border, width, line, text = _DATASET_STYLES.get(kind, _DATASET_STYLES[None])
        return {"shape": shape, "fill": fill, "border": border, "border_width": width,
                "border_style": line, "text": text}  # fmt: skip
    style = {
        "shape": "round-rectangle",
        "fill": CATEGORY_COLORS.get(str(attrs.get("category")), DEFAULT_OP_COLOR),
        "border": "#57534e",
        "border_width": 1.5,
        "border_style": "solid",
        "text": "#1c1917",
    }
    if attrs.get("category") == "stage":
        # several steps in one node: a double border says there is more inside
        style.update(border="#92400e", border_width=4.0, border_style="double")
    if attrs.get("opaque"):
        style.update(
            shape="cut-rectangle",
            fill=CATEGORY_COLORS["opaque"],
            border="#111827",
            border_width=2.0,
            border_style="dashed",
        )
    elif attrs.get("contextual"):
        style.update(border="#c2410c", border_width=2.5, border_style="dotted")
    elif attrs.get("nondeterministic"):
        style.update(border="#7e22ce", border_width=2.0, border_style="dashed")
    return style


def short(text: str, limit: int = LABEL_CHARS) -> str:
    """``text`` cut to ``limit`` characters with an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


#: font size (px) of node labels, in the explorer at zoom 1 and in the SVG
LABEL_FONT = 11.0
#: the widest a character of a label is on average, as a share of the font size
#: (Helvetica/Arial bold, mixed case and digits, with room to spare)
CHAR_WIDTH = 0.64
#: room kept free on either side of a label inside its box (px)
LABEL_PAD = 7.0


def fit_label(text: str, width: float, lines: int = 2, font: float = LABEL_FONT) -> list[str]:
    """``text`` word-wrapped into at most ``lines`` lines that fit a box ``width`` pixels
    wide at ``font`` px (the last line cut with an ellipsis when the text is longer).

    >>> fit_label("119 steps: withColumn ×118, drop", 132)
    ['119 steps:', 'withColumn ×118…']
    >>> fit_label("customers", 156, lines=1)
    ['customers']
    """
    per_line = max(4, int((width - 2 * LABEL_PAD) / (font * CHAR_WIDTH)))
    out: list[str] = []
    rest = " ".join(text.split())
    while rest and len(out) < lines:
        if len(rest) <= per_line:
            out.append(rest)
            rest = ""
            break
        if len(out) == lines - 1:  # the last line: cut, at a word when one ends late enough
            cut = rest.rfind(" ", 0, per_line - 1)
            cut = cut + 1 if cut >= per_line - 5 else per_line - 1
            out.append(rest[:cut] + "…")
            rest = ""
            break
        cut = rest.rfind(" ", 0, per_line + 1)
        if cut <= 0:  # one long word: break it
            cut = per_line
        out.append(rest[:cut].rstrip())
        rest = rest[cut:].lstrip()
    return out or [""]


# ---------------------------------------------------------------------------------------------
# graph model


def _operations_of(source: Any) -> tuple[Store, list[Operation], list[Dataset]]:
    """Store, operations and datasets of a Run, of anything Run-like, or of a Store."""
    if isinstance(source, Store):
        return (
            source,
            sorted(source.operations.values(), key=lambda o: o.id),
            list(source.datasets.values()),
        )
    store: Store = source.store
    ops = getattr(source, "operations", None)
    if ops is None:
        ops = list(store.operations.values())
    # without a dataset list, show the datasets the operations touch
    datasets = getattr(source, "datasets", None) or []
    return store, sorted(ops, key=lambda o: o.id), list(datasets)


def build_graph(source: Any, *, coarse: bool = False, show_trivial: bool = False) -> nx.DiGraph:
    """The DAG of a run: ``dataset -> operation -> dataset`` (or datasets only).

    Parameters
    ----------
    source : Run, Run-like (``.store`` and optionally ``.operations``/``.datasets``) or Store
    coarse : bool, default False
        Datasets only; an edge ``a -> b`` for every operation reading ``a`` and writing
        ``b``, labelled with the operation's method.
    show_trivial : bool, default False
        Keep trivial operations (repartition, cache, hints) and hidden datasets. By
        default they are spliced out: the consumers of a hidden dataset read the
        dataset the trivial operation read, since both hold the same records.

    Returns
    -------
    networkx.DiGraph
        Node attributes: ``kind`` (source / sink / dataset / operation), ``ref`` (store
        id), ``label``, ``category``, ``contextual``, ``opaque``, ``nondeterministic``,
        ``schema`` (list of ``(column, dtype)``), ``rows``, ``expression``, ``seconds``
        and, for operations, ``inputs`` / ``output`` (node ids) and ``in_columns``.
    """
    store, ops, datasets = _operations_of(source)
    spliced = {
        op.output: op
        for op in ops
        if not show_trivial and op.inputs and (op.trivial or store.datasets[op.output].hidden)
    }

    def resolve(ds: int) -> int:
        seen = set()
        while ds in spliced and ds not in seen:  # the guard only protects against a bad store
            seen.add(ds)
            ds = spliced[ds].inputs[0]
        return ds

    G = nx.DiGraph()
    aliases: dict[int, list[int]] = {}
    for ds in spliced:
        aliases.setdefault(resolve(ds), []).append(ds)

    def add_dataset(ds_id: int) -> str:
        nid = dataset_node(ds_id)
        if nid not in G:
            ds = store.datasets[ds_id]
            merged = [store.datasets[a] for a in aliases.get(ds_id, [])]
            # a hidden dataset bound to a variable (big = x.repartition(3)) lends its name
            # to the visible one it was spliced into, so the user finds their name
            name = ds.name or next((m.name for m in merged if m.name), None)
            G.add_node(
                nid,
                kind="dataset",
                ref=ds.id,
                label=name or _made_by(store, ds_id),
                named=bool(name),
                role=ds.role,
                origin=ds.origin,
                category="",
                contextual=False,
                opaque=False,
                nondeterministic=False,
                schema=list(zip(ds.columns, ds.dtypes)),
                rows=ds.n_rows,
                expression="",
                seconds=0.0,
                aliases=[m.id for m in merged],
            )
        return nid

    for op in ops:
        if op.output in spliced:
            continue
        onid = operation_node(op.id)
        ins = [add_dataset(resolve(i)) for i in op.inputs]
        out = add_dataset(op.output)
        in_columns = sorted({c for i in op.inputs for c in store.datasets[i].columns})
        G.add_node(
            onid,
            kind="operation",
            ref=op.id,
            label=op.method,
            category=op.category,
            contextual=op.contextual,
            opaque=op.opaque,
            nondeterministic=op.nondeterministic,
            schema=list(zip(store.datasets[op.output].columns, store.datasets[op.output].dtypes)),
            in_columns=in_columns,
            rows=store.datasets[op.output].n_rows,
            rows_in=[store.datasets[i].n_rows for i in op.inputs],
            expression=op.expression,
            seconds=op.seconds,
            inputs=ins,
            output=out,
            warnings=list(op.warnings),
            call=op.call,
            call_id=op.call_id,
        )
        for k, nid in enumerate(ins):
            if G.has_edge(nid, onid):  # self-join: one edge, drawn once, counted twice
                G.edges[nid, onid]["count"] += 1
            else:
                G.add_edge(nid, onid, count=1, position=k)
        G.add_edge(onid, out, count=1, position=0)
    # datasets of the run that no shown operation touches (e.g. a run that only read)
    for extra in datasets:
        if not extra.hidden or show_trivial:
            add_dataset(resolve(extra.id))
    set_kinds(G)
    if coarse:
        return coarsen(G)
    return G


def legend(G: nx.DiGraph) -> list[dict[str, Any]]:
    """What the node styles drawn in ``G`` mean: dataset kinds, operation categories
    and flags, each with its style (only those present)."""
    entries: list[dict[str, Any]] = []
    seen: set[str] = set()

    def add(key: str, text: str, attrs: dict[str, Any]) -> None:
        if key not in seen:
            seen.add(key)
            entries.append({"label": text, "style": node_style(attrs)})

    kinds = {"source": "source", "dataset": "intermediate dataset", "sink": "result (sink)"}
    present = [a for _, a in G.nodes(data=True)]
    for kind, text in kinds.items():
        if any(a["kind"] == kind for a in present):
            add(kind, text, {"kind": kind})
    for a in sorted(present, key=lambda a: str(a.get("category", ""))):
        if a["kind"] != "operation":
            continue
        cat = str(a.get("category") or "operation")
        text = "stage: several steps" if cat == "stage" else cat.replace("_", " ")
        add(f"op:{cat}", text, {"kind": "operation", "category": cat})
    for flag, text in (
        ("opaque", "opaque: record lineage stops"),
        ("contextual", "contextual: depends on other records"),
        ("nondeterministic", "non-deterministic"),
    ):
        if any(a["kind"] == "operation" and a.get(flag) for a in present):
            add(flag, text, {"kind": "operation", "category": "", flag: True})
    return entries


def _made_by(store: Store, ds_id: int) -> str:
    """A dataset no variable names, named after the call that made it: ``filter(orders)``,
    ``join(big, customers)`` (``…`` for an input without a name either)."""
    op = store.producer(ds_id)
    if op is None:
        return store.datasets[ds_id].label
    names = [store.datasets[i].name or "…" for i in op.inputs]
    return f"{op.method}({', '.join(names)})"


def set_kinds(G: nx.DiGraph) -> None:
    """Mark each dataset node of ``G`` a source, a sink or an intermediate dataset, by
    its edges in the picture."""
    # Source and sink are relative to the picture: a dataset made by an earlier run is
    # where this run's data comes from, so it is drawn as a source.
    for nid, attrs in G.nodes(data=True):
        if attrs["kind"] == "operation":
            continue
        if G.in_degree(nid) == 0:
            attrs["kind"] = "source"
        elif G.out_degree(nid) == 0:
            attrs["kind"] = "sink"
        else:
            attrs["kind"] = "dataset"


def coarsen(G: nx.DiGraph) -> nx.DiGraph:
    """Datasets only: ``a -> b`` for every operation ``a -> op -> b``, labelled ``op``."""
    C = nx.DiGraph()
    for nid, attrs in G.nodes(data=True):
        if attrs["kind"] != "operation":
            C.add_node(nid, **attrs)
    for nid, attrs in G.nodes(data=True):
        if attrs["kind"] != "operation":
            continue
        for src in G.predecessors(nid):
            for dst in G.successors(nid):
                if C.has_edge(src, dst):
                    C.edges[src, dst]["ops"].append(nid)
                    C.edges[src, dst]["label"] += ", " + attrs["label"]
                else:
                    C.add_edge(src, dst, ops=[nid], label=attrs["label"], count=1)
    return C


def focus_graph(G: nx.DiGraph, nid: str) -> nx.DiGraph:
    """Lineage focus: ``nid`` with its ancestors and descendants only."""
    if nid not in G:
        return G
    keep = nx.ancestors(G, nid) | nx.descendants(G, nid) | {nid}
    return G.subgraph([n for n in G.nodes if n in keep]).copy()


def graph_columns(G: nx.DiGraph) -> list[str]:
    """Every column name in the graph (type-ahead suggestions of the attribute search)."""
    cols: set[str] = set()
    for _, attrs in G.nodes(data=True):
        cols.update(c for c, _t in attrs.get("schema", []))
    return sorted(cols, key=lambda c: (c.lower(), c))


def matching_nodes(G: nx.DiGraph, column: str) -> list[str]:
    """Nodes whose schema holds ``column`` (operations: their input or output schema).

    An exact (case-insensitive) column name selects the nodes holding that attribute, as
    picked from the type-ahead list; any other text matches column names containing it.
    """
    text = column.strip().lower()
    if not text:
        return []
    known = {c.lower() for c in graph_columns(G)}

    def hit(cols: Iterable[str]) -> bool:
        lowered = [c.lower() for c in cols]
        return text in lowered if text in known else any(text in c for c in lowered)

    found = []
    for nid, attrs in G.nodes(data=True):
        cols = [c for c, _t in attrs.get("schema", [])] + list(attrs.get("in_columns", []))
        if hit(cols):
            found.append(nid)
    return found


# ---------------------------------------------------------------------------------------------
# layout


@dataclass
class GraphView:
    """A laid-out graph: pixel positions of node centres and edge bend points."""

    graph: nx.DiGraph
    pos: dict[str, tuple[float, float]]
    bends: dict[tuple[str, str], list[tuple[float, float]]]
    coarse: bool

    def size(self, nid: str) -> tuple[float, float]:
        """Width and height of a node's box."""
        if self.graph.nodes[nid]["kind"] == "operation":
            return OPERATION_SIZE
        return DATASET_SIZE

    def bounds(self) -> tuple[float, float, float, float]:
        """``(min_x, min_y, max_x, max_y)`` of every node box and bend point."""
        xs: list[float] = []
        ys: list[float] = []
        for nid, (x, y) in self.pos.items():
            w, h = self.size(nid)
            xs += [x - w / 2, x + w / 2]
            ys += [y - h / 2, y + h / 2]
        for pts in self.bends.values():
            xs += [p[0] for p in pts]
            ys += [p[1] for p in pts]
        if not xs:
            return (0.0, 0.0, 0.0, 0.0)
        return (min(xs), min(ys), max(xs), max(ys))

    def edge_path(self, u: str, v: str) -> list[tuple[float, float]]:
        """The polyline of an edge: out of the right side of ``u``, through the bend
        points, into the left side of ``v`` (the layout runs left to right)."""
        (xu, yu), (xv, yv) = self.pos[u], self.pos[v]
        wu, wv = self.size(u)[0], self.size(v)[0]
        return [(xu + wu / 2, yu), *self.bends.get((u, v), []), (xv - wv / 2, yv)]

    def to_payload(self) -> dict[str, Any]:
        """JSON-ready graph for the widget (cytoscape elements with preset positions)."""
        nodes = []
        for nid, attrs in self.graph.nodes(data=True):
            x, y = self.pos[nid]
            w, h = self.size(nid)
            with_rows = attrs["kind"] != "operation" and attrs.get("rows") is not None
            # drawn inside its box at the explorer's default zoom (rows on a line of its own)
            label = "\n".join(fit_label(str(attrs["label"]), w, lines=1 if with_rows else 2))
            if with_rows:
                label += f"\n{attrs['rows']:,} rows"
            nodes.append(
                {
                    "id": nid,
                    "kind": attrs["kind"],
                    "ref": attrs["ref"],
                    "label": label,
                    "name": str(attrs["label"]),
                    "category": attrs.get("category", ""),
                    "contextual": bool(attrs.get("contextual")),
                    "opaque": bool(attrs.get("opaque")),
                    "nondeterministic": bool(attrs.get("nondeterministic")),
                    "schema": [[c, t] for c, t in attrs.get("schema", [])],
                    "rows": attrs.get("rows"),
                    "expression": attrs.get("expression", ""),
                    "seconds": float(attrs.get("seconds", 0.0)),
                    "x": round(x, 2),
                    "y": round(y, 2),
                    "w": w,
                    "h": h,
                    "style": node_style(attrs),
                }
            )
        edges = []
        for u, v, attrs in self.graph.edges(data=True):
            pts = self.bends.get((u, v), [])
            weights, distances = segment_params(self.pos[u], self.pos[v], pts)
            edges.append(
                {
                    "id": f"{u}->{v}",
                    "source": u,
                    "target": v,
                    "label": attrs.get("label", ""),
                    "count": attrs.get("count", 1),
                    "points": [[round(x, 2), round(y, 2)] for x, y in pts],
                    "weights": weights,
                    "distances": distances,
                }
            )
        x0, y0, x1, y1 = self.bounds()
        return {
            "nodes": nodes,
            "edges": edges,
            "coarse": self.coarse,
            "columns": graph_columns(self.graph),
            "bounds": [round(x0, 2), round(y0, 2), round(x1, 2), round(y1, 2)],
            "legend": legend(self.graph),
        }


def layout_view(G: nx.DiGraph, *, coarse: bool | None = None) -> GraphView:
    """Lay ``G`` out left to right with :func:`tensprov_lab.layout.sugiyama_layout_with_edges`.

    Positions are computed here, not in the browser, so the SVG and the widget show the
    same picture and it is deterministic (the layout depends only on node/edge order).
    """
    if coarse is None:
        coarse = not any(a["kind"] == "operation" for _, a in G.nodes(data=True))
    # operations are never next to each other in the bipartite graph, so the gap between
    # layers only needs room for one box and the arrow
    gap = COARSE_LAYER_GAP if coarse else LAYER_GAP
    pos, bends = sugiyama_layout_with_edges(G, layer_gap=gap, node_gap=NODE_GAP)
    return GraphView(
        graph=G,
        pos={str(n): (float(x), float(y)) for n, (x, y) in pos.items()},
        bends={
            (str(u), str(v)): [(float(x), float(y)) for x, y in pts]
            for (u, v), pts in bends.items()
        },
        coarse=coarse,
    )


def segment_params(
    src: Sequence[float], dst: Sequence[float], points: Sequence[Sequence[float]]
) -> tuple[list[float], list[float]]:
    """Bend points as cytoscape ``segment-weights`` / ``segment-distances``.

    Cytoscape places segment point ``k`` at ``S + w_k (T - S) + d_k n`` with
    ``n = (-(T-S).y, (T-S).x) / |T - S|`` when ``edge-distances`` is ``node-position``
    (read from its ``findSegmentsPoints``); this inverts that.
    """
    dx, dy = dst[0] - src[0], dst[1] - src[1]
    length2 = dx * dx + dy * dy
    if length2 == 0 or not points:
        return [], []
    length = math.sqrt(length2)
    weights, distances = [], []
    for px, py in points:
        rx, ry = px - src[0], py - src[1]
        weights.append(round((rx * dx + ry * dy) / length2, 5))
        distances.append(round((-rx * dy + ry * dx) / length, 3))
    return weights, distances


def graph_key(G: nx.DiGraph) -> str:
    """A short stable hash of the graph's nodes and edges (unique SVG ids per picture)."""
    text = repr((sorted(map(str, G.nodes)), sorted(map(str, G.edges))))
    return hashlib.sha1(text.encode()).hexdigest()[:8]
