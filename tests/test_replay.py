"""Replay: re-running a localized pipeline on just an output row's backward lineage
reproduces that row (SystemL's replay; DESIGN.md §6)."""

from __future__ import annotations

import pytest

import tensprov_lab

pytestmark = pytest.mark.spark


def _pipeline(orders, customers):  # noqa: ANN001, ANN202
    from pyspark.sql import functions as F

    big = orders.filter(F.col("amount") > 20)
    doubled = big.withColumn("double", F.col("amount") * 2)
    joined = doubled.join(customers, "cust_id")
    picked = joined.select("order_id", "region", "double", "tags").filter(F.col("region") != "west")
    exploded = picked.select("order_id", "region", "double", F.explode("tags").alias("tag"))
    return exploded.union(exploded.filter(F.col("tag") == "a"))


@pytest.fixture(scope="module")
def data(spark):  # noqa: ANN001, ANN201
    orders = spark.createDataFrame(
        [(i, i % 5, float((i * 37) % 60), ["a", "b"] if i % 3 else ["c"]) for i in range(30)],
        "order_id long, cust_id long, amount double, tags array<string>",
    )
    customers = spark.createDataFrame(
        [(0, "north"), (1, "west"), (2, "south"), (2, "east"), (3, "north"), (9, "nowhere")],
        "cust_id long, region string",
    )
    return orders, customers


def test_every_output_row_replays_from_its_lineage(spark, data) -> None:  # noqa: ANN001
    orders, customers = data
    with tensprov_lab.track(spark, name="replay") as run:
        out = _pipeline(orders, customers)
    assert not any(op.opaque for op in run.operations)
    records = run.rows(out).drop(columns=["_row"])
    assert len(records) > 10
    for i in range(len(records)):
        lin = run.backward(out, rows=[i])
        sub_orders = run.rows(orders, rows=lin[orders]).drop(columns=["_row"])
        sub_customers = run.rows(customers, rows=lin[customers]).drop(columns=["_row"])
        replayed = _pipeline(
            spark.createDataFrame(sub_orders, orders.schema),
            spark.createDataFrame(sub_customers, customers.schema),
        ).collect()
        expected = tuple(records.iloc[i])
        assert expected in [tuple(r) for r in replayed], (i, expected, replayed)
        assert len(lin[orders]) == 1 and len(lin[customers]) == 1
