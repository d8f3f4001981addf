"""``tensprov-lab bench --suite pandas``: five pandas API pipelines print their figures."""

from __future__ import annotations

import re
from typing import Any

import pytest

pytestmark = pytest.mark.spark


def test_pandas_bench_prints_a_line_per_pipeline(
    spark: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from tensprov_lab.bench.engine import main

    # (the tests' session is running: the bench uses it and leaves it running)
    assert main(["--suite", "pandas", "--rows", "60", "--repeat", "1"]) == 0
    assert spark.range(3).count() == 3
    out = capsys.readouterr().out
    line = r"^(.+?) +(\d+) +(\d+) +(\d+) +(\d+|refused) +[\d.]+s +[\d.]+s +(\d+\.\d\d)×$"
    lines = re.findall(line, out, re.M)
    assert len(lines) == 5, out
    by_name = {name.strip(): rest for name, *rest in lines}
    # record level through the default index: no opaque step in any of them
    assert all(int(opaque) == 0 for _, opaque, *_ in by_name.values()), out
    assert all(float(ratio) > 0 for *_, ratio in by_name.values())
    assert by_name["where + fillna"][3] == "60"  # (every record: a where keeps them all)
    assert by_name["filter + groupby.sum"][3] == "3"
