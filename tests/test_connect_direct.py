"""A Connect source's keys and fused reads from its Parquet files on the client
(``capture/connect/_direct.py``): the keys are the ones Spark gives the same records,
conditions keep the records Spark's filter keeps, and a capture's lineage is the one it
has when Spark reads everything."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tensprov_lab
from tensprov_lab._api import _tracker
from tensprov_lab.capture.connect._direct import (
    compile_expression,
    direct_source,
    file_schema,
    layout_conf,
)
from tensprov_lab.capture.sources._direct import evaluate
from tensprov_lab.capture.sources._direct_files import Unreadable
from tensprov_lab.capture.spark._versions import to_arrow
from tests._connect_session import connect_session

pytestmark = [pytest.mark.spark, pytest.mark.connect]


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    with connect_session() as session:
        yield session


def _write(folder: Path, sizes: list[int], seed: int = 0) -> Path:
    """Parquet files of ``sizes`` records each (so of distinct byte sizes), with nulls,
    a bigint key partly beyond int's range, and a record id ``rid``."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    start = 0
    for i, n in enumerate(sizes):
        rid = np.arange(start, start + n)
        start += n
        amount = rng.normal(30, 15, n).round(2)
        table = pa.table({
            "rid": pa.array(rid, pa.int64()),
            "amount": pa.array(amount, mask=rng.random(n) < 0.1),
            "qty": pa.array(rng.integers(-5, 50, n).astype(np.int32), mask=rng.random(n) < 0.1),
            "small": pa.array(rng.integers(-3, 4, n).astype(np.int8)),
            "ratio": pa.array(rng.random(n).astype(np.float32)),
            "cust": pa.array(np.where(rng.random(n) < 0.05, 2**40 + rid, rid % 17), pa.int64()),
            "region": pa.array(rng.choice(["EU", "US", "APAC", "é"], n),
                               mask=rng.random(n) < 0.1),
            "flag": pa.array(rng.random(n) < 0.5),
        })  # fmt: skip
        pq.write_table(table, folder / f"part-{i:05d}.parquet")
    # files Spark's listing leaves out
    (folder / "_SUCCESS").write_bytes(b"")
    (folder / ".notes").write_bytes(b"hidden")
    return folder


def _direct_keys(spark: Any, df: Any) -> np.ndarray | None:
    schema = [(f.name, f.dataType.simpleString()) for f in df.schema.fields]
    conf = layout_conf(spark, {})
    reader = direct_source(spark, df, {}, schema, conf)
    return None if reader is None else reader()[0][:, 0]


def _spark_keys(df: Any) -> np.ndarray:
    from pyspark.sql import functions as F

    table = to_arrow(df.select(F.monotonically_increasing_id().alias("k")))
    return np.asarray(table.column("k").to_numpy())


@pytest.mark.parametrize(
    "conf",
    [
        {},
        {"spark.sql.files.maxPartitionBytes": "9000b", "spark.sql.files.openCostInBytes": "500b"},
        {"spark.sql.files.minPartitionNum": "4", "spark.sql.files.openCostInBytes": "100"},
        {"spark.sql.files.maxPartitionBytes": "9000", "spark.sql.files.openCostInBytes": "10",
         "spark.sql.files.maxPartitionNum": "2"},
        {"spark.sql.leafNodeDefaultParallelism": "3", "spark.sql.files.openCostInBytes": "1k"},
    ],
)  # fmt: skip
def test_keys_are_the_ids_spark_gives(spark: Any, tmp_path: Path, conf: dict[str, str]) -> None:
    folder = _write(tmp_path / "src", [40, 7, 130, 260, 15, 90, 33, 180])
    for key, value in conf.items():
        spark.conf.set(key, value)
    try:
        df = spark.read.parquet(str(folder))
        direct = _direct_keys(spark, df)
        assert direct is not None  # read on the client, not through Spark
        expected = _spark_keys(df)
        assert len(np.unique(expected >> 33)) > 1 or not conf  # several partitions
        assert direct.tolist() == expected.tolist()
    finally:
        for key in conf:
            spark.conf.unset(key)


