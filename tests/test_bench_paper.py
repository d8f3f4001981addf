"""``tensprov-lab bench --suite paper`` end to end at smoke size."""

from __future__ import annotations

import json

import pytest

from tensprov_lab.bench import engine, paper


def test_formatting_without_spark() -> None:
    pipes = [
        paper.PipelineResult(
            "census", "dataframe", rows_in=10, rows_out=10, materialize_s=1.0, capture_s=2.0,
            build_s=0.5, engine_bytes=2**20, baseline_s=8.0, baseline_bytes=2**30, agrees=True,
        )
    ]  # fmt: skip
    text = paper.format_pipelines(pipes)
    assert "4012.38" in text and "16.18" in text  # the paper's figures beside ours
    assert pipes[0].overhead == 2.0 and pipes[0].speedup == 4.0
    assert pipes[0].added == 1.5  # (2.0 - 0.5) / 1.0: the block's own code taken out
    assert " 0.50 " in text and " 1.50 " in text
    join = paper.format_join([paper.JoinResult(3, join_rows=10, join_bytes=20)])
    assert "3.02" in join and "1.02 GB" in join
    timed = paper.JoinResult(20, materialize_s=4.0, capture_s=1.0, baseline_s=22.0)
    assert timed.overhead == 0.25 and timed.speedup == 22.0
    line = paper.format_join([timed]).splitlines()[3]
    assert " 0.25 " in line and " 22.00 " in line and " chronological " in line
    assert " random " in paper.format_join([paper.JoinResult(20, order="random")])
    assert paper._jsonable({"a": (1.0, float("nan"))}) == {"a": [1.0, None]}


@pytest.mark.spark
def test_smoke_run_writes_every_result(spark, tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "paper.json"
    # through the engine bench's --suite switch, as the command line does; COMPAS only,
    # to stay quick: the other pipelines are checked in test_baseline.py
    md = tmp_path / "benchmarks.md"
    argv = ["--suite", "paper", "--smoke", "--pipelines", "compas", "--json", str(out)]
    argv += ["--accounts", "chronological,random", "--markdown", str(md)]
    assert engine.main(argv) == 0
    printed = capsys.readouterr().out
    # --markdown: the printed tables in the suite's own section
    text = md.read_text()
    assert "<!-- bench:paper-compas-sf0.05-pyspark" in text
    assert "## Paper suite (compas; TPC-DI SF 0.05)" in text
    assert "`tensprov-lab bench --suite paper --smoke --pipelines compas" in text
    assert "Table IX" in text and "Table XI" in text and " · pyspark " in text
    for title in ("Table IX", "Table X", "Table XI", "Fig. 4"):
        assert title in printed
    report = json.loads(out.read_text())
    assert set(report) >= {"pipelines", "join", "queries", "paper", "machine", "seconds"}
    assert [(p["pipeline"], p["variant"]) for p in report["pipelines"]] == [
        ("compas", "dataframe"),
        ("compas", "ml"),
    ]
    for p in report["pipelines"]:
        assert p["error"] is None, p
        assert p["rows_out"] > 0 and p["operations"] > 0
        assert p["materialize_s"] > 0 and p["capture_s"] > 0
        assert p["baseline_s"] > 0 and p["baseline_bytes"] > 0
        assert p["agrees"] is True, p  # the baseline's lineage equals ours
    assert [j["order"] for j in report["join"]] == ["chronological", "random"]
    for j in report["join"]:
        assert j["error"] is None, j
        assert j["sf"] == 0.05 and j["join_rows"] == j["accounts"] > 0
        assert j["join_bytes"] > 0 and j["capture_s"] > 0 and min(j["why_ms"]) > 0
        assert j["baseline_bytes"] > j["join_bytes"] and j["agrees"] is True
        assert j["speedup"] == j["baseline_s"] / j["capture_s"] and j["overhead"] > 0
    timed = {q["query"]: q for q in report["queries"] if q["p50_ms"] is not None}
    assert {"Q1", "Q2"} <= set(timed)
    assert all(q["p50_ms"] > 0 and q["p99_ms"] >= q["p50_ms"] for q in timed.values())
    # the session belongs to the tests: the suite must leave it running
    assert spark.range(3).count() == 3


@pytest.mark.spark
def test_repeated_turns_keep_medians(spark, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    timings = iter([3.0, 1.0, 2.0])  # materializations, one per turn: median 2.0
    monkeypatch.setattr(paper, "_materialize_s", lambda make: next(timings))
    res = paper.run_pipeline(spark, "german", "dataframe", None, 50, baseline=False, repeat=3)
    assert res.repeat == 3 and res.materialize_s == 2.0
    assert res.capture_s > 0 and res.build_s > 0 and res.rows_out > 0
    # each turn read the data anew, so each captured its source: the last turn's run has
    # a source of its own
    import tensprov_lab

    run = tensprov_lab.last_run()
    own = [d for d in run.store.datasets.values() if d.run == run.id and d.role == "source"]
    assert res.operations == len(run.operations) > 0 and len(own) == 1
    assert "medians of 3 turns" in paper.format_pipelines([res])
    assert res.held_s is None and "in the background" not in paper.format_pipelines([res])


@pytest.mark.spark
def test_background_turns_time_the_block_held(spark) -> None:  # type: ignore[no-untyped-def]
    res = paper.run_pipeline(
        spark, "german", "dataframe", None, 50, baseline=False, repeat=1, background=True
    )
    assert res.held_s is not None and res.background_capture_s is not None
    assert 0 < res.held_s and res.background_capture_s > 0
    assert res.added_held == (res.held_s - res.build_s) / res.materialize_s
    line = next(x for x in paper.format_pipelines([res]).splitlines() if "in the background" in x)
    assert line.startswith("german/dataframe with the capture in the background: the block held")
    import tensprov_lab

    # the background turn's run was forgotten: the foreground turn's run is the last
    assert tensprov_lab.last_run().name == "paper-german-dataframe"


def test_an_unknown_accounts_order_is_refused_before_spark_starts() -> None:
    with pytest.raises(SystemExit, match="unknown accounts order sorted; choose from chrono"):
        paper.main(["--accounts", "chronological,sorted"])
