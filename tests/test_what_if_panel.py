"""The explorer's what-if panel (notebook/_what_if_panel.py): marking dropped records and
edited values, previews of their effect downstream, and what cannot be previewed."""

from __future__ import annotations

import datetime
import decimal
from typing import Any

import pytest
from pyspark.sql import functions as F

import tensprov_lab
from tensprov_lab.notebook._widget import PAGE_SIZE, LineageExplorer, _convert, _edit_json
from tests import _widget_run
from tests._widget_run import ORDERS, node_of, op_node, send

pytestmark = pytest.mark.spark

#: the tracked run and its explorer (fixtures pytest finds by these names)
tracked, widget = _widget_run.tracked, _widget_run.widget


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
