"""A small orders / customers pair for the tests of what happens to a run after capture
(saving, exporting): ``cust`` joins them, ``amount`` is filtered and summed."""

from __future__ import annotations

from typing import Any


def orders_and_customers(spark: Any, orders: int, customers: int, amounts: int) -> tuple[Any, Any]:
    """``orders`` orders (``order_id``, ``cust``, ``amount`` in ``0..amounts-1``) and
    ``customers`` customers (``cust``, ``region`` r0–r2)."""
    o = spark.createDataFrame(
        [(i, i % customers, float(i % amounts)) for i in range(orders)],
        "order_id long, cust long, amount double",
    )
    c = spark.createDataFrame(
        [(k, f"r{k % 3}") for k in range(customers)], "cust long, region string"
    )
    return o, c
