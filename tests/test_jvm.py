"""Plan helpers: object numbering that capture's lookups rely on."""

from __future__ import annotations

import pytest

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
    again = jvm.plan(a)
    assert again is not pa
    assert jvm.ident(again) == jvm.ident(pa)
    assert jvm.kept_ident(pa) == jvm.ident(pa)


def test_ident_is_unique_over_many_objects(spark) -> None:  # noqa: ANN001
    from tensprov_lab.capture._jvm import Jvm

    jvm = Jvm(spark)
    plans = [jvm.plan(spark.range(i)) for i in range(300)]
    idents = [jvm.ident(p) for p in plans]
    assert len(set(idents)) == len(plans)
    # stable: asking again gives the same numbers
    assert [jvm.ident(p) for p in plans] == idents
