"""The lineage explorer widget: Python handlers driven as the front end would drive them,
and the shipped JavaScript bundle against its sources."""

from __future__ import annotations

import datetime
import decimal
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
from tensprov_lab.notebook._widget import PAGE_SIZE, LineageExplorer, _convert, _edit_json

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
    return {"run": run, "orders": orders, "cust": cust, "big": big, "joined": joined, "out": out}


@pytest.fixture()
def widget(tracked: dict[str, Any]) -> LineageExplorer:
    w = tracked["run"].explore()
    assert isinstance(w, LineageExplorer)
    return w


def node_of(tracked: dict[str, Any], name: str) -> str:
    return f"d{tracked['run'].dataset(tracked[name]).id}"


def op_node(w: LineageExplorer, method: str) -> str:
    return next(
        n["id"] for n in w.graph["nodes"] if n["kind"] == "operation" and n["name"] == method
    )


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


# ---------------------------------------------------------------------------------------------
# what-if


def test_what_if_preview_of_dropped_records(widget: LineageExplorer, tracked: dict) -> None:
    run = tracked["run"]
    orders, cust, out = (node_of(tracked, n) for n in ("orders", "cust", "out"))
    r = next(i for i, (_, c, amount) in enumerate(ORDERS) if amount > 50 and c == "c")
    send(widget, type="drop", node=orders, row=r, on=True)
    send(widget, type="drop", node=orders, row=0, on=True)
    send(widget, type="drop", node=orders, row=0, on=False)
    send(widget, type="drop", node=cust, row=1, on=True)  # customer b, the south region
    assert widget.dropped == {orders: [r], cust: [1]}

    send(widget, type="record", row=0, node=out)  # a lineage on show ...
    send(widget, type="what_if")
    assert widget.error == ""
    assert widget.lineage == {}  # ... gives way to the preview
    wi = widget.what_if
    preview = run.what_if(drop={tracked["orders"]: [r], tracked["cust"]: [1]})
    summary = preview.summary()
    # WhatIf names datasets by their store label; the widget by their drawn name (the
    # filter's output is drawn as `big`, the hidden dataset after it that the user named)
    by_store = {run.store.datasets[d["id"]].label: d for d in wi["datasets"]}
    by_label = {d["label"]: d for d in wi["datasets"]}
    assert sorted(by_store) == sorted(summary["dataset"]) and len(by_store) == len(by_label)
    assert set(by_label) == {"big", "joined", "out"}
    for row in summary.itertuples(index=False):
        shown = by_store[row.dataset]
        assert shown["counts"] == {
            "removed": row.removed,
            "changed": row.changed,
            "added": row.added,
        }, row
        for kind in ("removed", "changed", "added"):
            assert [x[0] for x in shown[kind]["rows"]] == getattr(preview, kind)[row.dataset][
                "_row"
            ].tolist(), (row.dataset, kind)
        assert shown["status"] == "changed" and shown["reason"] == row.note == ""

    # from the data alone: dropping order r takes its amount off the north total; dropping
    # customer b removes the south total and the joined records of b
    before = run.rows(tracked["out"])
    north = before.loc[before["region"] == "north"]
    changed = by_label["out"]["changed"]
    assert changed["rows"] == [
        [int(north["_row"].iloc[0]), "north", int(north["total"].iloc[0]) - ORDERS[r][2]]
    ]
    assert changed["before"] == [{"total": int(north["total"].iloc[0])}]
    assert [x[1:] for x in by_label["out"]["removed"]["rows"]] == [
        ["south", int(before.loc[before["region"] == "south", "total"].iloc[0])]
    ]
    joined = by_label["joined"]
    n_b = sum(1 for _, c, amount in ORDERS if amount > 50 and c == "b")
    assert joined["counts"] == {"removed": n_b + 1, "changed": 0, "added": 0}
    assert {x[1] for x in joined["removed"]["rows"]} == {"b", "c"}
    assert [x[1:] for x in by_label["big"]["removed"]["rows"]] == [list(ORDERS[r])]

    # the graph: dropped sources, changed datasets and the operations making them
    ops = {op_node(widget, m) for m in ("filter", "join", "agg")}
    changed_nodes = {by_label["big"]["node"], node_of(tracked, "joined"), out, *ops}
    assert wi["nodes"] == {orders: "dropped", cust: "dropped"} | dict.fromkeys(
        changed_nodes, "changed"
    )
    assert wi["drop"] == [
        {"node": orders, "id": int(orders[1:]), "label": "orders", "rows": [r]},
        {"node": cust, "id": int(cust[1:]), "label": "cust", "rows": [1]},
    ]
    widget.coarse = True  # the preview survives the toggle, on the datasets
    assert set(widget.what_if["nodes"]) == {k for k in wi["nodes"] if k.startswith("d")}
    widget.coarse = False

    # a record click clears the preview (the marks stay); clear_what_if clears both
    send(widget, type="record", row=0, node=out)
    assert widget.what_if == {} and widget.dropped == {orders: [r], cust: [1]}
    send(widget, type="clear_what_if")
    assert widget.dropped == {} and widget.what_if == {}

    # refused: records of a derived dataset, a preview with nothing marked
    send(widget, type="drop", node=out, row=0, on=True)
    assert "derived" in widget.error and widget.dropped == {}
    send(widget, type="what_if")
    assert "mark records" in widget.error


