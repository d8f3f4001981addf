"""Tracking over Spark Connect: a Connect server started here (pyspark's own
``SparkConnectServer``, loopback only, stopped at the end), the same pipelines captured
through it and through the classic session, and the random pipelines of the oracle."""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given
from hypothesis import strategies as st

import tensprov_lab
from tensprov_lab.capture.plan._nodes import TensProvWarning
from tests._connect_session import classic_code as _classic
from tests._connect_session import connect_session
from tests._examples import SLOW, spark_examples
from tests._interrupts import ctrl_c
from tests.oracle import Table, apply
from tests.test_capture_oracle import A_COLS, A_TYPES, a_rows, b_rows, draw_step, run_pipeline
from tests.test_pieces import SHAPES, tracked_shape

pytestmark = [pytest.mark.spark, pytest.mark.connect]

#: oracle steps captured record by record over Connect (pivots, limits and pandas/RDD
#: hops are not yet: docs/connect.md)
_CONNECT_STEPS = {
    "filter_gt", "filter_eq", "filter_notnull", "with", "select", "dropna", "fillna",
    "orderBy", "distinct", "dropDuplicates", "groupBy", "union_self", "union_b", "join",
    "explode", "window_running", "window_rank", "window_lag", "window_lead", "window_count",
}  # fmt: skip
#: steps that give their input's records in the order they come
_ORDER_KEEPING = {"filter_gt", "filter_eq", "filter_notnull", "with", "select", "dropna",
                  "fillna", "explode"}  # fmt: skip


@pytest.fixture(scope="module")
def connect() -> Iterator[Any]:
    """A Spark Connect session to a server of its own on loopback."""
    with connect_session() as session:
        yield session


def _pipeline(s, orders_rows, cust_rows):  # noqa: ANN001, ANN202
    from pyspark.sql import functions as F

    orders = s.createDataFrame(orders_rows, "order_id bigint, cust_id bigint, amount double")
    cust = s.createDataFrame(cust_rows, "cust_id bigint, region string")
    with tensprov_lab.track(s, name="same") as run:
        big = orders.filter(F.col("amount") > 5)
        joined = big.join(cust, "cust_id", "left")
        priced = joined.withColumn("eur", F.col("amount") * 0.9).withColumnRenamed("region", "r")
        both = priced.unionByName(priced.filter("eur > 10"))
        top = both.orderBy(F.col("eur").desc())
        dedup = top.select("cust_id", "r").distinct()
        # grouped by the server: by an expression, and by values of a floating-point type
        by_expr = priced.groupBy((F.col("amount") % 3).alias("m")).agg(F.count(F.lit(1)))
        by_double = priced.select("eur").distinct()
        out = (
            priced.dropna()
            .groupBy("r")
            .agg(F.sum("eur").alias("total"), F.count(F.lit(1)).alias("n"))
        )
    return run, [orders, cust, big, joined, priced, both, top, dedup, by_expr, by_double, out]


def test_same_lineage_as_a_classic_session(spark, connect) -> None:  # noqa: ANN001
    rng = np.random.default_rng(3)
    orders_rows = [(i, int(rng.integers(0, 6)), float(rng.integers(0, 20))) for i in range(60)]
    cust_rows = [(i, None if i == 2 else f"r{i % 3}") for i in range(5)]
    with _classic():
        classic, c_frames = _pipeline(spark, orders_rows, cust_rows)
    remote, r_frames = _pipeline(connect, orders_rows, cust_rows)
    assert not any(op.opaque for op in remote.operations), [op.warnings for op in remote.operations]
    assert [op.method for op in remote.operations] == [op.method for op in classic.operations]
    for c_op, r_op in zip(classic.operations, remote.operations):
        assert r_op.category == c_op.category, (r_op.method, r_op.category, c_op.category)
        for ct, rt in zip(c_op.tensors, r_op.tensors):
            assert rt.shape == ct.shape, r_op.method
            assert (rt.to_sparse() != ct.to_sparse()).nnz == 0, r_op.method
    for c_df, r_df in zip(c_frames, r_frames):
        assert classic.dataset(c_df).columns == remote.dataset(r_df).columns
        assert classic.dataset(c_df).n_rows == remote.dataset(r_df).n_rows
    # whole-dataset lineage and records, as a user asks for them
    for src in (0, 1):
        for dst in range(2, len(c_frames)):
            try:
                want = classic.mapping(c_frames[src], c_frames[dst]).toarray()
            except ValueError:
                continue
            got = remote.mapping(r_frames[src], r_frames[dst]).toarray()
            assert (got == want).all(), (src, dst)
    with _classic():
        c_rows = classic.rows(c_frames[-1])
    r_rows = remote.rows(r_frames[-1])
    # (sums of doubles may differ in the last bits: the two sessions add in other orders)
    pd.testing.assert_frame_equal(c_rows, r_rows, check_dtype=False)
    assert remote.backward(r_frames[-1], rows=[0]).result.rows.keys()


