"""Capture's large Arrow batches (capture.spark._batches): one change of the session's
setting shared by reads in several threads, the user's value restored by the last."""

from __future__ import annotations

import threading

from tensprov_lab.capture.spark._batches import BATCH_CONF, READ_BATCH_ROWS, large_batches


class Conf:
    def __init__(self) -> None:
        self.values = {BATCH_CONF: "10000"}
        self.sets: list[str] = []

    def get(self, key: str) -> str:
        return self.values[key]

    def set(self, key: str, value: str) -> None:
        self.sets.append(value)
        self.values[key] = value


class Session:
    def __init__(self) -> None:
        self.conf = Conf()


def test_reads_at_once_share_one_change_and_the_last_restores() -> None:
    spark = Session()
    inside = threading.Barrier(3)
    seen: list[str] = []

    def read() -> None:
        with large_batches(spark):
            inside.wait(5)  # all three hold it at once
            seen.append(spark.conf.get(BATCH_CONF))
            inside.wait(5)

    threads = [threading.Thread(target=read) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert seen == [str(READ_BATCH_ROWS)] * 3
    assert spark.conf.sets == [str(READ_BATCH_ROWS), "10000"]  # set once, restored once
    assert spark.conf.get(BATCH_CONF) == "10000"


def test_one_read_after_another_restores_each_time() -> None:
    spark = Session()
    for _ in range(2):
        with large_batches(spark):
            assert spark.conf.get(BATCH_CONF) == str(READ_BATCH_ROWS)
        assert spark.conf.get(BATCH_CONF) == "10000"
    assert spark.conf.sets == [str(READ_BATCH_ROWS), "10000"] * 2
