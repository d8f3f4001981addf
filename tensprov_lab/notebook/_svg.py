"""A static SVG of a run's operator DAG, for places where widgets do not run.

GitHub, nbviewer and exported HTML show the ``image/svg+xml`` output of a cell, so the
explorer widget carries this picture in its mimebundle. It is drawn from the same
Python layout and style table as the widget (:mod:`._graph_view`), and is
self-contained: no scripts, no external fonts or stylesheets.
"""

from __future__ import annotations

from typing import Any
from xml.sax.saxutils import escape, quoteattr

from tensprov_lab.notebook._graph_view import (
    LABEL_FONT,
    GraphView,
    build_graph,
    fit_label,
    graph_key,
    layout_view,
    node_style,
    short,
)
from tensprov_lab.notebook._rollup import rollup as rolled_up

__all__ = ["to_svg", "view_to_svg"]

MARGIN = 24.0
#: distance between the lines of a node's label (px)
LINE = 13.0
FONT = "system-ui, -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif"
DASHES = {"dashed": "6 3", "dotted": "2 3"}


def to_svg(
    run: Any, *, coarse: bool = False, show_trivial: bool = False, rollup: bool = True
) -> str:
    """The operator DAG of ``run`` as a self-contained SVG document.

    Parameters
    ----------
    run : Run, or anything with ``.store`` (and optionally ``.operations``), or a Store
    coarse : bool, default False
        Datasets only, edges labelled by the operation.
    show_trivial : bool, default False
        Keep trivial operations (repartition, cache ...) and hidden datasets.
    rollup : bool, default True
        Draw each chain of three or more row-preserving steps (``withColumn``, ``select``
        ...) as one stage node (:func:`~._rollup.rollup`).

    Returns
    -------
    str
        ``<svg ...>...</svg>``, laid out left to right.
    """
    G = build_graph(run, coarse=coarse, show_trivial=show_trivial)
    if rollup and not coarse:
        G = rolled_up(G)
    return view_to_svg(layout_view(G, coarse=coarse))


def _fmt(v: float) -> str:
    return f"{v:.1f}".rstrip("0").rstrip(".")


def _shape(kind: str, shape: str, x: float, y: float, w: float, h: float, attrs: str) -> str:
    """One node outline centred on ``(x, y)``."""
    left, top = x - w / 2, y - h / 2
    if shape == "round-rectangle":
        return (
            f'<rect x="{_fmt(left)}" y="{_fmt(top)}" width="{_fmt(w)}" height="{_fmt(h)}" '
            f'rx="{_fmt(h / 2)}" {attrs}/>'
        )
    if shape == "cut-rectangle":
        c = 8.0  # corner cut, as cytoscape draws it
        pts = [
            (left + c, top),
            (left + w - c, top),
            (left + w, top + c),
            (left + w, top + h - c),
            (left + w - c, top + h),
            (left + c, top + h),
            (left, top + h - c),
            (left, top + c),
        ]
        return f'<polygon points="{_points(pts)}" {attrs}/>'
    if shape == "diamond":
        pts = [(x, top), (left + w, y), (x, top + h), (left, y)]
        return f'<polygon points="{_points(pts)}" {attrs}/>'
    return (
        f'<rect x="{_fmt(left)}" y="{_fmt(top)}" width="{_fmt(w)}" height="{_fmt(h)}" '
        f'rx="3" {attrs}/>'
    )


def _points(pts: list[tuple[float, float]]) -> str:
    return " ".join(f"{_fmt(px)},{_fmt(py)}" for px, py in pts)


def _tooltip(attrs: dict[str, Any]) -> str:
    lines = [str(attrs["label"])]
    if attrs["kind"] == "operation":
        lines.append(f"category: {attrs.get('category')}")
        if attrs.get("expression"):
            lines.append(str(attrs["expression"]))
        flags = [f for f in ("opaque", "contextual", "nondeterministic") if attrs.get(f)]
        if flags:
            lines.append("flags: " + ", ".join(flags))
    else:
        lines.append(f"{attrs['kind']}, {attrs.get('rows')} rows")
    if attrs.get("schema"):
        lines.append("schema: " + ", ".join(f"{c}: {t}" for c, t in attrs["schema"]))
    return "\n".join(lines)