@spark_examples(
    "TENSPROV_CONNECT_EXAMPLES",
    60,
    suppress_health_check=[*SLOW, HealthCheck.function_scoped_fixture],
)
@given(a=a_rows, b=b_rows, data=st.data())
def test_random_pipelines_match_oracle_over_connect(connect, a, b, data) -> None:  # noqa: ANN001
    """The classic session's oracle (records, record lineage, cell lineage, why-not of
    every dataset) on random pipelines of the steps Connect traces."""
    t = Table.source("a", A_COLS, A_TYPES, a)
    steps: list[tuple] = []
    prev, used_join, sorted_once, in_order = None, False, False, False
    n_steps = data.draw(st.integers(1, 6))
    for _ in range(4 * n_steps):  # steps Connect does not trace are drawn again
        if len(steps) == n_steps:
            break
        step = draw_step(data, t, prev, used_join)
        if step is None or step[0] not in _CONNECT_STEPS:
            continue
        if step[0] == "orderBy" and sorted_once and not in_order:
            # a sort of sorted records joined, grouped or unioned since: their order
            # is neither their keys' nor Spark's, which Connect does not trace
            continue
        steps.append(step)
        used_join |= step[0] == "join"
        sorted_once |= step[0] == "orderBy"
        in_order = step[0] == "orderBy" or (in_order and step[0] in _ORDER_KEEPING)
        joined = step[0] == "join" or "w" in t.cols
        other = Table.source("b", ["k", "w"], {"k": "int", "w": "int"}, b) if joined else None
        t = apply(step, t, other or Table.source("a", A_COLS, A_TYPES, a))
        prev = step
    if steps:
        run_pipeline(connect, a, b, steps)


@pytest.mark.parametrize(
    "steps",
    [
        [("join", "full"), ("groupBy", "w", "k")],
        [("union_self",), ("dropDuplicates", ("k",)), ("orderBy", "k", False)],
        [("select", ("s", "k")), ("join", "semi")],
        [("filter_notnull", "v"), ("join", "anti"), ("explode", "k", "v")],
        [("orderBy", "v", True), ("filter_gt", "k", 0), ("union_b",), ("distinct",)],
        # an explode's records are told apart by their position: what follows is traced
        [("explode", "k", "v"), ("filter_gt", "e", 0), ("groupBy", "e", "k")],
        [("explode", "k", "v"), ("window_lag", "s", "e"), ("union_self",)],
        # a sort of sorted records: ties in the first sort's order
        [("orderBy", "s", True), ("orderBy", "k", True)],
        [("orderBy", "s", True), ("filter_notnull", "v"), ("orderBy", "v", False)],
    ],
)
def test_known_pipelines_match_oracle_over_connect(connect, steps) -> None:  # noqa: ANN001
    a = [(2, 1, "b"), (1, None, "a"), (1, 2, "b"), (None, 1, "a"), (2, 1, "b"), (3, 0, None)]
    b = [(1, 5), (2, 6), (2, 7), (None, 1)]
    run_pipeline(connect, a, b, steps)


