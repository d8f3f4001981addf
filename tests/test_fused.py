"""Fused capture (capture/sources/_fused.py) gives the same lineage as one job per operation.

Each pipeline is captured twice on the same data, with the block's reads fused and with
every operation reading its own keys (the path every other capture test also checks
against the oracle), and every tensor must be identical.  The fused capture must also
really be fused: the operations a rule covers take their tensors from the shared reads,
and the block runs fewer Spark jobs.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pandas as pd
import pytest

import tensprov_lab
from tensprov_lab._api import _tracker
from tensprov_lab.capture.spark._versions import spark4
from tests._dense import watch_dense_pairs

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def data(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any]:
    folder = tmp_path_factory.mktemp("fused")
    rng = np.random.default_rng(7)
    n = 600
    orders = [
        (
            i,
            None if i % 37 == 0 else int(rng.integers(0, 40)),
            None if i % 23 == 0 else float(np.round(rng.uniform(0, 100), 2)),
            None if i % 19 == 0 else f"d{int(rng.integers(0, 5))}",
        )
        for i in range(n)
    ]
    customers = [
        (
            c,
            None if c % 11 == 0 else f"r{c % 4}",
            None if c % 13 == 0 else c % 3,
        )
        for c in range(5, 50)  # some orders' customers are missing, some never order
    ]
    o = spark.createDataFrame(orders, "order_id long, cust_id long, amount double, day string")
    c = spark.createDataFrame(customers, "cust_id long, region string, segment int")
    # several files: several partitions, read back in scan order
    o.repartition(3).write.parquet(str(folder / "orders"))
    c.repartition(2).write.parquet(str(folder / "customers"))
    return (
        spark.read.parquet(str(folder / "orders")),
        spark.read.parquet(str(folder / "customers")),
    )


def _capture(spark: Any, fuse: bool, body: Any, direct: bool = True) -> Any:
    """Capture ``body``, its reads fused or not, and a fused read of a Parquet source
    from its files (``direct``) or through Spark."""
    tracker = _tracker(spark)
    tracker.fuse = fuse
    tracker.direct_reads = direct
    try:
        with tensprov_lab.track(spark, name=f"fused={fuse}") as run:
            body()
    finally:
        tracker.fuse = True
        tracker.direct_reads = True
    return run


def _compare(
    spark: Any, body: Any, fused_methods: list[str], fewer_jobs: bool = True, direct: bool = True
) -> Any:
    """Capture ``body`` both ways; every operation's tensors must be equal, the
    operations of ``fused_methods`` (in order) fused, and the fused run no slower in
    jobs."""
    plain = _capture(spark, False, body)
    fused = _capture(spark, True, body, direct)
    assert [op.method for op in plain.operations] == [op.method for op in fused.operations]
    for a, b in zip(plain.operations, fused.operations):
        assert not a.opaque and not b.opaque, (a.expression, a.warnings, b.warnings)
        assert a.category == b.category
        assert not a.fused
        assert [fused.store.datasets[i].n_rows for i in b.inputs] == [
            plain.store.datasets[i].n_rows for i in a.inputs
        ]
        assert len(a.tensors) == len(b.tensors)
        for ta, tb in zip(a.tensors, b.tensors):
            assert ta.shape == tb.shape
            assert (ta.to_sparse() != tb.to_sparse()).nnz == 0, a.expression
    assert [op.method for op in fused.operations if op.fused] == fused_methods, [
        (op.method, op.fused) for op in fused.operations
    ]
    assert not [w for w in fused.warnings if "fused capture not used" in w]
    if fewer_jobs:
        assert fused._log.jobs < plain._log.jobs
    assert sum(op.jobs for op in fused.operations) <= fused._log.jobs
    return fused


@pytest.mark.parametrize("direct", [False, True])
def test_filter_join_withcolumn_aggregate(spark: Any, data: Any, direct: bool) -> None:
    orders, customers = data
    out: dict[str, Any] = {}

    def body() -> None:
        big = orders.filter("amount > 20")
        joined = big.join(customers, "cust_id")
        priced = joined.withColumn("eur", joined.amount * 0.92)
        out["agg"] = priced.groupBy("region", "segment").agg({"eur": "sum", "*": "count"})

    run = _compare(spark, body, ["filter", "join", "agg"], direct=direct)
    if direct:
        # both sources are Parquet files Spark reads whole: read from the files, no job
        assert run._log.jobs == 0
        assert [op.jobs for op in run.operations] == [0, 0, 0, 0]
    else:
        # two jobs: one scan of each source (the filter's flag and the join key of
        # orders come from one read)
        assert run._log.jobs == 2
        assert run.operations[0].jobs == 1 and run.operations[-1].jobs == 0
    # the sources' partition sizes were not counted, and are when a raw key needs them
    rows = run.rows(out["agg"], rows=[0])
    assert len(rows) == 1


def test_reads_are_released_once_no_operation_needs_them(
    spark: Any, data: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The capture of each operation sees only the reads it and later operations still
    need: the orders' read (flag and join key) goes once the join's pairs are known, the
    join's pairs once the aggregate has its groups; the lineage stays the same."""
    from tensprov_lab.capture.recording._record_rules import RecordRules
    from tensprov_lab.capture.sources import _fused

    orders, customers = data
    seen: list[tuple[str, int, int, int]] = []
    fused_rule = RecordRules._fused_rule

    def spy(self: Any, rw: Any, occ: Any, out_ident: int, fusion: Any, rule: Any) -> Any:
        seen.append((rule.kind, len(fusion.tables), len(fusion._pairs), len(fusion._positions)))
        return fused_rule(self, rw, occ, out_ident, fusion, rule)

    monkeypatch.setattr(RecordRules, "_fused_rule", spy)
    after: list[_fused.Fusion] = []
    release = _fused.Fusion.release

    def spy_release(self: Any, done: int) -> None:
        release(self, done)
        after.append(self)

    monkeypatch.setattr(_fused.Fusion, "release", spy_release)

    def body() -> None:
        big = orders.filter("amount > 20")
        joined = big.join(customers, "cust_id")
        priced = joined.withColumn("eur", joined.amount * 0.92)
        priced.groupBy("region", "segment").agg({"eur": "sum", "*": "count"})

    run = _compare(spark, body, ["filter", "join", "agg"], direct=False)
    assert run._log.jobs == 2
    # (kind, tables held, join pairs held, positions held) as each rule starts
    assert [s[:2] for s in seen] == [("filter", 2), ("join", 2), ("group", 1)]
    assert seen[-1][2] == 1  # the aggregate reads the join's pairs …
    assert seen[-1][3] == 0  # … not the filter's survivors, gone with the orders' read
    fusion = after[-1]
    assert not fusion.tables and not fusion._pairs and not fusion._positions


@pytest.mark.parametrize("how", ["inner", "left", "right", "full"])
def test_outer_joins_and_groups_from_both_sides(spark: Any, data: Any, how: str) -> None:
    orders, customers = data

    def body() -> None:
        j = orders.join(customers, orders.cust_id == customers.cust_id, how)
        j.groupBy("day").count()
        j.groupBy("region", "day").count()
        j.groupBy("region", "segment").count()  # one side's: numbered over that side

    # the grouping columns are gathered from the side each comes from (null where an
    # outer join has no record on that side)
    _compare(spark, body, ["join", "count", "count", "count"])