def test_what_if_reports_what_cannot_be_previewed(spark: Any) -> None:
    from pyspark.sql import Window

    orders = spark.createDataFrame(ORDERS[:9], "order_id int, cust_id string, amount int")
    with tensprov_lab.track(spark, name="widget-window") as run:
        ranked = orders.withColumn(
            "rk", F.row_number().over(Window.partitionBy("cust_id").orderBy("amount"))
        )
        top = ranked.filter("rk = 1")
    w = run.explore()
    src = f"d{run.dataset(orders).id}"
    send(w, type="drop", node=src, row=4, on=True)
    send(w, type="what_if")
    expected = run.what_if(drop={orders: [4]})
    assert expected.not_previewable  # a window: a dropped record changes others' ranks
    shown = {d["label"]: d for d in w.what_if["datasets"]}
    assert {k: v["reason"] for k, v in shown.items()} == expected.not_previewable
    for label in expected.not_previewable:
        assert shown[label]["status"] == "not_previewable"
        assert w.what_if["nodes"][shown[label]["node"]] == "not_previewable"
    assert {f"d{run.dataset(top).id}", f"d{run.dataset(ranked).id}"} <= {
        d["node"] for d in shown.values()
    }


def check_preview(w: LineageExplorer, run: Any, preview: Any) -> dict[str, dict[str, Any]]:
    """The widget's what-if panel shows what ``preview`` (``run.what_if``) found: per
    dataset its status, counts, and the removed, changed (old and new values) and added
    records. Returns the panel's datasets by drawn label."""
    assert w.error == ""
    shown = {run.store.datasets[d["id"]].label: d for d in w.what_if["datasets"]}
    summary = preview.summary()
    assert sorted(shown) == sorted(summary["dataset"])
    for row in summary.itertuples(index=False):
        d = shown[row.dataset]
        assert d["reason"] == row.note, row
        if row.note:
            assert d["status"] == "not_previewable"
            continue
        assert d["counts"] == {"removed": row.removed, "changed": row.changed, "added": row.added}
        assert d["status"] == ("changed" if row.removed or row.changed or row.added else "same")
        for kind in ("removed", "changed", "added"):
            table = getattr(preview, kind)[row.dataset]
            got = d[kind]
            assert [x[0] for x in got["rows"]] == table["_row"].tolist(), (row.dataset, kind)
            if not len(table):
                continue
            # the new values, as the engine gives them
            assert got["rows"] == table[got["columns"]].values.tolist(), (row.dataset, kind)
        # the old values of the changed cells: the engine's "<col> (before)" columns
        table = preview.changed[row.dataset]
        before = [
            {c[: -len(" (before)")]: rec[c] for c in table.columns if c.endswith(" (before)")}
            for _, rec in table.iterrows()
        ]
        before = [{c: v for c, v in b.items() if v == v} for b in before]  # NaN: unchanged
        assert d["changed"].get("before", []) == before, row.dataset
    return {d["label"]: d for d in w.what_if["datasets"]}


