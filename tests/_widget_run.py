"""A small tracked run (orders filtered, joined to customers, grouped by region), its
explorer, and how the tests drive the explorer as its front end would (shared by the
widget and what-if panel tests)."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import functions as F

import tensprov_lab
from tensprov_lab.notebook._widget import LineageExplorer

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