def test_files_spark_would_split_or_order_are_read_by_spark(spark: Any, tmp_path: Path) -> None:
    folder = _write(tmp_path / "big", [40, 400])
    spark.conf.set("spark.sql.files.maxPartitionBytes", "2000b")
    try:
        assert _direct_keys(spark, spark.read.parquet(str(folder))) is None  # a file split
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")
    twins = _write(tmp_path / "twins", [50])
    twin = (twins / "part-00000.parquet").read_bytes()
    (twins / "part-00001.parquet").write_bytes(twin)  # the same size
    assert _direct_keys(spark, spark.read.parquet(str(twins))) is None
    one = twins / "part-00000.parquet"
    assert _direct_keys(spark, spark.read.parquet(str(one))) is not None
    with_options = spark.read.option("mergeSchema", "true").parquet(str(folder))
    assert _direct_keys(spark, with_options) is None


def _columns(df: Any) -> dict[str, tuple[str, str]]:
    return {f.name.lower(): (f.name, f.dataType.simpleString()) for f in df.schema.fields}


_VALUES = {
    "amount": st.sampled_from(["20", "20.5", "-3", "30.25D", "1e1", "NULL"]),
    "qty": st.sampled_from(["3", "0", "-5", "2147483648", "10L", "NULL", "7.5"]),
    "small": st.sampled_from(["1", "-3", "300", "0"]),
    "ratio": st.sampled_from(["0.5", "0.25D", "1"]),
    "cust": st.sampled_from(["3", "16", "1099511627776L", "1099511627800"]),
    "region": st.sampled_from(["'EU'", "'é'", "'US'", "NULL"]),
    "flag": st.sampled_from(["TRUE", "FALSE"]),
}


@st.composite
def _conditions(draw: Any, depth: int = 2) -> str:
    if depth and draw(st.booleans()):
        a, b = draw(_conditions(depth - 1)), draw(_conditions(depth - 1))
        return draw(st.sampled_from([f"({a}) AND ({b})", f"({a}) OR ({b})", f"NOT ({a})"]))
    column = draw(st.sampled_from(sorted(_VALUES)))
    value = draw(_VALUES[column])
    shape = draw(st.sampled_from(["cmp", "null", "in", "between"]))
    if shape == "null":
        return f"{column} IS {draw(st.sampled_from(['', 'NOT ']))}NULL"
    if shape == "in":
        items = draw(st.lists(_VALUES[column], min_size=1, max_size=3))
        return f"{column} {draw(st.sampled_from(['', 'NOT ']))}IN ({', '.join(items)})"
    if shape == "between":
        return f"{column} BETWEEN {value} AND {draw(_VALUES[column])}"
    op = draw(st.sampled_from(["=", "==", "!=", "<>", "<", "<=", ">", ">="]))
    return f"{column} {op} {value}"


@pytest.fixture(scope="module")
def source(spark: Any, tmp_path_factory: Any) -> tuple[Any, pa.Table]:
    folder = _write(tmp_path_factory.mktemp("cond") / "src", [60, 45, 80], seed=3)
    table = pa.concat_tables(pq.read_table(p) for p in sorted(folder.glob("*.parquet")))
    return spark.read.parquet(str(folder)), table


_compiled: list[bool] = []


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=_conditions())
def test_conditions_keep_what_sparks_filter_keeps(source: tuple[Any, pa.Table], text: str) -> None:
    """SQL text and the same condition as a Connect column (``F.expr``) keep, evaluated
    on the files, the records Spark's filter keeps; anything not compiled is Spark's."""
    from pyspark.sql import functions as F

    df, table = source
    try:
        node = compile_expression(F.expr(text)._expr.to_plan(None), _columns(df))
    except Unreadable:
        _compiled.append(False)
        return
    _compiled.append(True)
    kept = evaluate(node, table)
    if isinstance(kept, pa.Scalar):
        kept = pa.repeat(kept, table.num_rows)
    ours = sorted(np.asarray(table.column("rid"))[np.asarray(kept.fill_null(False), bool)])
    spark_kept = sorted(to_arrow(df.filter(text).select("rid")).column("rid").to_pylist())
    assert ours == spark_kept, text


def test_most_conditions_compiled() -> None:
    """(after the property test) it compared most conditions, not only refused them"""
    assert len(_compiled) >= 30 and sum(_compiled) >= len(_compiled) // 2, _compiled


