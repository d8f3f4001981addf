"""Plan helpers: object numbering that capture's lookups rely on, and the JVM-side
helper (TensProvHelper.java) against plain py4j reading."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    DoubleType,
    StructField,
    StructType,
    UserDefinedType,
)

pytestmark = pytest.mark.spark


def test_ident_numbers_objects_not_values(spark) -> None:  # noqa: ANN001
    from pyspark.sql import functions as F

    from tensprov_lab.capture.spark._jvm import Jvm

    jvm = Jvm(spark)
    src = spark.range(10)
    a = src.filter(F.col("id") > 3)
    b = src.filter(F.col("id") > 3)
    pa, pb = jvm.plan(a), jvm.plan(b)
    # equal plans, distinct objects: the value-based `equals` cannot tell them apart
    assert pa.equals(pb)
    assert jvm.ident(pa) != jvm.ident(pb)
    # a second proxy of the same JVM object is the same object
    again = a._jdf.logicalPlan()
    assert again is not pa
    assert jvm.ident(again) == jvm.ident(pa)
    # a DataFrame's plan is one proxy, so what is asked of it is asked once
    assert jvm.plan(a) is pa


def test_ident_is_unique_over_many_objects(spark) -> None:  # noqa: ANN001
    from tensprov_lab.capture.spark._jvm import Jvm

    jvm = Jvm(spark)
    plans = [jvm.plan(spark.range(i)) for i in range(300)]
    idents = [jvm.ident(p) for p in plans]
    assert len(set(idents)) == len(plans)
    # stable: asking again gives the same numbers
    assert [jvm.ident(p) for p in plans] == idents


_NAME = st.text(alphabet="ab <>(),:`.\\_é0", min_size=1, max_size=6)
_TYPES = [
    "int", "bigint", "string", "double", "decimal(10,2)", "date", "timestamp", "binary",
    "boolean", "array<int>", "map<string,double>", "array<struct<x:int,y:string>>",
    "interval day",
]  # fmt: skip


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    fields=st.lists(
        st.tuples(_NAME, st.sampled_from(_TYPES) | st.tuples(_NAME, _NAME)),
        min_size=1,
        max_size=6,
        unique_by=lambda f: f[0].lower(),
    )
)
@pytest.mark.parametrize("helper", [True, False])
def test_columns_read_like_pyspark_schema(spark, fields, helper) -> None:  # noqa: ANN001
    """Names and type strings read from the catalog string equal pyspark's own (from
    JSON), whatever the names: nested fields with brackets or commas in their names
    fall back to JSON rather than split wrongly.  Read through the helper or not."""
    from pyspark.ml.linalg import Vectors

    from tensprov_lab.capture.spark._jvm import Jvm

    jvm = Jvm(spark)
    if not helper:
        jvm._helper = None
    else:
        assert jvm.helper is not None
    cols = []
    for name, kind in fields:
        if isinstance(kind, tuple):  # a struct with two oddly named fields
            expr = F.struct(F.lit(1).alias(kind[0]), F.lit("s").alias(kind[1] + "_"))
        elif kind == "interval day":
            expr = F.expr("interval 1 day")
        else:
            expr = F.lit(None).cast(kind)
        cols.append(expr.alias(name))
    df = spark.range(1).select(*cols)
    fields_ = df.schema.fields
    expected = ([f.name for f in fields_], [f.dataType.simpleString() for f in fields_])
    assert jvm.columns(df) == expected
    # user-defined types (Spark's, Python-only) read as pyspark names them
    vec = spark.createDataFrame([(1, Vectors.dense([1.0]))], ["a", "v"])
    assert jvm.columns(vec) == (["a", "v"], ["bigint", "vector"])
    schema = StructType([StructField("p", _PointUDT())])
    points = spark.createDataFrame([(_Point(1.0, 2.0),)], schema)
    assert jvm.columns(points) == (["p"], [_PointUDT().simpleString()])


class _Point:
    def __init__(self, x: float, y: float) -> None:
        self.x, self.y = x, y


class _PointUDT(UserDefinedType):
    """A Python-only user-defined type (no Scala class behind it)."""

    @classmethod
    def sqlType(cls) -> ArrayType:
        return ArrayType(DoubleType(), False)

    @classmethod
    def module(cls) -> str:
        return __name__

    def serialize(self, obj: _Point) -> list[float]:
        return [obj.x, obj.y]

    def deserialize(self, datum: list[float]) -> _Point:
        return _Point(datum[0], datum[1])


def test_catalog_strings_split_or_refuse() -> None:
    import doctest

    from tensprov_lab.capture.spark import _jvm
    from tensprov_lab.capture.spark._jvm import _split_types

    assert doctest.testmod(_jvm).failed == 0
    assert _split_types("struct<a:int>", ["a"]) == ["int"]
    assert _split_types("struct<a,b:int,c:array<map<string,decimal(3,1)>>>", ["a,b", "c"]) == [
        "int",
        "array<map<string,decimal(3,1)>>",
    ]
    # a name that is not the next one, a missing or an extra field: no guess
    assert _split_types("struct<a:int,b:int>", ["a", "c"]) is None
    assert _split_types("struct<a:int,b:int>", ["a"]) is None
    assert _split_types("struct<a:int>", ["a", "b"]) is None
    assert _split_types("struct<a:map<int,int>", ["a"]) is None


_Point.__UDT__ = _PointUDT()  # type: ignore[attr-defined]


def test_memo_forgets_without_changing_answers(spark, monkeypatch) -> None:  # noqa: ANN001
    from tensprov_lab.capture.spark import _jvm

    jvm = _jvm.Jvm(spark)
    monkeypatch.setattr(_jvm, "_MEMO_SIZE", 3)
    plans = [jvm.plan(spark.range(i)) for i in range(6)]
    first = [jvm.ident(p) for p in plans]
    assert len(set(first)) == 6
    assert len(jvm._memo) <= 3
    # forgotten proxies are asked again and get the numbers they had
    assert [jvm.ident(p) for p in plans] == first
    assert [jvm.cls(p) for p in plans] == ["Range"] * 6


# -- the JVM-side helper --------------------------------------------------------------------


@pytest.fixture(scope="module")
def jvm(spark):  # noqa: ANN001, ANN201
    from tensprov_lab.capture.spark._jvm import Jvm

    jvm = Jvm(spark)
    assert jvm.helper is not None, "Janino did not compile TensProvHelper.java"
    return jvm


def _escaped_utf8(text: str) -> int:
    # what py4j sends: backslashes and line breaks escaped
    return len(text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").encode())


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    unit=st.text(min_size=1, max_size=6),
    times=st.sampled_from([1, 500, 1500, 4000]),
)
def test_helper_replies_come_back_whole_in_small_pieces(jvm, unit, times) -> None:  # noqa: ANN001
    """A text of any characters (line breaks, backslashes, 3- and 4-byte ones) comes back
    exactly, in pieces that each fit under the size where py4j's answer stalls."""
    text = unit * times + "\\\n\r\U0001f600é" * (times // 100)
    pieces = []
    reply = str(jvm.helper.reply(text))
    while True:
        token, _, piece = reply.partition(" ")
        pieces.append(piece)
        if token == "0":
            break
        reply = str(jvm.helper.more(int(token)))
    assert "".join(pieces) == text
    assert jvm._whole(jvm.helper, str(jvm.helper.reply(text))) == text
    assert all(_escaped_utf8(p) <= 7000 for p in pieces)
    if _escaped_utf8(text) > 7000:
        assert len(pieces) > 1


def test_helper_reads_projections_like_py4j(spark, jvm) -> None:  # noqa: ANN001
    """Output ids and the added columns' references, against reading them call by call;
    a subquery is left to the JSON path (None)."""
    df = spark.range(3).withColumn("a", F.col("id") + 1)
    for i in range(40):
        df = df.withColumn(f"c{i}", F.col("a") * i + F.col("id"))
    df = df.withColumn("a", F.col("c3") + F.col("c7")).withColumn("lit", F.lit(5))
    df = df.select("*", (F.col("c1") - F.col("c2")).alias("d"), F.col("c4").alias("e"))
    for step in (df, df.drop("c5"), df.withColumnRenamed("c6", "six")):
        plan = jvm.plan(step)
        got = jvm.project_info(plan)
        assert got is not None
        out = [int(a.exprId().id()) for a in jvm.lst(plan.output())]
        fresh = jvm.lst(plan.projectList().diff(plan.child().output()))
        expected = [
            [
                int(e.exprId().id()),
                *sorted(int(r.exprId().id()) for r in jvm.lst(e.references().toSeq())),
            ]
            for e in fresh
        ]
        assert got[0] == out
        assert [[e[0], *sorted(e[1:])] for e in got[1]] == expected
    sub = spark.range(3).withColumn("q", F.expr("(select max(id) from range(4))"))
    assert jvm.project_info(jvm.plan(sub)) is None


def _walk_shapes(jvm, plan) -> list:  # noqa: ANN001
    out, stack = [], [plan]
    while stack:
        node = stack.pop()
        out.append(jvm.shape(node))
        stack.extend(jvm.children(node))
    return out


def test_helper_shapes_equal_those_read_call_by_call(spark) -> None:  # noqa: ANN001
    """One answer of the helper gives what walking a plan asked node by node: the same
    class names, deterministic flags and children, and one numbering (ident) whichever
    side, Python or the helper, numbered an object first."""
    from tensprov_lab.capture.spark._jvm import Jvm

    a = spark.range(20).withColumn("g", F.col("id") % 3)
    b = spark.range(5).withColumnRenamed("id", "k")
    df = (
        a.filter(F.rand() > -1.0)
        .join(b, a.g == b.k, "left")
        .union(a.join(b, a.g == b.k).sample(0.5, seed=1))
        .groupBy("g")
        .count()
    )
    fast = Jvm(spark)
    assert fast.helper is not None
    slow = Jvm(spark)
    slow._helper = None  # as where Janino is missing
    plan = fast.plan(df)
    # the root's children numbered by Python before the helper sees them
    first = [fast.ident(k) for k in slow.lst(plan.children())]
    got = _walk_shapes(fast, plan)
    want = _walk_shapes(slow, slow.plan(df))
    assert [(s.cls, s.deterministic, len(s.kids)) for s in got] == [
        (s.cls, s.deterministic, len(s.kids)) for s in want
    ]
    assert {s.cls for s in got} >= {"Aggregate", "Union", "Join", "Filter", "Sample", "Range"}
    assert [s.deterministic for s in got].count(False) == 1  # the filter on rand()
    assert list(got[0].kids) == first
    # a fresh proxy of any node is numbered as its parent's shape reported it
    for s, node in zip(got, _nodes(fast, plan)):
        kids = node.children()
        assert [fast.ident(kids.apply(i)) for i in range(int(kids.size()))] == list(s.kids)
        assert fast.ident(node) == s.ident


def _nodes(jvm, plan) -> list:  # noqa: ANN001
    out, stack = [], [plan]
    while stack:
        node = stack.pop()
        out.append(node)
        stack.extend(jvm.children(node))
    return out


def test_helper_json_equals_the_plans_own(spark, jvm) -> None:  # noqa: ANN001
    df = spark.range(3)
    for i in range(60):
        df = df.withColumn(f"column_with_a_long_name_{i}", F.col("id") * i)
    plan = jvm.plan(df.groupBy("column_with_a_long_name_3").count())
    text = str(plan.toJSON())
    assert len(text) > 7000
    assert jvm.to_json(plan) == text


def test_capture_without_the_helper_is_the_same(spark, monkeypatch) -> None:  # noqa: ANN001
    """Where Janino is missing, capture reads the same facts call by call."""
    import numpy as np

    import tensprov_lab
    from tensprov_lab.capture.spark._jvm import Jvm

    def wide(name: str) -> tuple:
        src = spark.createDataFrame(
            [(i, i % 3, f"s{i}") for i in range(12)], "id int, g int, s string"
        )
        with tensprov_lab.track(spark, name=name) as run:
            df = src
            for i in range(35):
                df = df.withColumn(f"c{i}", F.col("id") * i + F.col("g"))
            df = df.withColumn("s", F.upper("s")).filter("g > 0").select("id", "s", "c3", "c30")
        ops = [run.store.operations[o] for o in run._log.operations]
        return run, df, ops

    run, out, ops = wide("with")
    monkeypatch.setattr(Jvm, "helper", property(lambda self: None))
    slow_run, slow_out, slow_ops = wide("without")
    assert len(ops) == len(slow_ops) == 38
    for a, b in zip(ops, slow_ops):
        assert (a.method, a.category) == (b.method, b.category)
        assert all(np.array_equal(x, y) for x, y in zip(a.contributing, b.contributing))
        assert all(np.array_equal(x, y) for x, y in zip(a.influencing, b.influencing))
    assert run.backward(out).to_dict() == slow_run.backward(slow_out).to_dict()
    assert run.rows(out).equals(slow_run.rows(slow_out))


def test_schema_read_in_pieces_equals_pyspark(spark, jvm) -> None:  # noqa: ANN001
    """An ML output's schema (slot metadata: far above 8 KB) read through the helper
    equals pyspark's, field by field as ML capture reads it."""
    import json

    from pyspark.ml.feature import OneHotEncoder, StringIndexer, VectorAssembler
    from pyspark.sql.types import StructType

    from tensprov_lab.capture.hops import _ml
    from tensprov_lab.capture.spark._jvm import schema_json

    rows = [(f"category number {i % 90}", f"c{i % 7}", float(i)) for i in range(200)]
    df = spark.createDataFrame(rows, "a string, b string, x double")
    idx = StringIndexer(inputCols=["a", "b"], outputCols=["ai", "bi"]).fit(df).transform(df)
    hot = OneHotEncoder(inputCols=["ai", "bi"], outputCols=["av", "bv"]).fit(idx).transform(idx)
    out = VectorAssembler(inputCols=["x", "av", "bv"], outputCol="v").transform(hot)
    text = schema_json(out)
    assert text is not None and len(text) > 8192
    assert StructType.fromJson(json.loads(text)) == out.schema
    fresh = out.select("*")  # a DataFrame whose schema pyspark has not read
    assert [_ml._field(fresh, c) for c in out.columns] == list(out.schema.fields)
    assert _ml.vector_size(fresh, "v") == 1 + 89 + 6


def test_facts_read_when_recorded_equal_those_asked_later(spark, monkeypatch) -> None:  # noqa: ANN001
    """A DataFrame's plan (its proxy), shape, columns and (a projection's) added
    expressions, read in the one round trip made when its call is recorded, equal those
    a fresh reader asks for one by one; asked again, they take no round trip."""
    from pyspark.ml.linalg import Vectors

    from tensprov_lab.capture.spark._jvm import Jvm

    base = spark.range(3).withColumn("a", F.col("id") + 1)
    wide = base
    for i in range(12):
        wide = wide.withColumn(f"c{i}", F.col("a") * i)
    frames = [
        wide,
        wide.select("*", (F.col("c1") - F.col("c2")).alias("d")),
        base.withColumn("q", F.expr("(select max(id) from range(4))")),  # a subquery
        base.filter(F.col("a") > 1),
        base.withColumn("s", F.struct(F.lit(1).alias("x,y"), F.lit("t").alias("z"))),
        spark.createDataFrame([(1, Vectors.dense([1.0]))], ["a", "v"]).withColumn("b", F.lit(2)),
        base.withColumn("r", F.rand(3)),  # not deterministic
    ]
    early, late = Jvm(spark), Jvm(spark)
    assert early.helper is not None and late.helper is not None
    assert early._numbers is not None  # made once per reader, by a few calls
    client = spark.sparkContext._gateway._gateway_client
    calls: list[str] = []
    real = client.send_command

    def counted(command: str, *args: object, **kwargs: object) -> object:
        calls.append(command)
        return real(command, *args, **kwargs)

    for df in frames:
        monkeypatch.setattr(client, "send_command", counted)
        plan, ident = early.recorded(df)
        monkeypatch.undo()
        assert calls
        # the plan's proxy comes in the reply, by its py4j id (a struct's or a UDT's
        # columns are then read as pyspark reads them)
        assert "\nrecorded\n" in calls[0]
        assert not any("logicalPlan" in c for c in calls)
        assert plan is early.plan(df)
        assert (
            plan.equals(df._jdf.logicalPlan())
            and plan.hashCode() == df._jdf.logicalPlan().hashCode()
        )
        calls.clear()
        monkeypatch.setattr(client, "send_command", counted)
        shape = early.shape(plan)
        cols = early.columns(df)
        info = early.project_info(plan) if shape.cls == "Project" else None
        monkeypatch.undo()
        assert calls == []
        assert shape.ident == ident == early.ident(plan)
        other = late.plan(df)
        want = late.shape(other)
        assert (shape.cls, shape.deterministic, len(shape.kids)) == (
            want.cls, want.deterministic, len(want.kids)
        )  # fmt: skip
        assert cols == late.columns(df) == ([f.name for f in df.schema.fields], [
            f.dataType.simpleString() for f in df.schema.fields
        ])  # fmt: skip
        assert info == (late.project_info(other) if want.cls == "Project" else None)
