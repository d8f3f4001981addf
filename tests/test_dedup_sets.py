"""``intersect``, ``subtract``, ``intersectAll``, ``exceptAll``: record lineage against an
oracle that works the set and bag semantics out from the rows (null-safe equality), and
the attribute maps (values from the left side, every column of both sides deciding)."""

from __future__ import annotations

import os
import warnings
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tensprov_lab
from tensprov_lab.capture.rules.dedup import match_sets

Row = tuple[Any, Any]
_ROWS = st.lists(
    st.tuples(st.sampled_from([0, 1, 2, None]), st.sampled_from(["a", "b", None])),
    max_size=8,
)


def oracle(what: str, left: list[Row], right: list[Row]) -> tuple[list[Row], list, list]:
    """The output rows in canonical order, and each one's left and right records."""
    rows: list[Row] = []
    lefts: list[set[int]] = []
    rights: list[set[int]] = []
    if what in ("intersect", "subtract"):
        firsts: dict[Row, int] = {}
        for i, r in enumerate(left):
            firsts.setdefault(r, i)
        for v, _ in sorted(firsts.items(), key=lambda kv: kv[1]):  # by smallest member
            in_right = {j for j, r in enumerate(right) if r == v}
            if bool(in_right) == (what == "intersect"):
                rows.append(v)
                lefts.append({i for i, r in enumerate(left) if r == v})
                rights.append(in_right)
        return rows, lefts, rights
    for i, v in enumerate(left):
        k = sum(1 for r in left[:i] if r == v)  # the k-th of its value on the left
        equal = [j for j, r in enumerate(right) if r == v]
        if (k < len(equal)) == (what == "intersectAll"):
            rows.append(v)
            lefts.append({i})
            rights.append({equal[k]} if what == "intersectAll" else set())
    return rows, lefts, rights


def _matrix(sets: list[set[int]], n: int) -> list[list[bool]]:
    return [[j in s for j in range(n)] for s in sets]


def _track(spark: Any, left: list[Row], right: list[Row]) -> tuple[Any, Any, Any, dict]:
    a = spark.createDataFrame(left, "k int, s string")
    b = spark.createDataFrame(right, "k int, s string")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing here is opaque or warned about
        with tensprov_lab.track(spark, name="setop") as run:
            outs = {
                "intersect": a.intersect(b),
                "subtract": a.subtract(b),
                "intersectAll": a.intersectAll(b),
                "exceptAll": a.exceptAll(b),
            }
    return run, a, b, outs


def _check(run: Any, a: Any, b: Any, outs: dict, left: list[Row], right: list[Row]) -> None:
    for what, df in outs.items():
        rows, lefts, rights = oracle(what, left, right)
        op = run.store.producer(run.dataset(df).id)
        assert op is not None and not op.opaque, (what, op and op.warnings)
        got = [tuple(r) for r in run.rows(df)[["k", "s"]].astype(object).itertuples(index=False)]
        got = [tuple(None if v is None or v != v else v for v in r) for r in got]
        assert got == rows, what
        # the records are the ones Spark returns
        assert sorted(map(tuple, df.collect()), key=repr) == sorted(rows, key=repr), what
        if not rows:
            continue
        assert run.mapping(a, df).toarray().tolist() == _matrix(lefts, len(left)), what
        assert run.mapping(b, df).toarray().tolist() == _matrix(rights, len(right)), what


_LEFT = [(1, "a"), (2, "b"), (2, "b"), (None, None), (0, "a"), (None, None), (2, "b")]
_RIGHT = [(2, "b"), (None, None), (3, "c"), (2, "b"), (None, "a")]


def test_the_oracle_on_a_hand_worked_case() -> None:
    rows, lefts, rights = oracle("intersect", _LEFT, _RIGHT)
    assert rows == [(2, "b"), (None, None)]
    assert lefts == [{1, 2, 6}, {3, 5}] and rights == [{0, 3}, {1}]
    rows, lefts, rights = oracle("intersectAll", _LEFT, _RIGHT)
    assert rows == [(2, "b"), (2, "b"), (None, None)]
    assert lefts == [{1}, {2}, {3}] and rights == [{0}, {3}, {1}]
    rows, lefts, _ = oracle("exceptAll", _LEFT, _RIGHT)
    assert rows == [(1, "a"), (0, "a"), (None, None), (2, "b")] and lefts == [{0}, {4}, {5}, {6}]
    assert oracle("subtract", _LEFT, _RIGHT)[0] == [(1, "a"), (0, "a")]


