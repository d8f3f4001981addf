"""The operation tests of :mod:`tests.test_operations` for the operations that order,
cut or multiply records: sorts, limits, samples, explodes and window functions (the same
tiny data sets and hand-written expected lineage)."""

from __future__ import annotations

import pytest
from pyspark.sql import Window
from pyspark.sql import functions as F

import tensprov_lab
from tests._operations import SALES, back, check_op, fwd, records, sales_df

pytestmark = pytest.mark.spark


# ---------------------------------------------------------------------------------------------
# order, limit, sample, explode, window


def test_sort_and_limit(spark) -> None:  # noqa: ANN001
    sales = sales_df(spark)
    with tensprov_lab.track(spark, name="sort-limit") as run:
        srt = sales.orderBy("amount")  # nulls first: 4 0 1 2 3 5
        desc = sales.sort(F.desc("amount"))  # nulls last: 5 3 2 1 0 4
        ties = sales.orderBy("region")  # ties in input order: 3 0 2 5 1 4
        top = srt.limit(3)
        top2 = sales.orderBy(F.desc("amount")).limit(2)
    for df in (srt, desc, ties):
        check_op(run, df, {"sort"})
    for df in (top, top2):
        op = check_op(run, df, {"horizontal_reduction"})
        assert not op.nondeterministic  # a limit of an ordered input is deterministic
    assert records(run, srt) == [
        ("y", None), ("x", 1), ("y", 2), ("x", 3), (None, 4), ("x", 5),
    ]  # fmt: skip
    assert back(run, srt, 0) == {"sales": [4]}
    assert back(run, srt, 1) == {"sales": [0]}
    assert fwd(run, sales, 5, srt) == [5]
    assert fwd(run, sales, 4, srt) == [0]
    assert records(run, desc) == [
        ("x", 5), (None, 4), ("x", 3), ("y", 2), ("x", 1), ("y", None),
    ]  # fmt: skip
    assert back(run, desc, 1) == {"sales": [3]}
    assert back(run, desc, 5) == {"sales": [4]}
    assert records(run, ties) == [
        (None, 4), ("x", 1), ("x", 3), ("x", 5), ("y", 2), ("y", None),
    ]  # fmt: skip
    assert back(run, ties, 0) == {"sales": [3]}
    assert back(run, ties, 3) == {"sales": [5]}
    assert back(run, ties, 5) == {"sales": [4]}
    assert fwd(run, sales, 2, ties) == [2]
    assert records(run, top) == [("y", None), ("x", 1), ("y", 2)]
    assert back(run, top, 0) == {"sales": [4]}
    assert back(run, top, 2) == {"sales": [1]}
    assert fwd(run, sales, 3, top) == []
    assert fwd(run, sales, 0, top) == [1]
    assert run.dataset(top2).n_rows == 2
    assert back(run, top2, 0) == {"sales": [5]}
    assert back(run, top2, 1) == {"sales": [3]}


def test_sample_with_seed(spark) -> None:  # noqa: ANN001
    nums = spark.createDataFrame([(i, i * 10) for i in range(12)], "i int, v int")
    with tensprov_lab.track(spark, name="sample") as run:
        smp = nums.sample(fraction=0.5, seed=11)
    check_op(run, smp, {"horizontal_reduction"})
    got = records(run, smp)
    ids = [r[0] for r in got]
    assert 0 < len(ids) < 12
    assert ids == sorted(set(ids))  # relative order of the kept records
    assert sorted(r.i for r in nums.sample(fraction=0.5, seed=11).collect()) == ids
    for k, (i, v) in enumerate(got):
        assert v == i * 10
        assert back(run, smp, k) == {"nums": [i]}  # the one input record with these values
    for j in range(12):
        assert fwd(run, nums, j, smp) == ([ids.index(j)] if j in ids else [])


