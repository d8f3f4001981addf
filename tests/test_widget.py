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
from tests import _widget_run
from tests._widget_run import ORDERS, node_of, op_node, send

pytestmark = pytest.mark.spark

#: the tracked run and its explorer (fixtures pytest finds by these names)
tracked, widget = _widget_run.tracked, _widget_run.widget

ROOT = Path(__file__).resolve().parent.parent
JS = ROOT / "js"
STATIC = ROOT / "tensprov_lab" / "static"


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


def test_legend_explains_the_styles_drawn(widget: LineageExplorer) -> None:
    legend = {e["label"]: e["style"] for e in widget.graph["legend"]}
    assert {"source", "result (sink)", "intermediate dataset"} <= set(legend)
    assert {"horizontal reduction", "join", "aggregate"} <= set(legend)
    # each entry is the style of the nodes it stands for
    by_kind = {n["kind"]: n["style"] for n in widget.graph["nodes"]}
    assert legend["source"] == by_kind["source"] and legend["result (sink)"] == by_kind["sink"]
    join = next(n for n in widget.graph["nodes"] if n["name"] == "join")
    assert legend["join"] == join["style"]
    assert "opaque: record lineage stops" not in legend  # nothing opaque is drawn


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


def test_click_source_record_says_where_it_stopped(widget: LineageExplorer, tracked: dict) -> None:
    """Why-not in the explorer: a source record reaching no sink lists, per sink, the
    operation that dropped it, why, and the values that decided it (run.why_not)."""
    run = tracked["run"]
    orders = node_of(tracked, "orders")
    widget.selected = orders
    dropped = next(i for i, (_, _, amount) in enumerate(ORDERS) if amount <= 50)
    send(widget, type="record", row=dropped)
    (entry,) = widget.lineage["why_not"]
    want = run.why_not(tracked["out"], source=tracked["orders"], rows=[dropped])
    assert entry["sink"] == "out" and entry["status"] == "dropped" == want["status"][0]
    assert entry["node"] == op_node(widget, "filter")
    assert entry["reason"] == want["reason"][0] and "condition is false" in entry["reason"]
    assert entry["values"] == {"amount": [ORDERS[dropped][2]]}
    # a record that reaches the sink: nothing to say
    kept = next(i for i, (_, _, amount) in enumerate(ORDERS) if amount > 50)
    send(widget, type="record", row=kept)
    assert widget.lineage["why_not"] == []
    # not a source: no why-not asked
    widget.selected = node_of(tracked, "out")
    send(widget, type="record", row=0)
    assert widget.lineage["why_not"] == []


# ---------------------------------------------------------------------------------------------
# cell lineage (attribute-value level)


def drawn_datasets(w: LineageExplorer) -> list[int]:
    return [int(n["id"][1:]) for n in w.graph["nodes"] if n["kind"] != "operation"]


def expected_cells(res: Any, drawn: list[int]) -> dict[int, dict[str, dict[str, list[int]]]]:
    """{dataset id: {kind: {column: rows}}} of a CellLineage: the datasets with a cell."""
    return {
        ds.id: {kind: {c: r.tolist() for c, r in cols.items()} for kind, cols in res[ds].items()}
        for ds in res
        if ds.id in drawn and len(res.rows(ds))
    }


def listed_cells(lin: dict[str, Any]) -> dict[int, dict[str, dict[str, list[int]]]]:
    """The same, as the lineage panel lists it (the picked cell's own dataset left out)."""
    return {
        d["id"]: {
            k: {c["column"]: c["rows"] for c in d[k]} for k in ("contributing", "influencing")
        }
        for d in lin["datasets"]
        if d["direction"] != "origin"
    }


def n_cells(cells: dict[str, dict[str, list[int]]]) -> int:
    return len({(c, r) for cols in cells.values() for c, rows in cols.items() for r in rows})


