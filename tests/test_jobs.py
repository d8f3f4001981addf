"""Capture's job group: the jobs each operation's capture ran, and only those."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tensprov_lab.capture.spark._jobs import JobGroup


def _count_in_turns(spark: Any, jobs: JobGroup) -> list[list[int]]:
    with jobs.running():
        with jobs.counting() as none:
            spark.range(3).select("id")  # no job: a plan only
        with jobs.counting() as two:
            spark.range(3).count()
            spark.range(4).count()
        with jobs.counting() as others:
            # a job of another thread, outside the group, starts meanwhile
            t = threading.Thread(target=lambda: spark.range(5).count())
            t.start()
            t.join()
        with jobs.counting() as one:
            spark.range(6).count()
    return [none, two, others, one]


@pytest.mark.spark
def test_each_count_is_the_groups_jobs_run_inside(spark: Any) -> None:
    """None for a plan or another thread's job, every job of the group otherwise."""
    none, two, others, one = _count_in_turns(spark, JobGroup(spark))
    assert none == [0] and others == [0]
    # (a count may take more than one job: the same action twice takes twice as many)
    assert one[0] >= 1 and two[0] == 2 * one[0]


@pytest.mark.spark
def test_the_thread_leaves_the_group_on_an_error(spark: Any) -> None:
    sc = spark.sparkContext
    before = sc.getLocalProperty("spark.jobGroup.id")
    jobs = JobGroup(spark)
    with pytest.raises(ZeroDivisionError), jobs.running():
        assert sc.getLocalProperty("spark.jobGroup.id") == jobs.name
        1 / 0  # noqa: B018
    assert jobs.name is None and sc.getLocalProperty("spark.jobGroup.id") == before
