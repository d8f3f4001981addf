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


Build = Callable[[Any, Any], Any]


def case(name: str, build: Build, ordered: bool = False, bag: bool = False) -> Any:
    """A parametrized case: ``build(a, b)`` gives the DataFrame; ``ordered`` when the query
    defines the order of its rows, ``bag`` when its lists have no defined order."""
    return pytest.param(build, ordered, bag, id=name)


# Cheap row-preserving operations are chained (capturing them runs no Spark job); every
# operation that runs a job of its own is a case of its own.
CASES = [
    case(
        "select_exprs_selectExpr",
        lambda a, b: a.select((F.col("n") * 2).alias("n2"), a.s, "*").selectExpr(
            "id", "n2 + 1 AS n3", "upper(s) AS su", "x"
        ),
    ),
    case("filter_where", lambda a, b: a.filter(F.col("n") > 5).where("s IS NOT NULL OR x > 1")),
    case("filter_str", lambda a, b: a.filter("n > 5 OR s IS NULL")),
    case(
        "withColumn_withColumns",
        lambda a, b: (
            a.withColumn("n2", F.col("n") + 1)
            .withColumn("n", F.coalesce("n", F.lit(0)))
            .withColumns({"p": F.col("id") * 2, "q": F.lit("z")})
        ),
    ),
    case(
        "withColumnRenamed_drop_alias",
        lambda a, b: a.withColumnRenamed("s", "str").drop("x", "n").alias("aa"),
    ),
    case("join_inner", lambda a, b: a.join(b, "id")),
    case("join_left", lambda a, b: a.join(b, "id", "left")),
    case("join_right", lambda a, b: a.join(b, ["id"], "right")),
    case("join_full", lambda a, b: a.join(b, "id", "full")),
    case("join_left_semi", lambda a, b: a.join(b, "id", "left_semi")),
    case("join_left_anti", lambda a, b: a.join(b, "id", "left_anti")),
    case("join_cross", lambda a, b: a.join(b, how="cross")),
    case("join_expr_left", lambda a, b: a.join(b, a.id == b.id, "left")),
    case("join_expr_theta", lambda a, b: a.join(b, a.id < b.id)),
    case("crossJoin", lambda a, b: a.crossJoin(b)),
    case(
        "self_join_alias",
        lambda a, b: a.alias("l").join(a.alias("r"), F.col("l.id") == F.col("r.id")),
    ),
    case("self_join_name", lambda a, b: a.join(a, "id")),
    case(
        "union_unionAll",
        lambda a, b: a.select("id", "s").union(b).unionAll(a.select("id", "s")),
    ),
    case("unionByName_missing", lambda a, b: a.unionByName(b, allowMissingColumns=True)),
    case("distinct", lambda a, b: a.distinct()),
    case(
        "dropDuplicates_drop_duplicates",
        lambda a, b: a.dropDuplicates().drop_duplicates(["id", "s"]),
    ),
    # ids 2 are duplicate rows, so the kept record of each group is determined
    case("dropDuplicates_subset", lambda a, b: a.dropDuplicates(["id"])),
    case(
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
        bag=True,
    ),
    case("groupby_count", lambda a, b: a.groupby("s").count()),
    case("grouped_sum", lambda a, b: a.groupBy("s", "n").sum("n", "id")),
    case(
        "grouped_avg_mean",
        lambda a, b: a.groupBy("n").avg("x").join(a.groupBy("n").mean("id"), "n"),
    ),
    case(
        "grouped_min_max",
        lambda a, b: a.groupBy("s").min("n").join(a.groupBy("s").max("x"), "s", "full"),
    ),
    case("global_agg", lambda a, b: a.agg(F.sum("n").alias("t"), F.count("*").alias("c"))),
    case(
        "rollup",
        lambda a, b: a.rollup("s", "n").agg(F.sum("id").alias("t"), F.grouping_id().alias("g")),
    ),
    case(
        "cube",
        lambda a, b: a.cube("s").agg(F.count("*").alias("c"), F.collect_list("n").alias("l")),
        bag=True,
    ),
    case("orderBy", lambda a, b: a.orderBy("id"), ordered=True),
    case(
        "sort_desc_nulls",
        lambda a, b: a.sort(F.desc("n"), F.asc_nulls_last("s"), F.col("id").desc()),
        ordered=True,
    ),
    case("limit_ordered", lambda a, b: a.orderBy(F.desc("id")).limit(3), ordered=True),
    case("limit", lambda a, b: a.limit(2)),
    case("sample", lambda a, b: a.sample(fraction=0.6, seed=7)),
    case("na_drop_dropna", lambda a, b: a.dropna(subset=["n"]).na.drop(how="all")),
    case("na_drop_any", lambda a, b: a.na.drop()),
    case("na_fill_fillna", lambda a, b: a.na.fill(0).fillna({"s": "?", "x": -1.0})),
    case("na_replace_replace", lambda a, b: a.na.replace("b", "B").replace(10, 11, subset=["n"])),
    case("explode", lambda a, b: a.select("id", F.explode(F.array("id", "n")).alias("e"))),
    case("posexplode", lambda a, b: a.select("s", F.posexplode(F.array("n", "id")))),
    case(
        "window_functions",
        lambda a, b: a.withColumn(
            "rk", F.rank().over(Window.partitionBy("s").orderBy("id", "x"))
        ).withColumn("tot", F.sum("n").over(Window.partitionBy("s"))),
    ),
    case("repartition_coalesce", lambda a, b: a.repartition(3).repartition("s").coalesce(1)),
    case(
        "cache_persist",
        lambda a, b: a.filter("id > 1").cache().filter("id < 5").persist(StorageLevel.MEMORY_ONLY),
    ),
    case("hint", lambda a, b: a.join(b.hint("broadcast"), "id")),
    case(
        "pipeline",
        lambda a, b: (
            a.filter("n IS NOT NULL")
            .join(b, "id", "left")
            .groupBy("s")
            .agg(F.sum("n").alias("t"))
            .orderBy("s")
        ),
        ordered=True,
    ),
]