def test_what_if_preview_of_edited_values(widget: LineageExplorer, tracked: dict) -> None:
    run = tracked["run"]
    orders, cust = node_of(tracked, "orders"), node_of(tracked, "cust")
    # an order of customer c that passes the filter (amount > 50): it reaches out
    r = next(i for i, (_, c, amount) in enumerate(ORDERS) if amount > 50 and c == "c")
    widget.selected = orders  # its records on show, as after a click on the node
    assert widget.records["types"] == [None, "int", "string", "int"]
    # what the browser sends: the typed text, converted to the column's type (int)
    send(widget, type="edit", node=orders, row=r, column="order_id", value=" 1000")
    assert widget.error == ""
    assert widget.edited == {orders: {r: {"order_id": 1000}}}
    send(widget, type="what_if")
    preview = run.what_if(edit={tracked["orders"]: {r: {"order_id": 1000}}})
    shown = check_preview(widget, run, preview)
    # from the data alone: the order's records in big and joined change, the totals not
    for name in ("big", "joined"):
        changed = shown[name]["changed"]
        assert changed["before"] == [{"order_id": ORDERS[r][0]}], name
        row = dict(zip(changed["columns"], changed["rows"][0]))
        assert row["order_id"] == 1000 and row["amount"] == ORDERS[r][2], name
    assert shown["out"]["status"] == "same"
    wi = widget.what_if
    assert wi["drop"] == []
    assert wi["edit"] == [
        {
            "id": int(orders[1:]),
            "row": r,
            "column": "order_id",
            "old": ORDERS[r][0],
            "new": 1000,
            "node": orders,
            "label": "orders",
        }
    ]
    assert wi["nodes"][orders] == "edited" and cust not in wi["nodes"]
    assert wi["nodes"][op_node(widget, "join")] == "changed"


def test_what_if_preview_of_edits_and_drops_together(
    widget: LineageExplorer, tracked: dict
) -> None:
    run = tracked["run"]
    orders, cust = node_of(tracked, "orders"), node_of(tracked, "cust")
    r = next(i for i, (_, c, amount) in enumerate(ORDERS) if amount > 50 and c == "c")
    far = next(i for i in range(PAGE_SIZE, len(ORDERS)) if ORDERS[i][2] > 50)
    widget.selected = orders
    send(widget, type="drop", node=cust, row=1, on=True)  # customer b
    send(widget, type="edit", node=orders, row=r, column="order_id", value="1000")
    # from Python, a typed value, on a row of another page (read from the source)
    widget.mark_edit(far, "order_id", 4200, node=orders)
    assert widget.error == ""
    assert widget.dropped == {cust: [1]}
    assert widget.edited == {orders: {r: {"order_id": 1000}, far: {"order_id": 4200}}}
    send(widget, type="what_if")
    preview = run.what_if(
        drop={tracked["cust"]: [1]},
        edit={tracked["orders"]: {r: {"order_id": 1000}, far: {"order_id": 4200}}},
    )
    shown = check_preview(widget, run, preview)
    joined = shown["joined"]
    n_b = sum(1 for _, c, amount in ORDERS if amount > 50 and c == "b")
    assert joined["counts"]["removed"] == n_b
    assert sorted(b["order_id"] for b in joined["changed"]["before"]) == sorted(
        [ORDERS[r][0], ORDERS[far][0]]
    )
    wi = widget.what_if
    assert wi["nodes"][cust] == "dropped" and wi["nodes"][orders] == "edited"
    assert [(e["row"], e["old"], e["new"]) for e in wi["edit"]] == [
        (r, ORDERS[r][0], 1000),
        (far, ORDERS[far][0], 4200),
    ]
    assert wi["drop"][0]["rows"] == [1]

    # clear_what_if forgets the edits with the drops
    send(widget, type="clear_what_if")
    assert widget.edited == {} and widget.dropped == {} and widget.what_if == {}
    send(widget, type="what_if")
    assert "mark records" in widget.error and "edit" in widget.error


def test_edit_unmark_and_null(widget: LineageExplorer, tracked: dict) -> None:
    orders = node_of(tracked, "orders")
    widget.selected = orders
    send(widget, type="edit", node=orders, row=3, column="amount", value="12")
    send(widget, type="edit", node=orders, row=3, column="cust_id", value="")  # null
    send(widget, type="edit", node=orders, row=4, column="amount", value="13")
    assert widget.error == ""
    assert widget.edited == {orders: {3: {"amount": 12, "cust_id": None}, 4: {"amount": 13}}}
    # typing the original value back forgets the edit
    send(widget, type="edit", node=orders, row=3, column="amount", value=str(ORDERS[3][2]))
    assert widget.edited == {orders: {3: {"cust_id": None}, 4: {"amount": 13}}}
    send(widget, type="edit", node=orders, row=3, column="cust_id", unmark=True)
    assert widget.edited == {orders: {4: {"amount": 13}}}
    widget.unmark_edit(4, "amount", node=orders)
    assert widget.edited == {} and widget.error == ""
    widget.unmark_edit(4, "amount", node=orders)  # nothing to forget: no error
    assert widget.edited == {}
    # an edit and a drop of the same record: kept apart, the drop wins in the engine
    send(widget, type="drop", node=orders, row=5, on=True)
    send(widget, type="edit", node=orders, row=5, column="amount", value="1")
    assert widget.dropped == {orders: [5]} and widget.edited == {orders: {5: {"amount": 1}}}
    widget.clear_what_if(keep_marks=True)
    assert widget.edited == {orders: {5: {"amount": 1}}}
    widget.clear_what_if()
    assert widget.edited == {} and widget.dropped == {}


