"""Fused reads over Spark Connect (``capture/connect/_fused.py``): filters, equi-joins and
the grouping values after them come from their sources' key reads, with the same lineage
as the capture that reads every dataset by its own job."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pandas as pd
import pytest

import tensprov_lab
from tensprov_lab.capture.connect import _fused
from tensprov_lab.capture.spark._versions import to_arrow
from tests._connect_session import connect_session
from tests._dense import watch_dense_pairs
from tests._interrupts import ctrl_c

pytestmark = [pytest.mark.spark, pytest.mark.connect]


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    with connect_session() as session:
        yield session


def _frames(spark: Any) -> tuple[Any, Any]:
    orders = spark.createDataFrame(
        [(i, (i * 7) % 11 if i % 9 else None, float(i % 13)) for i in range(60)],
        "id bigint, cust bigint, amount double",
    )
    customers = spark.createDataFrame(
        [(c, f"r{c % 3}", c % 2) for c in range(0, 12) if c != 4] + [(5, "dup", 1)],
        "cust bigint, region string, seg int",
    )
    return orders, customers


def _block(spark: Any, orders: Any, customers: Any) -> tuple[Any, dict[str, Any]]:
    from pyspark.sql import functions as F

    with tensprov_lab.track(spark, name="fused") as run:
        big = orders.filter("amount > 3")
        bigger = big.filter(F.col("amount") < 11)
        joined = bigger.join(customers, "cust")
        priced = joined.withColumn("eur", F.col("amount") * 0.9)
        out = priced.groupBy("region", "seg").agg(F.sum("eur").alias("t"))
        left = big.join(customers, big["cust"] == customers["cust"], "left")
        full = bigger.join(customers, "cust", "full")
        by_cust = full.groupBy("cust").count()
    frames = {"big": big, "bigger": bigger, "joined": joined, "priced": priced, "out": out,
              "left": left, "full": full, "by_cust": by_cust}  # fmt: skip
    return run, frames


def _same_as_unfused(
    spark: Any, monkeypatch: Any, orders: Any, customers: Any, run: Any, frames: dict[str, Any]
) -> Any:
    """Assert that ``run`` (:func:`_block` over ``orders`` and ``customers``) has the
    lineage and records of the same block with nothing fused, every dataset read by a
    job of its own; return that run."""
    fused = {name: run.mapping(orders, df).toarray() for name, df in frames.items()}
    fused_c = {
        name: run.mapping(customers, df).toarray()
        for name, df in frames.items()
        if name not in ("big", "bigger")
    }
    rows = {name: run.rows(df) for name, df in frames.items()}
    with monkeypatch.context() as patched:
        patched.setattr(_fused, "plan", lambda *a, **k: _fused.Fusion())
        slow, frames2 = _block(spark, orders, customers)
    for name, df in frames2.items():
        assert (slow.mapping(orders, df).toarray() == fused[name]).all(), name
        if name in fused_c:
            assert (slow.mapping(customers, df).toarray() == fused_c[name]).all(), name
        assert slow.rows(df).equals(rows[name]), name
    return slow


def test_fused_reads_give_the_lineage_of_one_job_per_dataset(spark: Any, monkeypatch) -> None:  # noqa: ANN001
    orders, customers = _frames(spark)
    run, frames = _block(spark, orders, customers)
    ops = {name: run.store.producer(run.dataset(df).id) for name, df in frames.items()}
    # the filters and joins took no job of their own; the aggregate's values rode along
    for name in ("big", "bigger", "joined", "left", "full"):
        assert not ops[name].opaque and ops[name].jobs == 0, name
    assert ops["out"].jobs == 0
    # one read per source, and one for by_cust: a full join's using column takes either
    # side's value, so its grouping values do not come from one source
    assert ops["by_cust"].jobs == 1
    assert run._log.jobs == 3
    slow = _same_as_unfused(spark, monkeypatch, orders, customers, run, frames)
    assert slow._log.jobs > run._log.jobs


def test_a_foreign_key_join_reads_its_pairs_from_the_key_columns(spark: Any, monkeypatch) -> None:  # noqa: ANN001
    """A join on one key that is unique on the right and never null takes its pairs
    straight from the key columns (``dense_pairs``): the same lineage as reading every
    dataset by its own job."""
    orders = spark.createDataFrame(
        [(i, (i * 7) % 11, float(i % 13)) for i in range(60)],
        "id bigint, cust bigint, amount double",
    )
    customers = spark.createDataFrame(
        [(c, f"r{c % 3}") for c in (9, 0, 4, 2, 7, 1, 3, 8, 5, 6)], "cust bigint, region string"
    )  # no customer 10: the orders of customer 10 match nothing
    used = watch_dense_pairs(monkeypatch, _fused)

    def block() -> tuple[Any, dict[str, Any]]:
        with tensprov_lab.track(spark, name="fk") as run:
            big = orders.filter("amount > 3")
            inner = big.join(customers, "cust")
            left = big.join(customers, "cust", "left")
            by_region = inner.groupBy("region").count()
        return run, {"inner": inner, "left": left, "by_region": by_region}

    run, frames = block()
    assert used == [True, True]
    fused = {k: (run.mapping(orders, df).toarray(), run.mapping(customers, df).toarray())
             for k, df in frames.items()}  # fmt: skip
    monkeypatch.setattr(_fused, "plan", lambda *a, **k: _fused.Fusion())
    slow, frames2 = block()
    for name, df in frames2.items():
        assert (slow.mapping(orders, df).toarray() == fused[name][0]).all(), name
        assert (slow.mapping(customers, df).toarray() == fused[name][1]).all(), name
    assert slow._log.jobs > run._log.jobs


def test_what_fusion_does_not_cover_is_traced_by_its_own_job(spark: Any) -> None:
    """A condition naming a DataFrame's columns by plan (``df["x"]``), a join of a source
    with itself, a join on a computed key: each read by its own job, lineage exact."""
    from pyspark.sql import functions as F

    orders, customers = _frames(spark)
    with tensprov_lab.track(spark, name="not-fused") as run:
        named = orders.filter(orders["amount"] > 5)
        twice = orders.join(orders.select("id", "cust"), "id")
        computed = orders.join(customers, orders["cust"] + 0 == customers["cust"])
        after = named.filter(F.col("id") > 10)
    for df in (named, twice, computed):
        op = run.store.producer(run.dataset(df).id)
        assert not op.opaque and op.jobs == 1
    kept = [r.id for r in orders.collect() if r.amount > 5]
    assert run.rows(named)["id"].tolist() == kept
    assert run.rows(after)["id"].tolist() == [i for i in kept if i > 10]
    assert run.backward(after, rows=[0], to=orders)[orders].tolist() == [
        next(i for i in kept if i > 10)
    ]
    assert run.dataset(computed).n_rows == computed.count()


def test_a_source_read_by_partition_has_the_ids_spark_gives(spark: Any, tmp_path: Any) -> None:
    """The fused read gives a source's records by the partition each came from, not by
    ``monotonically_increasing_id()``; the ids made of them are those Spark gives the
    records (a later operation's own job translates its records by them)."""
    import numpy as np
    from pyspark.sql import functions as F

    path = str(tmp_path / "parts")
    spark.range(0, 400).select("id", (F.col("id") * 37 % 101).alias("v")).repartition(
        4
    ).write.parquet(path)
    src = spark.read.parquet(path)
    with tensprov_lab.track(spark, name="by-partition") as run:
        kept = src.filter("v > 30")
        ranked = kept.orderBy(F.col("v").desc(), "id")  # its own job: raw ids translated
    assert run.store.producer(run.dataset(kept).id).jobs == 0
    node = run._tracker.by_ds[run.dataset(src).id]
    ids = to_arrow(src.select(F.monotonically_increasing_id().alias("m"))).column("m")
    expected = np.sort(np.asarray(ids.to_numpy(), dtype=np.int64))
    assert len(np.unique(expected >> 33)) > 1  # several partitions
    assert node.index.table[:, 0].tolist() == expected.tolist()
    rows = src.toPandas()
    order = rows[rows.v > 30].sort_values(["v", "id"], ascending=[False, True])
    assert run.rows(ranked)["id"].tolist() == order["id"].tolist()
    first = run.backward(ranked, rows=[0], to=src)[src].tolist()
    assert rows.iloc[first]["id"].tolist() == [int(order["id"].iloc[0])]


@pytest.mark.parametrize("offset", [-(2**31), 2**31])
def test_bigint_join_keys_read_as_int_where_they_fit(spark: Any, offset: int) -> None:
    """A fused read takes bigint join keys as int (half the bytes through gRPC); keys
    past an int's range send the join to its own job, never a wrong match: from
    ``-2**31`` they all fit (the range's lower edge), from ``2**31`` none does."""
    left = spark.createDataFrame(
        [(i, offset + i % 5 if i % 7 else None) for i in range(40)], "id bigint, k bigint"
    )
    right = spark.createDataFrame(
        [(offset + j, f"v{j}") for j in (0, 1, 3, 3, 9)], "k bigint, v string"
    )
    with tensprov_lab.track(spark, name="wide") as run:
        joined = left.join(right, "k", "left")
    op = run.store.producer(run.dataset(joined).id)
    assert not op.opaque
    assert op.jobs == (0 if offset < 0 else 1)
    expect = sorted(
        (i, v)
        for i in range(40)
        for v in ([f"v{j}" for j in (0, 1, 3, 3, 9) if i % 7 and j == i % 5] or [None])
    )
    got = run.rows(joined)
    assert sorted(zip(got["id"].tolist(), got["v"].tolist()), key=str) == sorted(expect, key=str)
    back = run.backward(joined, rows=list(range(len(got))), to=left)[left]
    assert sorted(back.tolist()) == list(range(40))


def test_which_reads_run_python_code(spark: Any) -> None:
    """A read takes large Arrow batches only when its plan surely runs no Python code;
    the client tells from the plan's messages, or leaves it to the server (None)."""
    from pyspark.sql import functions as F

    from tensprov_lab.capture.connect._arrow import python_code, runs_python
    from tensprov_lab.capture.plan import _proto as P

    ids = spark.range(10)
    plain = ids.filter("id > 2 AND abs(id) IN (3, 4)").select((F.col("id") + 1).alias("x"))
    assert python_code(P.relation(plain)) is False

    def same(it: Any) -> Any:
        yield from it

    assert python_code(P.relation(ids.mapInPandas(same, "id long"))) is True
    udf = F.udf(lambda x: x, "long")
    assert python_code(P.relation(ids.select(udf("id")))) is True
    # a name the client does not know (a UDF registered by name, say) is the server's to say
    assert python_code(P.relation(ids.filter("my_func(id) > 2"))) is None
    ids.createOrReplaceTempView("tp_ids")
    try:
        by_name = spark.table("tp_ids")
        assert python_code(P.relation(by_name)) is None
        assert runs_python(by_name) is False
        assert runs_python(by_name.select(udf("id"))) is True
    finally:
        spark.catalog.dropTempView("tp_ids")


def test_a_read_that_runs_python_keeps_the_sessions_batches(spark: Any) -> None:
    """A pandas UDF sees its input in the session's Arrow batches: the fused read of a
    filter on such a UDF must see the same batches as the user's own run, or the records
    it keeps would be others (here: the UDF gives each record its batch's size)."""
    from pyspark.sql import functions as F

    @F.pandas_udf("long")  # type: ignore[call-overload]
    def batch_size(s: pd.Series) -> pd.Series:
        return pd.Series([len(s)] * len(s))

    conf = "spark.sql.execution.arrow.maxRecordsPerBatch"
    before = spark.conf.get(conf)
    spark.conf.set(conf, "4")
    try:
        ids = spark.range(0, 18, 1, 1)  # one partition: batches of 4, 4, 4, 4, 2
        with tensprov_lab.track(spark, name="python batches") as run:
            kept = ids.filter(batch_size("id") == 4)
        assert sorted(r.id for r in kept.collect()) == list(range(16))
        op = run.store.producer(run.dataset(kept).id)
        assert not op.opaque
        assert run.backward(kept)[ids].tolist() == list(range(16))
        assert spark.conf.get(conf) == "4"
    finally:
        spark.conf.set(conf, before)


def test_the_sources_reads_run_at_once_ahead_of_the_block(spark: Any, monkeypatch) -> None:  # noqa: ANN001
    """The block's sources are read by the server in threads of their own, all started
    when the block ends; each read is taken once (no second job), and the session's
    Arrow batch size is the user's again after."""
    import threading

    from tensprov_lab._registry import _tracker
    from tensprov_lab.capture.connect import _ahead, _arrow

    real = _arrow.read_arrow
    threads: list[int] = []

    def spy(session: Any, rel: Any) -> Any:
        threads.append(threading.get_ident())
        return real(session, rel)

    monkeypatch.setattr(_arrow, "read_arrow", spy)
    monkeypatch.setattr(_ahead, "read_arrow", spy)
    conf = "spark.sql.execution.arrow.maxRecordsPerBatch"
    before = spark.conf.get(conf)
    spark.conf.set(conf, "777")
    try:
        orders, customers = _frames(spark)
        run, frames = _block(spark, orders, customers)
        assert spark.conf.get(conf) == "777"
    finally:
        spark.conf.set(conf, before)
    assert len(threads) == 2  # one read per source, taken once
    assert threading.get_ident() not in threads
    assert run._log.jobs == 3
    nodes = [_tracker(spark).node_of(df) for df in (orders, customers)]
    assert all(n is not None and n.index is not None for n in nodes)
    assert run.backward(frames["bigger"])[orders].tolist() == [
        i for i in range(60) if 3 < float(i % 13) < 11
    ]


@pytest.mark.parametrize("offset", [0, 2**31])
def test_file_sources_read_by_the_server_give_the_lineage_of_one_job_per_dataset(
    spark: Any, tmp_path: Any, monkeypatch: Any, offset: int
) -> None:
    """The server's fused read of file sources (by partition, with its filters' flags,
    where a null condition drops the record, and a bigint join key's does-not-fit
    flag) gives the lineage of reading every dataset by its own job, and the one the
    rows say (from ``2**31`` the keys do not fit an int: the join takes its own job)."""
    from pyspark.sql import functions as F

    from tensprov_lab._registry import _tracker

    orders, customers = _frames(spark)
    amount = F.when(F.col("id") % 5 == 0, None).otherwise(F.col("amount"))
    orders = orders.withColumn("amount", amount).withColumn("cust", F.col("cust") + offset)
    customers = customers.withColumn("cust", F.col("cust") + offset)
    orders.repartition(3).write.parquet(str(tmp_path / "orders"))
    customers.repartition(2).write.parquet(str(tmp_path / "customers"))
    orders = spark.read.parquet(str(tmp_path / "orders"))
    customers = spark.read.parquet(str(tmp_path / "customers"))
    monkeypatch.setattr(_tracker(spark), "direct_reads", False)
    run, frames = _block(spark, orders, customers)
    assert run.store.producer(run.dataset(frames["bigger"]).id).jobs == 0
    joined = run.store.producer(run.dataset(frames["joined"]).id)
    assert not joined.opaque and joined.jobs == (0 if offset == 0 else 1)
    src = run.rows(orders)
    kept = [
        int(i) for i, a in zip(src["id"], src["amount"]) if a == a and 3 < a < 11
    ]  # (a != a: null)
    back = run.backward(frames["bigger"])[orders]
    assert sorted(src["id"].iloc[back].tolist()) == sorted(kept)
    _same_as_unfused(spark, monkeypatch, orders, customers, run, frames)


def _server_reads(
    spark: Any, tmp_path: Any, monkeypatch: Any, parts: int, n: int
) -> tuple[Any, Any]:
    """``n`` orders like :func:`_frames`'s in ``parts`` Parquet files, and its customers
    in 2, read by the server (not by the client)."""
    from pyspark.sql import functions as F

    from tensprov_lab._registry import _tracker

    orders = spark.range(0, n, 1, parts).select(
        "id",
        (F.col("id") * 7 % 11).alias("cust"),
        (F.col("id") % 13).cast("double").alias("amount"),
    )
    _, customers = _frames(spark)
    orders.write.parquet(str(tmp_path / "orders"))
    customers.repartition(2).write.parquet(str(tmp_path / "customers"))
    monkeypatch.setattr(_tracker(spark), "direct_reads", False)
    return spark.read.parquet(str(tmp_path / "orders")), spark.read.parquet(
        str(tmp_path / "customers")
    )


def _counting_reads(monkeypatch: Any) -> list[int]:
    """The records of every request capture's reads make (``_arrow.read_arrow``; -1 for
    a request the server refused)."""
    from tensprov_lab.capture.connect import _ahead, _arrow

    requests: list[int] = []
    read = _arrow.read_arrow

    def counting(spark: Any, rel: Any) -> Any:
        try:
            table = read(spark, rel)
        except Exception:
            requests.append(-1)
            raise
        requests.append(table.num_rows)
        return table

    monkeypatch.setattr(_arrow, "read_arrow", counting)
    monkeypatch.setattr(_ahead, "read_arrow", counting)
    return requests


def test_ctrl_c_between_pieces_of_a_read_asks_for_no_more(
    spark: Any, tmp_path: Any, monkeypatch: Any
) -> None:
    """Ctrl-C while the server reads a block's sources in pieces (in threads of their
    own, ahead of the operations), just as one piece has come back: the block raises
    it, and the read asks for no more pieces (interrupting the capture's tag stops
    only the requests under way, and there was none)."""
    import time

    from tensprov_lab.capture.connect import _ahead, _arrow

    orders, customers = _server_reads(spark, tmp_path, monkeypatch, 2, 200_000)
    # 100,000 orders in each of 2 files, pieces of 1,000 positions: 100 requests
    monkeypatch.setattr(_arrow, "positions_per_piece", lambda session, row: 1_000)
    requests: list[int] = []
    read = _arrow.read_arrow

    def ctrl_c_after_the_third(session: Any, rel: Any) -> Any:
        table = read(session, rel)
        requests.append(table.num_rows)
        if len(requests) == 3:
            ctrl_c()
            time.sleep(1.0)  # the block handles it before this piece is taken
        return table

    monkeypatch.setattr(_arrow, "read_arrow", ctrl_c_after_the_third)
    monkeypatch.setattr(_ahead, "read_arrow", ctrl_c_after_the_third)
    runs = len(tensprov_lab.runs())
    with pytest.raises(KeyboardInterrupt), tensprov_lab.track(spark) as run:
        big = orders.filter("amount > 3")
        big.join(customers, "cust")
    time.sleep(2.0)  # time for more pieces, had the read gone on
    assert 3 <= len(requests) <= 4, requests  # (the customers' read may end later)
    assert run.forgotten and len(tensprov_lab.runs()) == runs


def test_a_source_is_read_in_pieces_of_every_partition(
    spark: Any, tmp_path: Any, monkeypatch: Any
) -> None:
    """Capture's read of a source asks for at most ``PIECE_BYTES`` of each partition's
    records at a time (the server holds a task's result whole while it sends it): the
    same lineage as one request, and the one the rows say."""
    from pyspark.sql import functions as F

    from tensprov_lab.capture.connect import _ahead
    from tensprov_lab.capture.plan import _pieces

    sizes: dict[int, int] = {}  # records read: the size of one as the read estimates it
    pieces = _ahead.read_pieces

    def sized(*args: Any, **kwargs: Any) -> Any:
        table = pieces(*args, **kwargs)
        sizes[table.num_rows] = args[4]
        return table

    monkeypatch.setattr(_ahead, "read_pieces", sized)
    orders, customers = _server_reads(spark, tmp_path, monkeypatch, 3, 2400)
    requests = _counting_reads(monkeypatch)
    run, frames = _block(spark, orders, customers)
    whole = len(requests)
    assert 2400 in requests, requests  # the orders' read, in one request
    # a server with the memory for pieces of 300 of the orders' records a partition
    monkeypatch.setattr(_pieces, "FEWEST", 1)
    server = (300 * sizes[2400] * _pieces.PIECE_SHARE, 1 << 40)
    monkeypatch.setattr(_pieces, "driver_limits", lambda session: server)
    requests.clear()
    # the same files again, as DataFrames not tracked yet
    orders2, customers2 = (spark.read.parquet(str(tmp_path / n)) for n in ("orders", "customers"))
    pieced, frames2 = _block(spark, orders2, customers2)
    counts = orders2.groupBy(F.spark_partition_id()).count().toPandas()["count"].tolist()
    want = [sum(min(300, max(0, n - i * 300)) for n in counts) for i in range(9)]
    want = [n for n in want if n]
    assert len(want) > 1 and want == [n for n in requests if n > 12], (requests, counts)
    # (a last, empty request when the largest partition ends a piece)
    assert len(requests) == whole - 1 + len(want) + (max(counts) % 300 == 0), requests
    for name, df in frames.items():
        mine = pieced.mapping(orders2, frames2[name]).toarray()
        assert (mine == run.mapping(orders, df).toarray()).all(), name
        if name not in ("big", "bigger"):
            mine_c = pieced.mapping(customers2, frames2[name]).toarray()
            assert (mine_c == run.mapping(customers, df).toarray()).all(), name
    src = pieced.rows(orders2)
    assert src.equals(run.rows(orders))
    kept = [int(i) for i, a in zip(src["id"], src["amount"]) if 3 < a < 11]
    back = pieced.backward(frames2["bigger"])[orders2]
    assert sorted(src["id"].iloc[back].tolist()) == sorted(kept)


def test_a_source_past_the_servers_result_limit_is_read_in_smaller_pieces(
    tmp_path: Any, monkeypatch: Any
) -> None:
    """A server whose ``spark.driver.maxResultSize`` is smaller than a source's keys:
    capture reads them in pieces under the limit (the block failed with Spark's "bigger
    than spark.driver.maxResultSize"), asking again in smaller pieces when the server
    refuses one, with the lineage the rows say.  An aggregate traced by a job of its
    own reads its result's keys in pieces too (it was opaque)."""
    # (a file a partition: an open costs more than a partition holds)
    limits = {"spark.driver.maxResultSize": "1m", "spark.sql.files.openCostInBytes": "128m"}
    with connect_session(**limits) as session:
        # 8 partitions of 30,000 records, ~14 bytes each read: 3 MB in all
        orders, customers = _server_reads(session, tmp_path, monkeypatch, 8, 240_000)
        requests = _counting_reads(monkeypatch)
        run, frames = _block(session, orders, customers)
        assert not any(op.opaque for op in run.operations), [op.warnings for op in run.operations]
        assert -1 in requests and requests.count(-1) < len(requests) - 3, requests
        # (all the records at once are more than the limit too: said so)
        with pytest.raises(RuntimeError, match=r"maxResultSize \(1024.0 KiB\).*rows="):
            run.rows(orders)
        src = pd.concat([run.rows(orders, where=f"id % 16 = {m}") for m in range(16)]).sort_values(
            "_row"
        )
        assert src["_row"].tolist() == list(range(240_000))
        assert sorted(src["id"].tolist()) == list(range(240_000))
        kept = src["_row"][(src["amount"] > 3) & (src["amount"] < 11)]
        back = run.backward(frames["bigger"])[orders]
        assert sorted(back.tolist()) == sorted(kept.tolist())
        # the count by customer of a full join (a job of its own, its keys past the
        # limit): each customer's group from the kept orders of that customer
        groups = run.mapping(orders, frames["by_cust"]).tocoo()
        custs = run.rows(frames["by_cust"])["cust"].tolist()
        got = {c: sorted(groups.col[groups.row == r].tolist()) for r, c in enumerate(custs)}
        bigger = src[(src["amount"] > 3) & (src["amount"] < 11)]
        want = {c: sorted(rows["_row"].tolist()) for c, rows in bigger.groupby("cust")}
        want.update({c: [] for c in custs if c not in want})  # customers without orders
        assert got == want
        # a window's frames past the limit too: each order's frame is itself and the
        # order before it of its customer
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        frame = Window.partitionBy("cust").orderBy("id").rowsBetween(-1, 0)
        with tensprov_lab.track(session, name="window") as windowed:
            paired = orders.withColumn("pair", F.sum("amount").over(frame))
        assert not any(op.opaque for op in windowed.operations)
        out = pd.concat(
            [windowed.rows(paired, where=f"id % 16 = {m}") for m in range(16)]
        ).sort_values("_row")
        assert out["_row"].tolist() == list(range(240_000))
        row_of = dict(zip(src["id"].tolist(), src["_row"].tolist()))
        before = {}
        for _, rows in src.sort_values("id").groupby("cust"):
            ids = rows["id"].tolist()
            before.update({b: a for a, b in zip(ids, ids[1:])})
        frames_of = windowed.mapping(orders, paired).tocoo()
        got_frames = {}
        for r, c in zip(frames_of.row.tolist(), frames_of.col.tolist()):
            got_frames.setdefault(r, set()).add(c)
        for r, i in enumerate(out["id"].tolist()):
            want_frame = {row_of[i]} | ({row_of[before[i]]} if i in before else set())
            assert got_frames[r] == want_frame, (r, i)
