"""The lineage explorer widget: Python handlers driven as the front end would drive them,
and the shipped JavaScript bundle against its sources."""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

import tensprov_lab
from tensprov_lab.notebook._widget import PAGE_SIZE, LineageExplorer

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parent.parent
JS = ROOT / "js"
STATIC = ROOT / "tensprov_lab" / "static"

ORDERS = [(i, "abc"[i % 3], (i * 37) % 100) for i in range(45)]
CUSTOMERS = [("a", "north"), ("b", "south"), ("c", "north")]


@pytest.fixture(scope="module")
def tracked(spark: Any) -> dict[str, Any]:
    orders = spark.createDataFrame(ORDERS, "order_id int, cust_id string, amount int")
    cust = spark.createDataFrame(CUSTOMERS, "cust_id string, region string")
    with tensprov_lab.track(spark, name="widget") as run:
        big = orders.filter(F.col("amount") > 50).repartition(2)
        joined = big.join(cust, "cust_id")
        out = joined.groupBy("region").agg(F.sum("amount").alias("total"))
    return {"run": run, "orders": orders, "cust": cust, "big": big, "joined": joined,
            "out": out}


@pytest.fixture()
def widget(tracked: dict[str, Any]) -> LineageExplorer:
    w = tracked["run"].explore()
    assert isinstance(w, LineageExplorer)
    return w


def node_of(tracked: dict[str, Any], name: str) -> str:
    return f"d{tracked['run'].dataset(tracked[name]).id}"


def op_node(w: LineageExplorer, method: str) -> str:
    return next(n["id"] for n in w.graph["nodes"] if n["kind"] == "operation"
                and n["name"] == method)


def send(w: LineageExplorer, **content: Any) -> None:
    """What ``model.send(content)`` in the front end arrives as."""
    w._handle_custom_msg(content, [])


# ---------------------------------------------------------------------------------------------
# graph


def test_graph_has_every_node_with_a_position(widget: LineageExplorer, tracked: dict) -> None:
    g = widget.graph
    ids = {n["id"] for n in g["nodes"]}
    for n in g["nodes"]:
        assert isinstance(n["x"], float) and isinstance(n["y"], float)
        assert n["w"] > 0 and n["h"] > 0 and n["style"]["fill"].startswith("#")
    assert len({(n["x"], n["y"]) for n in g["nodes"]}) == len(g["nodes"])
    for e in g["edges"]:
        assert e["source"] in ids and e["target"] in ids
        # left to right: the Python layout puts every edge's target to the right
        xs = {n["id"]: n["x"] for n in g["nodes"]}
        assert xs[e["source"]] < xs[e["target"]]
    run = tracked["run"]
    methods = sorted(n["name"] for n in g["nodes"] if n["kind"] == "operation")
    assert methods == sorted(op.method for op in run.operations if not op.trivial)
    assert "repartition" not in methods
    kinds = {n["id"]: n["kind"] for n in g["nodes"]}
    assert kinds[node_of(tracked, "orders")] == "source"
    assert kinds[node_of(tracked, "cust")] == "source"
    assert kinds[node_of(tracked, "out")] == "sink"
    assert set(g["columns"]) == {"order_id", "cust_id", "amount", "region", "total"}


# ---------------------------------------------------------------------------------------------
# clicks


def test_click_operation_shows_its_details(widget: LineageExplorer, tracked: dict) -> None:
    widget.selected = op_node(widget, "agg")
    d = widget.details
    run = tracked["run"]
    assert d["type"] == "operation" and d["method"] == "agg"
    # localized: a group's record is recomputed from its members, which the tensor lists
    assert d["category"] == "aggregate" and d["contextual"] is False
    assert "sum(amount)" in d["expression"]
    assert d["rows_in"] == [run.dataset(tracked["joined"]).n_rows]
    assert d["rows_out"] == run.dataset(tracked["out"]).n_rows == 2
    assert d["inputs"][0]["node"] == node_of(tracked, "joined")
    assert [c for c, _ in d["inputs"][0]["schema"]] == run.dataset(tracked["joined"]).columns
    assert d["output"]["schema"] == [["region", "string"], ["total", "bigint"]]
    assert d["seconds"] >= 0