def test_filter_chains_and_projections(spark: Any, data: Any) -> None:
    orders, customers = data

    def body() -> None:
        a = orders.where(orders.amount > 10)
        b = a.withColumn("big", a.amount > 60).filter("big")  # on a new column
        c = b.filter("day is not null").select("order_id", "cust_id", "day")
        d = c.dropna()
        d.join(customers.filter("segment = 1"), "cust_id").groupBy("region").agg(
            {"order_id": "max"}
        )
        orders.groupBy("day").count()  # an aggregate straight over a source

    _compare(spark, body, ["where", "filter", "filter", "dropna", "filter", "join", "agg",
                           "count"])  # fmt: skip


def test_not_fused_shapes_fall_back(spark: Any, data: Any) -> None:
    """A self-join, a non-equi join, rollup and a sort are not covered: they take their
    own jobs and give the same lineage."""
    orders, customers = data

    def body() -> None:
        o2 = orders.alias("x").join(orders.alias("y"), "order_id")
        o2.select("order_id").orderBy("order_id")
        orders.join(customers, orders.cust_id < customers.cust_id).count()
        orders.rollup("day").count()

    plain = _capture(spark, False, body)
    fused = _capture(spark, True, body)
    for a, b in zip(plain.operations, fused.operations):
        assert not b.fused
        for ta, tb in zip(a.tensors or [], b.tensors or []):
            assert (ta.to_sparse() != tb.to_sparse()).nnz == 0


def test_a_filter_with_a_subquery_is_not_read_in_scan_order(spark: Any) -> None:
    """Spark runs an ``IN`` subquery as a join, which reorders the records: such a
    filter (and what reads it) takes its own job, and its lineage is the exact one."""
    a = spark.createDataFrame([(i, i % 5) for i in range(30)], "id long, g long")
    spark.createDataFrame([(1,), (3,)], "g long").createOrReplaceTempView("fused_sub")
    out: dict[str, Any] = {}

    def body() -> None:
        out["kept"] = kept = a.filter("g IN (SELECT g FROM fused_sub)")
        out["agg"] = kept.groupBy("g").count()

    run = _capture(spark, True, body)
    assert not any(op.fused for op in run.operations)
    # kept in canonical (scan) order: ids 1, 3, 6, 8, ...
    kept_ids = [i for i in range(30) if i % 5 in (1, 3)]
    assert [int(run.backward(out["kept"], rows=[r])[a][0]) for r in range(4)] == kept_ids[:4]
    assert run.backward(out["agg"], rows=[0])[a].tolist() == [i for i in kept_ids if i % 5 == 1]


def test_fused_capture_of_a_source_with_unstable_order(spark: Any) -> None:
    """A source whose order is not stable (a shuffle in its plan) is pinned, not read in
    scan order: its filter takes its own job."""
    fresh = spark.createDataFrame([(i, float(i % 97)) for i in range(300)], "id long, x double")
    shuffled = fresh.repartition(4, "x")

    def body() -> None:
        shuffled.filter("x > 50")

    plain = _capture(spark, False, body)
    fused = _capture(spark, True, body)  # reads the copy the first capture pinned
    (a,), (b,) = plain.operations, fused.operations
    assert not b.fused and b.jobs >= 1
    assert (a.tensors[0].to_sparse() != b.tensors[0].to_sparse()).nnz == 0


def test_jobs_group_restored(spark: Any, data: Any) -> None:
    orders, _ = data
    sc = spark.sparkContext
    sc.setLocalProperty("spark.jobGroup.id", "users-own")
    tracker = _tracker(spark)
    tracker.direct_reads = False  # the filter's read is a Spark job
    try:
        with tensprov_lab.track(spark) as run:
            orders.filter("amount > 1")
        assert sc.getLocalProperty("spark.jobGroup.id") == "users-own"
        assert run.operations[0].jobs == 1
    finally:
        tracker.direct_reads = True
        sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]


