"""The static SVG and the graph model behind it, on a hand-built store (no JVM)."""

from __future__ import annotations

import itertools
import xml.etree.ElementTree as ET
from types import SimpleNamespace

import pytest

from tensprov_lab.notebook._graph_view import (
    DEFAULT_OP_COLOR,
    build_graph,
    focus_graph,
    graph_columns,
    layout_view,
    matching_nodes,
    node_style,
    segment_params,
)
from tensprov_lab.notebook._svg import to_svg
from tensprov_lab.store import CSRTensor, IdentityTensor, MaskTensor, Store

SVG = "{http://www.w3.org/2000/svg}"


def retail_store() -> Store:
    """orders -filter-> (repartition, trivial) -> big -join(customers)-> joined -agg-> totals
    -udf (opaque)-> scored; and orders -sample (non-deterministic)-> sampled."""
    s = Store()
    orders = s.add_dataset(
        "orders",
        n_rows=4,
        role="source",
        columns=["id", "cust", "amount"],
        dtypes=["int", "string", "int"],
    )
    customers = s.add_dataset(
        "customers",
        n_rows=3,
        role="source",
        columns=["cust", "region"],
        dtypes=["string", "string"],
    )
    kept = s.add_dataset(None, n_rows=2, columns=orders.columns, dtypes=orders.dtypes)
    s.add_operation(
        "filter",
        "horizontal_reduction",
        [orders.id],
        kept.id,
        [MaskTensor.from_kept([1, 3], 4)],
        expression="filter(amount > 50)",
    )
    big = s.add_dataset("big", n_rows=2, columns=orders.columns, dtypes=orders.dtypes, hidden=True)
    s.add_operation(
        "repartition",
        "trivial",
        [kept.id],
        big.id,
        [IdentityTensor(2)],
        trivial=True,
        expression="repartition(3)",
    )
    joined = s.add_dataset(
        "joined",
        n_rows=2,
        columns=["cust", "id", "amount", "region"],
        dtypes=["string", "int", "int", "string"],
    )
    s.add_operation(
        "join",
        "join",
        [big.id, customers.id],
        joined.id,
        [CSRTensor.from_pairs([0, 1], [0, 1], 2, 2), CSRTensor.from_pairs([0, 1], [1, 0], 2, 3)],
        expression="join(customers, 'cust')",
    )
    totals = s.add_dataset(
        "totals", n_rows=1, columns=["region", "total"], dtypes=["string", "bigint"]
    )
    s.add_operation(
        "agg",
        "aggregate",
        [joined.id],
        totals.id,
        [CSRTensor.from_pairs([0, 0], [0, 1], 1, 2)],
        contextual=True,
        expression="agg(sum(amount) AS total)",
    )
    scored = s.add_dataset(
        "scored",
        n_rows=1,
        columns=["region", "total", "score"],
        dtypes=["string", "bigint", "double"],
    )
    s.add_operation(
        "udf",
        "opaque",
        [totals.id],
        scored.id,
        None,
        opaque=True,
        expression="withColumn('score', score_udf(total))",
    )
    sampled = s.add_dataset("sampled", n_rows=2, columns=orders.columns, dtypes=orders.dtypes)
    s.add_operation(
        "sample",
        "horizontal_reduction",
        [orders.id],
        sampled.id,
        [MaskTensor.from_kept([0, 2], 4)],
        nondeterministic=True,
        expression="sample(0.5)",
    )
    return s


@pytest.fixture(scope="module")
def store() -> Store:
    return retail_store()


@pytest.fixture(scope="module")
def svg(store: Store) -> ET.Element:
    return ET.fromstring(to_svg(store))


def nodes_of(root: ET.Element) -> dict[str, ET.Element]:
    return {
        g.get("data-id", ""): g
        for g in root.iter(f"{SVG}g")
        if "node" in (g.get("class") or "").split()
    }


def edges_of(root: ET.Element) -> list[ET.Element]:
    return [g for g in root.iter(f"{SVG}g") if g.get("class") == "edge"]


def points(edge: ET.Element) -> list[tuple[float, float]]:
    line = edge.find(f"{SVG}polyline")
    assert line is not None
    return [tuple(map(float, p.split(","))) for p in (line.get("points") or "").split()]  # type: ignore[misc]


def text_of(g: ET.Element) -> str:
    return " ".join("".join(t.itertext()) for t in g.iter(f"{SVG}text"))


def shape_of(g: ET.Element) -> tuple[str | None, ...]:
    shape = next(c for c in g if c.tag in (f"{SVG}rect", f"{SVG}polygon"))
    return (
        shape.tag,
        shape.get("rx"),
        shape.get("fill"),
        shape.get("stroke"),
        shape.get("stroke-width"),
        shape.get("stroke-dasharray"),
    )