def test_click_cell_highlights_contributing_and_influencing_cells(
    widget: LineageExplorer, tracked: dict
) -> None:
    run = tracked["run"]
    out = node_of(tracked, "out")
    widget.selected = out
    north = next(r for r, region, _ in widget.records["rows"] if region == "north")
    send(widget, type="cell", row=north, column="total", node=out)
    assert widget.error == ""
    lin = widget.lineage
    assert lin["mode"] == "cell"
    assert lin["origin"] == {
        "node": out,
        "dataset": int(out[1:]),
        "row": north,
        "label": "out",
        "column": "total",
    }
    drawn = drawn_datasets(widget)
    back = run.backward(tracked["out"], rows=[north], columns=["total"], to=drawn)
    fwd = run.forward(tracked["out"], rows=[north], columns=["total"], to=drawn)
    assert len(fwd.to_pandas()) == 0  # out is the sink: nothing downstream
    expected = expected_cells(back, drawn)
    assert listed_cells(lin) == expected

    # the same, from the data alone: the north total sums `amount` of the orders of
    # customers a and c over 50 (contributing); the filter reads `amount`, the join
    # `cust_id` and the grouping `region` (influencing)
    orders, cust = run.dataset(tracked["orders"]).id, run.dataset(tracked["cust"]).id
    rows = [i for i, (_, c, amount) in enumerate(ORDERS) if amount > 50 and c in "ac"]
    assert expected[orders] == {
        "contributing": {"amount": rows},
        "influencing": {"cust_id": rows, "amount": rows},
    }
    assert expected[cust] == {
        "contributing": {},
        "influencing": {"cust_id": [0, 2], "region": [0, 2]},
    }

    # every node on the way counts its cells (a cell both contributing and influencing
    # once); operations count the cells of their output
    counts = {f"d{d}": n_cells(c) for d, c in expected.items()} | {out: 1}
    assert counts[f"d{orders}"] == 2 * len(rows) and counts[f"d{cust}"] == 4
    for method in ("filter", "join", "agg"):
        op = op_node(widget, method)
        output = next(e["target"] for e in widget.graph["edges"] if e["source"] == op)
        counts[op] = counts[output]
    assert lin["counts"] == counts
    assert set(lin["direction"].values()) == {"backward", "origin"}
    listed = {d["id"]: d for d in lin["datasets"]}
    assert listed[orders]["rows"] == rows and listed[orders]["cells"] == 2 * len(rows)

    # the records table colours exactly the lineage's cells of the rows on show
    send(widget, type="lineage_rows", node=f"d{orders}")
    r = widget.records
    on_page = [rec[0] for rec in r["rows"]]
    assert on_page == rows[:PAGE_SIZE]
    assert r["marks"] == {
        "contributing": {"amount": on_page},
        "influencing": {"cust_id": on_page, "amount": on_page},
    }
    widget.selected = f"d{cust}"
    assert widget.records["marks"] == {"influencing": {"cust_id": [0, 2], "region": [0, 2]}}

    # forward from a source cell: a south order's amount reaches the south total's value
    south = next(i for i, (_, c, amount) in enumerate(ORDERS) if amount > 50 and c == "b")
    send(widget, type="cell", row=south, column="amount", node=node_of(tracked, "orders"))
    fwd = run.forward(tracked["orders"], rows=[south], columns=["amount"], to=drawn)
    assert listed_cells(widget.lineage) == expected_cells(fwd, drawn)
    totals = run.rows(tracked["out"])
    south_total = int(totals.loc[totals["region"] == "south", "_row"].iloc[0])
    assert expected_cells(fwd, drawn)[int(out[1:])]["contributing"] == {"total": [south_total]}
    assert widget.lineage["direction"][out] == "forward"
    # a cell of a record the filter dropped reaches nothing
    dropped = next(i for i, (_, _, amount) in enumerate(ORDERS) if amount <= 50)
    send(widget, type="cell", row=dropped, column="amount", node=node_of(tracked, "orders"))
    assert widget.lineage["counts"] == {node_of(tracked, "orders"): 1}

    # datasets only: the same cells, on the datasets
    send(widget, type="cell", row=north, column="total", node=out)
    widget.coarse = True
    assert widget.lineage["counts"] == {k: v for k, v in counts.items() if k.startswith("d")}
    widget.coarse = False

    # a record click after a cell click: record counts again, no cell marks
    send(widget, type="record", row=north, node=out)
    assert widget.lineage["mode"] == "record" and "column" not in widget.lineage["origin"]
    assert widget.records["marks"] == {}
    send(widget, type="cell", row=north, column="nope", node=out)
    assert "nope" in widget.error and widget.lineage == {"error": widget.error}


