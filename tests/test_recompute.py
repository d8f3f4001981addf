"""Recomputation of intermediate records and what-if previews, against full evaluation."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd
import pytest
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

import tensprov_lab
from tensprov_lab._run import ROW
from tests._replays import by_row, driver_and_job, job_replay

pytestmark = pytest.mark.spark

ORDERS = [
    (1, 10, 5.0, [1, 2]), (2, 10, 60.0, [3]), (3, 11, 70.0, []), (4, 12, 80.0, [4, 5, 6]),
    (5, 13, 55.0, [7]), (6, 11, 90.0, [8, 9]), (7, 99, 65.0, [1]), (8, 12, 20.0, [2]),
]  # fmt: skip
CUSTOMERS = [(10, "ann", "west"), (11, "bob", "east"), (11, "bob2", "east"),
             (12, "cy", "west"), (13, "dee", "north")]  # fmt: skip


@pytest.fixture(scope="module")
def pipeline(spark: Any) -> dict[str, Any]:
    orders = spark.createDataFrame(ORDERS, "oid int, cid int, amount double, items array<int>")
    cust = spark.createDataFrame(CUSTOMERS, "cid int, name string, region string")
    with tensprov_lab.track(spark, name="recompute") as run:
        big = orders.filter(F.col("amount") > 50).withColumn("tax", F.col("amount") * 0.2)
        joined = big.join(cust, "cid")
        ranked = joined.withColumn(
            "rank", F.row_number().over(Window.partitionBy("region").orderBy("amount"))
        )
        top = ranked.filter(F.col("rank") <= 2)
        per_region = joined.groupBy("region").agg(
            F.sum("amount").alias("total"), F.count("*").alias("n")
        )
        items = big.select("oid", F.explode("items").alias("item"))
        both = big.select("oid", "cid").union(orders.select("oid", "cid")).distinct()
        best = joined.orderBy(F.desc("amount"), "oid").limit(3)
        kept = orders.join(cust, "cid", "left_semi")
        regions = per_region.select("region", (F.col("total") / F.col("n")).alias("avg"))
    return {k: v for k, v in locals().items() if isinstance(v, DataFrame) or k == "run"}


DERIVED = ["big", "joined", "ranked", "top", "per_region", "items", "both", "best", "kept",
           "regions"]  # fmt: skip


def full(run: Any, df: DataFrame) -> pd.DataFrame:
    """Every record with its row index, read from the whole annotated plan."""
    return run.rows(df)


@pytest.mark.parametrize("name", DERIVED)
def test_recomputed_records_equal_the_full_dataset(pipeline: dict, name: str) -> None:
    run, df = pipeline["run"], pipeline[name]
    everything = full(run, df)
    n = run.dataset(df).n_rows
    assert len(everything) == n and everything[ROW].tolist() == list(range(n))
    # every single row, and a few sets of rows, recomputed on their lineage alone
    picks = [[r] for r in range(n)] + [list(range(0, n, 2)), [n - 1, 0]] if n else [[]]
    for rows in picks:
        got = run.rows(df, rows=rows)
        want = everything[everything[ROW].isin(rows)].reset_index(drop=True)
        pd.testing.assert_frame_equal(got, want, check_dtype=False)


def test_recomputed_flag_and_materialization_policy(pipeline: dict) -> None:
    run = pipeline["run"]
    m = run.materialized.set_index("dataset")["reason"].to_dict()
    # outputs of the pipeline and the window's input are kept; the rest is recomputed
    assert m["joined"] == "input of a contextual operation"
    for sink in ("top", "items", "both", "best", "kept", "regions"):
        assert m[sink] == "pipeline output"
    assert "big" not in m and "per_region" not in m and "ranked" not in m
    assert run.rows(pipeline["big"], rows=[0]).attrs["recomputed"] is True
    assert run.rows(pipeline["ranked"], rows=[0]).attrs["recomputed"] is True
    assert run.rows(pipeline["top"], rows=[0]).attrs["recomputed"] is False
    assert run.rows(pipeline["orders"], rows=[0]).attrs["recomputed"] is False


def test_recomputation_reads_only_lineage_related_source_records(pipeline: dict) -> None:
    from tensprov_lab.replay._replay import _restricted

    run = pipeline["run"]
    tracker = run._tracker
    big = run.dataset(pipeline["big"]).id
    restricted, small = _restricted(tracker, big, np.array([0, 2]))
    assert small  # a few records only: replayed in the low-latency session
    plan = str(restricted.treeString())
    # the source is cut down to the keys of the two records' backward lineage
    assert plan.count(" IN (") == 1
    assert run.backward(pipeline["big"], rows=[0, 2])[pipeline["orders"]].tolist() == [1, 3]
    in_list = plan.split(" IN (", 1)[1].split("\n", 1)[0]
    orders = tracker.by_ds[run.dataset(pipeline["orders"]).id]
    keys = orders.ki.values(np.array([1, 3]))
    assert [int(k) for k in re.findall(r"\d+", in_list)] == keys.tolist()
    # past a materialized dataset (the window's input) the replay reads Spark's cache
    per_region = run.dataset(pipeline["per_region"]).id
    restricted, small = _restricted(tracker, per_region, np.array([0]))
    assert " IN (" not in str(restricted.treeString()) and not small


def test_a_few_records_replay_in_one_task(spark: Any) -> None:
    """Inner joins of a few records pair their sides in place and each source is read
    as one partition, so the replay has no shuffle; an outer join keeps Spark's join.
    Either way the records equal the full dataset's."""
    from tensprov_lab.replay._replay import _restricted

    orders = spark.createDataFrame(ORDERS, "oid int, cid int, amount double, items array<int>")
    cust = spark.createDataFrame(CUSTOMERS, "cid int, name string, region string")
    with tensprov_lab.track(spark, name="one-task") as run:
        inner = orders.join(cust, "cid").withColumn("tax", F.col("amount") * 0.2)
        outer = orders.join(cust, "cid", "left").withColumn("tax", F.col("amount") * 0.2)
        sink = inner.groupBy("region").count().union(outer.groupBy("region").count())
    tracker = run._tracker
    for df, outer_join in ((inner, False), (outer, True)):
        ds = run.dataset(df).id
        plan, small = _restricted(tracker, ds, np.array([1]))
        assert small
        physical = str(
            tracker.jvm.to_df(plan, tracker.replay_spark)._jdf.queryExecution().executedPlan()
        )
        if not outer_join:
            assert "Exchange" not in physical and "CartesianProduct" in physical, physical
        else:  # Spark's own join (whether it shuffles is Spark's choice)
            assert "CartesianProduct" not in physical and "Join" in physical, physical
        everything = run.rows(df)
        for rows in ([r] for r in range(len(everything))):
            got = run.rows(df, rows=rows)
            assert got.attrs["recomputed"] is True
            want = everything[everything[ROW].isin(rows)].reset_index(drop=True)
            pd.testing.assert_frame_equal(got, want, check_dtype=False)
    assert run.rows(sink)["count"].sum() == len(run.rows(inner)) + len(run.rows(outer))