def test_what_is_not_traced_is_opaque_with_a_warning_and_lineage_goes_on(connect) -> None:  # noqa: ANN001
    from pyspark.sql import functions as F

    df = connect.createDataFrame([(i, i % 3) for i in range(10)], "id bigint, g bigint")
    with pytest.warns(TensProvWarning, match="not traced record by record over Spark Connect"):
        with tensprov_lab.track(connect, name="opaque") as run:
            few = df.intersect(df.filter(F.col("g") < 2))  # opaque on every session
            after = few.filter(F.col("g") > 0)
    (inter,) = [op for op in run.operations if op.method == "intersect"]
    assert inter.opaque and not run.operations[-1].opaque
    assert run.dataset(few).n_rows == 7
    # the opaque output is numbered afresh: what follows it is traced from it
    kept = run.rows(few)
    first = int(kept[kept["g"] > 0]["_row"].min())
    assert run.backward(after, rows=[0], to=few)[few].tolist() == [first]
    assert sorted(run.rows(after)["id"].tolist()) == [1, 4, 7]


def test_user_errors_and_methods_are_as_without_tracking(connect) -> None:  # noqa: ANN001
    from pyspark.sql.connect.dataframe import DataFrame

    before = DataFrame.filter
    df = connect.range(5)
    with pytest.raises(ZeroDivisionError):
        with tensprov_lab.track(connect):
            df.filter("id > 1")
            _ = 1 / 0
    assert DataFrame.filter is before
    with tensprov_lab.track(connect) as run:
        kept = df.filter("id > 1")
    assert kept.count() == 3 and run.dataset(kept).n_rows == 3
    with tensprov_lab.track(connect, background=True) as bg:
        small = df.filter("id < 2")
    assert bg.dataset(small).n_rows == 2 and not bg.capturing  # (the query waited)


def test_background_capture_over_connect(connect) -> None:  # noqa: ANN001
    """The block returns while its capture runs in a thread; queries wait for it and
    give the foreground's lineage; cancelling interrupts its job on the server and drops
    the run whole; the next block works as usual."""
    import time

    from pyspark.sql import functions as F
    from pyspark.sql.connect.dataframe import DataFrame

    orders = connect.createDataFrame(
        [(i, i % 5, float(i % 13)) for i in range(300)], "id bigint, g bigint, amount double"
    )
    groups = connect.createDataFrame([(g, f"r{g % 2}") for g in range(5)], "g bigint, r string")

    def block(**kw):  # noqa: ANN003, ANN202
        with tensprov_lab.track(connect, **kw) as run:
            big = orders.filter(F.col("amount") > 4)
            joined = big.join(groups, "g")
            out = joined.groupBy("r").agg(F.sum("amount").alias("t"))
        return run, [big, joined, out]

    fg, fg_frames = block(name="fg")
    bg, bg_frames = block(name="bg", background=True)
    for a, b in zip(fg_frames, bg_frames):
        assert (fg.mapping(orders, a) != bg.mapping(orders, b)).nnz == 0
    assert [o.method for o in bg.operations] == [o.method for o in fg.operations]
    assert not bg.capturing

    @F.udf("boolean")
    def slow(x: int) -> bool:
        time.sleep(0.02)
        return x % 2 == 0

    many = connect.createDataFrame([(i,) for i in range(3000)], "id bigint")  # ~60 s of UDF
    filter_before = DataFrame.filter
    runs_before = len(tensprov_lab.runs())
    with tensprov_lab.track(connect, name="slow", background=True) as run:
        kept = many.filter(slow("id"))
    assert DataFrame.filter is filter_before  # restored when the block returned
    assert run.capturing
    time.sleep(1.0)
    run.cancel()
    assert not run.capturing
    with pytest.raises(LookupError, match="interrupted"):
        run.dataset(kept)
    assert len(tensprov_lab.runs()) == runs_before
    with tensprov_lab.track(connect, name="after") as again:
        small = many.filter("id < 3")
    assert again.dataset(small).n_rows == 3


def test_records_where_and_what_if_over_connect(connect) -> None:  # noqa: ANN001
    df = connect.createDataFrame([(i, f"n{i}") for i in range(6)], "id bigint, name string")
    with tensprov_lab.track(connect, name="reads") as run:
        odd = df.filter("id % 2 = 1")
    assert run.rows(odd)["id"].tolist() == [1, 3, 5]
    assert run.forward(df, where="id = 3", to=odd)[odd].tolist() == [1]
    with pytest.raises(ValueError, match="is not a valid predicate over odd .columns: id, name"):
        run.backward(odd, where="nope = 1")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        preview = run.what_if(drop={df: [1]})
    assert preview.removed["odd"]["id"].tolist() == [1] and preview.not_previewable == {}