def test_records_table_says_when_records_were_recomputed(
    widget: LineageExplorer, tracked: dict
) -> None:
    run = tracked["run"]
    for name, recomputed in (("orders", False), ("joined", True), ("out", False)):
        widget.selected = node_of(tracked, name)
        r = widget.records
        table = run.rows(tracked[name], rows=[rec[0] for rec in r["rows"]])
        assert r["recomputed"] is bool(table.attrs["recomputed"]) is recomputed, name
        ds = run.dataset(tracked[name])
        # a source is read where it is, even when cached for faster recomputation
        assert r["materialized"] == ("" if ds.role == "source" else ds.materialized)
        assert r["rows"] == table.values.tolist()
        # only sources' records can be dropped in a what-if preview
        assert r["droppable"] is (name == "orders")
    assert widget.records["materialized"] == "pipeline output"
    assert widget.details["materialized"] == "pipeline output"


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
    assert set(widget.lineage["counts"]) == {
        n for n in widget.lineage["counts"] if n.startswith("d")
    }
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
        subprocess.run(
            [node, "build.mjs", "--outdir", str(tmp_path)], cwd=JS, check=True, timeout=120
        )
        for name in ("explorer.js", "explorer.css", "explorer.js.sha256"):
            assert (tmp_path / name).read_bytes() == (STATIC / name).read_bytes(), name


def test_widget_class_points_at_the_bundle() -> None:
    esm = LineageExplorer._esm
    assert Path(str(getattr(esm, "_path", esm))).name == "explorer.js" or str(esm).startswith(
        (STATIC / "explorer.js").read_text(encoding="utf-8")[:100]
    )
    synced = set(LineageExplorer.class_trait_names(sync=lambda v: bool(v)))
    assert {
        "graph",
        "selected",
        "details",
        "records",
        "lineage",
        "coarse",
        "focus",
        "search",
        "matches",
        "dropped",
        "edited",
        "what_if",
    } <= synced


# ---------------------------------------------------------------------------------------------
# stages: chains of row-preserving steps rolled up


def test_a_chain_of_steps_is_one_stage_until_expanded(spark: Any) -> None:
    df = spark.createDataFrame([(i, float(i)) for i in range(6)], "k int, v double")
    with tensprov_lab.track(spark, name="widget-stages") as run:
        a = df.withColumn("a", F.col("v") + 1).withColumn("b", F.col("v") * 2)
        a = a.withColumn("c", F.lit(1)).select("k", "v", "a", "b")
        kept = a.filter("k > 1")
        out = kept.withColumn("d", F.col("a") + 1).withColumn("e", F.col("d") + 1)
        out = out.withColumnRenamed("e", "f")
    w = run.explore()
    ops = {n["id"]: n for n in w.graph["nodes"] if n["kind"] == "operation"}
    stages = {nid: n for nid, n in ops.items() if n["category"] == "stage"}
    # withColumn x3 + select before the filter, withColumn x2 + rename after it
    assert sorted(n["name"] for n in stages.values()) == [
        "3 steps: withColumn ×2, withColumnRenamed",
        "4 steps: withColumn ×3, select",
    ]
    assert [n["name"] for n in ops.values() if n["category"] != "stage"] == ["filter"]
    first = next(nid for nid, n in stages.items() if n["name"].startswith("4"))
    w.selected = first
    assert w.details["type"] == "stage"
    assert [s["method"] for s in w.details["steps"]] == ["withColumn"] * 3 + ["select"]
    assert w.details["inputs"][0]["label"] == "df" and w.details["rows_out"] == 6
    # a record's lineage lights the stages it runs through
    w.selected = f"d{run.dataset(out).id}"
    send(w, type="record", row=0)
    assert set(stages) <= set(w.lineage["counts"])
    # expanded: its steps drawn one by one, the first one selected; the other stays
    send(w, type="expand", node=first)
    ops2 = {n["id"]: n for n in w.graph["nodes"] if n["kind"] == "operation"}
    assert first not in ops2 and sum(n["category"] == "stage" for n in ops2.values()) == 1
    assert [n["name"] for n in ops2.values()].count("withColumn") == 3
    assert w.selected in ops2 and ops2[w.selected]["name"] == "select"
    # unticking "roll up chains" draws every step
    w.rollup = False
    assert not any(n["category"] == "stage" for n in w.graph["nodes"])
    assert len([n for n in w.graph["nodes"] if n["kind"] == "operation"]) == 8
    # the SVG rolls up too
    # (drawn on two lines that fit the stage's box: the count, then the steps)
    labels = re.findall(r"<text[^>]*>(\d+ steps:)</text>\s*<text[^>]*>([^<]*)</text>", run.to_svg())
    assert sorted(labels) == [("3 steps:", "withColumn ×2, …"), ("4 steps:", "withColumn ×3, …")], (
        labels
    )
    assert "steps:" not in run.to_svg(rollup=False)