def test_click_dataset_pages_its_records(widget: LineageExplorer, tracked: dict) -> None:
    run = tracked["run"]
    widget.selected = node_of(tracked, "orders")
    assert widget.details["type"] == "dataset" and widget.details["kind"] == "source"
    r = widget.records
    assert r["columns"] == ["_row", "order_id", "cust_id", "amount"]
    assert r["total"] == 45 and r["pages"] == 3 and r["page"] == 0
    expected = run.rows(tracked["orders"]).values.tolist()
    assert r["rows"] == expected[:PAGE_SIZE]
    send(widget, type="page", page=1)
    assert widget.records["page"] == 1 and widget.records["rows"] == expected[20:40]
    send(widget, type="page", page=2)
    assert widget.records["rows"] == expected[40:]
    send(widget, type="page", page=99)  # clipped
    assert widget.records["page"] == 2
    # `big` (after a repartition) is hidden: the filter's output is drawn under its name
    filtered = next(n["id"] for n in widget.graph["nodes"] if n["name"] == "big")
    assert filtered != node_of(tracked, "big")
    widget.selected = filtered
    assert widget.details["aliases"] == ["big"]
    assert widget.records["total"] == run.dataset(tracked["big"]).n_rows


def test_click_record_highlights_backward_and_forward_lineage(
    widget: LineageExplorer, tracked: dict
) -> None:
    run = tracked["run"]
    out = node_of(tracked, "out")
    widget.selected = out
    send(widget, type="record", row=0)
    lin = widget.lineage
    assert lin["origin"] == {"node": out, "dataset": int(out[1:]), "row": 0, "label": "out"}
    back = run.backward(tracked["out"], rows=[0]).result.rows
    listed = {d["id"]: d for d in lin["datasets"]}
    for src in (tracked["orders"], tracked["cust"]):
        ds = run.dataset(src).id
        assert listed[ds]["rows"] == back[ds].tolist()
        assert listed[ds]["direction"] == "backward"
        assert lin["counts"][f"d{ds}"] == len(back[ds]) > 0
    assert lin["counts"][out] == 1 and lin["direction"][out] == "origin"
    # every operation between the sources and `out` is on the path
    for method in ("filter", "join", "agg"):
        assert lin["direction"][op_node(widget, method)] == "backward"
    assert f"{op_node(widget, 'agg')}->{out}" in lin["edges"]

    # forward from a source record: the sink rows run.forward finds
    orders = node_of(tracked, "orders")
    widget.selected = orders
    row = next(i for i, (_, _, amount) in enumerate(ORDERS) if amount > 50)
    send(widget, type="record", row=row)
    fwd = run.forward(tracked["orders"], rows=[row]).result.rows
    out_id = run.dataset(tracked["out"]).id
    listed = {d["id"]: d for d in widget.lineage["datasets"]}
    assert listed[out_id]["rows"] == fwd[out_id].tolist() and len(fwd[out_id]) == 1
    assert listed[out_id]["direction"] == "forward"
    assert widget.lineage["counts"][orders] == 1

    # a record filtered out reaches nothing downstream
    dropped = next(i for i, (_, _, amount) in enumerate(ORDERS) if amount <= 50)
    send(widget, type="record", row=dropped)
    assert set(widget.lineage["counts"]) == {orders}

    # the reached records of one dataset, as a table
    send(widget, type="record", row=row, node=orders)
    send(widget, type="lineage_rows", node=out)
    assert widget.records["lineage_only"] and widget.records["node"] == out
    assert [r[0] for r in widget.records["rows"]] == fwd[out_id].tolist()
    send(widget, type="clear")
    assert widget.lineage == {}


def test_coarse_toggle_and_focus(widget: LineageExplorer, tracked: dict) -> None:
    out = node_of(tracked, "out")
    widget.selected = out
    send(widget, type="record", row=0)
    fine = {n["id"] for n in widget.graph["nodes"]}
    widget.coarse = True
    g = widget.graph
    assert all(n["kind"] != "operation" for n in g["nodes"])
    assert {n["id"] for n in g["nodes"]} == {n for n in fine if n.startswith("d")}
    assert sorted(e["label"] for e in g["edges"]) == ["agg", "filter", "join", "join"]
    # the lineage survives the toggle, now on datasets only
    assert set(widget.lineage["counts"]) == {n for n in widget.lineage["counts"]
                                              if n.startswith("d")}
    assert widget.lineage["counts"][node_of(tracked, "orders")] > 0
    widget.coarse = False
    assert {n["id"] for n in widget.graph["nodes"]} == fine

    # lineage focus: customers and what is derived from it, nothing of orders' own branch
    cust = node_of(tracked, "cust")
    widget.focus = cust
    shown = {n["id"]: n for n in widget.graph["nodes"]}
    assert shown[cust]["focus"] is True
    assert node_of(tracked, "orders") not in shown and op_node(widget, "join") in shown
    assert out in shown
    assert "filter" not in {n["name"] for n in shown.values()}
    # focus on an operation survives the coarse toggle as its output dataset
    widget.focus = op_node(widget, "join")
    widget.coarse = True
    assert widget.focus == node_of(tracked, "joined")
    widget.focus = ""
    assert len(widget.graph["nodes"]) == len({n for n in fine if n.startswith("d")})