@contextlib.contextmanager
def _shell_over(connect, src):  # noqa: ANN001, ANN202
    """The IPython shell with tensprov_lab loaded, ``spark`` the Connect session and
    ``src`` a DataFrame of it; its namespace restored afterwards."""
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
    assert ip.run_cell("%load_ext tensprov_lab").success
    ns = ip.user_ns
    had = ns.get("spark")
    ns["spark"] = connect
    ns["src"] = src
    try:
        yield ip
    finally:
        for name in ("src", "small", "per_g"):
            ns.pop(name, None)
        if had is None:
            ns.pop("spark", None)
        else:
            ns["spark"] = had


def test_provtrack_cell_and_explorer_over_connect(connect, capsys) -> None:  # noqa: ANN001
    src = connect.createDataFrame([(i, i % 2) for i in range(8)], "id bigint, g bigint")
    with _shell_over(connect, src) as ip:
        ns = ip.user_ns
        cell = (
            "%%provtrack --name cell\nsmall = src.filter('id > 2')\n"
            "per_g = small.groupBy('g').count()"
        )
        assert ip.run_cell(cell).success
        run = tensprov_lab.last_run()
        assert run.name == "cell" and not any(op.opaque for op in run.operations)
        assert run.dataset("small").n_rows == 5 and run.dataset(ns["per_g"]).n_rows == 2
        assert "tensprov-lab run cell" in capsys.readouterr().out
        assert ip.run_cell("%provtrace per_g 0").success
        assert "src" in capsys.readouterr().out
        widget = run.explore()
        names = {n["name"] for n in widget.graph["nodes"] if n["kind"] != "operation"}
        assert {"src", "small", "per_g"} <= names
        # clicking a dataset pages its records, read over Connect
        widget.selected = next(n["id"] for n in widget.graph["nodes"] if n["name"] == "small")
        assert widget.records["total"] == 5
        assert [r[1] for r in widget.records["rows"]] == [3, 4, 5, 6, 7]


def test_provtrack_in_a_notebook_kernel_captures_in_the_background_over_connect(
    connect,
    monkeypatch,  # noqa: ANN001
) -> None:
    """In a notebook kernel ``%%provtrack`` returns when the cell's code has run and
    captures in the background, over Connect as in a classic session: the summary
    display updates itself, a query waits for the capture, and the lineage is the
    foreground capture's."""
    from IPython.utils.capture import capture_output

    src = connect.createDataFrame([(i, i % 3) for i in range(30)], "id bigint, g bigint")
    body = "small = src.filter('id % 4 > 0')\nper_g = small.groupBy('g').count()"
    with _shell_over(connect, src) as ip:
        ns = ip.user_ns
        assert ip.run_cell(f"%%provtrack --name fg --wait\n{body}").success
        fg = tensprov_lab.last_run()
        want = [fg.backward("per_g", rows=[r]).to_dict() for r in range(3)]
        monkeypatch.setattr(ip, "kernel", object(), raising=False)  # as in ipykernel
        magics = ip.magics_manager.magics["cell"]["provtrack"].__self__
        with capture_output() as cap:
            assert ip.run_cell(f"%%provtrack --name bg\n{body}").success
            bg = tensprov_lab.last_run()
            got = [bg.backward(ns["per_g"], rows=[r]).to_dict() for r in range(3)]
            magics.progress.summarizer.join(60)
        assert bg.name == "bg" and not any(op.opaque for op in bg.operations)
        strip = [{k.split(":")[-1]: v for k, v in d.items()} for d in (*want, *got)]
        assert strip[:3] == strip[3:]
        # the display updated itself at the capture's end (bytes then: before the
        # queries built their indexes)
        shown = cap.outputs[-1].data["text/plain"].splitlines()[0]
        entries = bg.summary().split(" tensor entries")[0]
        assert shown.startswith(f"{entries} tensor entries") and "capture failed" not in shown


