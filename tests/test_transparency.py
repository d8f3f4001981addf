"""Tracking must not change what user code computes, prints or returns (DESIGN.md §7).

Every covered operation is built once without tracking and once inside
``tensprov_lab.track``; the collected results and schemas must be equal.  After a block
(also one that raises) the patched classes are exactly as before, the user's exception
propagates unchanged and the store stays consistent.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pyspark import StorageLevel
from pyspark.sql import Window
from pyspark.sql import functions as F

import tensprov_lab

pytestmark = pytest.mark.spark

# ---------------------------------------------------------------------------------------------
# small data with nulls and duplicates (rows 1 and 2 of A are identical)

A_ROWS = [
    (1, "a", 10, None),
    (2, "b", None, 1.5),
    (2, "b", None, 1.5),
    (3, None, 30, 2.5),
    (4, "d", 10, None),
    (5, "a", 50, 0.5),
]
A_SCHEMA = "id int, s string, n int, x double"
B_ROWS = [(2, "B2"), (3, "B3"), (3, "B3b"), (6, "B6"), (None, "Bn")]
B_SCHEMA = "id int, t string"


@pytest.fixture(scope="module")
def a(spark):  # noqa: ANN001, ANN201
    return spark.createDataFrame(A_ROWS, A_SCHEMA)


@pytest.fixture(scope="module")
def b(spark):  # noqa: ANN001, ANN201
    return spark.createDataFrame(B_ROWS, B_SCHEMA)


def _norm_value(v: Any, bag: bool) -> Any:
    if isinstance(v, list):
        items = [_norm_value(x, bag) for x in v]
        return sorted(items, key=repr) if bag else items
    if hasattr(v, "asDict"):  # nested Row
        return tuple(_norm_value(x, bag) for x in v)
    return v


def _collected(df: Any, ordered: bool, bag: bool) -> list[tuple]:
    rows = [tuple(_norm_value(v, bag) for v in r) for r in df.collect()]
    return rows if ordered else sorted(rows, key=repr)


# (id, builder, order defined by the query, lists are bags (collect_list))
Case = tuple[str, Callable[[Any, Any], Any], bool, bool]

CASES: list[Case] = [
    ("select", lambda a, b: a.select("id", "s"), False, False),
    ("select_exprs", lambda a, b: a.select((F.col("n") * 2).alias("n2"), a.s, "*"), False, False),
    ("selectExpr", lambda a, b: a.selectExpr("id", "n + 1 AS n1", "upper(s) AS su"), False, False),
    ("filter_col", lambda a, b: a.filter(F.col("n") > 5), False, False),
    ("filter_str", lambda a, b: a.filter("n > 5 OR s IS NULL"), False, False),
    ("where", lambda a, b: a.where(a.s.isNotNull()), False, False),
    ("withColumn_new", lambda a, b: a.withColumn("n2", F.col("n") + 1), False, False),
    ("withColumn_replace", lambda a, b: a.withColumn("n", F.coalesce("n", F.lit(0))), False, False),
    ("withColumns", lambda a, b: a.withColumns({"p": F.col("id") * 2, "q": F.lit("z")}), False, False),
    ("withColumnRenamed", lambda a, b: a.withColumnRenamed("s", "str"), False, False),
    ("drop", lambda a, b: a.drop("x", "n"), False, False),
    ("alias", lambda a, b: a.alias("aa"), False, False),
    ("alias_select", lambda a, b: a.alias("aa").select("aa.id", "aa.n"), False, False),
    ("join_inner_name", lambda a, b: a.join(b, "id"), False, False),
    ("join_inner_list", lambda a, b: a.join(b, ["id"], "inner"), False, False),
    ("join_left", lambda a, b: a.join(b, "id", "left"), False, False),
    ("join_right", lambda a, b: a.join(b, "id", "right"), False, False),
    ("join_full", lambda a, b: a.join(b, "id", "full"), False, False),
    ("join_left_semi", lambda a, b: a.join(b, "id", "left_semi"), False, False),
    ("join_left_anti", lambda a, b: a.join(b, "id", "left_anti"), False, False),
    ("join_cross", lambda a, b: a.join(b, how="cross"), False, False),
    ("join_expr_eq", lambda a, b: a.join(b, a.id == b.id, "left"), False, False),
    ("join_expr_full", lambda a, b: a.join(b, a.id == b.id, "full"), False, False),
    ("join_expr_theta", lambda a, b: a.join(b, a.id < b.id), False, False),
    ("crossJoin", lambda a, b: a.crossJoin(b), False, False),
    (
        "self_join_alias",
        lambda a, b: a.alias("l").join(a.alias("r"), F.col("l.id") == F.col("r.id")),
        False,
        False,
    ),
    ("self_join_name", lambda a, b: a.join(a, "id"), False, False),
    ("union", lambda a, b: a.select("id", "s").union(b), False, False),
    ("unionAll", lambda a, b: a.select("id", "s").unionAll(b), False, False),
    ("union_self", lambda a, b: a.union(a), False, False),
    (
        "unionByName_missing",
        lambda a, b: a.unionByName(b, allowMissingColumns=True),
        False,
        False,
    ),
    ("distinct", lambda a, b: a.distinct(), False, False),
    ("dropDuplicates", lambda a, b: a.dropDuplicates(), False, False),
    # ids 2 are duplicate rows, so the kept record of each group is determined
    ("dropDuplicates_subset", lambda a, b: a.dropDuplicates(["id"]), False, False),
    ("drop_duplicates", lambda a, b: a.drop_duplicates(["id", "s"]), False, False),
    (
        "groupBy_agg",
        lambda a, b: a.groupBy("s").agg(
            F.count("n").alias("cnt"),
            F.count("*").alias("rows"),
            F.sum("n").alias("sum"),
            F.avg("x").alias("avg"),
            F.min("n").alias("min"),
            F.max("x").alias("max"),
            F.collect_list("id").alias("ids"),
            F.countDistinct("id").alias("cd"),
        ),
        False,
        True,
    ),
    ("groupby_lower", lambda a, b: a.groupby("s", "n").agg(F.sum("id").alias("t")), False, False),
    ("grouped_count", lambda a, b: a.groupBy("s").count(), False, False),
    ("grouped_sum", lambda a, b: a.groupBy("s").sum("n", "id"), False, False),
    ("grouped_avg_mean", lambda a, b: a.groupBy("n").avg("x").join(a.groupBy("n").mean("id"), "n"), False, False),
    ("grouped_min_max", lambda a, b: a.groupBy("s").min("n").join(a.groupBy("s").max("x"), "s", "full"), False, False),
    ("global_agg", lambda a, b: a.agg(F.sum("n").alias("t"), F.count("*").alias("c")), False, False),
    (
        "rollup",
        lambda a, b: a.rollup("s", "n").agg(F.sum("id").alias("t"), F.grouping_id().alias("g")),
        False,
        False,
    ),
    (
        "cube",
        lambda a, b: a.cube("s").agg(F.count("*").alias("c"), F.collect_list("n").alias("l")),
        False,
        True,
    ),
    ("orderBy", lambda a, b: a.orderBy("id"), True, False),
    ("orderBy_desc_nulls", lambda a, b: a.orderBy(F.desc("n"), "id"), True, False),
    ("sort", lambda a, b: a.sort(F.asc_nulls_last("s"), F.col("id").desc()), True, False),
    ("limit_ordered", lambda a, b: a.orderBy(F.desc("id")).limit(3), True, False),
    ("limit", lambda a, b: a.limit(2), False, False),
    ("sample", lambda a, b: a.sample(fraction=0.6, seed=7), False, False),
    ("sample_positional", lambda a, b: a.sample(False, 0.5, 3), False, False),
    ("na_drop", lambda a, b: a.na.drop(), False, False),
    ("dropna_subset", lambda a, b: a.dropna(subset=["n"]), False, False),
    ("dropna_how_all", lambda a, b: a.select("n", "x").dropna(how="all"), False, False),
    ("na_fill", lambda a, b: a.na.fill(0), False, False),
    ("fillna_dict", lambda a, b: a.fillna({"s": "?", "x": -1.0}), False, False),
    ("na_replace", lambda a, b: a.na.replace("b", "B"), False, False),
    ("replace_subset", lambda a, b: a.replace(10, 11, subset=["n"]), False, False),
    (
        "explode",
        lambda a, b: a.select("id", F.explode(F.array("id", "n")).alias("e")),
        False,
        False,
    ),
    (
        "posexplode",
        lambda a, b: a.select("s", F.posexplode(F.array("n", "id"))),
        False,
        False,
    ),
    ("window_rank", lambda a, b: a.withColumn("rk", F.rank().over(Window.partitionBy("s").orderBy("id", "x"))), False, False),
    (
        "window_sum",
        lambda a, b: a.withColumn("tot", F.sum("n").over(Window.partitionBy("s"))),
        False,
        False,
    ),
    ("repartition_n", lambda a, b: a.repartition(3), False, False),
    ("repartition_col", lambda a, b: a.repartition("s"), False, False),
    ("coalesce", lambda a, b: a.coalesce(1), False, False),
    ("cache", lambda a, b: a.filter("id > 1").cache(), False, False),
    ("persist", lambda a, b: a.filter("id < 5").persist(StorageLevel.MEMORY_ONLY), False, False),
    ("hint", lambda a, b: a.join(b.hint("broadcast"), "id"), False, False),
    (
        "pipeline",
        lambda a, b: a.filter("n IS NOT NULL")
        .join(b, "id", "left")
        .groupBy("s")
        .agg(F.sum("n").alias("t"))
        .orderBy("s"),
        True,
        False,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_tracked_result_equals_untracked(spark, a, b, case: Case) -> None:  # noqa: ANN001
    _, build, ordered, bag = case
    plain = build(a, b)
    expected = _collected(plain, ordered, bag)
    with tensprov_lab.track(spark) as run:
        tracked = build(a, b)
    got = _collected(tracked, ordered, bag)
    assert tracked.schema == plain.schema
    assert tracked.columns == plain.columns
    assert got == expected
    assert run.operations, "the tracked block recorded no operation"
    for df in (plain, tracked):
        if df.is_cached:
            df.unpersist()


# ---------------------------------------------------------------------------------------------
# patching, exceptions, store consistency


def _classes() -> list[type]:
    from pyspark.sql.classic.dataframe import DataFrame as ClassicDataFrame
    from pyspark.sql.dataframe import DataFrame
    from pyspark.sql.group import GroupedData

    return [ClassicDataFrame, GroupedData, DataFrame]


def _snapshot() -> dict[type, dict[str, Any]]:
    return {cls: dict(vars(cls)) for cls in _classes()}


class _UserError(Exception):
    pass


def _check_store_consistent() -> None:
    store = tensprov_lab.store()
    for op in store.operations.values():
        assert op.output in store.datasets, op
        for d in op.inputs:
            assert d in store.datasets, op
        if op.opaque:
            assert op.tensors is None
            continue
        assert op.tensors is not None and len(op.tensors) == len(op.inputs), op
        n_out = store.datasets[op.output].n_rows
        for t, d in zip(op.tensors, op.inputs):
            assert t.shape == (n_out, store.datasets[d].n_rows), (op, t.shape)


def test_classes_unpatched_after_block(spark, a, b) -> None:  # noqa: ANN001
    before = _snapshot()
    with tensprov_lab.track(spark):
        during = _snapshot()
        out = a.join(b, "id").groupBy("s").agg(F.sum("n").alias("t"))
    assert _snapshot() == before
    # the block did patch something, so the check above is meaningful
    assert during != before
    assert out.schema.names == ["s", "t"]


def test_user_exception_propagates_unchanged_and_unpatches(spark, a, b) -> None:  # noqa: ANN001
    before = _snapshot()
    err = _UserError("boom 17")
    with pytest.raises(_UserError) as info:
        with tensprov_lab.track(spark, name="raising") as run:
            kept = a.filter(F.col("n") > 5)
            joined = kept.join(b, "id", "left")
            joined.groupBy("s").agg(F.max("t").alias("m"))
            raise err
    assert info.value is err
    assert type(info.value) is _UserError and str(info.value) == "boom 17"
    assert _snapshot() == before
    _check_store_consistent()
    # what ran before the exception is still captured and queryable
    assert tensprov_lab.last_run() is run
    assert [op.method for op in run.operations] == ["filter", "join", "agg"]
    assert run.dataset(kept).n_rows == 4
    assert run.backward(kept, rows=[0]).to_dict() == {"a": [0]}


def test_builtin_exception_inside_block(spark, a) -> None:  # noqa: ANN001
    before = _snapshot()
    with pytest.raises(ZeroDivisionError) as info:
        with tensprov_lab.track(spark):
            a.select("id")
            1 / 0  # noqa: B018
    assert type(info.value) is ZeroDivisionError
    assert str(info.value) == "division by zero"
    assert _snapshot() == before
    _check_store_consistent()


def test_spark_error_inside_patched_call_is_unchanged(spark, a) -> None:  # noqa: ANN001
    from pyspark.errors import AnalysisException

    with pytest.raises(AnalysisException) as plain:
        a.filter("id > 1").select("no_such_column")
    before = _snapshot()
    with pytest.raises(AnalysisException) as tracked:
        with tensprov_lab.track(spark):
            a.filter("id > 1").select("no_such_column")
    assert type(tracked.value) is type(plain.value)
    assert tracked.value.getCondition() == plain.value.getCondition()
    assert str(tracked.value) == str(plain.value)
    assert _snapshot() == before
    _check_store_consistent()
    # the failed call left no tracking state behind: the next block records normally
    with tensprov_lab.track(spark) as run:
        c = a.filter("id > 3")
    assert [op.method for op in run.operations] == ["filter"]
    assert run.dataset(c).n_rows == 2
    assert _snapshot() == before


# ---------------------------------------------------------------------------------------------
# printing and actions inside the block


def _print_things(a: Any, b: Any) -> None:
    a.show()
    a.join(b, "id", "left").orderBy("id", "t").show(truncate=False)
    a.groupBy("s").count().orderBy("s").show()
    a.printSchema()
    print(a.filter("n > 5").count())
    print(a.orderBy("id", "x").collect())
    print(a)
    print(a.columns, a.dtypes)


def test_printed_output_unchanged(spark, a, b, capsys) -> None:  # noqa: ANN001
    capsys.readouterr()
    _print_things(a, b)
    plain = capsys.readouterr()
    with tensprov_lab.track(spark):
        _print_things(a, b)
        tracked = capsys.readouterr()
    assert tracked.out == plain.out
    assert tracked.err == plain.err
    assert "count" in plain.out and "root" in plain.out


def _actions(a: Any, b: Any) -> list[Any]:
    j = a.join(b, "id", "left")
    g = a.groupBy("s").agg(F.sum("n").alias("t"))
    return [
        j.count(),
        sorted(map(repr, j.collect())),
        a.count(),
        a.filter("n > 5").orderBy("id").first(),
        g.orderBy("s").collect(),
        a.orderBy("id", "x").take(2),
        a.orderBy("id", "x").head(3),
        a.orderBy("id", "x").toPandas().to_json(),
        a.filter("id > 100").isEmpty(),
        [r.asDict() for r in a.distinct().orderBy("id").collect()],
    ]


def test_actions_inside_block_return_the_same(spark, a, b) -> None:  # noqa: ANN001
    plain = _actions(a, b)
    with tensprov_lab.track(spark):
        tracked = _actions(a, b)
    assert tracked == plain
    assert plain[0] == 7 and plain[2] == 6