def test_sources_are_cached_for_recomputation_unless_told_not_to(spark: Any) -> None:
    adaptive = spark.conf.get("spark.sql.adaptive.enabled")
    results = {}
    for policy in ("auto", "none"):
        src = spark.createDataFrame([(i, i % 3) for i in range(30)], "id int, g int")
        other = spark.createDataFrame([(g, f"g{g}") for g in range(3)], "g int, name string")
        with tensprov_lab.track(spark, materialize=policy) as run:
            joined = src.filter(F.col("id") > 4).join(other, "g")
            out = joined.groupBy("name").count()
        assert run.dataset(src).materialized == ""
        got = run.rows(joined, rows=[0, 7])
        everything = run.rows(joined)
        want = everything[everything[ROW].isin([0, 7])].reset_index(drop=True)
        pd.testing.assert_frame_equal(got, want, check_dtype=False)
        assert got.attrs["recomputed"] is True
        results[policy] = run
        reasons = run.materialized.set_index("dataset")["reason"].to_dict()
        if policy == "auto":
            # the first replay caches the keyed sources it reads, and says so
            assert reasons["src"] == "source, cached for recomputation"
            assert reasons["other"] == "source, cached for recomputation"
            assert run._tracker.by_ds[run.dataset(src).id].cached.is_cached
        else:
            assert "src" not in reasons and "other" not in reasons
            assert run._tracker.by_ds[run.dataset(src).id].cached is None
        del out
    # replays run in a session of their own: the user's settings are untouched
    assert spark.conf.get("spark.sql.adaptive.enabled") == adaptive
    replay = results["auto"]._tracker.replay_spark
    assert replay.conf.get("spark.sql.adaptive.enabled") == "false"
    assert replay.sparkContext is spark.sparkContext