def test_budget_export_and_save_over_connect(connect, tmp_path) -> None:  # noqa: ANN001
    from pyspark.sql import functions as F

    df = connect.createDataFrame([(i, i % 3) for i in range(3000)], "id bigint, g bigint")
    with tensprov_lab.track(connect, name="exp", budget="1KB") as run:
        kept = df.filter(F.col("id") % 7 > 1)
        per_g = kept.groupBy("g").agg(F.sum("id").alias("t"))
    assert any(op.spilled for op in run.operations)  # past the budget: on disk
    disk_files = [p for op in run.operations for p in op.spilled or []]
    assert disk_files and all(os.path.exists(p) for p in disk_files)
    back = run.backward(per_g, rows=[0])[df]
    kept_ids = [i for i in range(3000) if i % 7 > 1]
    first_group = kept_ids[0] % 3  # groups are numbered by their smallest member
    assert back.tolist() == [i for i in kept_ids if i % 3 == first_group]
    events = run.to_openlineage()
    assert events and any("columnLineage" in str(e) for e in events)
    assert '"wasDerivedFrom"' in run.to_prov().serialize()
    tensprov_lab.save(tmp_path / "c.tpl", run)
    loaded = tensprov_lab.load(tmp_path / "c.tpl")[-1]
    assert loaded.backward("per_g", rows=[0])["df"].tolist() == back.tolist()
    # storage="spark": the tensors become tables the Connect server reads, and queries
    # run as jobs there
    with tensprov_lab.track(
        connect, name="res", storage="spark", spark_dir=str(tmp_path / "tables")
    ) as res:
        kept = df.filter(F.col("id") % 7 > 1)
        per_g = kept.groupBy("g").agg(F.sum("id").alias("t"))
    in_spark = [op for op in res.operations if op.spilled]
    assert {op.method for op in in_spark} == {"filter", "agg"}
    assert all(t.kind == "spark" for op in in_spark for t in op.tensors)
    assert res.backward(per_g, rows=[0])[df].tolist() == back.tolist()
    fwd = res.forward(df, rows=[kept_ids[0]], to=per_g)[per_g].tolist()
    assert fwd == [0]
    tables = [p for op in in_spark for p in op.spilled]
    tensprov_lab.forget(res)
    assert not any(os.path.exists(p) for p in tables)
    tensprov_lab.forget(run)  # its disk files go with it
    assert not any(os.path.exists(p) for p in disk_files)


def test_ctrl_c_during_capture_over_connect(connect) -> None:  # noqa: ANN001
    """Ctrl-C while the server runs a capture job: the job is interrupted, the block's
    provenance dropped whole, the methods restored, earlier runs still answer."""
    import threading
    import time

    from pyspark.sql import functions as F
    from pyspark.sql.connect.dataframe import DataFrame

    src = connect.createDataFrame([(i,) for i in range(20)], "id bigint")
    with tensprov_lab.track(connect, name="before") as earlier:
        evens = src.filter("id % 2 = 0")
    n_runs = len(tensprov_lab.runs())

    @F.udf("boolean")
    def slow(x: int) -> bool:
        time.sleep(0.02)
        return x % 2 == 0

    df = connect.createDataFrame([(i,) for i in range(4000)], "id bigint")
    filter_method = DataFrame.filter
    timer = threading.Timer(3.0, ctrl_c)
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt), tensprov_lab.track(connect) as run:
        kept = df.filter(slow("id"))
        timer.start()  # the capture's job takes ~40 s of UDF calls on two cores
    timer.cancel()
    assert time.monotonic() - started < 30
    assert DataFrame.filter is filter_method
    assert run.forgotten and len(tensprov_lab.runs()) == n_runs
    with pytest.raises(KeyError):
        tensprov_lab.last_run().dataset(kept)
    assert earlier.backward(evens, rows=[1])[src].tolist() == [2]
    with tensprov_lab.track(connect) as after:  # the next block works
        odd = src.filter("id % 2 = 1")
    assert after.dataset(odd).n_rows == 10


