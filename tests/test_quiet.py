"""Capture's own Spark jobs are silent; the user's log as before
(tensprov_lab/capture/spark/_quiet.py and TensProvQuiet.java)."""

from __future__ import annotations

import shutil
import tempfile
from typing import Any

import pytest

from tensprov_lab.capture.spark._jvm import Jvm
from tensprov_lab.capture.spark._quiet import MARK, mark, silence, unmark

pytestmark = pytest.mark.spark


def _errors(err: str) -> list[str]:
    return [line for line in err.splitlines() if " ERROR " in line]


def _removed_source(spark: Any) -> Any:
    """A DataFrame over parquet files that were removed after it was made."""
    folder = tempfile.mkdtemp()
    spark.range(20).repartition(2).write.mode("overwrite").parquet(folder)
    df = spark.read.parquet(folder)
    shutil.rmtree(folder)
    return df


def _fails(df: Any) -> str:
    try:
        df.count()
    except Exception as exc:  # noqa: BLE001 - the failure is the point
        return str(exc)
    raise AssertionError("a count over removed files succeeded")


def test_a_marked_job_over_removed_files_logs_nothing_the_users_job_logs_as_before(
    spark: Any, capfd: pytest.CaptureFixture
) -> None:
    jvm = Jvm(spark)
    assert silence(jvm) and silence(jvm)  # (a second call adds nothing twice)
    sc = spark.sparkContext
    quiet = jvm.once("TensProvQuiet", None)
    before = quiet.dropped()

    capfd.readouterr()
    previous = mark(sc, "tensprov-lab-test-1")
    try:
        message = _fails(_removed_source(spark))
    finally:
        unmark(sc, previous)
    err = capfd.readouterr().err
    assert "FILE_NOT_EXIST" in message or "does not exist" in message, message[:500]
    assert _errors(err) == [], err[:2000]
    # both kinds of line were there to drop: the tasks' pages and the scheduler's line
    assert quiet.dropped() - before >= 2
    assert sc.getLocalProperty(MARK) is None

    # the same failure in the user's job: Spark's lines reach the console as before
    capfd.readouterr()
    _fails(_removed_source(spark))
    err = capfd.readouterr().err
    lines = _errors(err)
    assert any("Executor" in line and "Exception in task" in line for line in lines), err[:2000]
    assert any("TaskSetManager" in line for line in lines), err[:2000]


def test_mark_restores_the_threads_own_job_group(spark: Any) -> None:
    sc = spark.sparkContext
    sc.setLocalProperty("spark.jobGroup.id", "the-users-group")
    try:
        previous = mark(sc, "tensprov-lab-test-2")
        assert sc.getLocalProperty("spark.jobGroup.id") == "tensprov-lab-test-2"
        unmark(sc, previous)
        assert sc.getLocalProperty("spark.jobGroup.id") == "the-users-group"
        assert sc.getLocalProperty(MARK) is None
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