def view_to_svg(view: GraphView) -> str:
    """Draw a laid-out graph (see :func:`to_svg`)."""
    G = view.graph
    key = graph_key(G)
    x0, y0, x1, y1 = view.bounds()
    dx, dy = MARGIN - x0, MARGIN - y0
    width, height = x1 - x0 + 2 * MARGIN, y1 - y0 + 2 * MARGIN
    arrow = f"tp-arrow-{key}"  # unique per picture: many SVGs share one HTML page
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_fmt(width)}" height="{_fmt(height)}" '
        f'viewBox="0 0 {_fmt(width)} {_fmt(height)}" font-family="{FONT}" font-size="12" '
        f'class="tensprov-lineage">',
        "<title>tensprov-lab lineage graph</title>",
        f'<defs><marker id="{arrow}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
        'fill="#64748b"/></marker></defs>',
        f'<rect width="{_fmt(width)}" height="{_fmt(height)}" fill="#ffffff"/>',
        '<g class="edges">',
    ]
    for u, v, attrs in G.edges(data=True):
        pts = [(px + dx, py + dy) for px, py in view.edge_path(u, v)]
        title = f"{G.nodes[u]['label']} → {G.nodes[v]['label']}"
        out.append(
            f'<g class="edge" data-source="{u}" data-target="{v}">'
            f"<title>{escape(title)}</title>"
            f'<polyline points="{_points(pts)}" fill="none" stroke="#64748b" '
            f'stroke-width="{1.4 + 0.6 * (attrs.get("count", 1) - 1)}" '
            f'marker-end="url(#{arrow})"/>'
        )
        if attrs.get("label"):
            # coarse edges: the operation name, on the middle segment
            mid = len(pts) // 2
            (ax, ay), (bx, by) = pts[mid - 1], pts[mid]
            out.append(
                f'<text x="{_fmt((ax + bx) / 2)}" y="{_fmt((ay + by) / 2 - 5)}" '
                f'text-anchor="middle" font-size="11" fill="#334155">'
                f"{escape(short(str(attrs['label']), 30))}</text>"
            )
        out.append("</g>")
    out.append("</g>")
    out.append('<g class="nodes">')
    for nid, attrs in G.nodes(data=True):
        x, y = view.pos[nid]
        x, y = x + dx, y + dy
        w, h = view.size(nid)
        st = node_style(attrs)
        classes = [attrs["kind"]]
        if attrs["kind"] == "operation":
            classes.append(f"category-{attrs.get('category')}")
            classes += [f for f in ("opaque", "contextual", "nondeterministic") if attrs.get(f)]
        stroke_width = st["border_width"] if st["border_style"] != "double" else 1.5
        dash = DASHES.get(st["border_style"])
        paint = f'fill="{st["fill"]}" stroke="{st["border"]}" stroke-width="{stroke_width}"' + (
            f' stroke-dasharray="{dash}"' if dash else ""
        )
        out.append(
            f'<g class="node {" ".join(classes)}" data-id="{nid}" '
            f"data-label={quoteattr(str(attrs['label']))}>"
        )
        out.append(f"<title>{escape(_tooltip(attrs))}</title>")
        out.append(_shape(attrs["kind"], st["shape"], x, y, w, h, paint))
        if st["border_style"] == "double":
            inner = f'fill="none" stroke="{st["border"]}" stroke-width="1.5"'
            out.append(_shape(attrs["kind"], st["shape"], x, y, w - 7, h - 7, inner))
        # (lines that fit the box: the explorer's font size and wrapping)
        if attrs["kind"] == "operation" or attrs.get("rows") is None:
            lines = fit_label(str(attrs["label"]), w, lines=2)
            top = y + 4 - (len(lines) - 1) * LINE / 2
            out += [
                f'<text x="{_fmt(x)}" y="{_fmt(top + k * LINE)}" text-anchor="middle" '
                f'fill="{st["text"]}" font-size="{_fmt(LABEL_FONT)}" font-weight="600">'
                f"{escape(line)}</text>"
                for k, line in enumerate(lines)
            ]
        else:
            (label,) = fit_label(str(attrs["label"]), w, lines=1)
            out.append(
                f'<text x="{_fmt(x)}" y="{_fmt(y - 3)}" text-anchor="middle" fill="{st["text"]}" '
                f'font-size="{_fmt(LABEL_FONT)}" font-weight="600">{escape(label)}</text>'
                f'<text x="{_fmt(x)}" y="{_fmt(y + 12)}" text-anchor="middle" '
                f'fill="{st["text"]}" font-size="10">{attrs["rows"]:,} rows</text>'
            )
        out.append("</g>")
    out.append("</g>")
    out.append("</svg>")
    return "\n".join(out)
