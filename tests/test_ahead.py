"""Round trips asked ahead (capture.connect._ahead.Prefetch): no JVM."""

from __future__ import annotations

import threading
import time

import pytest

from tensprov_lab.capture.connect._ahead import Prefetch


class Frame:
    """A DataFrame's stand-in: its schema asked in some thread, counted."""

    def __init__(self, name: str, fail: bool = False) -> None:
        self.name, self.fail, self.asked, self.threads = name, fail, 0, set()

    @property
    def schema(self) -> str:
        self.asked += 1
        self.threads.add(threading.get_ident())
        if self.fail:
            raise ValueError(f"cannot analyse {self.name}")
        return f"schema of {self.name}"


def test_answers_are_the_plain_calls_and_asked_once_in_other_threads() -> None:
    frames = [Frame("a"), Frame("b")]
    with Prefetch(frames + [frames[0]], {"conf": lambda: 42}) as ahead:
        assert [ahead.schema(f) for f in frames] == ["schema of a", "schema of b"]
        assert ahead.result("conf", lambda: 0) == 42
        assert ahead.result("other", lambda: 7) == 7  # not asked ahead: asked now
    assert [f.asked for f in frames] == [1, 1]  # the repeated frame was asked once
    assert all(threading.get_ident() not in f.threads for f in frames)


def test_a_frame_not_asked_ahead_is_asked_when_needed() -> None:
    late = Frame("late")
    with Prefetch([]) as ahead:
        assert ahead.schema(late) == "schema of late"
    assert late.threads == {threading.get_ident()}


def test_a_failed_answer_raises_where_the_capture_asks() -> None:
    bad = Frame("bad", fail=True)
    ahead = Prefetch([bad])
    with pytest.raises(ValueError, match="cannot analyse bad"):
        ahead.schema(bad)
    ahead.close()


def test_close_drops_the_answers_not_started() -> None:
    gate = threading.Event()
    started = []

    def slow(i: int) -> int:
        started.append(i)
        gate.wait(5)
        return i

    ahead = Prefetch(calls={f"c{i}": (lambda i=i: slow(i)) for i in range(12)})
    ahead.close()  # 4 threads: at most 4 of the 12 had started
    gate.set()
    time.sleep(0.3)  # time for any task left in the queue to start (none must)
    assert len(started) <= 4


def test_settle_waits_for_every_call_and_keeps_the_answers() -> None:
    ended = []

    def call(i: int) -> int:
        time.sleep(0.05 * i)
        ended.append(i)
        return i * 10

    with Prefetch(calls={f"c{i}": (lambda i=i: call(i)) for i in range(6)}) as ahead:
        ahead.settle()
        assert sorted(ended) == list(range(6))
        assert [ahead.result(f"c{i}", lambda: -1) for i in range(6)] == [0, 10, 20, 30, 40, 50]
        assert ahead.result("c0", lambda: -1) == -1  # taken once