@pytest.mark.parametrize("how", ["inner", "left", "full"])
def test_operations_after_a_fused_join_translate_its_keys(spark: Any, data: Any, how: str) -> None:
    """A sort and a union over a fused join read the join's record keys back: its key
    index (coded only when first used) must translate them as the per-operation
    capture's does (the tensors are compared), and recomputing join records through
    it gives the same records."""
    orders, customers = data
    joins: list[Any] = []

    def body() -> None:
        j = orders.join(customers, "cust_id", how)
        joins.append(j)
        j.orderBy("order_id", "region")
        j.union(j.filter("segment = 1"))

    # the union reads the join's keys back, running the join again (the per-operation
    # capture keeps the join's annotated result in Spark's cache for it): not fewer
    # jobs (the sort and the filter of the join's output are fused)
    fused = _compare(spark, body, ["join", "orderBy", "filter"], fewer_jobs=False)
    plain = tensprov_lab.runs()[-2]
    assert plain.name == "fused=False"
    n = fused.dataset(joins[1]).n_rows
    picked = sorted({0, n // 3, n - 1})
    got = fused.rows(joins[1], rows=picked)
    want = plain.rows(joins[0], rows=picked)
    assert got.attrs.get("recomputed") is True
    pd.testing.assert_frame_equal(got.reset_index(drop=True), want.reset_index(drop=True))


def test_operations_after_a_fused_filter_translate_its_keys(spark: Any, data: Any) -> None:
    """A fused filter's key index is made only when a later operation first translates a
    key through it (a union reads the filter's record keys back): the tensors
    must be the per-operation capture's, and an index nothing translated is not made."""
    orders, customers = data
    kept: list[Any] = []

    def body() -> None:
        big = orders.filter("amount > 20")
        kept.append(big)
        big.orderBy("amount", "order_id")
        big.union(big.filter("cust_id % 3 = 0"))

    # (the sort is fused too: its values read with the filter's)
    fused = _compare(spark, body, ["filter", "orderBy", "filter"], fewer_jobs=False)
    node = fused._tracker.node_of(kept[0])
    assert node is not None and node.ki is not None
    assert node.ki._in_to_out is not None  # made by the union's lookups
    # the output row of each input row, as the filter's tensor says
    tensor = fused.operations[0].tensors[0]
    n_out, n_in = tensor.shape
    out, rows = tensor.backward_pairs(np.arange(n_out))
    want = np.full(n_in, -1)
    want[rows] = out
    assert 0 < n_out < n_in
    assert np.array_equal(node.ki.in_to_out, want)

    def alone() -> None:
        kept.append(orders.filter("amount > 30").join(customers, "cust_id"))

    run = _compare(spark, alone, ["filter", "join"])
    big = run._tracker.by_ds[run.operations[0].output]
    assert big.ki is not None and big.ki._in_to_out is None  # nothing translated a key
    assert big.ki.nbytes == 0


@pytest.mark.parametrize("direct", [True, False])
def test_a_source_read_through_a_projection_is_not_counted(
    spark: Any, data: Any, monkeypatch: pytest.MonkeyPatch, direct: bool
) -> None:
    """A filter of a projection of a source (COMPAS: select, then dropna) reads every
    record of the source in scan order: the source's size comes from that read, and the
    count started while the block ran is cancelled before the reads begin (a count still
    running would take cores from them).  The read goes through Spark, or (``direct``)
    straight to the source's files through the projection."""
    from tensprov_lab.capture.plan._keys import LazyScanKeyIndex
    from tensprov_lab.capture.sources import _fused

    orders, _ = data
    tracker = _tracker(spark)
    at_fetch: list[dict[int, bool]] = []
    fetch = _fused.Fusion.fetch

    def watched(self: Any, count_jobs: Any) -> None:
        at_fetch.append({i: f is not None for i, (_, f) in tracker._early.items()})
        fetch(self, count_jobs)

    monkeypatch.setattr(_fused.Fusion, "fetch", watched)
    kept: list[Any] = []
    folder = os.path.dirname(orders.inputFiles()[0])

    def body() -> None:
        # a source new to each block (a block counts only its new sources early)
        picked = spark.read.parquet(folder).select("order_id", "amount", "day")
        kept.append(picked.dropna().withColumn("cents", picked.amount * 100))

    # (one job either way through Spark: the per-operation capture's dropna reads its
    # keys in one)
    fused = _compare(spark, body, ["dropna"], fewer_jobs=direct, direct=direct)
    assert fused._log.jobs == (0 if direct else 1)
    # the fused run's counts: started at the select, cancelled before its read
    assert at_fetch[-1] and not any(at_fetch[-1].values())
    source = fused._tracker.by_ds[fused.operations[0].inputs[0]]
    assert isinstance(source.ki, LazyScanKeyIndex) and source.ki._count is not None
    assert source.ki.n == orders.count()
    # a raw key translated later counts it then, and the lineage still reads back
    rows = fused.rows(kept[0], rows=[0])
    assert len(rows) == 1


@pytest.mark.parametrize("how", ["inner", "left"])
def test_a_foreign_key_join_reads_its_pairs_from_the_key_columns(
    spark: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """A join on one integer key that is unique on the right, non-negative and never
    null takes its pairs straight from the key columns (``dense_pairs``), the filtered
    left side's records picked by their positions: the lineage is the per-operation
    capture's."""
    from tensprov_lab.capture.sources import _fused

    rng = np.random.default_rng(3)
    # keys 0..59 on the left, 0..49 on the right: some left records match nothing
    facts = pd.DataFrame({"k": rng.integers(0, 60, 700), "v": rng.uniform(0, 100, 700)})
    dims = pd.DataFrame({"k": rng.permutation(50), "g": rng.integers(0, 4, 50)})
    spark.createDataFrame(facts).repartition(3).write.parquet(str(tmp_path / "facts"))
    spark.createDataFrame(dims).repartition(2).write.parquet(str(tmp_path / "dims"))
    f = spark.read.parquet(str(tmp_path / "facts"))
    d = spark.read.parquet(str(tmp_path / "dims"))
    used = watch_dense_pairs(monkeypatch, _fused)

    def body() -> None:
        f.filter("v > 30").join(d, "k", how).groupBy("g").agg({"v": "sum"})

    _compare(spark, body, ["filter", "join", "agg"])
    assert used == [True]


def test_a_direct_read_that_cannot_read_its_files_is_read_by_spark(
    spark: Any, tmp_path: Any
) -> None:
    """A NaN in a compared float column is found only when the files are read: that read
    then goes through Spark (one job), with the same lineage."""
    rows = [(i, float("nan") if i % 9 == 0 else float(i % 13), i % 4) for i in range(200)]
    spark.createDataFrame(rows, "id long, x double, g long").repartition(2).write.parquet(
        str(tmp_path / "nan")
    )
    source = spark.read.parquet(str(tmp_path / "nan"))

    def body() -> None:
        source.filter("x > 6").groupBy("g").count()

    run = _compare(spark, body, ["filter", "count"], fewer_jobs=False)
    assert run._log.jobs >= 1 and run.operations[0].jobs >= 1


def test_a_csv_source_is_read_from_its_file(spark: Any, tmp_path: Any) -> None:
    """A CSV source selected and cleaned as the COMPAS pipeline does (select, dropna,
    recoding) is read straight from its file, quoted values and doubled quotes (in a
    column not read) included: no Spark job, the per-operation capture's lineage."""
    lines = ["id,age,race,desc,days,note"]
    for i in range(300):
        age = "" if i % 17 == 0 else str(18 + i % 50)
        days = "" if i % 23 == 0 else f"{(i % 9) - 1}.0"
        race = '"Afr,Am"' if i % 3 else "Caucasian"
        note = '"a ""b"" c"' if i % 5 == 0 else "n"
        lines.append(f"{i},{age},{race},d{i % 4},{days},{note}")
    path = tmp_path / "people.csv"
    path.write_text("\n".join(lines) + "\n")
    schema = "id int, age int, race string, desc string, days double, note string"
    source = spark.read.csv(str(path), header=True, schema=schema)

    def body() -> None:
        from pyspark.sql import functions as F

        df = source.select("age", "race", "days").dropna()
        df.withColumn("race", F.when(F.col("race") == "Caucasian", 1).otherwise(0))

    run = _compare(spark, body, ["dropna"])
    assert run._log.jobs == 0 and run.operations[1].jobs == 0
    assert run.store.datasets[run.operations[1].output].n_rows == sum(
        1 for i in range(300) if i % 17 and i % 23
    )


def test_a_spark_read_in_pieces_gives_the_lineage_of_one_job_per_operation(
    spark: Any, data: Any, monkeypatch: Any
) -> None:
    """A source read through Spark in pieces of scan positions (a driver of small
    memory: pieces of 60 positions of each of its 3 partitions) gives the lineage of
    the capture that reads nothing fused, each piece a job."""
    from pyspark.sql import functions as F

    from tensprov_lab.capture.sources import _fused

    orders, customers = data
    asked: list[int] = []
    monkeypatch.setattr(_fused, "positions_per_piece", lambda session, row: asked.append(row) or 60)
    out: dict[str, Any] = {}

    def body() -> None:
        big = orders.filter("amount > 20")
        out["joined"] = big.join(customers, "cust_id")

    run = _compare(spark, body, ["filter", "join"], fewer_jobs=False, direct=False)
    # orders (600 records, 3 partitions): pieces of 60 positions until one is not full
    # in any partition; customers (45): one request
    largest = int(orders.groupBy(F.spark_partition_id()).count().toPandas()["count"].max())
    assert asked and run._log.jobs == largest // 60 + 1 + 1, (run._log.jobs, largest)


@pytest.mark.skipif(
    not spark4(),
    reason="KNOWN FAILURE on pyspark 3.5 in CI's 3.5 list (passes alone): the sort past "
    "the 1 MB limit stays opaque there; open, see the stop note of 2026-11-30",
)
def test_a_source_past_the_drivers_result_limit_is_read_in_smaller_pieces(
    spark: Any, tmp_path: Any, monkeypatch: Any
) -> None:
    """A driver whose ``spark.driver.maxResultSize`` is smaller than a source's read:
    capture reads it in pieces under the limit (every operation was opaque), asking
    again in smaller pieces when Spark refuses one, with the lineage the data says.  An
    operation traced by a job of its own (a sort of a join) whose keys pass the
    limit reads its result in pieces too (it was opaque), in the order of the result."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from tensprov_lab.capture.plan import _pieces

    results: list[int] = []
    read_result = _pieces.read_result_in_pieces

    def counted(df: Any, names: list[str], *args: Any, **kwargs: Any) -> Any:
        table = read_result(df, names, *args, **kwargs)
        results.append(table.num_rows)
        return table

    spark.range(0, 240_000, 1, 8).select(
        "id",
        (F.col("id") * 7 % 11).alias("cust"),
        (F.col("id") % 13).cast("double").alias("amount"),
    ).write.parquet(str(tmp_path / "orders"))
    spark.range(0, 11).select(
        F.col("id").alias("cust"), (F.col("id") % 3).alias("region")
    ).write.parquet(str(tmp_path / "customers"))
    orders = spark.read.parquet(str(tmp_path / "orders"))
    customers = spark.read.parquet(str(tmp_path / "customers"))
    ids = orders.select("id").toPandas()["id"].to_numpy()  # in scan order: canonical
    pairs_window = Window.partitionBy("cust").orderBy("id").rowsBetween(-1, 0)
    conf = spark.sparkContext._jsc.sc().conf()  # read by every new stage
    before = conf.get("spark.driver.maxResultSize", "1g")
    conf.set("spark.driver.maxResultSize", "1m")
    monkeypatch.setattr(_pieces, "read_result_in_pieces", counted)
    try:
        with tensprov_lab.track(spark, name="limit") as run:
            tracker = _tracker(spark)
            tracker.direct_reads = False
            big = orders.filter("amount > 3 AND amount < 11")
            joined = big.join(customers, "cust")
            ordered = joined.orderBy("id")
            ranked = joined.withColumn("pair", F.sum("amount").over(pairs_window))
    finally:
        conf.set("spark.driver.maxResultSize", before)
        _tracker(spark).direct_reads = True
    assert not any(op.opaque for op in run.operations), [op.warnings for op in run.operations]
    assert run._log.jobs > 3
    back = np.sort(run.backward(big)[orders])
    assert back.tolist() == np.flatnonzero((ids % 13 > 3) & (ids % 13 < 11)).tolist()
    pairs = run.mapping(orders, joined).tocoo()  # (a joined record x an order)
    assert sorted(pairs.col.tolist()) == back.tolist()  # every kept order has its customer
    # the sort's keys, past the limit, read in pieces: its record i is the kept order
    # of the i-th smallest id
    assert len(back) in results, results
    sorted_pairs = run.mapping(orders, ordered).tocoo()
    assert sorted(sorted_pairs.row.tolist()) == list(range(len(back)))
    by_row = sorted_pairs.col[np.argsort(sorted_pairs.row)]
    assert by_row.tolist() == back[np.argsort(ids[back], kind="stable")].tolist()
    assert run.rows(ordered)["id"].tolist() == sorted(ids[back].tolist())
    # a window over the join (its rule reads its frames, past the limit too): the
    # lineage of the same block captured under the default limit, in one job each
    orders2 = spark.read.parquet(str(tmp_path / "orders"))
    customers2 = spark.read.parquet(str(tmp_path / "customers"))
    with tensprov_lab.track(spark, name="no limit") as whole:
        joined2 = orders2.filter("amount > 3 AND amount < 11").join(customers2, "cust")
        ranked2 = joined2.withColumn("pair", F.sum("amount").over(pairs_window))
    assert not any(op.opaque for op in whole.operations)
    mine, want = run.mapping(orders, ranked), whole.mapping(orders2, ranked2)
    assert mine.shape == want.shape and (mine != want).nnz == 0
    assert run.rows(ranked).equals(whole.rows(ranked2))


def test_a_sql_statements_steps_are_fused(spark: Any, data: Any) -> None:
    """A statement's steps read their tables through a view and an alias, and a step's
    SELECT projection sits above its filter: the same records, fused as DataFrame calls
    are (a comma join's condition, a filter pushed below it, a grouping over both sides)."""
    orders, customers = data
    orders.createOrReplaceTempView("fused_orders")
    customers.createOrReplaceTempView("fused_customers")

    def body() -> None:
        spark.sql(
            "SELECT region, day, count(*) AS n, sum(amount) AS total "
            "FROM fused_orders o, fused_customers c "
            "WHERE o.cust_id = c.cust_id AND amount > 20 AND segment = 1 GROUP BY region, day"
        )
        spark.sql("SELECT order_id, amount * 2 AS twice FROM fused_orders WHERE day = 'd1'")

    run = _compare(spark, body, ["sql:Filter", "sql:Filter", "sql:Join", "sql:Aggregate",
                                 "sql:Filter"])  # fmt: skip
    assert [op.jobs for op in run.operations] == [0, 0, 0, 0, 0]


@pytest.fixture(scope="module")
def zones(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    folder = tmp_path_factory.mktemp("zones")
    rows = [("r0", "north", 1), ("r1", "south", 2), ("r2", "north", None), ("r9", "west", 3)]
    spark.createDataFrame(rows, "region string, zone string, tier int").write.parquet(
        str(folder / "zones")
    )
    tiers = [(1, "gold"), (2, "silver"), (2, "steel"), (4, "tin")]
    spark.createDataFrame(tiers, "tier int, metal string").write.parquet(str(folder / "tiers"))
    return spark.read.parquet(str(folder / "zones")), spark.read.parquet(str(folder / "tiers"))


@pytest.fixture
def views(data: Any, zones: Any) -> None:
    """The sources as the temp views a SQL statement reads."""
    orders, customers = data
    orders.createOrReplaceTempView("fused_orders")
    customers.createOrReplaceTempView("fused_customers")
    zones[0].createOrReplaceTempView("fused_zones")


@pytest.mark.parametrize("how", ["inner", "left", "full"])
def test_chains_of_joins_are_matched_join_by_join(
    spark: Any, data: Any, zones: Any, how: str
) -> None:
    """A join of a join's output (keys from either joined dataset, an outer join's
    missing records null) and groupings over the chain's datasets: fused, as the
    unfused capture numbers them."""
    orders, customers = data
    zones, tiers = zones

    def body() -> None:
        oc = orders.join(customers, orders.cust_id == customers.cust_id, how)
        ocz = oc.join(zones, "region", how)
        ocz.groupBy("zone").count()
        ocz.groupBy("zone", "day").count()  # from two of the joined datasets
        metals = ocz.join(tiers.where("metal != 'tin'").select("tier", "metal"), "tier", how)
        metals.groupBy("metal", "segment").count()

    _compare(spark, body, ["join", "join", "count", "count", "where", "join", "count"])


def test_a_multi_way_comma_join_is_fused(spark: Any, views: None) -> None:

    def body() -> None:
        spark.sql(
            "SELECT zone, day, count(*) AS n FROM fused_orders o, fused_customers c, "
            "fused_zones z WHERE o.cust_id = c.cust_id AND c.region = z.region "
            "AND amount > 20 GROUP BY zone, day"
        )

    run = _compare(spark, body, ["sql:Filter", "sql:Join", "sql:Join", "sql:Aggregate"])
    assert [op.jobs for op in run.operations] == [0, 0, 0, 0]


def test_a_sort_of_fused_groups_is_fused(spark: Any, data: Any, zones: Any) -> None:
    """The groups of a fused aggregate sorted by their values (ties, nulls first and
    last, descending, a double, a decimal, a string, a count) and by grouping values:
    ordered as the unfused capture orders them, ties in canonical order."""
    from pyspark.sql import functions as F

    orders, customers = data
    zones, _ = zones

    def body() -> None:
        by_day = orders.groupBy("day", "cust_id").agg(F.count("*").alias("n"))
        by_day.orderBy(F.desc("n"))  # many ties
        by_day.orderBy(F.col("day").desc_nulls_first(), F.col("cust_id").asc_nulls_last())
        j = orders.join(customers, "cust_id").join(zones, "region", "left")
        g = j.groupBy("zone", "segment").agg(
            F.sum("amount").alias("total"),
            F.sum(F.col("amount").cast("decimal(12,2)")).alias("exact"),
        )
        g.orderBy("total").limit(4)  # the first records of sorted groups: fused too
        g.orderBy(F.desc_nulls_last("exact"), "zone").limit(100)  # (more than there are)

    run = _compare(spark, body, ["agg", "orderBy", "orderBy", "join", "join", "agg",
                                 "orderBy", "limit", "orderBy", "limit"])  # fmt: skip
    # by grouping values, by a count (known from the groups' sizes) or by an exact sum
    # (see test_exact_sums_of_fused_groups_are_computed_from_them): sorted without a job;
    # by a sum of doubles (its value depends on Spark's order of adding) or of doubles
    # cast to decimals (Spark rounds them), one job of the plan below
    assert run.operations[2].jobs == 0 and run.operations[1].jobs == 0
    assert run.operations[6].jobs > 0


def test_a_statements_order_by_over_its_groups_is_fused(spark: Any, views: None) -> None:

    def body() -> None:
        spark.sql(
            "SELECT zone, day, sum(amount) AS total FROM fused_orders o, fused_customers c, "
            "fused_zones z WHERE o.cust_id = c.cust_id AND c.region = z.region "
            "GROUP BY zone, day ORDER BY total DESC, day LIMIT 7"
        )

    run = _compare(spark, body, ["sql:Join", "sql:Join", "sql:Aggregate", "sql:Sort",
                                 "sql:GlobalLimit"])  # fmt: skip
    # the sort: the statement's own plan below it, run once without keys (its shuffle and
    # broadcasts are jobs of their own), nothing counted
    assert [op.jobs for op in run.operations][:3] == [0, 0, 0]
    assert run.operations[-1].jobs == 0  # (the limit: the first 7 sorted records)


def test_groups_of_counts_and_sorts_by_counts_are_fused(spark: Any, data: Any, views: None) -> None:
    """TPC-H Q13's shape: a grouping by a count of a left outer join's records (the
    subquery's columns renamed by its alias; a count of a column skips its nulls and
    the customers without orders), then a sort by a count: both known from the groups,
    fused without a job, as the unfused capture numbers them."""
    from pyspark.sql import functions as F

    orders, _ = data

    def body() -> None:
        spark.sql(
            "SELECT c_count, count(*) AS custdist FROM (SELECT c.cust_id, count(o.amount) "
            "FROM fused_customers c LEFT OUTER JOIN fused_orders o ON c.cust_id = o.cust_id "
            "AND o.day <> 'd1' GROUP BY c.cust_id) AS co (cust_id, c_count) "
            "GROUP BY c_count ORDER BY custdist DESC, c_count DESC"
        )
        per = orders.groupBy("cust_id").agg(F.count("day").alias("days"), F.count("*").alias("n"))
        per.groupBy("days").agg(F.count("*").alias("k")).orderBy(F.desc("k"), "days")
        per.orderBy("n", F.desc("days"), "cust_id")  # a count, another, a grouping value

    run = _compare(spark, body, ["sql:Join", "sql:Aggregate", "sql:Aggregate", "sql:Sort",
                                 "agg", "agg", "orderBy", "orderBy"])  # fmt: skip
    assert [op.jobs for op in run.operations] == [0] * len(run.operations)


def test_a_join_pairing_more_than_numpy_may_takes_its_own_job(
    spark: Any, data: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A many-to-many join past the pairs a fused join may match (a comma join's steps
    below its last filter can pair far more records than the statement returns) is
    captured by its own job, as are the steps over it: the same lineage, no warning."""
    from pyspark.sql import functions as F

    from tensprov_lab.capture.sources import _fused

    orders, customers = data

    def body() -> None:
        seg = orders.withColumn("segment", (F.col("cust_id") % 3).cast("int"))
        pairs = seg.join(customers.drop("cust_id"), "segment")  # ~600 x 45 / 3 pairs
        pairs.groupBy("region").count()

    monkeypatch.setattr(_fused, "MAX_PAIRS", 1000)
    run = _compare(spark, body, [], fewer_jobs=False)
    assert run.store.datasets[run.operations[-2].output].n_rows > 1000
    monkeypatch.setattr(_fused, "MAX_PAIRS", 10**9)
    _compare(spark, body, ["join", "count"])


def test_semi_and_anti_joins_are_fused(spark: Any, data: Any, views: None) -> None:
    """Semi and anti joins (``EXISTS`` / ``IN`` / ``NOT EXISTS`` after the statement's
    rewriting, and ``left_semi`` / ``left_anti`` calls): the left records with a match
    (without one, null keys among them) and the right records each one matched, as
    the unfused capture gives them; a grouping over the kept records fused too."""
    orders, customers = data

    def body() -> None:
        kept = orders.join(customers.where("segment = 1"), "cust_id", "left_semi")
        kept.groupBy("day").count()
        orders.join(customers, "cust_id", "left_anti")
        # each customer matches many orders
        customers.join(orders.where("amount > 50"), "cust_id", "left_semi")
        spark.sql(
            "SELECT day, count(*) AS n FROM fused_orders o WHERE EXISTS (SELECT * FROM "
            "fused_customers c WHERE c.cust_id = o.cust_id AND c.segment = 1) GROUP BY day"
        )
        spark.sql(
            "SELECT region FROM fused_customers c WHERE NOT EXISTS (SELECT * FROM "
            "fused_orders o WHERE o.cust_id = c.cust_id AND amount > 90)"
        )
        spark.sql(
            "SELECT order_id FROM fused_orders WHERE cust_id IN "
            "(SELECT cust_id FROM fused_customers WHERE region = 'r1')"
        )

    run = _compare(spark, body, ["where", "join", "count", "join", "where", "join",
                                 "sql:Filter", "sql:Join", "sql:Aggregate", "sql:Filter",
                                 "sql:Join", "sql:Filter", "sql:Join"])  # fmt: skip
    assert run._log.jobs == 0  # (Parquet sources: every read from the files)


def test_joins_with_conditions_beyond_their_keys_are_fused(
    spark: Any, data: Any, views: None
) -> None:
    """An inner, semi or anti join whose condition has more than key equalities: its
    key pairs matched in NumPy, the rest of the condition evaluated on each pair's
    values (three-valued: a null is no match), as the unfused capture pairs them; a
    comma join whose WHERE is an OR of branches that all hold the join key (TPC-H Q19)."""
    orders, customers = data

    def body() -> None:
        same = orders.cust_id == customers.cust_id
        orders.join(customers, same & (orders.day != customers.region) & (orders.amount > 20))
        orders.join(customers, same & (customers.region < orders.day), "left_semi")
        orders.join(customers, same & (customers.region < orders.day), "left_anti")
        spark.sql(
            "SELECT region, count(*) AS n FROM fused_orders o, fused_customers c "
            "WHERE (o.cust_id = c.cust_id AND c.segment = 1 AND o.amount > 50) "
            "OR (o.cust_id = c.cust_id AND c.region = 'r2' AND o.day < c.region) "
            "GROUP BY region"
        )
        for how in ("left", "right", "full"):  # (each side's records without a pair kept)
            orders.join(
                customers, same & (orders.amount > 20) & (customers.region < orders.day), how
            )
        spark.sql(  # (TPC-H Q13's shape: counts of counts over an outer join's condition)
            "SELECT n, count(*) AS k FROM (SELECT c.cust_id, count(o.order_id) AS n "
            "FROM fused_customers c LEFT OUTER JOIN fused_orders o ON c.cust_id = o.cust_id "
            "AND o.day NOT LIKE '%1' GROUP BY c.cust_id) t GROUP BY n ORDER BY k DESC, n DESC"
        )

    methods = ["join", "join", "join", "sql:Join", "sql:Aggregate", "join", "join", "join",
               "sql:Join", "sql:Aggregate", "sql:Aggregate", "sql:Sort"]  # fmt: skip
    run = _compare(spark, body, methods)
    # the comma join: the key shared out of the OR, the rest of it the join's condition
    assert "OR" in run.operations[3].expression
    # read from the files, but for Q13's counts of counts (its inner counts through
    # Spark, see the steps over an aggregate's output) and its sort by a count
    assert [op.jobs for op in run.operations[:10]] == [0] * 10


def test_a_table_a_statement_reads_twice_is_fused(spark: Any, views: None) -> None:
    """A self-join and a subquery over the statement's own table read a copy of its
    source with attributes of its own (Spark's analyzer makes each reference anew):
    the same records, read over the copy, fused as the source's own steps are."""

    def body() -> None:
        spark.sql(
            "SELECT o.order_id FROM fused_orders o WHERE EXISTS (SELECT * FROM fused_orders "
            "o2 WHERE o2.cust_id = o.cust_id AND o2.order_id <> o.order_id AND o2.amount > 90)"
        )
        spark.sql(
            "SELECT c1.region, count(*) AS n FROM fused_customers c1, fused_customers c2 "
            "WHERE c1.segment = c2.segment AND c1.region < c2.region GROUP BY c1.region"
        )
        spark.sql(
            "SELECT region FROM fused_customers WHERE segment > "
            "(SELECT avg(segment) FROM fused_customers WHERE region = 'r1')"
        )

    # (the self-join of one dataset with itself is not fused yet: its own job)
    run = _compare(spark, body, ["sql:Filter", "sql:Join", "sql:Filter", "sql:Filter"])
    assert [op.jobs for op in run.operations[:2]] == [0, 0]  # (read from the files)


def test_filters_with_an_uncorrelated_scalar_subquery_are_fused(spark: Any, views: None) -> None:
    """A filter comparing with an uncorrelated scalar subquery's value (Spark computes
    it before the query, the records' order kept) is fused over a source, over an
    aggregate's output (a HAVING: TPC-H Q11), and over a CTE's aggregate read twice
    whose grouping attribute is renamed (TPC-H Q15's ``l_suppkey AS supplier_no``); the
    steps above it too.  The value's own record is every output record's context."""

    def body() -> None:
        spark.sql(
            "SELECT cust_id, sum(amount) AS total FROM fused_orders GROUP BY cust_id "
            "HAVING sum(amount) > (SELECT avg(amount) * 10 FROM fused_orders) ORDER BY total"
        )
        spark.sql(
            "WITH t AS (SELECT cust_id AS who, sum(amount) AS total FROM fused_orders "
            "WHERE day <> 'd0' GROUP BY cust_id) "
            "SELECT c.region, t.total FROM fused_customers c, t "
            "WHERE c.cust_id = t.who AND t.total = (SELECT max(total) FROM t) ORDER BY c.region"
        )

    run = _compare(
        spark,
        body,
        ["sql:Aggregate", "sql:Filter", "sql:Sort", "sql:Filter", "sql:Aggregate",
         "sql:Filter", "sql:Aggregate", "sql:Filter", "sql:Join", "sql:Sort"],
    )  # fmt: skip
    having = next(op for op in run.operations if "scalar-subquery" in str(op.expression))
    assert len(having.inputs) == 2  # its input, and the subquery's value (one record)
    assert run.store.datasets[having.inputs[1]].n_rows == 1


@pytest.mark.parametrize("how", ["inner", "left", "full"])
def test_filters_of_a_joins_output_are_fused(
    spark: Any, data: Any, zones: Any, views: None, how: str
) -> None:
    """A filter of a join's output (a condition over both joined tables, nulls of an
    outer join's missing side among its values): its condition evaluated on each
    record's values, read over the joined datasets; the joins, filters and groupings
    above it fused over its records, as the unfused capture numbers them."""
    orders, customers = data
    zones, _ = zones

    def body() -> None:
        oc = orders.join(customers, orders.cust_id == customers.cust_id, how)
        picked = oc.where("(region = 'r1' AND amount > 30) OR (day < region AND segment IS NULL)")
        picked.groupBy("region").count()
        placed = picked.join(zones, "region", how).where("zone != 'south' OR tier IS NULL")
        placed.groupBy("zone", "day").count()
        spark.sql(  # (a condition over an outer join's both sides stays above it)
            "SELECT day, count(*) AS n FROM fused_orders o LEFT JOIN fused_customers c "
            "ON o.cust_id = c.cust_id WHERE c.region IS NULL OR o.amount > 90 GROUP BY day"
        )

    run = _compare(spark, body, ["join", "where", "count", "join", "where", "count",
                                 "sql:Join", "sql:Filter", "sql:Aggregate"])  # fmt: skip
    assert run._log.jobs == 0


def test_groups_by_computed_values_and_a_table_joined_twice_are_fused(
    spark: Any, data: Any, views: None
) -> None:
    """Groupings by values a projection computes over one joined table (TPC-H Q7's
    ``year(l_shipdate) AS l_year``, ``n1.n_name AS supp_nation``), read over that
    table's records; a table a statement joins twice (Q7's two nations): each side's
    columns over its own copy, as the unfused capture numbers them."""
    from pyspark.sql import functions as F

    orders, customers = data

    def body() -> None:
        oc = orders.join(customers, "cust_id", "left")
        oc.withColumn("d", F.substring("day", 2, 1)).groupBy("d", "region").count()
        spark.sql(
            "SELECT a, b, k, count(*) AS n FROM (SELECT z1.zone AS a, z2.zone AS b, "
            "substring(o.day, 2, 1) AS k FROM fused_orders o, fused_customers c, "
            "fused_zones z1, fused_zones z2 WHERE o.cust_id = c.cust_id AND "
            "c.region = z1.region AND c.segment = z2.tier) t GROUP BY a, b, k ORDER BY a, b, k"
        )

    run = _compare(spark, body, ["join", "count", "sql:Join", "sql:Join", "sql:Join",
                                 "sql:Aggregate", "sql:Sort"])  # fmt: skip
    assert run._log.jobs == 0


def test_steps_over_an_aggregates_output_and_sorts_of_records_are_fused(
    spark: Any, data: Any, views: None
) -> None:
    """An aggregate's output read by the steps over it (a correlated scalar subquery's
    join and its comparison, TPC-H Q17's shape; a HAVING and the semi join over it,
    Q18's; a DataFrame join with grouped output on its key): its records read through
    Spark and put in canonical order by their grouping values; a sort of a join's
    records by their values (Q2's ORDER BY over its joined tables), and its limit."""
    from pyspark.sql import functions as F

    orders, customers = data

    def body() -> None:
        spark.sql(
            "SELECT o.order_id, o.amount FROM fused_orders o, fused_customers c "
            "WHERE o.cust_id = c.cust_id AND o.amount > (SELECT 0.5 * avg(amount) "
            "FROM fused_orders o2 WHERE o2.cust_id = o.cust_id) "
            "ORDER BY c.region DESC, o.amount, o.order_id LIMIT 40"
        )
        spark.sql(
            "SELECT order_id FROM fused_orders WHERE cust_id IN (SELECT cust_id "
            "FROM fused_orders GROUP BY cust_id HAVING sum(amount) > 1500)"
        )
        totals = orders.groupBy("cust_id").agg(F.sum("amount").alias("total"), F.count("*"))
        joined = customers.join(totals, "cust_id", "left").where("total > 700 OR segment = 2")
        joined.orderBy(F.desc("total"), "cust_id")

    methods = ["sql:Aggregate", "sql:Join", "sql:Filter", "sql:Join", "sql:Sort",
               "sql:GlobalLimit", "sql:Aggregate", "sql:Filter", "sql:Join", "agg", "join",
               "where", "orderBy"]  # fmt: skip
    run = _compare(spark, body, methods)
    # the jobs are the reads of the aggregates' outputs (by the first step reading a value
    # their groups do not give: the filters; the joins on grouping values read none);
    # the sorts read their values over the sources' files
    reading = {2, 7, 11}
    assert all(op.jobs == 0 for k, op in enumerate(run.operations) if k not in reading)


def test_not_in_subqueries_are_fused(spark: Any, views: None) -> None:
    """``NOT IN`` (a null-aware anti join, TPC-H Q16's): a null key on the left keeps no
    record, a null among the subquery's values none at all, and an empty subquery every
    record; as the unfused capture gives them."""

    def body() -> None:
        spark.sql(  # (orders' cust_id has nulls)
            "SELECT order_id FROM fused_orders WHERE cust_id NOT IN "
            "(SELECT cust_id FROM fused_customers WHERE region = 'r1')"
        )
        spark.sql(
            "SELECT region FROM fused_customers WHERE cust_id NOT IN "
            "(SELECT cust_id FROM fused_orders)"
        )
        spark.sql(
            "SELECT order_id FROM fused_orders WHERE cust_id NOT IN "
            "(SELECT cust_id FROM fused_customers WHERE region = 'nowhere')"
        )

    run = _compare(spark, body, ["sql:Filter", "sql:Join", "sql:Join", "sql:Filter",
                                 "sql:Join"])  # fmt: skip
    # (the subquery over orders is a projection of its own: not a fused rule)
    sizes = [run.store.datasets[op.output].n_rows for op in run.operations]
    assert 0 < sizes[1] <= 600 - 17  # (17 orders have a null key: none kept)
    assert sizes[3] == 0  # (a null among the subquery's values)
    assert sizes[5] == 600  # (NOT IN of nothing: every order, null keys too)
    assert run._log.jobs == 0


def test_computed_groups_over_an_outer_joins_missing_side(spark: Any, data: Any) -> None:
    """A grouping value computed over one table of an outer join: a record without a
    record of that table is grouped by the value Spark computes of nulls. An
    expression null goes through (``upper``) is fused; one that turns null into a value
    (``coalesce``) is captured by its own job; both as the unfused capture groups."""
    from pyspark.sql import functions as F

    orders, customers = data

    def body() -> None:
        oc = orders.join(customers, "cust_id", "left")
        oc.withColumn("r", F.upper("region")).groupBy("r").count()
        oc.withColumn("r", F.coalesce("region", F.lit("none"))).groupBy("r").count()

    run = _compare(spark, body, ["join", "count"], fewer_jobs=False)
    assert run.operations[-1].jobs > 0 and not run.operations[-1].fused


@pytest.fixture
def lines(spark: Any, views: None, tmp_path: Any) -> None:
    """A view ``fused_lines`` of the orders with decimal prices and discounts, and an
    integer quantity (TPC-H's lineitem, in small)."""
    spark.sql(
        "SELECT order_id, cust_id, day, CAST(amount AS decimal(12,2)) AS price, "
        "CAST(cust_id / 100 AS decimal(12,2)) AS discount, CAST(order_id % 7 AS int) AS qty "
        "FROM fused_orders"
    ).repartition(2).write.parquet(str(tmp_path / "lines"))
    spark.read.parquet(str(tmp_path / "lines")).createOrReplaceTempView("fused_lines")


def test_exact_sums_of_fused_groups_are_computed_from_them(spark: Any, lines: None) -> None:
    """Sums of decimals and integers (of products and differences of them: TPC-H Q3's
    ``sum(l_extendedprice * (1 - l_discount))``) computed from a fused aggregate's
    groups: a sort by one with a limit, a ``HAVING`` over one (Q18's), groups whose
    every value is null, all without a job; a decimal sum that may pass 63 bits is read
    through Spark, the same tensors either way."""

    def body() -> None:
        spark.sql(
            "SELECT cust_id, day, sum(price * (1 - discount)) AS revenue FROM fused_lines "
            "GROUP BY cust_id, day ORDER BY revenue DESC NULLS LAST, day LIMIT 25"
        )
        spark.sql(
            "SELECT order_id FROM fused_lines WHERE cust_id IN (SELECT cust_id FROM "
            "fused_lines GROUP BY cust_id HAVING sum(price) > 900)"
        )
        spark.sql(
            "SELECT cust_id, sum(order_id - 300) AS s, sum(CAST(NULL AS bigint)) AS none "
            "FROM fused_lines GROUP BY cust_id ORDER BY s, cust_id"
        )
        spark.sql(
            "SELECT day, sum(CAST(order_id AS decimal(38,0)) * 100000000000000000) AS big "
            "FROM fused_lines GROUP BY day ORDER BY big"
        )

    run = _compare(spark, body, ["sql:Aggregate", "sql:Sort", "sql:GlobalLimit",
                                 "sql:Aggregate", "sql:Filter", "sql:Join",
                                 "sql:Aggregate", "sql:Sort", "sql:Aggregate"])  # fmt: skip
    jobs = [op.jobs for op in run.operations]
    assert jobs[:8] == [0] * 8, jobs
    assert jobs[9] > 0  # (the sum that may pass 63 bits: Spark's)


def _each_filter_keeps_some_and_drops_some(run: Any) -> None:
    sizes = run.store.datasets
    kept = [
        (sizes[op.inputs[0]].n_rows, sizes[op.output].n_rows)
        for op in run.operations
        if op.method == "sql:Filter"
    ]
    assert all(0 < out < n for n, out in kept), kept


def test_minima_maxima_and_scalar_subquery_values_are_computed_from_groups(
    spark: Any, lines: None
) -> None:
    """The values that decide TPC-H Q2's, Q11's, Q15's and Q20's filters, computed from
    fused groups without a job: a correlated ``min`` (Q2) and ``0.5 * sum`` (Q20), a
    ``max`` of strings, an uncorrelated scalar subquery's ``max`` over an aggregate's
    output (Q15) and its ``sum(...) * 0.0001`` over a join, rounded as Spark rounds
    decimals (Q11); the tensors are those of the unfused capture."""

    def body() -> None:
        spark.sql(
            "SELECT a.order_id FROM fused_lines a, fused_customers c WHERE a.cust_id = "
            "c.cust_id AND a.price = (SELECT min(b.price) FROM fused_lines b WHERE "
            "b.cust_id = a.cust_id)"
        )
        spark.sql(
            "SELECT a.order_id FROM fused_lines a WHERE a.price > (SELECT 0.02 * "
            "sum(b.price) FROM fused_lines b WHERE b.cust_id = a.cust_id)"
        )
        spark.sql("SELECT cust_id FROM fused_lines GROUP BY cust_id HAVING max(day) = 'd4'")
        spark.sql(
            "WITH r AS (SELECT cust_id, sum(price) AS t FROM fused_lines GROUP BY cust_id) "
            "SELECT cust_id, t FROM r WHERE t = (SELECT max(t) FROM r)"
        )
        spark.sql(
            "SELECT l.cust_id, sum(price * qty) AS v FROM fused_lines l, fused_customers c "
            "WHERE l.cust_id = c.cust_id GROUP BY l.cust_id HAVING sum(price * qty) > ("
            "SELECT sum(price * qty) * 0.0412345678 FROM fused_lines l, fused_customers c "
            "WHERE l.cust_id = c.cust_id AND c.region <> 'r0') ORDER BY v DESC"
        )

    run = _compare(spark, body, [
        "sql:Aggregate", "sql:Join", "sql:Filter", "sql:Join",
        "sql:Aggregate", "sql:Join", "sql:Filter",
        "sql:Aggregate", "sql:Filter",
        "sql:Aggregate", "sql:Aggregate", "sql:Filter",  # (and the global max: no rule)
        "sql:Join", "sql:Aggregate", "sql:Filter", "sql:Join", "sql:Filter", "sql:Sort",
    ])  # fmt: skip
    assert [op.jobs for op in run.operations] == [0] * len(run.operations)
    _each_filter_keeps_some_and_drops_some(run)


def test_averages_are_computed_from_groups(spark: Any, lines: None) -> None:
    """TPC-H Q17's correlated ``0.2 * avg(l_quantity)`` and Q22's uncorrelated
    ``avg(c_acctbal)`` (decimal averages, rounded as Spark rounds them), and an integer
    average (a double) in a ``HAVING``: computed from fused groups without a job, each
    filter keeping some records and dropping others, the tensors those of the unfused
    capture."""

    def body() -> None:
        spark.sql(
            "SELECT a.order_id FROM fused_lines a WHERE a.price < (SELECT 0.9 * "
            "avg(b.price) FROM fused_lines b WHERE b.cust_id = a.cust_id)"
        )
        spark.sql(
            "SELECT order_id FROM fused_lines WHERE price > (SELECT avg(price) FROM "
            "fused_lines WHERE discount > 0.10)"
        )
        spark.sql("SELECT cust_id FROM fused_lines GROUP BY cust_id HAVING avg(qty) > 3.2")

    run = _compare(spark, body, [
        "sql:Aggregate", "sql:Join", "sql:Filter",
        "sql:Filter", "sql:Filter",  # (and the global avg between: no rule)
        "sql:Aggregate", "sql:Filter",
    ])  # fmt: skip
    assert [op.jobs for op in run.operations] == [0] * len(run.operations)
    _each_filter_keeps_some_and_drops_some(run)


def test_distinct_counts_are_computed_from_groups(spark: Any, lines: None) -> None:
    """TPC-H Q16's ``ORDER BY count(DISTINCT ps_suppkey) DESC``, and a ``HAVING`` over
    a distinct count of two columns, one with nulls: computed from fused groups without
    a job, the tensors those of the unfused capture; a distinct count of an expression
    is read through Spark, the same tensors either way."""

    def body() -> None:
        spark.sql(
            "SELECT cust_id, count(DISTINCT qty) AS n FROM fused_lines GROUP BY cust_id "
            "ORDER BY n DESC, cust_id"
        )
        spark.sql(
            "SELECT cust_id FROM fused_lines GROUP BY cust_id HAVING count(DISTINCT day, qty) > 11"
        )

    run = _compare(spark, body, ["sql:Aggregate", "sql:Sort", "sql:Aggregate", "sql:Filter"])
    assert [op.jobs for op in run.operations] == [0] * len(run.operations)
    _each_filter_keeps_some_and_drops_some(run)

    def expression() -> None:
        spark.sql(
            "SELECT cust_id, count(DISTINCT qty + 1) AS n FROM fused_lines GROUP BY cust_id "
            "ORDER BY n DESC, cust_id"
        )

    run = _compare(spark, expression, ["sql:Aggregate", "sql:Sort"], fewer_jobs=False)
    assert run.operations[-1].jobs > 0


def test_a_scalar_subquerys_comma_join_is_joined_on_its_conditions(spark: Any, views: None) -> None:
    """An uncorrelated scalar subquery over a comma join of its own (TPC-H Q11's
    ``HAVING``): its plan is rewritten as the statement's is, so its join has its
    condition and its filter is a filter of one table, fused; no dataset is the cross
    product of its tables, and the tensors are those of the unfused capture."""

    def body() -> None:
        spark.sql(
            "SELECT order_id, amount FROM fused_orders WHERE amount > (SELECT "
            "avg(o.amount) FROM fused_orders o, fused_customers c "
            "WHERE o.cust_id = c.cust_id AND c.region = 'r1')"
        )

    run = _compare(spark, body, ["sql:Filter", "sql:Join", "sql:Filter"])
    assert [op.method for op in run.operations] == [
        "sql:Filter", "sql:Join", "sql:Aggregate", "sql:Filter",
    ]  # fmt: skip
    assert "(cust_id = cust_id)" in str(run.operations[1].expression)
    assert [run.store.datasets[i].n_rows for i in run.operations[1].inputs] == [600, 11]
    sizes = [run.store.datasets[i].n_rows for op in run.operations for i in op.inputs]
    assert max(sizes) < 600 * 45  # (the product of the subquery's tables: never made)