def test_window_replay_sees_the_whole_partition(spark: Any) -> None:
    df = spark.createDataFrame([(i, i % 2, float(i)) for i in range(8)], "id int, g int, v double")
    with tensprov_lab.track(spark) as run:
        w = df.withColumn("s", F.sum("v").over(Window.partitionBy("g")))
        out = w.filter(F.col("id") > 2).select("id", "s")
        out2 = out.withColumn("t", F.col("s") + 1)
    # the window's input is a source: it stays where it is, and is read whole
    assert run.dataset(df).role == "source" and not run.dataset(df).materialized
    everything = run.rows(out)
    got = run.rows(out, rows=[0])
    assert got.attrs["recomputed"] is True
    assert got.iloc[0].tolist() == everything.iloc[0].tolist()
    # s is the sum over the whole partition, not over the replayed record alone
    assert got["s"].iloc[0] == sum(float(i) for i in range(8) if i % 2 == got["id"].iloc[0] % 2)
    assert run.rows(out2, rows=[1]).iloc[0]["t"] == everything.iloc[1]["s"] + 1


def test_non_deterministic_results_are_kept(spark: Any) -> None:
    df = spark.range(20)
    with tensprov_lab.track(spark) as run:
        noisy = df.withColumn("r", F.rand())
        picked = noisy.filter(F.col("id") < 5)
    assert run.dataset(noisy).materialized == "not deterministic"
    first = run.rows(picked, rows=[1, 3])
    again = run.rows(picked, rows=[1, 3])
    pd.testing.assert_frame_equal(first, again)
    assert first["r"].tolist() == run.rows(noisy, rows=[1, 3])["r"].tolist()


# ---------------------------------------------------------------------------------------------
# what-if


def records(df: DataFrame) -> list[tuple]:
    return sorted((tuple(r) for r in df.collect()), key=repr)


def apply_preview(before: pd.DataFrame, preview: Any, label: str, cols: list[str]) -> list:
    """The dataset after the change, from its records before and the preview."""
    removed = set(preview.removed[label][ROW]) if len(preview.removed[label]) else set()
    changed = preview.changed[label]
    changed_rows = set(changed[ROW]) if len(changed) else set()
    keep = before[~before[ROW].isin(removed | changed_rows)]
    out = [tuple(r) for r in keep[cols].itertuples(index=False)]
    if len(changed):
        out += [tuple(r) for r in changed[cols].itertuples(index=False)]
    if len(preview.added[label]):
        out += [tuple(r) for r in preview.added[label][cols].itertuples(index=False)]
    return sorted(out, key=repr)


def build(orders: DataFrame, cust: DataFrame) -> dict[str, DataFrame]:
    big = orders.filter(F.col("amount") > 50)
    joined = big.join(cust, "cid")
    per_region = joined.groupBy("region").agg(F.sum("amount").alias("total"))
    both = big.select("oid", "cid").union(cust.select(F.col("cid").alias("oid"), "cid"))
    return {"big": big, "joined": joined, "per_region": per_region, "both": both}


