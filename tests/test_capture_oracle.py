"""Property-based backbone: random pipelines, every lineage answer against the oracle."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import tensprov_lab
from tests.oracle import ANY, Table, apply

pytestmark = pytest.mark.spark

A_COLS, A_TYPES = ["k", "v", "s"], {"k": "int", "v": "int", "s": "str"}
B_COLS, B_TYPES = ["k", "w"], {"k": "int", "w": "int"}
ints = st.one_of(st.none(), st.integers(0, 3))
small = st.one_of(st.none(), st.integers(-3, 3))
strs = st.one_of(st.none(), st.sampled_from(["x", "y", "z"]))
a_rows = st.lists(st.tuples(ints, small, strs), max_size=7)
b_rows = st.lists(st.tuples(ints, small), max_size=5)


def draw_step(data: st.DataObject, t: Table, prev: tuple | None, used_join: bool) -> tuple | None:
    int_cols = [c for c in t.cols if t.types[c] == "int"]
    str_cols = [c for c in t.cols if t.types[c] == "str"]
    options = ["filter_notnull", "with", "select", "dropna", "fillna", "orderBy", "distinct",
               "dropDuplicates", "union_self", "window_count"]  # fmt: skip
    if int_cols:
        options += ["filter_gt", "groupBy"]
    if str_cols:
        options.append("filter_eq")
    if "k" in t.cols and "w" not in t.cols and not used_join:
        options.append("join")
    if (
        sorted(t.cols) == sorted(A_COLS)
        or set(t.cols) <= set(B_COLS)
        and "k" in t.cols
        and "w" in t.cols
    ):
        options.append("union_b")
    if len(int_cols) >= 2 and "e" not in t.cols:
        options.append("explode")
    if prev is not None and prev[0] == "orderBy":
        options.append("limit")
    kind = data.draw(st.sampled_from(options))
    if kind == "filter_gt":
        return (kind, data.draw(st.sampled_from(int_cols)), data.draw(st.integers(-2, 2)))
    if kind == "filter_eq":
        return (kind, data.draw(st.sampled_from(str_cols)), data.draw(st.sampled_from(["x", "y"])))
    if kind == "filter_notnull":
        return (kind, data.draw(st.sampled_from(t.cols)))
    if kind == "with":
        if not int_cols:
            return None
        new = data.draw(st.sampled_from(["c1", "c2", int_cols[0]]))
        return (kind, data.draw(st.sampled_from(int_cols)), new)
    if kind == "select":
        cols = data.draw(
            st.lists(st.sampled_from(t.cols), min_size=1, max_size=len(t.cols), unique=True)
        )
        return (kind, tuple(cols))
    if kind == "orderBy":
        c = data.draw(st.sampled_from(t.cols))
        asc = True if t.types[c] == "str" else data.draw(st.booleans())
        return (kind, c, asc)
    if kind == "limit":
        return (kind, data.draw(st.integers(0, 4)))
    if kind == "dropDuplicates":
        cols = data.draw(
            st.lists(st.sampled_from(t.cols), min_size=1, max_size=len(t.cols), unique=True)
        )
        return (kind, tuple(cols))
    if kind == "groupBy":
        c = data.draw(st.sampled_from(t.cols))
        others = [x for x in int_cols if x != c]
        if not others or c in ("n", "t"):  # the aggregate names its outputs n and t
            return None
        return (kind, c, data.draw(st.sampled_from(others)))
    if kind == "join":
        return (
            kind,
            data.draw(st.sampled_from(["inner", "left", "right", "full", "semi", "anti"])),
        )
    if kind == "explode":
        x, y = data.draw(st.lists(st.sampled_from(int_cols), min_size=2, max_size=2, unique=True))
        return (kind, x, y)
    if kind == "window_count":
        if "wc" in t.cols:
            return None
        return (kind, data.draw(st.sampled_from(t.cols)))
    return (kind,)


def spark_step(step: tuple, df, a_df, b_df):  # noqa: ANN001, ANN201
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    kind = step[0]
    if kind == "filter_gt":
        return df.filter(F.col(step[1]) > step[2])
    if kind == "filter_eq":
        return df.where(df[step[1]] == step[2])
    if kind == "filter_notnull":
        return df.filter(F.col(step[1]).isNotNull())
    if kind == "with":
        return df.withColumn(step[2], F.col(step[1]) + 1)
    if kind == "select":
        return df.select(*step[1])
    if kind == "dropna":
        return df.dropna()
    if kind == "fillna":
        return df.fillna(0)
    if kind == "orderBy":
        c = F.col(step[1])
        return df.orderBy(c.asc() if step[2] else c.desc())
    if kind == "limit":
        return df.limit(step[1])
    if kind == "distinct":
        return df.distinct()
    if kind == "dropDuplicates":
        # the kept record's other columns are arbitrary: keep only the subset after it
        return df.dropDuplicates(list(step[1])).select(*step[1])
    if kind == "groupBy":
        return df.groupBy(step[1]).agg(F.count(F.lit(1)).alias("n"), F.sum(step[2]).alias("t"))
    if kind == "union_self":
        return df.union(df)
    if kind == "union_b":
        other = a_df if "s" in df.columns else b_df
        return df.unionByName(other.select(*df.columns))
    if kind == "join":
        return df.join(b_df, on="k", how=step[1])
    if kind == "explode":
        return df.select("*", F.explode(F.array(step[1], step[2])).alias("e"))
    if kind == "window_count":
        return df.withColumn("wc", F.count(F.lit(1)).over(Window.partitionBy(step[1])))
    raise ValueError(kind)


def check_dataset(run, df, t: Table, sources: dict, check_values: bool) -> None:  # noqa: ANN001
    ds = run.dataset(df)
    assert ds.n_rows == len(t.rows), (ds.n_rows, len(t.rows))
    if check_values:
        got = run.rows(df)
        assert got["_row"].tolist() == list(range(len(t.rows)))
        values = (
            got.drop(columns=["_row"])
            .astype(object)
            .where(got.drop(columns=["_row"]).notna(), None)
        )
        for i, expected in enumerate(t.rows):
            actual = tuple(values.iloc[i])
            for a, e in zip(actual, expected):
                if e is ANY:
                    continue
                assert a == e, (i, actual, expected)
    used = {}
    for name, src_df in sources.items():
        try:
            used[name] = run.dataset(src_df)
        except KeyError:
            assert all(name not in li for li in t.lin)
    for i in range(len(t.rows)):
        lin = run.backward(df, rows=[i])
        for name, src in used.items():
            got = lin.result.rows.get(src.id, np.zeros(0, np.int64)).tolist()
            assert got == sorted(t.lin[i].get(name, frozenset())), (i, name, got, t.lin[i])
    for name, src in used.items():
        src_df = sources[name]
        oracle = np.zeros((len(t.rows), src.n_rows), dtype=bool)
        for i, li in enumerate(t.lin):
            for j in li.get(name, ()):
                oracle[i, j] = True
        try:
            m = run.mapping(src_df, df).toarray()
        except ValueError as exc:  # df does not derive from this source at all
            assert "not reachable" in str(exc)
            assert not oracle.any()
            continue
        assert (m == oracle).all()
        for j in range(src.n_rows):
            fw = run.forward(src_df, rows=[j], to=df)[df].tolist()
            assert fw == np.flatnonzero(oracle[:, j]).tolist()


@settings(
    max_examples=int(os.environ.get("TENSPROV_EXAMPLES", "200")),
    phases=[Phase.explicit, Phase.reuse, Phase.generate]
    + ([] if os.environ.get("TENSPROV_NOSHRINK") else [Phase.shrink]),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(a=a_rows, b=b_rows, data=st.data())
def test_random_pipelines_match_oracle(spark, a, b, data) -> None:  # noqa: ANN001
    a_df = spark.createDataFrame(a, "k bigint, v bigint, s string")
    b_df = spark.createDataFrame(b, "k bigint, w bigint")
    t = Table.source("a", A_COLS, A_TYPES, a)
    tb = Table.source("b", B_COLS, B_TYPES, b)
    n_steps = data.draw(st.integers(1, 8))
    steps: list[tuple] = []
    prev, used_join = None, False
    while len(steps) < n_steps:
        step = draw_step(data, t, prev, used_join)
        if step is None:
            continue
        steps.append(step)
        used_join |= step[0] == "join"
        t_next = apply(
            step,
            t,
            tb if step[0] == "join" or "w" in t.cols else Table.source("a", A_COLS, A_TYPES, a),
        )
        t, prev = t_next, step
    # rebuild the oracle tables step by step alongside Spark
    t = Table.source("a", A_COLS, A_TYPES, a)
    frames = []
    with tensprov_lab.track(spark, name="prop") as run:
        df = a_df
        for step in steps:
            other = (
                tb
                if (step[0] == "join" or "w" in t.cols)
                else Table.source("a", A_COLS, A_TYPES, a)
            )
            df = spark_step(step, df, a_df, b_df)
            t = apply(step, t, other)
            frames.append((df, t))
    assert not any(op.opaque for op in run.operations), [op.warnings for op in run.operations]
    sources = {"a": a_df, "b": b_df}
    for i, (df, tt) in enumerate(frames):
        check_dataset(run, df, tt, sources, check_values=i == len(frames) - 1)
