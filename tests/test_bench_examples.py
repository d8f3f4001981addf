"""``tensprov-lab bench --suite examples``: pyspark's documented examples, untracked
then tracked (tensprov_lab/bench/examples.py)."""

from __future__ import annotations

import contextlib
import doctest
import re
import sys
import types
from collections.abc import Iterator
from typing import Any

import pytest

from tensprov_lab.bench import examples

pytestmark = pytest.mark.spark

_PASSES = """
>>> df = spark.range(6).filter("id > 2")
>>> df.count()
3
>>> df.groupBy((df.id % 2).alias("odd")).count().orderBy("odd").collect()
[Row(odd=0, count=1), Row(odd=1, count=2)]
"""

_FAILS = """
>>> spark.range(3).count()
4
"""


def _doctest(text: str, name: str = "probe.example") -> doctest.DocTest:
    return doctest.DocTestParser().get_doctest(text, {}, name, "probe.py", 0)


_MODULE = types.ModuleType("probe")


def test_an_example_that_passes_is_run_tracked_and_counted(spark: Any) -> None:
    out = examples.run_example(_doctest(_PASSES), _MODULE, spark)
    assert out.passed_untracked
    assert out.raised == "" and out.differs == ""
    assert out.ops >= 3  # range, filter, groupBy's aggregate, orderBy
    assert out.opaque == []
    assert out.errors_tracked == 0
    assert out.seconds_untracked > 0 and out.seconds_tracked > 0


def test_an_example_that_fails_untracked_is_not_tracked(spark: Any) -> None:
    out = examples.run_example(_doctest(_FAILS), _MODULE, spark)
    assert not out.passed_untracked
    assert out.ops == 0 and out.seconds_tracked == 0


def test_a_block_that_raises_and_error_lines_are_reported(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tensprov_lab

    @contextlib.contextmanager
    def noisy(session: Any) -> Iterator[None]:
        yield None
        print("26/12/04 21:00:00 ERROR Executor: injected", file=sys.stderr)
        raise RuntimeError("injected capture failure\nsecond line")

    monkeypatch.setattr(tensprov_lab, "track", noisy)
    out = examples.run_example(_doctest(_PASSES), _MODULE, spark)
    assert out.passed_untracked
    assert out.raised == "RuntimeError: injected capture failure"
    assert out.errors_tracked == 1 and out.errors_untracked == 0
    assert "ERROR Executor: injected" in out.error_sample


def test_an_output_that_differs_tracked_is_reported(
    spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tensprov_lab

    real = tensprov_lab.track

    @contextlib.contextmanager
    def changing(session: Any) -> Iterator[Any]:
        # a tracker that (wrongly) changes what the block's code sees
        monkeypatch.setattr(session.__class__, "range", lambda self, n: real_range(self, n + 1))
        try:
            with real(session) as run:
                yield run
        finally:
            monkeypatch.setattr(session.__class__, "range", real_range)

    real_range = spark.__class__.range
    monkeypatch.setattr(tensprov_lab, "track", changing)
    out = examples.run_example(_doctest(_PASSES), _MODULE, spark)
    assert out.passed_untracked
    assert out.differs == "df.count()"


def test_the_bench_prints_a_row_per_module(spark: Any, capsys: pytest.CaptureFixture) -> None:
    assert examples.main(["--modules", "window,group", "--limit", "2"]) == 0
    assert spark.range(3).count() == 3  # the tests' session is used and left running
    printed = capsys.readouterr().out
    row = r"^(\S+) +(\d+) +(\d+) +(\d+) +(\d+) +(\d+) +([\d.]+)% +(\d+) +[\d.]+s +[\d.]+s$"
    rows = {m[0]: m[1:] for m in re.findall(row, printed, re.M)}
    assert set(rows) == {"window", "group", "all"}, printed
    for docstrings, passed, failed, differs, *_ in rows.values():
        assert 0 < int(passed) <= int(docstrings)
        assert failed == "0" and differs == "0"


def test_an_unknown_module_is_refused_with_the_choices(
    capsys: pytest.CaptureFixture,
) -> None:
    with pytest.raises(SystemExit):
        examples.main(["--modules", "DataFrame,nope"])
    err = capsys.readouterr().err
    assert "unknown module(s) nope: choose of DataFrame, Column" in err