def test_attribute_search_highlights_nodes_with_the_column(widget: LineageExplorer) -> None:
    widget.search = "region"
    expected = set()
    for n in widget.graph["nodes"]:
        if n["kind"] != "operation":
            if "region" in [c for c, _ in n["schema"]]:
                expected.add(n["id"])
    # operations: region in their input or output schema
    expected |= {op_node(widget, "join"), op_node(widget, "agg")}
    assert set(widget.matches) == expected
    widget.search = "cust_id"
    names = {n["id"]: n["name"] for n in widget.graph["nodes"]}
    assert "out" not in {names[m] for m in widget.matches}
    assert {"filter", "join", "agg"} <= {names[m] for m in widget.matches}
    widget.search = ""
    assert widget.matches == []


def test_mimebundle_falls_back_to_svg(widget: LineageExplorer, tracked: dict) -> None:
    data, _meta = widget._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in data
    assert "widget" in data["text/plain"] and "operations" in data["text/plain"]
    root = ET.fromstring(data["image/svg+xml"])
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    labels = {g.get("data-label") for g in root.iter("{http://www.w3.org/2000/svg}g")}
    assert {"orders", "cust", "out", "agg"} <= labels
    assert tracked["run"].to_svg().startswith("<svg")


def test_bad_messages_report_an_error_instead_of_raising(widget: LineageExplorer) -> None:
    send(widget, type="record", row=10_000, node=widget.graph["nodes"][0]["id"])
    assert widget.error and widget.lineage["error"] == widget.error
    send(widget, type="record", node="nonsense", row=0)
    assert "nonsense" in widget.error
    widget.selected = "d999999"
    assert widget.details == {} and widget.error


# ---------------------------------------------------------------------------------------------
# the shipped bundle


def source_hash() -> str:
    """The hash js/build.mjs writes into static/explorer.js.sha256 (same recipe)."""
    files = sorted(
        [p.relative_to(JS).as_posix() for p in (JS / "src").rglob("*") if p.is_file()]
        + ["build.mjs"]
    )
    h = hashlib.sha256()
    for rel in files:
        h.update(rel.encode() + b"\0")
        h.update((JS / rel).read_bytes())
        h.update(b"\0")
    return h.hexdigest()


def test_bundle_is_an_esm_module_built_from_the_current_sources(tmp_path: Path) -> None:
    bundle = STATIC / "explorer.js"
    text = bundle.read_text(encoding="utf-8")
    assert re.search(r"export\s*\{\s*\w+ as default\s*\}\s*;?\s*$", text) or (
        "export default" in text
    )
    assert "require(" not in text[:2000]  # ESM, not CommonJS
    assert "cytoscape" in text  # bundled in, not imported from a CDN
    assert not re.search(r"""from\s*["']https?:""", text)
    assert (STATIC / "explorer.css").is_file()
    # fails when js/src changed without `cd js && npm run build`
    recorded = (STATIC / "explorer.js.sha256").read_text().strip()
    assert recorded == source_hash(), "js/ sources changed: run `cd js && npm run build`"
    node = shutil.which("node")
    if node and (JS / "node_modules" / "esbuild").is_dir():
        subprocess.run([node, "build.mjs", "--outdir", str(tmp_path)], cwd=JS, check=True,
                       timeout=120)
        for name in ("explorer.js", "explorer.css", "explorer.js.sha256"):
            assert (tmp_path / name).read_bytes() == (STATIC / name).read_bytes(), name


def test_widget_class_points_at_the_bundle() -> None:
    esm = LineageExplorer._esm
    assert Path(str(getattr(esm, "_path", esm))).name == "explorer.js" or str(esm).startswith(
        (STATIC / "explorer.js").read_text(encoding="utf-8")[:100]
    )
    synced = set(LineageExplorer.class_trait_names(sync=lambda v: bool(v)))
    assert {"graph", "selected", "details", "records", "lineage", "coarse", "focus",
            "search", "matches"} <= synced