@pytest.mark.parametrize(("build", "ordered", "bag"), CASES)
def test_tracked_result_equals_untracked(
    spark, a, b, build: Build, ordered: bool, bag: bool
) -> None:  # noqa: ANN001
    plain = build(a, b)
    expected = _collected(plain, ordered, bag)
    with tensprov_lab.track(spark) as run:
        tracked = build(a, b)
    got = _collected(tracked, ordered, bag)
    assert tracked.schema == plain.schema
    assert tracked.columns == plain.columns
    assert got == expected
    assert run.operations, "the tracked block recorded no operation"
    if plain.is_cached:  # the cache cases: leave no cached plan behind
        spark.catalog.clearCache()


# ---------------------------------------------------------------------------------------------
# patching, exceptions, store consistency


def _classes() -> list[type]:
    from pyspark.ml.base import Estimator, Transformer
    from pyspark.sql import SparkSession
    from pyspark.sql.classic.dataframe import DataFrame as ClassicDataFrame
    from pyspark.sql.dataframe import DataFrame
    from pyspark.sql.group import GroupedData

    return [ClassicDataFrame, GroupedData, DataFrame, SparkSession, Transformer, Estimator]


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
        for t, d in zip(op.tensors, op.inputs, strict=True):
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


def _print_things(a: Any) -> None:
    a.show()
    a.printSchema()
    print(a.filter("n > 5").count())
    print(a.orderBy("id", "x").collect())
    print(a)
    print(a.columns, a.dtypes)


def test_printed_output_unchanged(spark, a, capsys) -> None:  # noqa: ANN001
    capsys.readouterr()
    _print_things(a)
    plain = capsys.readouterr()
    with tensprov_lab.track(spark):
        _print_things(a)
        tracked = capsys.readouterr()
    assert tracked.out == plain.out
    assert tracked.err == plain.err
    assert "| id|" in plain.out and "root" in plain.out


def _actions(a: Any, b: Any) -> list[Any]:
    j = a.join(b, "id", "left")
    ordered = a.orderBy("id", "x")
    return [
        j.count(),
        a.count(),
        a.filter("n > 5").first(),
        ordered.take(2),
        ordered.toPandas().to_json(),
        sorted(map(repr, a.groupBy("s").agg(F.sum("n").alias("t")).collect())),
        a.filter("id > 100").isEmpty(),
    ]


def test_actions_inside_block_return_the_same(spark, a, b) -> None:  # noqa: ANN001
    plain = _actions(a, b)
    with tensprov_lab.track(spark):
        tracked = _actions(a, b)
    assert tracked == plain
    assert plain[0] == 7 and plain[1] == 6