def test_explode_and_posexplode(spark) -> None:  # noqa: ANN001
    arrs = spark.createDataFrame(
        [(1, [20, 10]), (2, []), (3, None), (4, [30]), (5, [7, 9, 8])], "id int, xs array<int>"
    )
    with tensprov_lab.track(spark, name="explode") as run:
        ex = arrs.select("id", F.explode("xs").alias("x"))
        pex = arrs.select("id", F.posexplode("xs"))
        exo = arrs.select("id", F.explode_outer("xs").alias("x"))
        big = ex.filter("x > 9")
    for df in (ex, pex, exo):
        check_op(run, df, {"explode"})
    check_op(run, big, {"horizontal_reduction"})
    # by (input index, position), not by value
    assert records(run, ex) == [(1, 20), (1, 10), (4, 30), (5, 7), (5, 9), (5, 8)]
    assert back(run, ex, 1) == {"arrs": [0]}
    assert back(run, ex, 2) == {"arrs": [3]}
    assert back(run, ex, 5) == {"arrs": [4]}
    assert fwd(run, arrs, 0, ex) == [0, 1]
    assert fwd(run, arrs, 1, ex) == []
    assert fwd(run, arrs, 2, ex) == []
    assert fwd(run, arrs, 4, ex) == [3, 4, 5]
    assert records(run, exo) == [
        (1, 20), (1, 10), (2, None), (3, None), (4, 30), (5, 7), (5, 9), (5, 8),
    ]  # fmt: skip
    assert back(run, exo, 2) == {"arrs": [1]}
    assert back(run, exo, 3) == {"arrs": [2]}
    assert fwd(run, arrs, 3, exo) == [4]
    # exploded records keep their identity through later operations
    assert records(run, big) == [(1, 20), (1, 10), (4, 30)]
    assert back(run, big, 2) == {"arrs": [3]}
    assert fwd(run, arrs, 0, big) == [0, 1]
    assert run.backward(big, rows=[2], to=ex)[ex].tolist() == [2]
    # posexplode: (input index, position) with its default column names
    assert back(run, pex, 4) == {"arrs": [4]}
    assert fwd(run, arrs, 4, pex) == [3, 4, 5]
    assert records(run, pex) == [
        (1, 0, 20), (1, 1, 10), (4, 0, 30), (5, 0, 7), (5, 1, 9), (5, 2, 8),
    ]  # fmt: skip


def test_window_functions_come_from_their_partition_and_are_contextual(spark) -> None:  # noqa: ANN001
    """A rank and a sum over a whole partition: each record from every record of its
    partition (regions x: 0, 2, 5; y: 1, 4; null: 3); ``localized=True`` gives the
    paper's localized answer, the record alone (the answer before windows were exact:
    tests/test_windows.py checks every frame kind)."""
    sales = sales_df(spark)
    with tensprov_lab.track(spark, name="window") as run:
        rn = sales.withColumn(
            "rn", F.row_number().over(Window.partitionBy("region").orderBy("amount"))
        )
        ws = sales.withColumn("tot", F.sum("amount").over(Window.partitionBy("region")))
    partition = {0: [0, 2, 5], 1: [1, 4], 2: [0, 2, 5], 3: [3], 4: [1, 4], 5: [0, 2, 5]}
    for df in (rn, ws):
        op = check_op(run, df, {"window"})
        assert op.contextual is True
        for i in (0, 3, 4, 5):
            assert back(run, df, i) == {"sales": partition[i]}
            assert fwd(run, sales, i, df) == partition[i]
            assert run.backward(df, rows=[i], localized=True).to_dict() == {"sales": [i]}
            assert run.forward(sales, rows=[i], to=df, localized=True)[df].tolist() == [i]
    assert records(run, rn) == [
        ("x", 1, 1), ("y", 2, 2), ("x", 3, 2), (None, 4, 1), ("y", None, 1), ("x", 5, 3),
    ]  # fmt: skip
    assert records(run, ws) == [
        ("x", 1, 9), ("y", 2, 2), ("x", 3, 9), (None, 4, 4), ("y", None, 2), ("x", 5, 9),
    ]  # fmt: skip


def test_repartition_coalesce_hint_are_trivial(spark) -> None:  # noqa: ANN001
    sales = sales_df(spark)
    with tensprov_lab.track(spark, name="trivial") as run:
        rp = sales.repartition(3)
        rpc = sales.repartition("region")
        co = sales.coalesce(1)
        hi = sales.hint("broadcast")
        after = rp.filter("amount > 2")  # rows 2, 3, 5
    for df in (rp, rpc, co, hi):
        op = check_op(run, df, {"trivial"})
        assert op.trivial is True
        assert run.dataset(df).hidden is True
        assert run.dataset(df).n_rows == 6
        for i in (0, 4):
            assert back(run, df, i) == {"sales": [i]}
            assert fwd(run, sales, i, df) == [i]
    assert records(run, rp) == SALES
    assert records(run, co) == SALES
    check_op(run, after, {"horizontal_reduction"})
    assert back(run, after, 2) == {"sales": [5]}
    assert fwd(run, sales, 3, after) == [1]