@settings(max_examples=300, deadline=None)
@given(left=_ROWS, right=_ROWS, shuffled=st.randoms(use_true_random=False))
def test_match_sets_agrees_with_the_oracle(left: list[Row], right: list[Row], shuffled) -> None:  # noqa: ANN001
    """The engine-neutral matching on its own (no JVM): the records and pairs of all
    four operations, with the records given in any order (rows and key order travel
    with them, as they come back from Spark)."""
    values = {v: i for i, v in enumerate(dict.fromkeys(left + right))}
    for what in ("intersect", "subtract", "intersectAll", "exceptAll"):
        rows, lefts, rights = oracle(what, left, right)
        lp, rp = list(range(len(left))), list(range(len(right)))
        shuffled.shuffle(lp)
        shuffled.shuffle(rp)
        lv = np.array([values[left[i]] for i in lp], dtype=np.int64)
        rv = np.array([values[right[j]] for j in rp], dtype=np.int64)
        li, ri = np.array(lp, dtype=np.int64), np.array(rp, dtype=np.int64)
        n, lo, lr, ro, rr = match_sets(
            lv, li, li, rv, ri, ri, anti=what in ("subtract", "exceptAll"), bag="All" in what
        )
        assert n == len(rows), what
        got_left = [{int(r) for o, r in zip(lo, lr) if o == k} for k in range(n)]
        got_right = [{int(r) for o, r in zip(ro, rr) if o == k} for k in range(n)]
        assert got_left == lefts and got_right == rights, what
        assert [left[min(m)] for m in got_left] == rows, what


@pytest.mark.spark
def test_set_operations_on_a_hand_worked_case(spark) -> None:  # noqa: ANN001
    run, a, b, outs = _track(spark, _LEFT, _RIGHT)
    _check(run, a, b, outs, _LEFT, _RIGHT)
    ops = {op.method: op for op in run.operations}
    assert ops["intersect"].category == ops["subtract"].category == "dedup"
    assert ops["intersectAll"].category == "horizontal_reduction"
    # dropping a right record can make a left one appear: no replay through an except
    for what in ("subtract", "exceptAll"):
        assert "except" in (ops[what].replay_blocker or ""), what
    # the values come from the left side; every column of both sides decides the records
    for op in ops.values():
        assert op.contributing is not None and op.influencing is not None
        assert op.contributing[0].tolist() == np.eye(2, dtype=bool).tolist(), op.method
        assert not op.contributing[1].any(), op.method
        assert op.influencing[0].all() and op.influencing[1].all(), op.method


@pytest.mark.spark
@settings(
    max_examples=int(os.environ.get("TENSPROV_SETOP_EXAMPLES", "15")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(left=_ROWS, right=_ROWS)
def test_set_operations_match_the_oracle(spark, left: list[Row], right: list[Row]) -> None:  # noqa: ANN001
    run, a, b, outs = _track(spark, left, right)
    _check(run, a, b, outs, left, right)


@pytest.mark.spark
def test_lineage_goes_on_after_a_set_operation(spark) -> None:  # noqa: ANN001
    """An intersect of two steps of one source, filtered after: the records keep their
    source's keys, so the filter is traced to the source's rows."""
    from pyspark.sql import functions as F

    df = spark.createDataFrame(
        [(i % 5, "x" if i % 2 else "y") for i in range(20)], "k int, s string"
    )
    with tensprov_lab.track(spark, name="setop-after") as run:
        both = df.where("k > 0").intersect(df.where("s = 'x'"))
        kept = both.filter(F.col("k") > 2)
    assert not any(op.opaque for op in run.operations)
    rows = run.rows(kept)
    assert sorted(zip(rows["k"], rows["s"])) == [(3, "x"), (4, "x")]
    back = run.backward(kept, rows=[0], to=df)[df].tolist()
    k, s = rows["k"][0], rows["s"][0]
    assert back == [i for i in range(20) if i % 5 == k and ("x" if i % 2 else "y") == s]