def test_grouping_values_ride_along_the_read_of_the_join(connect) -> None:  # noqa: ANN001
    """An aggregate over a join's records (through a withColumn) takes its grouping
    values from the join's own read: no job of its own, the same groups."""
    from pyspark.sql import functions as F

    orders = connect.createDataFrame(
        [(i, i % 7, float(i % 11)) for i in range(400)], "id bigint, cust bigint, amount double"
    )
    cust = connect.createDataFrame(
        [(c, f"r{c % 3}") for c in range(7)], "cust bigint, region string"
    )
    with tensprov_lab.track(connect, name="ride") as run:
        joined = orders.join(cust, "cust")
        priced = joined.withColumn("eur", F.col("amount") * 0.9)
        out = priced.groupBy("region").agg(F.sum("eur").alias("t"))
        # a renamed grouping column is not the join's: this one reads its own values
        renamed = joined.withColumnRenamed("region", "reg").groupBy("reg").count()
    ops = {run.store.datasets[o.output].name: o for o in run.operations}
    assert ops["out"].jobs == 0 and not ops["out"].opaque
    assert ops["renamed"].jobs == 1 and not ops["renamed"].opaque
    regions = run.rows(joined)["region"].tolist()
    for df, col in ((out, "region"), (renamed, "reg")):
        for i, region in enumerate(run.rows(df)[col]):
            members = run.backward(df, rows=[i], to=joined)[joined].tolist()
            assert members == [j for j, r in enumerate(regions) if r == region]


def test_a_benchmark_section_names_the_servers_java(connect: Any) -> None:
    """Over Connect there is no JVM in this process: the line about a benchmark's run
    asks the server which Java it runs (SQL ``reflect``), the one its JVM reports."""
    import re

    from tensprov_lab.bench._markdown import about_this_run

    assert not hasattr(connect, "_jvm")
    line = about_this_run(connect)
    java = re.search(r"· Java (\S+) ·", line)
    assert java is not None, line
    query = "SELECT reflect('java.lang.System', 'getProperty', 'java.specification.version')"
    spec = connect.sql(query).first()[0]
    assert java.group(1).split(".")[0] == spec.split(".")[0] and int(spec) >= 17


@pytest.mark.parametrize("shape", SHAPES)
def test_a_join_written_without_a_condition_never_reads_the_cross_product(
    connect: Any, shape: str
) -> None:
    """Over Connect too: 50,000 x 1,000 records, whose product (5e7 pairs) a
    ``join().where()`` capture was still reading after four minutes; the join's pairs
    are implicit and the filter over them is the join the server runs."""
    run, out, _, b, crosses = tracked_shape(connect, shape)
    if shape == "comma join":
        # over Connect a statement over untracked views is a source (docs/connect.md):
        # the server runs it as the join it is, and capture reads its records once
        assert run.dataset(out).n_rows == 50_000 and not crosses
        return
    assert len(crosses) == 2 and crosses[0].n_out == 50_000 * 1_000
    # output record 7: order 7 (k = 7) and customer 7
    assert run.rows(out, rows=[7])["id"].tolist() == [7]
    lin = run.backward(out, rows=[7])
    assert lin[b].tolist() == [7]
    assert run.forward(b, rows=[3], to=out)[out].tolist() == list(range(3, 50_000, 1_000))


def test_a_stream_or_a_removed_source_never_fails_a_connect_block(connect: Any) -> None:
    """Over Connect nothing is screened yet (issue 59): a streaming DataFrame or a source
    the block removed stops the capture, with one note, and the block ends as it would
    untracked."""
    import tempfile

    with tensprov_lab.track(connect) as streamed:
        values = connect.readStream.format("rate").load().select("value")
    assert values.isStreaming and values.columns == ["value"]
    with tensprov_lab.track(connect) as removed:
        with tempfile.TemporaryDirectory() as folder:
            connect.range(10).write.parquet(f"{folder}/y")
            counted = connect.read.parquet(f"{folder}/y").filter("id > 3").count()
    assert counted == 6
    for run in (streamed, removed):
        failed = [w for w in run.warnings if w.startswith("capture failed")]
        assert len(failed) == 1 and ";;" not in failed[0], run.warnings
    # the session is as it was: the next block captures
    with tensprov_lab.track(connect) as after:
        kept = connect.range(10).filter("id > 6")
    assert after.dataset(kept).n_rows == 3
