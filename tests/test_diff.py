"""Run history and ``tensprov_lab.diff``: two versions of a pipeline compared by name,
records matched by their source lineage (checked against the data itself)."""

from __future__ import annotations

from typing import Any

import pytest

import tensprov_lab

pytestmark = pytest.mark.spark

ORDERS = [(i, i % 5, float((i * 7) % 40)) for i in range(120)]


def _versions(spark: Any) -> tuple[Any, Any, Any]:
    orders = spark.createDataFrame(ORDERS, "order_id long, cust long, amount double")
    with tensprov_lab.track(spark, name="diffed") as v1:
        big = orders.filter("amount > 20")
        out = big.withColumn("eur", big.amount * 0.5)
    with tensprov_lab.track(spark, name="diffed") as v2:
        big = orders.filter("amount > 25")  # the fix: a stricter threshold ...
        out = big.withColumn("eur", big.amount * 0.5 + (big.cust == 3).cast("double"))
        out = out.withColumn("flag", out.eur > 15)  # ... and a new column
    del out
    return orders, v1, v2


def test_history_and_versions(spark: Any) -> None:
    _, v1, v2 = _versions(spark)
    runs = tensprov_lab.history("diffed")
    assert runs[-2:] == [v1, v2]
    assert (v1.version, v2.version) == (len(runs) - 1, len(runs))


def test_diff_matches_records_by_source_lineage(spark: Any) -> None:
    _, v1, v2 = _versions(spark)
    d = tensprov_lab.diff(v1, v2)
    ops = d.operations.set_index("dataset")
    assert ops.loc["big", "change"] == "changed"
    assert "amount > 25" in ops.loc["big", "after"] and "amount > 20" in ops.loc["big", "before"]
    assert ops.loc["orders", "change"] == "same"
    rows = d.rows.set_index("dataset")
    kept1 = [o for o in ORDERS if o[2] > 20]
    kept2 = [o for o in ORDERS if o[2] > 25]
    assert (rows.loc["big", "before"], rows.loc["big", "after"]) == (len(kept1), len(kept2))
    (schema,) = d.schemas.to_dict("records")
    assert schema["dataset"] == "out" and schema["added"] == ["flag"]

    # the oracle: records keyed by the order they come from
    table = d.records["out"]
    gone = {o[0] for o in kept1} - {o[0] for o in kept2}
    changed = {o[0] for o in kept2 if o[1] == 3}
    order_of = {i: o[0] for i, o in enumerate(kept1)}  # v1's out rows: kept1 in scan order
    order_of_2 = {i: o[0] for i, o in enumerate(kept2)}
    got_gone = {order_of[r] for r in table.query("status == 'disappears'")["row_before"]}
    assert got_gone == gone
    assert table.query("status == 'appears'").empty
    changed_rows = table.query("status == 'changed'")
    assert {order_of_2[int(r)] for r in changed_rows["row_after"]} == changed
    for _, r in changed_rows.iterrows():
        assert r["columns"] == ["eur"] and r["after"]["eur"] == r["before"]["eur"] + 1.0
    same = table.query("status == 'same'")
    assert len(same) == len(kept2) - len(changed)
    for _, r in same.iterrows():
        assert order_of[int(r["row_before"])] == order_of_2[int(r["row_after"])]
    text = d.summary()
    assert f"records of out: 0 appears, {len(gone)} disappears, {len(changed)} changed" in text
    assert "changed big" in text


def test_a_diff_of_a_loaded_run_says_what_it_cannot_compare(spark: Any, tmp_path: Any) -> None:
    _, v1, v2 = _versions(spark)
    tensprov_lab.save(tmp_path / "v1", runs=v1)
    (old,) = tensprov_lab.load(tmp_path / "v1")
    try:
        d = tensprov_lab.diff(old, v2)
        table = d.records["out"]
        # lineage still matches records; values need the loaded run's records
        assert set(table["status"]) == {"same", "disappears"}
        assert any("values of out not compared" in n for n in d.notes)
    finally:
        old.forget()


def test_provdiff_magic(spark: Any) -> None:
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    _, v1, v2 = _versions(spark)
    ip = InteractiveShell.instance()
    assert ip.run_cell("%load_ext tensprov_lab").success
    n = len(tensprov_lab.history("diffed"))
    want = tensprov_lab.diff(v1, v2).summary()
    for line in ("%provdiff diffed", f"%provdiff diffed@{n - 1} diffed@{n}"):
        with capture_output() as cap:
            assert ip.run_cell(line).success
        assert want in cap.stdout
        tables = [o.data.get("text/plain", "") for o in cap.outputs]
        assert any("records of out that differ:" in t for t in tables)
    for line, message in [
        ("%provdiff nosuchrun", "run 'nosuchrun' has 0 version(s)"),
        (f"%provdiff diffed@1 diffed@{n + 1}", f"has versions 1..{n}, not '{n + 1}'"),
        ("%provdiff a b c", "give at most two runs"),
    ]:
        with capture_output():
            result = ip.run_cell(line)
        assert message in str(result.error_in_exec)


def test_the_explorer_marks_what_changed(spark: Any) -> None:
    orders = spark.createDataFrame(ORDERS, "order_id long, cust long, amount double")
    with tensprov_lab.track(spark, name="diff-view") as v1:
        big = orders.filter("amount > 20")
        out = big.withColumn("eur", big.amount * 0.5)
        extra = out.select("order_id")  # gone in the next version
    with tensprov_lab.track(spark, name="diff-view") as v2:
        big = orders.filter("amount > 25")
        out = big.withColumn("eur", big.amount * 0.5)
        late = out.filter("eur > 15")  # new in this version
    del extra, late
    d = tensprov_lab.diff(v1, v2)
    w = d.explore()
    change = dict(zip(d.operations["dataset"], d.operations["change"]))
    assert change["big"] == "changed" and change["late"] == "added"
    assert change["extra"] == "removed" and change["out"] == "same"
    marks = {}
    for node in w.graph["nodes"]:
        kind, ref = node["kind"], node["ref"]
        ds = v2.store.operations[ref].output if kind == "operation" else ref
        label = v2.store.datasets[ds].label
        want = change.get(label, "same")
        assert node["diff"] == (want if want in ("added", "changed") else ""), node["name"]
        marks[label] = node["diff"]
    assert marks["big"] == "changed" and marks["late"] == "added" and marks["out"] == ""
    diff = w.graph["diff"]
    assert diff["summary"].startswith("changes from diff-view: 1 changed, 1 added, 1 removed")
    assert diff["removed"] == [
        {"dataset": "extra", "expression": d.operations.set_index("dataset").loc["extra", "before"]}
    ]
    # the coarse view (datasets only) marks the datasets the same way
    w.coarse = True
    assert {n["name"]: n["diff"] for n in w.graph["nodes"]}["big"] == "changed"
