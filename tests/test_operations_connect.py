"""The operation tests of ``tests/test_operations.py`` over Spark Connect: the same test
functions, their ``spark`` a Connect session to a server of this module's own (loopback,
stopped at the end).  Operations Connect does not trace yet (docs/connect.md) have a test
here instead that checks they are opaque with a warning naming why, and that what
follows them is traced again."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import pytest

import tensprov_lab
from tensprov_lab.capture._nodes import TensProvWarning
from tests import test_operations as ops
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
    "test_window_functions_come_from_their_partition_and_are_contextual",
    "test_sort_and_limit",
    "test_explode_and_posexplode",
    "test_sample_with_seed",
    "test_repartition_coalesce_hint_are_trivial",
    "test_unsupported_operation_is_opaque",
    "test_bad_where_and_out_of_range_rows",
]
for _name in _SAME:
    globals()[_name] = getattr(ops, _name)


def test_what_connect_does_not_trace_yet_is_opaque_with_its_reason(spark: Any) -> None:
    """docs/connect.md's list: each such operation is an opaque step with a warning that
    says why, its output counted right, and what follows it traced again."""
    from pyspark.sql import functions as F

    people, sales = ops.people_df(spark), ops.sales_df(spark)
    twin = spark.createDataFrame([(1, "a"), (2, "b"), (1, "c")], "k int, v string")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with tensprov_lab.track(spark, name="not-yet") as run:
            outs = {
                "limit": people.limit(3),
                # ages None, 25, 30, 30, 40: the limit cuts between the two 30s
                "tied limit": people.orderBy("age").limit(3),
                # over a shuffle: Spark draws by position in partitions that change
                "sample": people.repartition(3).sample(fraction=0.5, seed=3),
                "rollup": sales.rollup("region").agg(F.sum("amount").alias("t")),
                "cube": sales.cube("region").agg(F.count("*").alias("n")),
                "pivot": sales.groupBy("region").pivot("amount", [1, 2]).count(),
                "intersect": sales.intersect(sales.filter("amount > 2")),
                "self-join": twin.join(twin, "k"),
            }
            after_rollup = outs["rollup"].filter("t > 3")
    said = [str(w.message) for w in caught if issubclass(w.category, TensProvWarning)]
    for what, df in outs.items():
        op = ops.op_of(run, df)
        assert op.opaque and op.tensors is None, what
        assert op.warnings and "Spark Connect" in op.warnings[0], (what, op.warnings)
        assert any(op.warnings[0] in m for m in said), what
        assert run.dataset(df).n_rows == df.count(), what
    assert "rollup" in ops.op_of(run, outs["rollup"]).warnings[0]
    assert "no fixed order" in ops.op_of(run, outs["limit"]).warnings[0]
    assert "tied in the sort order" in ops.op_of(run, outs["tied limit"]).warnings[0]
    # the output of an opaque step is numbered afresh: what follows it is traced
    follow = ops.check_op(run, after_rollup, {"horizontal_reduction"})
    assert follow.inputs == [run.dataset(outs["rollup"]).id]
    kept = [r for r in ops.records(run, outs["rollup"]) if r[1] is not None and r[1] > 3]
    assert ops.records(run, after_rollup) == kept


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
