"""The operation tests of ``tests/test_operations.py`` and ``test_operations_order.py``
over Spark Connect: the same test functions, their ``spark`` a Connect session to a
server of this module's own (loopback, stopped at the end).  Operations Connect does
not trace yet (docs/connect.md) have a test here instead that checks they are opaque
with a warning naming why, and that what follows them is traced again."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import pytest

import tensprov_lab
from tensprov_lab.capture.plan._nodes import TensProvWarning
from tests import test_operations as ops
from tests import test_operations_order as order_ops
from tests._connect_session import connect_session

pytestmark = [pytest.mark.spark, pytest.mark.connect]


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    """A Spark Connect session (this module's tests take it where the classic tests take
    the shared local session)."""
    with connect_session() as session:
        yield session


#: the operation tests that run over Connect as they are; the others of
#: tests/test_operations.py test what Connect does not trace yet (below), or the classic
#: capture's own short cuts (test_global_aggregates_need_no_job_...)
_SAME = [
    "test_sources_of_every_kind",
    "test_source_with_a_shuffle_is_pinned_with_a_stable_numbering",
    "test_second_block_reaches_sources_of_the_first",
    "test_projection_family_is_identity",
    "test_filter_family_is_a_mask",
    "test_joins",
    "test_cross_join",
    "test_outer_join_with_an_aggregated_side",
    "test_unions_append_blocks",
    "test_distinct_and_drop_duplicates",
    "test_group_by_aggregates",
    "test_self_joins",
    "test_rollup_groups",
    "test_cube_groups",
    "test_nondeterministic_expression_is_flagged",
    "test_window_functions_come_from_their_partition_and_are_contextual",
    "test_sort_and_limit",
    "test_explode_and_posexplode",
    "test_sample_with_seed",
    "test_repartition_coalesce_hint_are_trivial",
    "test_unsupported_operation_is_opaque",
    "test_bad_where_and_out_of_range_rows",
]
for _name in _SAME:
    globals()[_name] = getattr(ops, _name, None) or getattr(order_ops, _name)


def test_what_connect_does_not_trace_yet_is_opaque_with_its_reason(spark: Any) -> None:
    """docs/connect.md's list: each such operation is an opaque step with a warning that
    says why, its output counted right, and what follows it traced again."""
    from pyspark.sql import functions as F

    people, sales = ops.people_df(spark), ops.sales_df(spark)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with tensprov_lab.track(spark, name="not-yet") as run:
            outs = {
                # over a shuffle: Spark keeps whichever records a partition gives first
                "limit": people.repartition(3).limit(3),
                # ages None, 25, 30, 30, 40: the limit cuts between the two 30s
                "tied limit": people.orderBy("age").limit(3),
                # over a shuffle: Spark draws by position in partitions that change
                "sample": people.repartition(3).sample(fraction=0.5, seed=3),
                # a pivot grouped by a computed value
                "pivot": sales.groupBy(F.upper("region")).pivot("amount", [1, 2]).count(),
                "intersect": sales.intersect(sales.filter("amount > 2")),
                # sorted records joined: their order is neither their keys' nor Spark's
                "sort": sales.orderBy("amount").join(people, F.lit(True)).orderBy("region"),
            }
            after_pivot = outs["pivot"].filter(F.col("upper(region)") == "X")
    said = [str(w.message) for w in caught if issubclass(w.category, TensProvWarning)]
    for what, df in outs.items():
        op = ops.op_of(run, df)
        assert op.opaque and op.tensors is None, what
        assert op.warnings and "Spark Connect" in op.warnings[0], (what, op.warnings)
        assert any(op.warnings[0] in m for m in said), what
        assert run.dataset(df).n_rows == df.count(), what
    assert "pivot" in ops.op_of(run, outs["pivot"]).warnings[0]
    assert "after a shuffle" in ops.op_of(run, outs["limit"]).warnings[0]
    assert "tied in the sort order" in ops.op_of(run, outs["tied limit"]).warnings[0]
    assert "neither their keys'" in ops.op_of(run, outs["sort"]).warnings[0]
    # the output of an opaque step is numbered afresh: what follows it is traced
    follow = ops.check_op(run, after_pivot, {"horizontal_reduction"})
    assert follow.inputs == [run.dataset(outs["pivot"]).id]
    kept = [r for r in ops.records(run, outs["pivot"]) if r[0] == "X"]
    assert ops.records(run, after_pivot) == kept


def test_a_limit_of_records_in_no_order_keeps_what_spark_reads_first(spark: Any) -> None:
    """Over records Spark reads in the same partitions and order every time, the
    rewrite keeps the records Spark keeps; flagged as not deterministic, as on a
    classic session."""
    stable = spark.createDataFrame([(i, i * 10) for i in range(20)], "i int, v int")
    with pytest.warns(TensProvWarning, match="not deterministic"):
        with tensprov_lab.track(spark, name="limit") as run:
            few = stable.filter("i % 2 = 1").limit(4)
            after = few.withColumn("w", few.v + 1)
    op = ops.check_op(run, few, {"horizontal_reduction"})
    assert op.nondeterministic
    got = ops.records(run, few)
    assert got == [tuple(r) for r in stable.filter("i % 2 = 1").limit(4).collect()]
    for k, (i, _) in enumerate(got):
        assert ops.back(run, few, k) == {"stable": [i]}
        assert ops.back(run, after, k) == {"stable": [i]}
    assert ops.fwd(run, stable, got[0][0], after) == [0]
    assert ops.fwd(run, stable, 0, after) == []


def test_a_window_the_plan_does_not_name_gives_the_localized_answer_with_a_warning(
    spark: Any,
) -> None:
    """Frames are traced for a withColumn or a select of named window columns
    (tests/test_windows_connect.py); a select of an unnamed one falls back to the
    record itself, and says so."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    sales = ops.sales_df(spark)
    with pytest.warns(TensProvWarning, match="localized"):
        with tensprov_lab.track(spark, name="win") as run:
            w = sales.select("amount", F.lag("amount").over(Window.orderBy("amount")))
    op = ops.check_op(run, w, {"window"})
    assert op.contextual and "frame is not traced" in op.warnings[0]
    assert [ops.back(run, w, i) for i in range(6)] == [{"sales": [i]} for i in range(6)]


