"""Warnings point at the user's line: the first frame outside tensprov-lab and pyspark."""

from __future__ import annotations

import inspect
import os
import warnings
from typing import Any

import pytest

import tensprov_lab
from tensprov_lab._warn import TensProvWarning, user_stacklevel, warn


def _ours(source: str) -> dict[str, Any]:
    """Functions whose code claims to live in the package (as our modules' code does)."""
    path = os.path.join(os.path.dirname(tensprov_lab.__file__), "_pretend_module.py")
    ns: dict[str, Any] = {"warn": warn, "user_stacklevel": user_stacklevel}
    exec(compile(source, path, "exec"), ns)
    return ns


def test_a_warning_from_deep_inside_points_at_the_callers_line() -> None:
    ns = _ours("def deep():\n    warn('deep note')\ndef outer():\n    deep()\n")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
        ns["outer"]()
    assert len(seen) == 1 and seen[0].category is TensProvWarning
    assert (seen[0].filename, seen[0].lineno) == (__file__, line)


def test_stacklevel_counts_our_frames() -> None:
    ns = _ours("def two():\n    return user_stacklevel()\ndef one():\n    return two()\n")
    assert ns["one"]() == 3  # two, one (ours), then this test's frame
    assert user_stacklevel() == 1  # called from outside: the caller itself


@pytest.mark.spark
def test_a_tracked_blocks_warning_points_at_the_users_block(spark: Any) -> None:
    df = spark.range(10)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        start = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
        with tensprov_lab.track(spark, name="warns-here"):
            few = df.limit(3)  # an unordered limit: flagged as not deterministic
        end = inspect.currentframe().f_lineno  # type: ignore[union-attr]
    ours = [w for w in seen if issubclass(w.category, TensProvWarning)]
    assert ours, "the unordered limit is flagged"
    for w in ours:
        assert w.filename == __file__ and start <= w.lineno <= end, (w.filename, w.lineno)
    # led by the variable that holds the result
    assert str(ours[0].message).startswith("few: limit(3) is not deterministic")
    assert few.count() == 3