def test_column_conditions_compile_as_spark_types_them(source: tuple[Any, pa.Table]) -> None:
    from pyspark.sql import functions as F

    df, table = source
    cases = [
        (F.col("amount") > 20) & F.col("region").isin("EU", "US"),
        ~(F.col("qty") == 3) | F.col("qty").isNull(),
        F.col("small").between(-1, 2) & (F.col("ratio") < 0.5),
        (F.col("cust") != 16) & F.col("flag"),
        F.col("region").isNotNull() & (F.col("amount") <= F.col("qty")),
    ]
    for cond in cases:
        node = compile_expression(cond._expr.to_plan(None), _columns(df))
        kept = np.asarray(evaluate(node, table).fill_null(False), bool)
        ours = sorted(np.asarray(table.column("rid"))[kept])
        assert ours == sorted(to_arrow(df.filter(cond).select("rid")).column("rid").to_pylist())
    for refused in (F.col("amount") + 1 > 3, F.col("region") == 3, F.col("amount").eqNullSafe(2)):
        with pytest.raises(Unreadable):
            compile_expression(refused._expr.to_plan(None), _columns(df))


def _pipeline(spark: Any, folder: Path, direct: bool) -> tuple[Any, dict[str, Any]]:
    from pyspark.sql import functions as F

    orders = spark.read.parquet(str(folder / "orders"))
    customers = spark.read.parquet(str(folder / "customers"))
    tracker = _tracker(spark)
    tracker.direct_reads = direct
    try:
        with tensprov_lab.track(spark, name=f"direct={direct}") as run:
            big = orders.filter("amount > 20 AND region IS NOT NULL")
            some = big.filter(F.col("qty").isin(1, 2, 3, 4, 5) | (F.col("small") < 0))
            joined = some.join(customers, "cust")
            by_key = big.join(customers, big["cust"] == customers["cust"], "left")
            out = joined.groupBy("segment").agg(F.sum("amount").alias("total"))
            right = some.join(customers, "CUST", "right")
            full = big.join(customers, "cust", "full")
    finally:
        tracker.direct_reads = True
    frames = {"orders": orders, "customers": customers, "big": big, "some": some,
              "joined": joined, "by_key": by_key, "out": out, "right": right,
              "full": full}  # fmt: skip
    return run, frames


def test_lineage_is_the_one_of_sparks_reads(spark: Any, tmp_path: Path) -> None:
    _write(tmp_path / "orders", [120, 75, 300, 41])
    segments = pa.table({
        "cust": pa.array(list(range(17)) + [2**40 + 5], pa.int64()),
        "segment": pa.array([f"s{c % 4}" for c in range(17)] + ["far"]),
    })  # fmt: skip
    (tmp_path / "customers").mkdir()
    pq.write_table(segments, tmp_path / "customers" / "part-0.parquet")
    fast, frames = _pipeline(spark, tmp_path, True)
    slow, frames2 = _pipeline(spark, tmp_path, False)
    # the sources were read on the client: no job for them, none for the filters
    assert fast._log.jobs < slow._log.jobs
    for name in ("big", "some"):
        assert fast.store.producer(fast.dataset(frames[name]).id).jobs == 0
    for name in ("big", "some", "joined", "by_key", "out", "right", "full"):
        for src in ("orders", "customers"):
            if src == "customers" and name in ("big", "some"):
                continue
            a = fast.mapping(frames[src], frames[name])
            b = slow.mapping(frames2[src], frames2[name])
            assert a.shape == b.shape and (a != b).nnz == 0, (name, src)
        assert fast.rows(frames[name]).equals(slow.rows(frames2[name])), name
    for name, df in frames.items():  # schemas read from files, derived for joins: Spark's
        got = fast.dataset(df)
        fields = df.schema.fields
        expected = ([f.name for f in fields], [f.dataType.simpleString() for f in fields])
        assert (list(got.columns), list(got.dtypes)) == expected, name


def test_file_schema_is_the_one_spark_gives(spark: Any, tmp_path: Path) -> None:
    ours = _write(tmp_path / "ours", [20, 30])
    written = tmp_path / "spark"
    spark.range(7).selectExpr(
        "id", "cast(id as int) AS i", "current_date() AS d", "cast(id as string) AS s",
        "cast(id as decimal(10, 2)) AS m", "array(id) AS a",
    ).write.parquet(str(written))  # fmt: skip
    for folder in (ours, written):
        df = spark.read.parquet(str(folder))
        got = file_schema(spark, df)
        assert got is not None, folder
        expected = [(f.name, f.dataType.simpleString()) for f in df.schema.fields]
        assert [(f.name, f.dataType.simpleString()) for f in got] == expected
    stamps = tmp_path / "stamps"
    stamps.mkdir()
    pq.write_table(pa.table({"t": pa.array([1], pa.timestamp("us"))}), stamps / "p.parquet")
    assert file_schema(spark, spark.read.parquet(str(stamps))) is None  # Spark's to say