def test_a_select_of_aggregate_functions_is_one_record_of_all(spark: Any) -> None:
    """``df.select(F.sum(...))`` makes one record of every input record, as
    ``df.agg(...)`` does (no job: nothing tells the records apart); what follows it is
    traced."""
    from pyspark.sql import functions as F

    sales = ops.sales_df(spark)
    with tensprov_lab.track(spark, name="select-agg") as run:
        kept = sales.filter(F.col("amount") > 1)
        tot = kept.select(F.sum("amount").alias("t"), F.count(F.lit(1)).alias("n"))
        twice = tot.withColumn("t2", F.col("t") * 2)
        empty = sales.filter(F.col("amount") > 100).select(F.max("amount").alias("m"))
    op = ops.check_op(run, tot, {"aggregate"})
    assert op.jobs == 0
    assert ops.records(run, tot) == [(14, 4)]
    assert ops.back(run, tot, 0) == {"sales": [1, 2, 3, 5]}
    assert ops.fwd(run, "sales", 0, tot) == []
    assert ops.fwd(run, "sales", 5, twice) == [0]
    assert ops.records(run, twice) == [(14, 4, 28)]
    assert ops.back(run, empty, 0) == {"sales": []} and ops.records(run, empty) == [(None,)]
    cells = run.backward(tot, rows=[0], columns=["t"])["sales"]
    assert sorted(cells["contributing"]["amount"]) == [1, 2, 3, 5]


def test_a_non_deterministic_expression_is_flagged_over_connect(spark: Any) -> None:
    from pyspark.sql import functions as F

    people = ops.people_df(spark)
    with pytest.warns(TensProvWarning, match="not deterministic"):
        with tensprov_lab.track(spark, name="nd") as run:
            nd = people.withColumn("r", F.rand())
            flt = people.filter("age > 26")
            dd = people.dropDuplicates(["grp"])
    op = ops.check_op(run, nd, {"vertical_augmentation"})
    assert op.nondeterministic and op.warnings
    assert ops.back(run, nd, 2) == {"people": [2]}
    assert not ops.op_of(run, flt).nondeterministic
    dedup = ops.op_of(run, dd)
    assert dedup.nondeterministic and "arbitrary record" in dedup.warnings[0]


