"""What differs between pyspark 3.5 and 4.x lives in capture/spark/_versions.py; these
tests run on whichever pyspark is installed (CI runs them on both)."""

from __future__ import annotations

from importlib import resources

import pyspark
import pytest

from tensprov_lab.capture.spark import _versions as V


def test_the_release_is_read_from_pyspark() -> None:
    major, minor = (int(p) for p in pyspark.__version__.split(".")[:2])
    assert V.spark_version() == (major, minor) >= V.OLDEST
    assert V.spark4() == (major >= 4)


@pytest.mark.parametrize("name", ["TensProvHelper", "TensProvReplay"])
def test_java_helpers_name_only_what_the_installed_spark_has(name: str) -> None:
    text = resources.files("tensprov_lab.capture.spark").joinpath(f"{name}.java").read_text()
    made = V.java_source(text)
    if V.spark4():
        assert made == text
        return
    # every Spark 4 spelling of the table is replaced (the compile test below proves
    # what is left compiles)
    for new, _ in V._JAVA_35:
        assert new not in made
    assert "org.apache.spark.sql.classic" not in made
    assert "scala.collection.immutable.Seq" not in made
    assert "scala.jdk.javaapi" not in made


def test_every_spelling_of_the_table_is_in_a_helper() -> None:
    """The table of Spark 4 spellings is not stale: each is in one of the helpers."""
    folder = resources.files("tensprov_lab.capture.spark")
    both = "".join(
        folder.joinpath(f"{n}.java").read_text() for n in ("TensProvHelper", "TensProvReplay")
    )
    assert [new for new, _ in V._JAVA_35 if new not in both] == []


def test_classes_are_the_installed_ones() -> None:
    frame = V.classic_dataframe()
    assert frame.__name__ == "DataFrame"
    assert frame.__module__ == (
        "pyspark.sql.classic.dataframe" if V.spark4() else "pyspark.sql.dataframe"
    )
    rdd = V.rdd_class()
    assert rdd is not None and rdd.__name__ == "RDD"


@pytest.mark.spark
def test_both_java_helpers_compile(spark: object) -> None:
    from tensprov_lab.capture.spark._jvm import Jvm

    jvm = Jvm(spark)
    assert jvm.helper is not None, "Janino did not compile TensProvHelper.java"
    assert jvm.replayer is not None, "Janino did not compile TensProvReplay.java"


@pytest.mark.spark
def test_arrow_and_frames_round_trip(spark: object) -> None:
    """``to_arrow``, ``from_pandas`` and ``from_arrow`` give what pyspark 4's own
    methods give: nulls (pandas' NaN in an integer column) included."""
    import pandas as pd
    import pyarrow as pa

    df = spark.createDataFrame(  # type: ignore[attr-defined]
        [(1, "a", 1.5), (None, None, None)], "k long, s string, x double"
    )
    table = V.to_arrow(df)
    assert table.schema == V.arrow_schema(df.schema)
    assert table.to_pylist() == [{"k": 1, "s": "a", "x": 1.5}, {"k": None, "s": None, "x": None}]
    pdf = pd.DataFrame({"k": [1.0, float("nan")], "s": ["a", None], "x": [1.5, None]})
    back = V.from_pandas(spark, pdf, df.schema)
    assert [tuple(r) for r in back.collect()] == [(1, "a", 1.5), (None, None, None)]
    keys = V.from_arrow(spark, pa.table({"w": pa.array([3, 1], pa.int64())}))
    assert [r.w for r in keys.collect()] == [3, 1]
    assert V.to_arrow(df.limit(0)).num_rows == 0


@pytest.mark.spark
def test_constructor_names_are_the_node_own(spark: object) -> None:
    from tensprov_lab.capture.spark._jvm import Jvm

    jvm = Jvm(spark)
    plan = spark.range(3).groupBy("id").count()._jdf.queryExecution().analyzed()  # type: ignore[attr-defined]
    names = V.product_names(plan, int(plan.productArity()))
    # (Spark 4's Aggregate has a fourth, its hint)
    assert len(names) == int(plan.productArity())
    assert names[:3] == ["groupingExpressions", "aggregateExpressions", "child"]
    copied = jvm.copy(plan, child=plan.child())
    assert str(copied.toString()) == str(plan.toString())


@pytest.mark.skipif(V.spark4(), reason="pyspark 4's Connect client is tracked (test_connect.py)")
def test_a_connect_session_of_pyspark_35_is_refused_clearly() -> None:
    """pyspark 3.5's Connect client lacks what capture needs (and pip has no 3.5 Connect
    server to test against): tracking one says so before anything runs."""
    from pyspark.sql.connect.session import SparkSession

    import tensprov_lab

    # no server needed: a session object that never sends a request
    session = SparkSession.__new__(SparkSession)
    before = len(tensprov_lab.runs())
    with pytest.raises(NotImplementedError, match="needs pyspark 4's Connect client"):
        tensprov_lab.track(session).__enter__()
    assert len(tensprov_lab.runs()) == before


def test_a_ctrl_c_is_noted_and_handled_as_before() -> None:
    """sigint_noted: a Ctrl-C in the block is noted and still reaches the handler that
    was there (Python's: KeyboardInterrupt), which is back once the block ends; an error
    raised after one becomes a KeyboardInterrupt in ctrl_c_kept (pyspark 3.5's own
    handler fails with a Py4JError when the Ctrl-C comes during a call to the JVM)."""
    import os
    import signal

    before = signal.getsignal(signal.SIGINT)
    with V.sigint_noted() as seen:
        assert not seen()
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            signal.sigtimedwait([], 0.5)  # (the handler runs at the next bytecode)
        assert seen()
    assert signal.getsignal(signal.SIGINT) is before

    def fails_like_pyspark_35(signum: int, frame: object) -> None:
        raise RuntimeError("reentrant call inside <_io.BufferedReader>")

    signal.signal(signal.SIGINT, fails_like_pyspark_35)
    try:
        with pytest.raises(KeyboardInterrupt), V.ctrl_c_kept():
            try:
                os.kill(os.getpid(), signal.SIGINT)
                signal.sigtimedwait([], 0.5)
            except RuntimeError:
                raise ValueError("the job's own error, after the handler's") from None
        with pytest.raises(ValueError), V.ctrl_c_kept():
            raise ValueError("a failure without a Ctrl-C stays itself")
    finally:
        signal.signal(signal.SIGINT, before)
