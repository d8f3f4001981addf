"""Why-not provenance (``Run.why_not``) against the data itself: every order and
customer either reaches the output or is reported dropped by the step, with the values,
that a direct evaluation in Python says dropped it."""

from __future__ import annotations

from typing import Any

import pytest

import tensprov_lab

pytestmark = pytest.mark.spark

ORDERS = [
    (i, None if i % 17 == 0 else i % 9, None if i % 13 == 0 else float((i * 7) % 50))
    for i in range(150)
]
CUSTOMERS = [(c, f"r{c % 3}") for c in range(2, 11)]  # customers 0, 1 and 9..: some missing


@pytest.fixture(scope="module")
def retail(spark: Any) -> Any:
    orders = spark.createDataFrame(ORDERS, "order_id long, cust_id long, amount double")
    customers = spark.createDataFrame(CUSTOMERS, "cust_id long, region string")
    with tensprov_lab.track(spark, name="why-not") as run:
        big = orders.filter("amount > 20")
        joined = big.join(customers, "cust_id")
        totals = joined.groupBy("region").agg({"amount": "sum"})
    return run, orders, customers, totals


def _expected_order(o: tuple) -> tuple[str, str | None, dict[str, list] | None]:
    _, cust, amount = o
    if amount is None or not amount > 20:
        return "dropped", "filter", {"amount": [amount]}
    if cust not in {c for c, _ in CUSTOMERS}:
        return "dropped", "join", {"cust_id": [cust]}
    return "reaches", None, None


def test_every_order_dropped_where_python_says(retail: Any) -> None:
    run, orders, _, totals = retail
    table = run.why_not(totals, source=orders, rows=list(range(len(ORDERS))))
    assert list(table["row"]) == list(range(len(ORDERS)))  # one stop each here
    for (_, r), o in zip(table.iterrows(), ORDERS):
        status, op, values = _expected_order(o)
        assert r["status"] == status, (o, r.to_dict())
        if status == "reaches":
            assert r["reason"].startswith("reaches rows")
            continue
        assert r["operation"] == op
        assert r["input"] == ("orders" if op == "filter" else "big")
        got = {k: [None if x != x else x for x in v] for k, v in r["values"].items()}
        assert got == values, (o, r.to_dict())
        assert r["columns"] == list(values)
    at_join = table[table["operation"] == "join"]
    assert len(at_join) > 0
    assert all("no record of customers matches it on cust_id" in x for x in at_join["reason"])


def test_customers_without_a_big_order_are_dropped_at_the_join(retail: Any) -> None:
    run, _, customers, totals = retail
    table = run.why_not(totals, source=customers, rows=list(range(len(CUSTOMERS))))
    kept_custs = {o[1] for o in ORDERS if o[2] is not None and o[2] > 20}
    for (_, r), (cust, _) in zip(table.iterrows(), CUSTOMERS):
        if cust in kept_custs:
            assert r["status"] == "reaches"
        else:
            assert (r["status"], r["operation"], r["values"]) == (
                "dropped", "join", {"cust_id": [cust]},
            )  # fmt: skip
            assert "no record of big matches it" in r["reason"]


def test_where_picks_candidates_in_every_source_that_has_the_columns(retail: Any) -> None:
    run, _, _, totals = retail
    table = run.why_not(totals, where="cust_id = 1")  # an unknown customer: no customers row
    assert set(table["source"]) == {"orders"}
    assert set(table["status"]) == {"dropped"}
    want = [i for i, o in enumerate(ORDERS) if o[1] == 1]
    assert sorted(table["row"]) == want
    both = run.why_not(totals, where="cust_id = 4")
    assert set(both["source"]) == {"orders", "customers"}
    with pytest.raises(ValueError, match="not a predicate over any source"):
        run.why_not(totals, where="nosuchcolumn = 1")
    with pytest.raises(ValueError, match="rows= needs source="):
        run.why_not(totals, rows=[1])


def test_why_not_on_a_loaded_run_without_values(retail: Any, tmp_path: Any) -> None:
    run, orders, _, totals = retail
    tensprov_lab.save(tmp_path / "w", runs=run)
    (loaded,) = tensprov_lab.load(tmp_path / "w")
    try:
        live = run.why_not(totals, source=orders, rows=[0, 1, 2, 3], values=False)
        saved = loaded.why_not("totals", source="orders", rows=[0, 1, 2, 3], values=False)
        assert live.astype(str).values.tolist() == saved.astype(str).values.tolist()
        with pytest.raises(LookupError, match="loaded from"):
            loaded.why_not("totals", source="orders", rows=[0])
    finally:
        loaded.forget()
