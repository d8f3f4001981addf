"""The pandas API on Spark, tracked (issue 59): lineage through its default index.

``df.pandas_api()`` and ``ps.from_pandas`` number records with a distributed-sequence
index (an ``AttachDistributedSequence`` plan node, tensprov_lab/capture/rules/
sequence.py).  Each pipeline here is checked against an oracle that needs no capture:
every source record carries its own ``rid``, and the expected lineage of an output
record is computed from the source data in Python.
"""

from __future__ import annotations

import subprocess
import sys
import warnings
from typing import Any

import networkx as nx
import pandas as pd
import pytest
from pyspark.sql import functions as F

import tensprov_lab
from tensprov_lab.notebook._graph_view import build_graph
from tensprov_lab.notebook._rollup import rollup

pytestmark = pytest.mark.spark

ROWS = [(i, i % 3, float((i * 7) % 11), f"n{i % 4}") for i in range(15)]
LABELS = [(0, "zero", 100), (1, "one", 101), (3, "three", 103)]


@pytest.fixture(scope="module")
def frames(spark: Any) -> tuple[Any, Any]:
    orders = spark.createDataFrame(ROWS, ["rid", "k", "v", "name"])
    labels = spark.createDataFrame(LABELS, ["k", "label", "lid"])
    return orders, labels


