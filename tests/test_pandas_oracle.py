"""Random pandas-on-Spark pipelines against an oracle that carries lineage as data.

Each pipeline (filters, a merge, a groupby aggregation, assign, sort_values + head)
runs twice: through the pandas API on Spark inside a tracked block, and in plain
pandas over the same records, where every record carries the set of source records
it comes from (a column of frozensets, united by merges and groupings).  Every output
record's backward lineage must be that set, for each of pandas-on-Spark's default
index kinds; and the DAG names the pandas calls, not pandas-on-Spark's own steps.
"""

from __future__ import annotations

import os
import warnings
from typing import Any

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tensprov_lab
from tensprov_lab._warn import TensProvWarning
from tensprov_lab.notebook._graph_view import build_graph
from tensprov_lab.notebook._rollup import rollup
from tests._examples import spark_examples

pytestmark = pytest.mark.spark

INDEX_KINDS = ["distributed-sequence", "sequence", "distributed"]
LABELS = [(0, "zero"), (1, "one"), (3, "three")]

orders_rows = st.lists(st.tuples(st.integers(0, 3), st.integers(-3, 9)), min_size=1, max_size=12)
steps = st.lists(
    st.one_of(
        st.tuples(st.just("filter"), st.integers(-2, 8)),
        st.tuples(st.just("merge"), st.just(0)),
        st.tuples(st.just("groupby"), st.just(0)),
        st.tuples(st.just("assign"), st.just(0)),
        st.tuples(st.just("head"), st.integers(1, 6)),
    ),
    min_size=1,
    max_size=4,
)


def _union(sets: Any) -> frozenset:
    return frozenset().union(*sets)


def _apply(kind: str, arg: int, psdf: Any, pdf: pd.DataFrame, labels: tuple[Any, Any]) -> Any:
    """One step on the pandas-on-Spark frame and on the oracle's frame (None: the step
    does not apply to this frame)."""
    if kind == "filter":
        return psdf[psdf.v > arg], pdf[pdf.v > arg]
    if kind == "merge":
        if "label" in pdf.columns:
            return None
        merged = pdf.merge(labels[1], on="k")
        merged["lin"] = [a | b for a, b in zip(merged.pop("lin_x"), merged.pop("lin_y"))]
        return psdf.merge(labels[0], on="k"), merged
    if kind == "groupby":
        if "w" in pdf.columns:
            return None
        spec = {"v": "sum", "rid": "max"}
        grouped = pdf.groupby("k").agg({**spec, "lin": _union}).reset_index()
        return psdf.groupby("k").agg(spec).reset_index(), grouped
    if kind == "assign":
        return psdf.assign(w=psdf.v * 2), pdf.assign(w=pdf.v * 2)
    # (rid stays unique through every step: the order is total)
    return psdf.sort_values("rid").head(arg), pdf.sort_values("rid").head(arg)


@pytest.mark.parametrize("index", INDEX_KINDS)
@spark_examples("TENSPROV_PANDAS_EXAMPLES", 10)
@given(rows=orders_rows, plan=steps)
def test_pandas_on_spark_lineage_matches_the_oracle(
    spark: Any, index: str, rows: list[tuple[int, int]], plan: list[tuple[str, int]]
) -> None:
    import pyspark.pandas as ps

    data = [(rid, k, float(v)) for rid, (k, v) in enumerate(rows)]
    orders = spark.createDataFrame(data, "rid long, k long, v double")
    labels = spark.createDataFrame(LABELS, "k long, label string")
    pdf = pd.DataFrame(data, columns=["rid", "k", "v"])
    pdf["lin"] = [frozenset({("o", rid)}) for rid in pdf.rid]
    plabels = pd.DataFrame(LABELS, columns=["k", "label"])
    plabels["lin"] = [frozenset({("l", i)}) for i in range(len(LABELS))]
    applied: list[str] = []
    with ps.option_context("compute.default_index_type", index):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with tensprov_lab.track(spark) as run:
                psdf = orders.pandas_api()
                for kind, arg in plan:
                    done = _apply(kind, arg, psdf, pdf, (labels.pandas_api(), plabels))
                    if done is not None:
                        psdf, pdf = done
                        applied.append(kind)
                out = psdf.sort_values("rid")  # applies a trailing assign's columns
            said = [str(w.message) for w in caught if issubclass(w.category, TensProvWarning)]
        assert said == [], said
        assert not [op.method for op in run.operations if op.opaque]
        got = run.rows(out)
    expect = pdf.sort_values("rid")
    assert list(got["rid"]) == list(expect["rid"])
    assert list(got["v"]) == list(expect["v"])
    lin = dict(zip(expect["rid"], expect["lin"]))
    for _, rec in got.iterrows():
        row = int(rec["_row"])
        found = {("o", int(r)) for r in _back(run, out, row, orders)}
        if "merge" in applied:
            found |= {("l", int(r)) for r in _back(run, out, row, labels)}
        assert found == lin[rec["rid"]], (applied, rec.to_dict())
    # the DAG draws the user's calls, one node each, and no step of pandas-on-Spark's
    G = rollup(build_graph(run))
    drawn = [a["label"] for _, a in G.nodes(data=True) if a["kind"] == "operation"]
    assert all(a.get("call") for _, a in G.nodes(data=True) if a["kind"] == "operation"), drawn
    assert drawn.count("pandas_api") == 1 + ("merge" in applied), (applied, drawn)
    assert drawn.count("merge") == applied.count("merge"), (applied, drawn)
    assert drawn.count("groupby.agg") == applied.count("groupby"), (applied, drawn)
    assert drawn.count("reset_index") == applied.count("groupby"), (applied, drawn)
    assert drawn.count("[]") == applied.count("filter"), (applied, drawn)
    if os.environ.get("TENSPROV_SHOW_DAG"):
        print(applied, drawn)


def _back(run: Any, out: Any, row: int, source: Any) -> list[int]:
    found = run.backward(out, rows=[row], to=source).to_dict()
    return sorted(v for rows in found.values() for v in rows)