@pytest.mark.parametrize(
    "change",
    [
        {"drop": {"orders": [1]}},
        {"drop": {"orders": [1, 3], "cust": [2]}},
        {"drop": {"cust": [1, 2]}},
        {"edit": {"orders": {3: {"oid": 40}}}},
        {"edit": {"cust": {0: {"name": "ANN", "region": "south"}}}},
        {"edit": {"orders": {5: {"amount": 10.0}}}},  # leaves the filter: no join after it
        # dropped and edited: the drop wins
        {"drop": {"orders": [3]}, "edit": {"orders": {3: {"amount": 999.0}, 4: {"oid": 41}}}},
    ],
)
def test_what_if_equals_rerunning_on_the_changed_inputs(spark: Any, change: dict) -> None:
    o_rows = [r[:3] for r in ORDERS]
    orders = spark.createDataFrame(o_rows, "oid int, cid int, amount double")
    cust = spark.createDataFrame(CUSTOMERS, "cid int, name string, region string")
    with tensprov_lab.track(spark) as run:
        out = build(orders, cust)
    srcs = {"orders": orders, "cust": cust}
    drop = {srcs[k]: v for k, v in change.get("drop", {}).items()}
    edit = {srcs[k]: v for k, v in change.get("edit", {}).items()}
    preview = run.what_if(drop=drop, edit=edit)
    # the same change applied to the input data, and the pipeline run again
    data = {"orders": [list(r) for r in o_rows], "cust": [list(r) for r in CUSTOMERS]}
    cols = {"orders": ["oid", "cid", "amount"], "cust": ["cid", "name", "region"]}
    for k, rows in change.get("edit", {}).items():
        for r, vals in rows.items():
            for c, v in vals.items():
                data[k][r][cols[k].index(c)] = v
    for k, rows in change.get("drop", {}).items():
        data[k] = [r for i, r in enumerate(data[k]) if i not in set(rows)]
    new_o = spark.createDataFrame([tuple(r) for r in data["orders"]], orders.schema)
    new_c = spark.createDataFrame([tuple(r) for r in data["cust"]], cust.schema)
    again = build(new_o, new_c)
    checked = 0
    for name, df in out.items():
        label = run.dataset(df).label
        if label in preview.not_previewable:
            continue
        if label not in preview.removed:  # the change does not reach it
            assert records(again[name]) == records(df)
            continue
        before = run.rows(df)
        assert apply_preview(before, preview, label, df.columns) == records(again[name])
        checked += 1
    assert checked >= 1


def test_what_if_reports_what_it_cannot_preview(spark: Any) -> None:
    orders = spark.createDataFrame([r[:3] for r in ORDERS], "oid int, cid int, amount double")
    cust = spark.createDataFrame(CUSTOMERS, "cid int, name string, region string")
    with tensprov_lab.track(spark) as run:
        lonely = orders.join(cust, "cid", "left_anti")
        ranked = orders.withColumn("r", F.rank().over(Window.orderBy("amount")))
        top = orders.orderBy("amount").limit(2)
        joined = orders.join(cust, "cid")
    p = run.what_if(drop={cust: [0]})
    assert "anti" in p.not_previewable[run.dataset(lonely).label]
    p = run.what_if(drop={orders: [0]})
    assert "contextual" in p.not_previewable[run.dataset(ranked).label]
    assert "limit" in p.not_previewable[run.dataset(top).label]
    p = run.what_if(edit={orders: {1: {"cid": 12}}})
    assert "key" in p.not_previewable[run.dataset(joined).label]
    with pytest.raises(ValueError, match="derived"):
        run.what_if(drop={joined: [0]})
    with pytest.raises(KeyError, match="no column"):
        run.what_if(edit={orders: {1: {"nope": 1}}})
    with pytest.raises(IndexError):
        run.what_if(drop={orders: [100]})


