"""Plan helpers: object numbering that capture's lookups rely on."""

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

    from tensprov_lab.capture._jvm import Jvm

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
    from tensprov_lab.capture._jvm import Jvm

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


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    fields=st.lists(
        st.tuples(_NAME, st.sampled_from(_TYPES) | st.tuples(_NAME, _NAME)),
        min_size=1,
        max_size=6,
        unique_by=lambda f: f[0].lower(),
    )
)
def test_columns_read_like_pyspark_schema(spark, fields) -> None:  # noqa: ANN001
    """Names and type strings read from the catalog string equal pyspark's own (from
    JSON), whatever the names: nested fields with brackets or commas in their names
    fall back to JSON rather than split wrongly."""
    from pyspark.ml.linalg import Vectors

    from tensprov_lab.capture._jvm import Jvm

    jvm = Jvm(spark)
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

    from tensprov_lab.capture import _jvm
    from tensprov_lab.capture._jvm import _split_types

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
    from tensprov_lab.capture import _jvm

    jvm = _jvm.Jvm(spark)
    monkeypatch.setattr(_jvm, "_MEMO_SIZE", 3)
    plans = [jvm.plan(spark.range(i)) for i in range(6)]
    first = [jvm.ident(p) for p in plans]
    assert len(set(first)) == 6
    assert len(jvm._memo) <= 3
    # forgotten proxies are asked again and get the numbers they had
    assert [jvm.ident(p) for p in plans] == first
    assert [jvm.cls(p) for p in plans] == ["Range"] * 6