def test_what_follows_a_rollup_or_a_pivot_is_traced(spark: Any) -> None:
    """A rollup's records are named by their smallest member and their grouping set, a
    pivot's by their group's smallest member: the operations after them find them."""
    from pyspark.sql import functions as F

    sales = ops.sales_df(spark)
    with tensprov_lab.track(spark, name="after-sets") as run:
        roll = sales.rollup("region").agg(F.sum("amount").alias("t"), F.grouping_id().alias("s"))
        big = roll.filter("t > 3")
        wide = sales.groupBy("region").pivot("amount", [1, 2, 5]).count()
        some = wide.filter(F.col("region").isNotNull()).withColumn("x", F.lit(1))
    got = ops.records(run, roll)
    kept = [i for i, r in enumerate(got) if r[1] is not None and r[1] > 3]
    assert ops.records(run, big) == [got[i] for i in kept]
    for k, i in enumerate(kept):
        assert ops.back(run, big, k) == ops.back(run, roll, i)
    for j in range(6):
        assert ops.fwd(run, sales, j, big) == [
            k for k, i in enumerate(kept) if j in ops.back(run, roll, i)["sales"]
        ]
    groups = ops.records(run, wide)
    named = [i for i, r in enumerate(groups) if r[0] is not None]
    assert [r[:-1] for r in ops.records(run, some)] == [groups[i] for i in named]
    for k, i in enumerate(named):
        assert ops.back(run, some, k) == ops.back(run, wide, i)
        region = groups[i][0]
        assert ops.back(run, some, k) == {
            "sales": [j for j, r in enumerate(ops.SALES) if r[0] == region]
        }


def test_what_follows_your_own_posexplode_is_traced(spark: Any) -> None:
    """A posexplode's records are told apart by the position it gives them (under its
    default name or yours): the operations after it are traced."""
    from pyspark.sql import functions as F

    arrs = spark.createDataFrame([(1, [10, 20]), (2, []), (3, [30])], "id int, xs array<int>")
    with tensprov_lab.track(spark, name="posexplode") as run:
        pex = arrs.select("id", F.posexplode("xs"))
        big = pex.filter("col > 10")
        named = arrs.select("id", F.posexplode_outer("xs").alias("i", "x"))
        twice = named.withColumn("y", F.col("x") * 2)
    assert ops.records(run, big) == [(1, 1, 20), (3, 0, 30)]
    assert ops.back(run, big, 0) == {"arrs": [0]} and ops.back(run, big, 1) == {"arrs": [2]}
    assert ops.fwd(run, arrs, 0, big) == [0]
    assert not ops.op_of(run, twice).opaque
    assert ops.records(run, twice) == [
        (1, 0, 10, 20), (1, 1, 20, 40), (2, None, None, None), (3, 0, 30, 60),
    ]  # fmt: skip
    assert [ops.back(run, twice, k) for k in range(4)] == [
        {"arrs": [0]}, {"arrs": [0]}, {"arrs": [1]}, {"arrs": [2]},
    ]  # fmt: skip
    assert ops.fwd(run, arrs, 0, twice) == [0, 1]


def test_a_sql_statement_is_opaque_from_the_views_it_reads(spark: Any) -> None:
    """``spark.sql`` over views of tracked DataFrames: an opaque step from the datasets
    of the views Spark's analyzer says it reads (as they were when it was made), with a
    warning; what follows it is traced; a statement over no tracked view is a source."""
    people, sales = ops.people_df(spark), ops.sales_df(spark)
    with pytest.warns(TensProvWarning, match="a SQL statement") as caught:
        with tensprov_lab.track(spark, name="sql") as run:
            big = sales.filter("amount > 1")
            big.createOrReplaceTempView("tp_big")
            people.createOrReplaceTempView("tp_people")
            q = spark.sql(
                "SELECT b.region, count(*) AS n FROM tp_big b JOIN tp_people p "
                "ON b.amount = p.id GROUP BY b.region"
            )
            after = q.filter("n > 0")
            plain = spark.sql("SELECT 1 AS one")
            small = sales.filter("amount < 3")
            small.createOrReplaceTempView("tp_big")  # replaced: q read `big`
    op = ops.op_of(run, q)
    assert op.opaque and op.tensors is None
    assert sorted(op.inputs) == sorted([run.dataset(big).id, run.dataset(people).id])
    assert "big" in op.warnings[0] and "people" in op.warnings[0]
    assert any("a SQL statement" in str(w.message) for w in caught)
    assert run.dataset(q).n_rows == q.count()
    follow = ops.check_op(run, after, {"horizontal_reduction"})
    assert follow.inputs == [run.dataset(q).id]
    assert ops.records(run, after) == [r for r in ops.records(run, q) if r[1] > 0]
    made = run.dataset(plain)
    assert made.role == "source" and run.store.producer(made.id) is None
    assert ops.records(run, plain) == [(1,)]
