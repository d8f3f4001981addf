"""The TPC-H bench's table (tensprov_lab/bench/tpch.py): no JVM."""

from __future__ import annotations

from tensprov_lab.bench.tpch import format_table, summary


def _result(query: int, untracked: float, tracked: float) -> dict:
    added = max(tracked - untracked, 0.0)
    return {
        "query": query, "untracked_s": untracked, "tracked_s": tracked, "capture_s": added,
        "ratio": added / untracked, "jobs": 3, "operations": 4, "opaque": [],
        "tensor_bytes": 2**20, "jvm_heap_mb": 300.0, "python_rss_mb": 200.0,
        "backward_p50_ms": 0.5, "same": True, "rows": 4,
    }  # fmt: skip


def test_the_table_shows_what_tracking_adds_and_the_summary_its_median() -> None:
    results = [_result(1, 2.0, 3.0), _result(2, 1.0, 1.2), _result(3, 4.0, 10.0)]
    results.append({"query": 4, "failed": "the JVM died (out of memory)"})
    lines = format_table(results).splitlines()
    assert lines[0].split()[:8] == [
        "query", "untracked", "s", "tracked", "s", "added", "s", "ratio",
    ]  # fmt: skip
    q1 = lines[1].split()
    assert q1[:5] == ["Q", "1", "2.00", "3.00", "1.00"] and q1[5] == "0.50"
    assert lines[4] == "Q   4 FAILED: the JVM died (out of memory)"
    # ratios 0.5, 0.2 and 1.5: median 0.5, worst 1.5; the failed query counts as failed
    assert summary(results) == (
        "summary: 3/4 queries record-level with the untracked result, 1 failed; "
        "added/query ratio median 0.50, worst 1.50"
    )