def test_bad_edits_say_what_is_wrong(widget: LineageExplorer, tracked: dict) -> None:
    orders, out = node_of(tracked, "orders"), node_of(tracked, "out")
    widget.selected = orders
    send(widget, type="edit", node=orders, row=2, column="order_id", value="7")
    assert widget.edited == {orders: {2: {"order_id": 7}}}

    def refused(**content: Any) -> str:
        send(widget, type="edit", **content)
        assert widget.edited == {orders: {2: {"order_id": 7}}}  # unchanged
        e = widget.error
        assert e and "Traceback" not in e and "py4j" not in e.lower() and "java" not in e
        return e

    e = refused(node=orders, row=2, column="amout", value="5")
    assert "'amout'" in e and "order_id, cust_id, amount" in e, e
    e = refused(node=orders, row=2, column="amount", value="lots")
    assert "orders.amount" in e and "'lots'" in e and "int" in e, e
    assert "whole number" in e and "empty for null" in e, e
    e = refused(node=orders, row=2, column="amount", value="2.5")
    assert "whole number" in e, e
    e = refused(node=orders, row=2, column="amount", value="99999999999")
    assert "-2147483648 to 2147483647" in e, e
    e = refused(node=out, row=0, column="total", value="5")
    assert "derived" in e and "source" in e, e
    e = refused(node=orders, row=10_000, column="amount", value="5")
    assert "0..44" in e, e
    # a good edit clears the error; the Python API raises the same messages
    send(widget, type="edit", node=orders, row=2, column="amount", value="60")
    assert widget.error == ""
    with pytest.raises(ValueError, match="whole number"):
        widget.mark_edit(2, "amount", "sixty", node=orders)
    with pytest.raises(ValueError, match="no column 'amout'"):
        widget.mark_edit(2, "amout", 60, node=orders)


@pytest.mark.parametrize(
    ("dtype", "text", "value"),
    [
        ("int", "42", 42),
        ("bigint", " -7 ", -7),
        ("int", "42.0", 42),
        ("smallint", "", None),
        ("double", "3.5", 3.5),
        ("float", "2", 2.0),
        ("double", "null", None),
        ("boolean", "true", True),
        ("boolean", "No", False),
        ("boolean", "0", False),
        ("string", "west", "west"),
        ("string", " padded ", " padded "),
        ("string", "", None),
        ("string", "null", "null"),  # text: only the empty text is null
        ("date", "2024-03-02", datetime.date(2024, 3, 2)),
        ("date", "", None),
        ("timestamp", "2024-03-02 14:30:00", datetime.datetime(2024, 3, 2, 14, 30)),
        ("decimal(10,2)", "12.5", decimal.Decimal("12.50")),
    ],
)
def test_typed_text_becomes_the_columns_type(dtype: str, text: str, value: Any) -> None:
    got = _convert(text, dtype, "ds.col")
    assert got == value and type(got) is type(value)
    # what the `edited` trait holds converts back to the same value
    assert _convert(_edit_json(got), dtype, "ds.col") == value


@pytest.mark.parametrize(
    ("dtype", "text", "hint"),
    [
        ("int", "x", "whole number"),
        ("tinyint", "300", "-128 to 127"),
        ("double", "3,5", "a number such as 3.5"),
        ("boolean", "maybe", "true or false"),
        ("date", "03/02/2024", "YYYY-MM-DD"),
        ("timestamp", "noon", "YYYY-MM-DD HH:MM:SS"),
        ("decimal(5,2)", "1234", "at most 3 digit(s) before the point and 2 after"),
        ("array<int>", "[1]", "run.what_if(edit=...)"),
    ],
)
def test_text_of_another_type_is_refused_with_a_hint(dtype: str, text: str, hint: str) -> None:
    with pytest.raises(ValueError) as err:
        _convert(text, dtype, "ds.col")
    assert "ds.col" in str(err.value) and hint in str(err.value) and dtype in str(err.value)


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