def test_every_dataset_and_visible_operation_is_drawn_with_its_label(svg: ET.Element) -> None:
    nodes = nodes_of(svg)
    labels = {g.get("data-label") for g in nodes.values()}
    # the hidden dataset "big" is spliced into the filter output, which takes its name
    assert labels == {
        "orders",
        "customers",
        "big",
        "joined",
        "totals",
        "scored",
        "sampled",
        "filter",
        "join",
        "agg",
        "udf",
        "sample",
    }
    assert "repartition" not in labels
    for g in nodes.values():
        assert g.get("data-label") in text_of(g)
        title = g.find(f"{SVG}title")
        assert title is not None and g.get("data-label") in (title.text or "")
    # row counts are printed in dataset boxes
    by_label = {g.get("data-label"): g for g in nodes.values()}
    assert "4 rows" in text_of(by_label["orders"])
    assert "2 rows" in text_of(by_label["big"])


def test_edges_are_counted_and_run_left_to_right(svg: ET.Element, store: Store) -> None:
    edges = edges_of(svg)
    # orders->filter->big->join, customers->join->joined->agg->totals->udf->scored,
    # orders->sample->sampled
    assert len(edges) == 11
    ids = set(nodes_of(svg))
    for e in edges:
        assert e.get("data-source") in ids and e.get("data-target") in ids
        pts = points(e)
        assert len(pts) >= 2
        xs = [x for x, _ in pts]
        assert xs == sorted(xs) and xs[0] < xs[-1]
    assert len(edges) == build_graph(store).number_of_edges()


def test_styles_tell_source_sink_opaque_and_contextual_apart(svg: ET.Element) -> None:
    by_label = {g.get("data-label"): g for g in nodes_of(svg).values()}
    kinds = {label: (by_label[label].get("class") or "").split() for label in by_label}
    assert "source" in kinds["orders"] and "source" in kinds["customers"]
    assert "sink" in kinds["scored"] and "sink" in kinds["sampled"]
    assert "dataset" in kinds["joined"]
    assert "opaque" in kinds["udf"] and "contextual" in kinds["agg"]
    assert "nondeterministic" in kinds["sample"]
    styles = {
        "source": shape_of(by_label["orders"]),
        "sink": shape_of(by_label["scored"]),
        "dataset": shape_of(by_label["joined"]),
        "opaque": shape_of(by_label["udf"]),
        "contextual": shape_of(by_label["agg"]),
        "plain operation": shape_of(by_label["join"]),
        "nondeterministic": shape_of(by_label["sample"]),
    }
    for (a, sa), (b, sb) in itertools.combinations(styles.items(), 2):
        assert sa != sb, f"{a} and {b} look the same: {sa}"
    # the same kind is drawn the same way
    assert shape_of(by_label["orders"]) == shape_of(by_label["customers"])
    # operations are colour-coded by category
    assert shape_of(by_label["join"])[2] != shape_of(by_label["filter"])[2]


def test_boxes_do_not_overlap_and_fit_in_the_picture(svg: ET.Element) -> None:
    width, height = float(svg.get("width", 0)), float(svg.get("height", 0))
    boxes = []
    for g in nodes_of(svg).values():
        shape = next(c for c in g if c.tag in (f"{SVG}rect", f"{SVG}polygon"))
        if shape.tag == f"{SVG}rect":
            x, y = float(shape.get("x", 0)), float(shape.get("y", 0))
            boxes.append(
                (x, y, x + float(shape.get("width", 0)), y + float(shape.get("height", 0)))
            )
        else:
            pts = [tuple(map(float, p.split(","))) for p in (shape.get("points") or "").split()]
            boxes.append(
                (
                    min(p[0] for p in pts),
                    min(p[1] for p in pts),
                    max(p[0] for p in pts),
                    max(p[1] for p in pts),
                )
            )
    for x0, y0, x1, y1 in boxes:
        assert 0 <= x0 < x1 <= width and 0 <= y0 < y1 <= height
    for a, b in itertools.combinations(boxes, 2):
        assert a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1], (a, b)


def test_svg_is_self_contained_and_has_unique_marker_ids(store: Store) -> None:
    text = to_svg(store)
    assert "<script" not in text and "http://" not in text.replace(
        'xmlns="http://www.w3.org/2000/svg"', ""
    )
    root = ET.fromstring(text)
    markers = [m.get("id") for m in root.iter(f"{SVG}marker")]
    assert len(markers) == 1 and markers[0] and markers[0].startswith("tp-arrow-")
    assert to_svg(store) == text  # deterministic


def test_run_like_object_and_coarse_mode(store: Store) -> None:
    ops = [op for op in store.operations.values() if op.method != "sample"]
    run = SimpleNamespace(store=store, operations=ops)
    root = ET.fromstring(to_svg(run))
    labels = {g.get("data-label") for g in nodes_of(root).values()}
    assert "sample" not in labels and "sampled" not in labels and "filter" in labels

    coarse = ET.fromstring(to_svg(store, coarse=True))
    nodes = nodes_of(coarse)
    assert all("operation" not in (g.get("class") or "").split() for g in nodes.values())
    assert len(nodes) == 7
    edge_labels = sorted(
        "".join(t.itertext()) for e in edges_of(coarse) for t in e.iter(f"{SVG}text")
    )
    assert edge_labels == ["agg", "filter", "join", "join", "sample", "udf"]