def test_kept_records_are_read_by_key(spark: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Some records of a kept (materialized) join, union or aggregate are read with a
    filter on their keys, not by bringing the whole dataset to Python."""
    from tensprov_lab.capture.recording._tracker import Tracker

    orders = spark.createDataFrame(ORDERS, "oid int, cid int, amount double, items array<int>")
    cust = spark.createDataFrame(CUSTOMERS, "cid int, name string, region string")
    with tensprov_lab.track(spark, name="kept") as run:
        inner = orders.join(cust, "cid")
        outer = orders.join(cust, "cid", "left")  # order 7's customer is missing: nulls
        both = orders.select("oid", "cid").union(cust.select(F.col("cid").alias("oid"), "cid"))
        sums = orders.groupBy("cid").agg(F.sum("amount").alias("s"))
        rolled = orders.rollup("cid").agg(F.count("*").alias("n"))
    conditions: list[Any] = []
    original = Tracker._rows_condition

    def spy(self: Tracker, node: Any, rows: np.ndarray) -> Any:
        conditions.append(original(self, node, rows))
        return conditions[-1]

    monkeypatch.setattr(Tracker, "_rows_condition", spy)
    datasets = [inner, outer, both, sums, rolled]
    for df in datasets:
        assert run.dataset(df).materialized  # kept: read, not recomputed
        everything = full(run, df)
        n = len(everything)
        for rows in ([0], [n - 1], list(range(0, n, 3))):
            got = run.rows(df, rows=rows)
            want = everything[everything[ROW].isin(rows)].reset_index(drop=True)
            pd.testing.assert_frame_equal(got, want, check_dtype=False)
            assert not got.attrs["recomputed"]
    assert len(conditions) == 3 * len(datasets)
    assert all(c is not None for c in conditions), conditions
    # the missing side of the outer join is asked for as null
    assert any("IS NULL" in str(c) for c in conditions)


def _jobs(spark: Any) -> int:
    return len(spark.sparkContext.statusTracker().getJobIdsForGroup())


def test_a_few_records_replay_in_the_driver_without_a_job(spark: Any) -> None:
    """Once the sources are cached, a replay through projections, filters, joins of
    every kind, sorts (and a top-k limit) and unions runs in the driver: no Spark job,
    and the very records (and dtypes) the replay as a Spark job gives.  An aggregate in
    between, or a dataset whose sources are not cached yet, takes the job."""
    from tensprov_lab.replay import _replay

    orders = spark.createDataFrame(ORDERS, "oid int, cid int, amount double, items array<int>")
    cust = spark.createDataFrame(CUSTOMERS, "cid int, name string, region string")
    with tensprov_lab.track(spark, name="driver-replay") as run:
        big = orders.filter(F.col("amount") > 10).withColumn("day", F.lit("2026-01-01"))
        joins = {
            how: big.join(cust, "cid", how).withColumn("tax", F.col("amount") * 0.2)
            for how in ("inner", "left", "right", "full", "left_semi", "left_anti")
        }
        theta = big.join(cust.withColumnRenamed("cid", "c2"), F.col("cid") < F.col("c2"))
        both = joins["inner"].select("oid", "name").union(joins["left"].select("oid", "name"))
        ranked = joins["full"].orderBy(F.col("name").desc_nulls_first(), "oid").limit(5)
        counted = joins["inner"].groupBy("region").count()
    tracker = run._tracker
    first = run.rows(joins["inner"], rows=[0])  # the first recomputation caches the sources
    assert first.attrs["recomputed"] is True
    for df in [big, both, ranked, *joins.values(), counted, theta]:
        ds = run.dataset(df).id
        n = run.dataset(df).n_rows or 0
        for rows in [np.arange(n)[:1], np.arange(n)[n // 2 :], np.arange(n)]:
            rows = rows.astype(np.int64)
            before = _jobs(spark)
            if df is counted:
                assert _replay._local(tracker, ds, rows) is None
                continue
            local = _replay._local(tracker, ds, rows)
            assert local is not None, run.dataset(df).label
            assert _jobs(spark) == before  # no Spark job ran
            (got, got_idx), (want, want_idx) = by_row(local), by_row(job_replay(run, df, rows))
            np.testing.assert_array_equal(got_idx, want_idx)
            pd.testing.assert_frame_equal(got, want)
            assert set(rows) <= set(got_idx.tolist())
        # and through the public call
        everything = run.rows(df)
        picked = run.rows(df, rows=[0, n - 1] if n else [])
        want_rows = everything[everything[ROW].isin([0, n - 1])].reset_index(drop=True)
        pd.testing.assert_frame_equal(picked, want_rows, check_dtype=False)
    assert tracker.jvm.replayer.getFailure() == ""  # no error made it answer "not here"


def test_driver_replay_is_skipped_for_uncached_sources(spark: Any) -> None:
    from tensprov_lab.replay import _replay

    orders = spark.createDataFrame(ORDERS, "oid int, cid int, amount double, items array<int>")
    with tensprov_lab.track(spark, name="not-cached", materialize="none") as run:
        big = orders.filter(F.col("amount") > 10)
    assert _replay._local(run._tracker, run.dataset(big).id, np.array([0])) is None
    assert run.rows(big, rows=[0]).attrs["recomputed"] is True
    assert _replay._local(run._tracker, run.dataset(big).id, np.array([0])) is None


def test_driver_replay_reads_every_column_type_as_the_job_does(spark: Any) -> None:
    """Cache batches decoded in the driver and sent as Arrow give the values and dtypes
    a replay run as a Spark job gives, for every Spark SQL type a source may hold."""
    import datetime as dt
    from decimal import Decimal

    schema = (
        "id int, flag boolean, b tinyint, sh smallint, l bigint, f float, d double, "
        "dec decimal(12,3), s string, bin binary, day date, ts timestamp, "
        "tsn timestamp_ntz, arr array<string>, m map<string,int>, "
        "st struct<x:int,y:string>"
    )
    rows = [
        (
            i, i % 2 == 0, i - 3, 1000 + i, 2**40 + i, i / 3, i * 1.5,
            Decimal(f"{i}.125"), f"s{i}", bytes([i, 255 - i]),
            dt.date(2026, 1, 1 + i), dt.datetime(2026, 1, 1, i, 30),
            dt.datetime(2020, 5, 5, 0, i), [f"a{i}", None], {"k": i}, (i, f"y{i}"),
        )
        for i in range(6)
    ]  # fmt: skip
    nulls = tuple([6] + [None] * 15)
    src = spark.createDataFrame([*rows, nulls], schema)
    other = spark.createDataFrame([(i, f"o{i}") for i in range(0, 8, 2)], "id int, o string")
    with tensprov_lab.track(spark, name="driver-types") as run:
        kept = src.filter(F.col("id") != 3).withColumn("l2", F.col("l") * 2)
        joined = kept.join(other, "id", "left")
        joined.groupBy("o").count()  # a sink: joined is an intermediate dataset
    tracker = run._tracker
    for df in (kept, joined):
        run.rows(df, rows=[0])  # the first recomputation caches the sources it reads
    # pyspark hands timestamps to pandas in UTC whatever the session's time zone
    zone = tracker.replay_spark.conf.get("spark.sql.session.timeZone")
    tracker.replay_spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        _compare_driver_and_job(run, [kept, joined])
    finally:
        tracker.replay_spark.conf.set("spark.sql.session.timeZone", zone)


def _compare_driver_and_job(run: Any, frames: list[Any]) -> None:
    tracker = run._tracker
    for df in frames:
        every = np.arange(run.dataset(df).n_rows or 0, dtype=np.int64)
        pair = driver_and_job(run, df, every)
        assert pair is not None
        (a, got_idx), (b, want_idx) = pair
        assert got_idx.tolist() == want_idx.tolist() == every.tolist()
        assert list(a.dtypes) == list(b.dtypes)
        for col in a.columns:  # object columns hold arrays, dicts and bytes
            assert [repr(v) for v in a[col]] == [repr(v) for v in b[col]], col
    assert tracker.jvm.replayer.getFailure() == ""
