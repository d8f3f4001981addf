"""Recomputation and what-if over Spark Connect (tensprov_lab.replay._connect).

The random pipelines of ``test_replay_oracle`` over a Connect session: recomputed records
equal the dataset evaluated in full, a what-if preview equals running the pipeline again
on the changed inputs (or says why it cannot be previewed); the same pipeline on a
classic session and over Connect gives the same previews; the explorer's what-if panel
works over Connect.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tensprov_lab
from tests._connect_session import connect_session
from tests.test_capture_oracle import a_rows, b_rows
from tests.test_connect import _classic
from tests.test_replay_oracle import (
    _settings,
    check_recomputed,
    check_what_if,
    check_with_large_key_sets,
)

pytestmark = [pytest.mark.spark, pytest.mark.connect]

#: examples per property (each captures and replays over gRPC: seconds apiece)
EXAMPLES = int(os.environ.get("TENSPROV_CONNECT_REPLAY_EXAMPLES", "10"))


@pytest.fixture(scope="module")
def connect(spark: Any) -> Iterator[Any]:
    # the classic session first: one made once a Connect session exists would be remote
    with connect_session() as session:
        yield session


@settings(_settings(), max_examples=EXAMPLES)
@given(a=a_rows, b=b_rows, data=st.data())
def test_recomputed_records_equal_full_evaluation_over_connect(connect, a, b, data) -> None:  # noqa: ANN001
    check_recomputed(connect, a, b, data)


@settings(_settings(), max_examples=EXAMPLES)
@given(a=a_rows, b=b_rows, data=st.data())
def test_what_if_equals_rerun_on_changed_inputs_over_connect(connect, a, b, data) -> None:  # noqa: ANN001
    check_what_if(connect, a, b, data)


def test_what_if_through_aggregates_over_connect(connect) -> None:  # noqa: ANN001
    """Pipelines ending in a groupBy: previews from the deltas equal a re-run, and the
    deltas are used (Connect aggregates note their decomposition)."""
    used: list[str] = []

    @settings(_settings(), max_examples=EXAMPLES)
    @given(a=a_rows, b=b_rows, data=st.data())
    def check(a, b, data) -> None:  # noqa: ANN001
        used.extend(check_what_if(connect, a, b, data, group_last=True))

    check()
    assert used


@settings(_settings(), max_examples=max(EXAMPLES // 2, 1))
@given(a=a_rows, b=b_rows, data=st.data())
def test_replays_reading_sources_whole_or_by_key_join_over_connect(connect, a, b, data) -> None:  # noqa: ANN001
    check_with_large_key_sets(connect, a, b, data)


ORDERS = [(i, i % 5, float((i * 7) % 23)) for i in range(40)]
CUSTOMERS = [(c, f"r{c % 3}") for c in range(5)]


def _shop(s: Any, name: str) -> tuple[Any, dict[str, Any]]:
    from pyspark.sql import functions as F

    orders = s.createDataFrame(ORDERS, "order_id bigint, cust_id bigint, amount double")
    cust = s.createDataFrame(CUSTOMERS, "cust_id bigint, region string")
    with tensprov_lab.track(s, name=name) as run:
        big = orders.filter(F.col("amount") > 5)
        joined = big.join(cust, "cust_id")
        priced = joined.withColumn("eur", F.col("amount") * 2)
        out = priced.groupBy("region").agg(F.sum("eur").alias("total"), F.count("*").alias("n"))
    frames = {"orders": orders, "cust": cust, "big": big, "joined": joined, "priced": priced,
              "out": out}  # fmt: skip
    return run, frames


def _tables(preview: Any) -> dict[str, Any]:
    """A preview as plain data: per kind and dataset, its records sorted by row."""
    summary = preview.summary()
    # (a note names the operation by its expression, which each client writes its way)
    summary["note"] = summary["note"] != ""
    out: dict[str, Any] = {"summary": summary.to_dict("list")}
    for kind in ("removed", "changed", "added"):
        for label, frame in getattr(preview, kind).items():
            f = frame.sort_values("_row").reset_index(drop=True) if len(frame) else frame
            out[f"{kind} {label}"] = f.astype(object).where(f.notna(), None).to_dict("list")
    return out


def test_same_previews_and_records_as_a_classic_session(spark, connect) -> None:  # noqa: ANN001
    with _classic():
        classic, c = _shop(spark, "classic-shop")
    remote, r = _shop(connect, "connect-shop")
    changes = [
        ({"orders": [3, 8, 9]}, {}),
        ({"cust": [1]}, {}),
        ({}, {"orders": {4: {"amount": 30.0}, 11: {"amount": 1.0}}}),
        ({}, {"cust": {2: {"region": "zz"}}}),
        ({"orders": [0]}, {"orders": {6: {"amount": 2.5}}}),
    ]
    for drop, edit in changes:
        with _classic():
            want = classic.what_if(
                drop={c[k]: v for k, v in drop.items()} or None,
                edit={c[k]: v for k, v in edit.items()} or None,
            )
            want_tables = _tables(want)
        got = remote.what_if(
            drop={r[k]: v for k, v in drop.items()} or None,
            edit={r[k]: v for k, v in edit.items()} or None,
        )
        assert _tables(got) == want_tables, (drop, edit)
        assert got.incremental == want.incremental, (drop, edit)
    assert "out" in remote.what_if(drop={r["orders"]: [3]}).incremental
    rng = np.random.default_rng(0)
    for name in ("big", "joined", "priced", "out"):
        n = remote.dataset(r[name]).n_rows
        rows = sorted(rng.choice(n, size=min(3, n), replace=False).tolist())
        got = remote.rows(r[name], rows=rows)
        assert got.attrs["recomputed"]
        with _classic():
            want = classic.rows(c[name], rows=rows)
        pd.testing.assert_frame_equal(got, want, check_dtype=False)


def test_sources_are_cached_on_the_server_for_replays_unless_told_not_to(connect) -> None:  # noqa: ANN001
    from pyspark.sql import functions as F

    src = connect.createDataFrame([(i, i % 4) for i in range(50)], "id bigint, g bigint")
    with tensprov_lab.track(connect, name="cached") as run:
        odd = src.filter(F.col("id") % 2 == 1).withColumn("h", F.col("g") + 1)
    run._tracker.client_replays = False  # (replays on the server: test_client_replay.py)
    assert run.rows(odd, rows=[2])["id"].tolist() == [5]
    node = run._tracker.by_ds[run.dataset(src).id]
    assert node.kept is not None and node.kept.storageLevel.useMemory
    assert run.dataset(src).materialized == "source, cached for recomputation"
    # a replay reads the cached source: the server's plan scans it from memory
    from tensprov_lab.capture.plan import _proto as P
    from tensprov_lab.replay._connect import ConnectReplay

    replay = ConnectReplay(run._tracker)
    rel = replay._restrict(run.dataset(src).id, np.array([1, 2]))
    assert "InMemoryTableScan" in P.dataframe(connect, rel)._explain_string(extended=False)
    other = connect.createDataFrame([(i, i % 4) for i in range(50)], "id bigint, g bigint")
    with tensprov_lab.track(connect, name="uncached", materialize="none") as run2:
        odd2 = other.filter(F.col("id") % 2 == 1)
    run2._tracker.client_replays = True  # the client keeps no records either
    assert run2.rows(odd2, rows=[2])["id"].tolist() == [5]
    assert run2._tracker.by_ds[run2.dataset(other).id].kept is None
    assert run2.dataset(other).materialized == ""
    run.forget()  # unpersists the source kept for it
    assert not node.kept.storageLevel.useMemory
    run2.forget()


def test_what_if_says_what_cannot_be_replayed_over_connect(connect) -> None:  # noqa: ANN001
    from pyspark.sql import functions as F
    from pyspark.sql.window import Window

    src = connect.createDataFrame([(i, i % 3) for i in range(30)], "id bigint, g bigint")
    with tensprov_lab.track(connect, name="blocked") as run:
        some = src.sample(fraction=0.5, seed=3)
        firsts = src.orderBy("id").limit(10)
        ranked = src.withColumn("n", F.count("*").over(Window.partitionBy("g")))
        kept = some.filter("g > 0")
    assert run.dataset(firsts).n_rows == 10 and run.dataset(ranked).n_rows == 30
    preview = run.what_if(drop={src: [1, 2]})
    why = preview.not_previewable
    assert set(why) == {"some", "firsts", "ranked", "kept"}
    assert "a sample" in why["some"] and "a sample" in why["kept"] and "a limit" in why["firsts"]
    assert "contextual" in why["ranked"]
    # records after a sample are read by running its plan: the records captured
    whole = run.rows(kept)
    got = run.rows(kept, rows=[0, 2])
    pd.testing.assert_frame_equal(got, whole[whole["_row"].isin([0, 2])].reset_index(drop=True))


def test_explorer_what_if_panel_over_connect(connect) -> None:  # noqa: ANN001
    from tensprov_lab.notebook._widget import LineageExplorer

    run, frames = _shop(connect, "panel")
    w = run.explore()
    assert isinstance(w, LineageExplorer)
    nodes = {n["name"]: n["id"] for n in w.graph["nodes"] if n["kind"] != "operation"}
    w._handle_custom_msg({"type": "drop", "node": nodes["orders"], "row": 3, "on": True}, [])
    w._handle_custom_msg({"type": "what_if"}, [])
    assert w.error == ""
    preview = run.what_if(drop={frames["orders"]: [3]})
    shown = {run.store.datasets[d["id"]].label: d for d in w.what_if["datasets"]}
    assert sorted(shown) == sorted(preview.summary()["dataset"])
    for row in preview.summary().itertuples(index=False):
        assert shown[row.dataset]["counts"] == {
            "removed": row.removed,
            "changed": row.changed,
            "added": row.added,
        }


def test_a_source_captured_again_after_replays_keeps_its_records(connect, tmp_path) -> None:  # noqa: ANN001
    """The same source captured in a second run, after replays of the first kept it in
    the server's cache (a notebook cell run again): its records keep their numbers, on
    the server and on the client. (Capture rebuilt a local relation's keys from the
    partitions of the cached scan, numbered otherwise: records went missing.)"""
    from pyspark.sql import functions as F

    rows = [(i, i % 4, f"s{i}") for i in range(200)]
    spark_rows = connect.createDataFrame(rows, "id bigint, g bigint, s string")
    spark_rows.repartition(2).write.parquet(str(tmp_path / "src"))
    for kind in ("local", "parquet"):
        for client in (False, True, False):
            src = connect.createDataFrame(rows, "id bigint, g bigint, s string") \
                if kind == "local" else connect.read.parquet(str(tmp_path / "src"))  # fmt: skip
            with tensprov_lab.track(connect, name=f"again-{kind}") as run:
                odd = src.filter(F.col("id") % 2 == 1).withColumn("h", F.col("g") * 2)
            run._tracker.client_replays = client
            whole = run.rows(odd)
            picked = [0, 60, len(whole) - 1]
            got = run.rows(odd, rows=picked)
            want = whole[whole["_row"].isin(picked)].reset_index(drop=True)
            pd.testing.assert_frame_equal(got, want, obj=f"{kind}, client {client}")
            assert len(run.rows(src, rows=[150])) == 1
    run._tracker.client_replays = True