def test_show_trivial_keeps_the_repartition(store: Store) -> None:
    root = ET.fromstring(to_svg(store, show_trivial=True))
    labels = [g.get("data-label") for g in nodes_of(root).values()]
    # the hidden dataset no variable names is named after the call that made it
    assert "repartition" in labels and "filter(orders)" in labels and "big" in labels


def test_graph_model_attributes_search_and_focus(store: Store) -> None:
    G = build_graph(store)
    agg = next(a for _, a in G.nodes(data=True) if a["label"] == "agg")
    assert agg["kind"] == "operation" and agg["category"] == "aggregate" and agg["contextual"]
    assert agg["expression"] == "agg(sum(amount) AS total)"
    assert agg["schema"] == [("region", "string"), ("total", "bigint")]
    assert agg["rows"] == 1
    kinds = {a["label"]: a["kind"] for _, a in G.nodes(data=True)}
    assert kinds["orders"] == "source" and kinds["scored"] == "sink"
    assert kinds["joined"] == "dataset"

    assert graph_columns(G) == ["amount", "cust", "id", "region", "score", "total"]
    by_id = {n: a["label"] for n, a in G.nodes(data=True)}
    assert sorted(by_id[n] for n in matching_nodes(G, "region")) == sorted(
        ["customers", "joined", "totals", "scored", "join", "agg", "udf"]
    )
    # "tot" is no column name: substring match
    assert sorted(by_id[n] for n in matching_nodes(G, "tot")) == ["agg", "scored", "totals", "udf"]
    assert matching_nodes(G, "  ") == []

    cust = next(n for n, label in by_id.items() if label == "customers")
    focused = focus_graph(G, cust)
    assert sorted(focused.nodes[n]["label"] for n in focused) == sorted(
        ["customers", "join", "joined", "agg", "totals", "udf", "scored"]
    )


def test_segment_params_invert_cytoscape_placement() -> None:
    src, dst = (0.0, 10.0), (400.0, 50.0)
    bends = [(100.0, 80.0), (300.0, -20.0)]
    weights, distances = segment_params(src, dst, bends)
    dx, dy = dst[0] - src[0], dst[1] - src[1]
    length = (dx * dx + dy * dy) ** 0.5
    for (px, py), w, d in zip(bends, weights, distances):
        # cytoscape: S + w (T - S) + d * (-dy, dx) / |T - S|
        x = src[0] + w * dx + d * (-dy / length)
        y = src[1] + w * dy + d * (dx / length)
        assert abs(x - px) < 0.01 and abs(y - py) < 0.01


def test_long_edges_get_bend_points_between_layers() -> None:
    s = Store()
    a = s.add_dataset("a", n_rows=2, role="source", columns=["k"], dtypes=["int"])
    b = s.add_dataset("b", n_rows=2, columns=["k"], dtypes=["int"])
    s.add_operation("select", "transformation", [a.id], b.id, [IdentityTensor(2)])
    c = s.add_dataset("c", n_rows=2, columns=["k"], dtypes=["int"])
    s.add_operation("select", "transformation", [b.id], c.id, [IdentityTensor(2)])
    d = s.add_dataset("d", n_rows=4, columns=["k"], dtypes=["int"])
    s.add_operation(
        "union",
        "append",
        [c.id, a.id],
        d.id,
        [CSRTensor.from_pairs([0, 1], [0, 1], 4, 2), CSRTensor.from_pairs([2, 3], [0, 1], 4, 2)],
    )
    view = layout_view(build_graph(s))
    long_edges = [e for e, pts in view.bends.items() if pts]
    assert long_edges  # a -> union spans four layers
    payload = view.to_payload()
    bent = [e for e in payload["edges"] if e["points"]]
    assert bent and all(len(e["weights"]) == len(e["points"]) for e in bent)
    root = ET.fromstring(to_svg(s))
    assert any(len(points(e)) > 2 for e in edges_of(root))
    for e in edges_of(root):
        xs = [x for x, _ in points(e)]
        assert xs == sorted(xs)


#: every category the capture gives an operation (capture/recording/_tracker.py,
#: capture/hops/_ml.py)
CATEGORIES = [
    "transformation", "vertical_reduction", "vertical_augmentation", "horizontal_reduction",
    "join", "append", "aggregate", "dedup", "window", "sort", "explode", "trivial",
    "ml_transform", "ml_fit",
]  # fmt: skip


def test_each_operation_category_has_a_colour_of_its_own() -> None:
    fills = [node_style({"kind": "operation", "category": c})["fill"] for c in CATEGORIES]
    assert DEFAULT_OP_COLOR not in fills
    assert len(set(fills)) == len(CATEGORIES)