def _tracked(spark: Any, body: Any) -> tuple[Any, Any, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with tensprov_lab.track(spark) as run:
            out = body()
    said = [str(w.message) for w in caught if "tensprov" in type(w.message).__module__]
    return out, run, said


def _backward(run: Any, out: Any, row: int, source: Any) -> list[int]:
    found = run.backward(out, rows=[row], to=source).to_dict()
    return sorted(v for rows in found.values() for v in rows)


def _ops(run: Any) -> list[str]:
    return [op.category for op in run.operations]


def test_the_default_index_is_record_level(spark: Any, frames: Any) -> None:
    orders, _ = frames
    out, run, _ = _tracked(spark, lambda: orders.pandas_api())
    assert "opaque" not in _ops(run), [(o.method, o.category) for o in run.operations]
    got = run.rows(out)
    assert len(got) == len(ROWS)
    for _, rec in got.iterrows():
        assert _backward(run, out, int(rec["_row"]), orders) == [int(rec["rid"])]
        assert rec["__index_level_0__"] == rec["rid"]  # numbered in scan order
    assert run.dataset(out).n_rows == len(ROWS)


def test_filter_then_groupby_sum(spark: Any, frames: Any) -> None:
    orders, _ = frames

    def body() -> Any:
        psdf = orders.pandas_api()
        return psdf[psdf.v > 5].groupby("k").sum().reset_index()

    out, run, _ = _tracked(spark, body)
    assert "opaque" not in _ops(run)
    got = run.rows(out)
    assert sorted(got["k"]) == sorted({k for _, k, v, _ in ROWS if v > 5})
    for _, rec in got.iterrows():
        expect = [i for i, (_, k, v, _) in enumerate(ROWS) if k == rec["k"] and v > 5]
        assert _backward(run, out, int(rec["_row"]), orders) == expect
        assert rec["v"] == sum(ROWS[i][2] for i in expect)


def test_merge_assign_sort_head(spark: Any, frames: Any) -> None:
    orders, labels = frames

    def body() -> Any:
        a, b = orders.pandas_api(), labels.pandas_api()
        merged = a.merge(b, on="k").assign(w=lambda d: d.v * 2)
        return merged.sort_values(["v", "rid"]).head(4)

    out, run, _ = _tracked(spark, body)
    got = run.rows(out)
    expect_rids = sorted((v, rid) for rid, k, v, _ in ROWS if k in {lk for lk, _, _ in LABELS})[:4]
    assert sorted(zip(got["v"], got["rid"])) == expect_rids
    for _, rec in got.iterrows():
        row = int(rec["_row"])
        assert _backward(run, out, row, orders) == [int(rec["rid"])]
        assert _backward(run, out, row, labels) == [
            i for i, (k, _, _) in enumerate(LABELS) if k == rec["k"]
        ]
        assert rec["w"] == rec["v"] * 2


def test_where_and_fillna_keep_every_record(spark: Any, frames: Any) -> None:
    orders, _ = frames

    def body() -> Any:
        psdf = orders.pandas_api()[["rid", "v"]]
        filled = psdf.where(psdf.v > 4).fillna(-1.0)
        return filled, filled.spark.frame(index_col="idx")

    (filled, out), run, _ = _tracked(spark, body)
    assert "opaque" not in _ops(run)
    plain = body()[0].to_pandas()
    # where and fillna are column expressions pandas-on-Spark applies with the frame's
    # next call: the DataFrame that applies them is made inside the call, so the
    # frame itself is a captured dataset, and so is the spark frame made from it
    for frame, index in ((filled, "__index_level_0__"), (out, "idx")):
        got = run.rows(frame)
        assert len(got) == len(ROWS)
        assert sorted(got["v"]) == sorted(plain["v"]) and (got["v"] == -1.0).any()
        # a record whose rid became -1 still comes from its own source record: the
        # index (the record's position) links them
        for _, rec in got.iterrows():
            assert _backward(run, frame, int(rec["_row"]), orders) == [int(rec[index])]
    assert [op.call for op in run.operations if op.output == run.dataset(filled).id] == ["fillna"]
    assert plain.equals(filled.to_pandas())  # (the frame as pandas-on-Spark made it)


def test_a_series_of_expressions_is_refused_by_name_and_its_frame_answers(
    spark: Any, frames: Any
) -> None:
    orders, _ = frames

    def body() -> Any:
        psdf = orders.pandas_api()
        doubled = psdf.v * 2
        return doubled, doubled.to_frame()

    (doubled, frame), run, _ = _tracked(spark, body)
    # a Series is a column of its frame, made again on each use: no dataset holds its
    # values, and the query says what to do instead of answering for the frame below
    with pytest.raises(ValueError, match="column expressions.*to_frame"):
        run.rows(doubled)
    got = run.rows(frame)
    assert sorted(got["v"]) == sorted(2 * v for _, _, v, _ in ROWS)


def test_pandas_on_spark_frames_are_query_arguments(spark: Any, frames: Any) -> None:
    orders, _ = frames

    def body() -> Any:
        psdf = orders.pandas_api()
        return psdf[psdf.k == 1]

    out, run, _ = _tracked(spark, body)
    ds = run.dataset(out)
    assert ds.n_rows == sum(1 for _, k, _, _ in ROWS if k == 1)
    assert sorted(run.rows(out)["rid"]) == [rid for rid, k, _, _ in ROWS if k == 1]
    assert isinstance(out.to_pandas(), pd.DataFrame)


def test_the_natural_order_column_is_not_a_warning_over_a_stable_plan(
    spark: Any, frames: Any
) -> None:
    """pandas-on-Spark numbers records by position (``__natural_order__``, a
    ``monotonically_increasing_id()``): over records in a stable order these are the
    same numbers each time, so nothing warns and nothing is cached for them."""
    orders, _ = frames

    def body() -> Any:
        psdf = orders.pandas_api()
        few = psdf[psdf.v > 5][["rid", "v"]]
        return few.rename(columns={"v": "value"})

    out, run, said = _tracked(spark, body)
    assert not any("__natural_order__" in s for s in said), said
    assert not any(op.nondeterministic for op in run.operations)
    assert "not deterministic" not in set(run.materialized["reason"])
    got = run.rows(out)
    assert sorted(got["rid"]) == [rid for rid, _, v, _ in ROWS if v > 5]

    # numbers by position over an order that is not stable are noted on their steps
    # (the numbers of a shuffled DataFrame differ between executions; its records and
    # their provenance do not), and not said: they are the pandas API's own columns
    def shuffled() -> Any:
        psdf = orders.pandas_api()
        merged = psdf.merge(psdf[["rid", "name"]], on="rid")
        return merged.groupby("k").sum().reset_index()

    out, run, said = _tracked(spark, shuffled)
    renumbered = [op for op in run.operations if any("by their position" in w for w in op.warnings)]
    assert len(renumbered) >= 2, [(op.expression, op.warnings) for op in run.operations]
    assert all(op.call for op in renumbered)
    assert said == [], said
    assert all(op.nondeterministic for op in renumbered)  # kept as the block saw them
    assert not any("is not deterministic" in s for s in said), said
    got = run.rows(out)
    for _, rec in got.iterrows():
        expect = [i for i, (_, k, _, _) in enumerate(ROWS) if k == rec["k"]]
        assert _backward(run, out, int(rec["_row"]), orders) == expect

    # the user's own numbering by position after a shuffle is said, once a block
    def own() -> Any:
        grouped = orders.groupBy("k").count()
        numbered = grouped.withColumn("pos", F.monotonically_increasing_id())
        return numbered.withColumn("again", F.monotonically_increasing_id())

    out, run, said = _tracked(spark, own)
    assert len([s for s in said if "by their position" in s]) == 1, said


def test_the_dag_draws_the_pandas_calls(spark: Any, frames: Any) -> None:
    """Each pandas call is one node of the DAG, named as the user wrote it; the frames
    pandas-on-Spark makes for itself and never uses (the series of ``psdf.v > 5``) are
    not drawn; its steps are there on expanding."""
    orders, labels = frames

    def body() -> Any:
        psdf = orders.pandas_api()
        kept = psdf[psdf.v > 5].groupby("k").sum().reset_index()
        return kept.merge(labels.pandas_api(), on="k").sort_values("rid")

    out, run, said = _tracked(spark, body)
    assert said == [], said
    assert {op.call for op in run.operations} == {
        "pandas_api",
        ">",
        "[]",
        "groupby.sum",
        "reset_index",
        "merge",
        "sort_values",
    }
    G = rollup(build_graph(run))
    order = [n for n in nx.topological_sort(G) if G.nodes[n]["kind"] == "operation"]
    drawn = [G.nodes[n]["label"] for n in order]
    assert sorted(drawn) == sorted(
        ["pandas_api", "pandas_api", "[]", "groupby.sum", "reset_index", "merge", "sort_values"]
    ), drawn
    assert drawn.index("[]") < drawn.index("groupby.sum") < drawn.index("reset_index")
    assert drawn.index("reset_index") < drawn.index("merge") < drawn.index("sort_values")
    sinks = [n for n in G if G.nodes[n]["kind"] == "sink"]
    assert [G.nodes[n]["ref"] for n in sinks] == [run.dataset(out).id]
    merge = next(n for n in order if G.nodes[n]["label"] == "merge")
    assert len(G.nodes[merge]["inputs"]) == 2
    # the explorer: the call's details list its steps and both inputs; expanding it
    # draws them one by one
    from tensprov_lab.notebook._widget import LineageExplorer

    ex = LineageExplorer(run)
    ex.selected = merge
    assert ex.details["type"] == "stage" and ex.details["label"] == "merge"
    assert len(ex.details["inputs"]) == 2 and len(ex.details["steps"]) >= 2
    ex.expand_stage(merge)
    shown = {n for n in ex._view.graph if ex._view.graph.nodes[n]["kind"] == "operation"}
    assert {f"o{s[1:]}" for s in [merge]} <= shown


#: a new interpreter whose block imports the pandas API on Spark itself
_FIRST_USE = """
import sys
from pyspark.sql import SparkSession
import tensprov_lab
spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
orders = spark.createDataFrame([(i, i % 3) for i in range(6)], ["rid", "k"])
assert "pyspark.pandas.internal" not in sys.modules
with tensprov_lab.track(spark) as run:
    out = orders.pandas_api()
    kept = out[out.k == 1]
assert "pyspark.pandas.internal" in sys.modules
for frame, rids in ((out, list(range(6))), (kept, [1, 4])):
    got = run.rows(frame)
    assert sorted(got["rid"]) == rids, got
    for _, rec in got.iterrows():
        back = run.backward(frame, rows=[int(rec["_row"])], to=orders).to_dict()
        assert [v for rows in back.values() for v in rows] == [int(rec["rid"])], back
assert not [op for op in run.operations if op.category == "opaque"]
# the calls of a pandas API the block imported itself are named too
assert {"pandas_api", "[]"} <= {op.call for op in run.operations}, run.operations
print("first use ok")
"""


def test_a_block_that_imports_the_pandas_api_itself_is_traced() -> None:
    """pyspark 3.5 attaches the default index by a JVM call that capture wraps; the
    first ``pandas_api()`` of a process imports that module inside the block (CI's
    3.5 run met it: a block's sources were then the indexed frames, not ``orders``)."""
    done = subprocess.run(
        [sys.executable, "-c", _FIRST_USE], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "first use ok" in done.stdout
