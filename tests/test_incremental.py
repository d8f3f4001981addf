"""What-if through aggregates from the changed members' deltas (replay._incremental).

The pure tests compare :func:`update_groups` with the groups aggregated again from
scratch in pandas (an independent oracle); the Spark tests compare a what-if preview
with the pipeline re-run, untracked, on the changed sources.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tensprov_lab.replay._incremental import ROW, members_of, update_groups

SPEC = [("key", 0), ("sum", 1), ("count", None), ("count", 1), ("avg", 1), ("min", 1), ("max", 1)]
OUT = ["g", "s", "n", "nx", "a", "lo", "hi"]
IN = ["g", "x"]


def _aggregate(members: pd.DataFrame) -> pd.DataFrame:
    """The oracle: every group aggregated from its members, Spark's null rules."""
    rows = []
    for g, part in members.groupby("g", sort=True):
        xs = [v for v in part["x"].tolist() if v is not None and not pd.isna(v)]
        rows.append(
            {
                "g": g,
                "s": sum(xs) if xs else None,
                "n": len(part),
                "nx": len(xs),
                "a": sum(xs) / len(xs) if xs else None,
                "lo": min(xs) if xs else None,
                "hi": max(xs) if xs else None,
            }
        )
    return pd.DataFrame(rows, columns=OUT)


def _same(a: Any, b: Any) -> bool:
    if a is None or (isinstance(a, float) and math.isnan(a)):
        return b is None or (isinstance(b, float) and math.isnan(b))
    if b is None:
        return False
    return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-9)


def _case(
    values: list[list[int | None]], drop: set[int], edit: dict[int, int | None],
    spec: list[Any] = SPEC,
) -> tuple[Any, pd.DataFrame]:  # fmt: skip
    """Groups of members with values ``values``; returns update_groups' answer (with
    every untouched member read along) and the oracle's new groups."""
    members = pd.DataFrame(
        [(g, x) for g, xs in enumerate(values) for x in xs], columns=["g", "x"]
    ).astype({"x": object})
    members.insert(0, ROW, np.arange(len(members)))
    old = _aggregate(members)
    old.insert(0, ROW, old["g"].to_numpy())
    touched = np.array(sorted(drop | set(edit)), dtype=np.int64)
    before = members[members[ROW].isin(touched)]
    after = before[~before[ROW].isin(list(drop))].copy()
    after["x"] = [edit.get(r, x) for r, x in zip(after[ROW], after["x"])]
    changed = members[~members[ROW].isin(list(drop))].copy()
    changed["x"] = [
        edit.get(r, x) if r not in drop else x for r, x in zip(changed[ROW], changed["x"])
    ]
    want = _aggregate(changed)
    pairs = (members["g"].to_numpy(np.int64), members[ROW].to_numpy(np.int64))
    m = members_of(pairs, touched, k=10**6)  # every untouched member is a witness
    # without min/max: the columns before them
    out = OUT[: len(spec)]
    got = update_groups(spec, out, IN, old[[ROW, *out]], m, before, after, members)
    return got, want[out]


values_st = st.lists(
    st.lists(st.one_of(st.none(), st.integers(-5, 5)), min_size=1, max_size=6),
    min_size=1, max_size=4,
)  # fmt: skip


@settings(max_examples=300, deadline=None, derandomize=True)
@given(values=values_st, data=st.data())
def test_update_groups_equals_aggregating_again(values: list, data: st.DataObject) -> None:
    n = sum(len(v) for v in values)
    drop = set(data.draw(st.lists(st.integers(0, n - 1), max_size=3)))
    edits = data.draw(
        st.dictionaries(st.integers(0, n - 1), st.one_of(st.none(), st.integers(-5, 5)), max_size=2)
    )
    edit = {r: v for r, v in edits.items() if r not in drop}
    got, want = _case(values, drop, edit)
    if got is None:
        # only a min/max whose extreme went needs a replay (counts are exact here,
        # every member was read)
        old_members = [x for xs in values for x in xs]
        went = [old_members[r] for r in sorted(drop | set(edit))]
        extremes = set()
        for xs in values:
            present = [x for x in xs if x is not None]
            if present:
                extremes |= {min(present), max(present)}
        assert any(w in extremes for w in went if w is not None)
        return
    assert list(got["g"]) == list(want["g"])
    for c in OUT:
        for a, b in zip(got[c].astype(object), want[c].astype(object)):
            assert _same(a, b), (c, a, b)


def test_a_group_with_no_member_left_disappears() -> None:
    got, want = _case([[1, 2], [3]], drop={2}, edit={})
    assert list(got[ROW]) == [0] and list(want["g"]) == [0]


def test_a_sum_goes_null_only_when_no_value_is_left() -> None:
    # min and max lose their holder: left to a replay
    assert _case([[1, None, None]], drop={0}, edit={})[0] is None
    got, _ = _case([[1, None, None]], drop={0}, edit={}, spec=SPEC[:5])
    assert got["s"].tolist() == [None] and got["n"].tolist() == [2] and got["a"].tolist() == [None]
    got, _ = _case([[None, None]], drop=set(), edit={1: 4})
    assert got["s"].tolist() == [4] and got["lo"].tolist() == [4] and got["nx"].tolist() == [1]


def test_a_sum_without_a_count_needs_a_witness() -> None:
    spec, out = [("key", 0), ("sum", 1)], ["g", "s"]
    members = pd.DataFrame({ROW: [0, 1, 2], "g": [0, 0, 0], "x": [1, None, 5]})
    old = pd.DataFrame({ROW: [0], "g": [0], "s": [6]})
    before, after = members.iloc[[2]], members.iloc[:0]
    pairs = (np.zeros(3, np.int64), np.arange(3))
    # no untouched member read: whether a value is left is unknown -> replay
    unknown = members_of(pairs, np.array([2]), k=0)
    assert update_groups(spec, out, IN, old, unknown, before, after, before) is None
    # member 0 read along proves the sum is not null
    known = members_of(pairs, np.array([2]), k=1)
    seen = members.iloc[[0, 2]]
    assert update_groups(spec, out, IN, old, known, before, after, seen)["s"].tolist() == [1]
    # every member left read, all null: the sum is null
    nulls = pd.DataFrame({ROW: [0, 1, 2], "g": [0, 0, 0], "x": [None, None, 5]})
    got = update_groups(spec, out, IN, old.assign(s=5), members_of(pairs, np.array([2]), k=5),
                        nulls.iloc[[2]], after, nulls)  # fmt: skip
    assert got["s"].tolist() == [None]


def test_an_average_without_its_count_or_a_column_made_otherwise_is_replayed() -> None:
    members = pd.DataFrame({ROW: [0, 1], "g": [0, 0], "x": [1.0, 3.0]})
    old = pd.DataFrame({ROW: [0], "g": [0], "a": [2.0]})
    m = members_of((np.zeros(2, np.int64), np.arange(2)), np.array([0]))
    args = (old, m, members.iloc[[0]], members.iloc[:0], members)
    assert update_groups([("key", 0), ("avg", 1)], ["g", "a"], IN, *args) is None
    assert update_groups([("key", 0), None], ["g", "a"], IN, *args) is None


def test_members_of_reads_the_touched_and_a_few_others_per_group() -> None:
    groups = np.array([0, 0, 0, 0, 1, 1, 2])
    rows = np.array([0, 1, 2, 3, 4, 5, 6])
    m = members_of((groups, rows), np.array([1, 5]), k=2)
    assert m.sizes == {0: 4, 1: 2, 2: 1}
    assert m.witnesses.tolist() == [0, 2, 4, 6]
    assert sorted(m.read[1].tolist()) == [0, 1, 2, 4, 5, 6]


# ------------------------------------------------------------------------------------
# with Spark: previews against the pipeline re-run on the changed sources


def _pipeline(orders: Any, customers: Any, how: str = "inner") -> tuple[Any, Any]:
    from pyspark.sql import functions as F

    joined = orders.filter("amount > 1").join(customers, "cust_id", how)
    out = joined.groupBy("region").agg(
        F.sum("amount").alias("total"), F.count("*").alias("n"),
        F.count("amount").alias("n_amount"), F.avg("amount").alias("mean"),
        F.min("amount").alias("lo"), F.max("qty").alias("hi"), F.sum("qty").alias("q"),
    )  # fmt: skip
    return joined, out


ORDERS = [(i, i % 7, float(i % 13) if i % 11 else None, i % 5) for i in range(60)]
CUSTOMERS = [(c, f"r{c % 3}") for c in range(7)]


def _frames(spark: Any, orders: list, customers: list) -> tuple[Any, Any]:
    o = spark.createDataFrame(orders, "order_id long, cust_id long, amount double, qty long")
    c = spark.createDataFrame(customers, "cust_id long, region string")
    return o, c


def _check(spark: Any, drop: list[int], edit: dict[int, dict], how: str = "inner",
           agg_out: Any = None) -> Any:  # fmt: skip
    import tensprov_lab

    o, c = _frames(spark, ORDERS, CUSTOMERS)
    with tensprov_lab.track(spark, name="incremental") as run:
        joined, out = _pipeline(o, c, how)
        if agg_out is not None:
            out = agg_out(joined)
    out.count()
    preview = run.what_if(drop={o: drop} if drop else None, edit={o: edit} if edit else None,
                          to=[out])  # fmt: skip
    changed = [list(r) for i, r in enumerate(ORDERS) if i not in drop]
    ids = [r[0] for r in ORDERS]
    for row, new in edit.items():
        pos = [r[0] for r in changed].index(ids[row])
        for col, v in new.items():
            changed[pos][["order_id", "cust_id", "amount", "qty"].index(col)] = v
    o2, c2 = _frames(spark, [tuple(r) for r in changed], CUSTOMERS)
    _, again = _pipeline(o2, c2, how)
    if agg_out is not None:
        again = agg_out(_pipeline(o2, c2, how)[0])
    before = run.rows(out)
    rerun = again.toPandas().sort_values("region").reset_index(drop=True)
    label = run.dataset(out).label
    changed_rows = preview.changed[label]
    removed = set(preview.removed[label][ROW]) if len(preview.removed[label]) else set()
    expected = before[~before[ROW].isin(removed)].copy()
    for rec in changed_rows.to_dict("records"):
        for col in out.columns:
            expected.loc[expected[ROW] == rec[ROW], col] = rec[col]
    expected = (
        pd.concat([expected, preview.added[label]]) if len(preview.added[label]) else expected
    )
    expected = expected.drop(columns=[ROW]).sort_values("region").reset_index(drop=True)
    assert list(expected["region"]) == list(rerun["region"])
    for col in out.columns:
        for a, b in zip(expected[col].astype(object), rerun[col].astype(object)):
            assert _same(a, b) if not isinstance(a, str) else a == b, (col, a, b)
    return preview, label


@pytest.mark.spark
def test_what_if_updates_an_aggregate_from_the_dropped_records(spark: Any) -> None:
    preview, label = _check(spark, drop=[3, 17, 40], edit={})
    assert label in preview.incremental
    assert len(preview.changed[label]) > 0
    summary = preview.summary().set_index("dataset")
    assert summary.loc[label, "how"] == "deltas" and summary.loc[label, "note"] == ""


@pytest.mark.spark
def test_what_if_updates_an_aggregate_from_edited_values(spark: Any) -> None:
    # qty is no condition or key: its edits are previewable
    preview, label = _check(spark, drop=[5], edit={8: {"qty": 40}, 11: {"qty": None}})
    assert label in preview.incremental


@pytest.mark.spark
def test_what_if_drops_every_record_of_a_group(spark: Any) -> None:
    members = [i for i, r in enumerate(ORDERS) if r[1] % 3 == 0]  # every order of r0
    preview, label = _check(spark, drop=members, edit={})
    assert label in preview.incremental and len(preview.removed[label]) == 1


@pytest.mark.spark
def test_what_if_updates_an_aggregate_of_a_source_itself(spark: Any) -> None:
    from pyspark.sql import functions as F

    import tensprov_lab

    o, _ = _frames(spark, ORDERS, CUSTOMERS)
    with tensprov_lab.track(spark, name="incremental-source") as run:
        out = o.groupBy("cust_id").agg(F.sum("qty").alias("q"), F.count("*").alias("n"))
    out.count()
    drop = [1, 8, 30]
    preview = run.what_if(drop={o: drop}, to=[out])
    label = run.dataset(out).label
    assert label in preview.incremental
    left = [r for i, r in enumerate(ORDERS) if i not in drop]
    o2, _ = _frames(spark, left, CUSTOMERS)
    rerun = {r.cust_id: (r.q, r.n) for r in o2.groupBy("cust_id").agg(
        F.sum("qty").alias("q"), F.count("*").alias("n")).collect()}  # fmt: skip
    before = run.rows(out)
    changed = preview.changed[label].set_index(ROW)
    for rec in before.to_dict("records"):
        new = changed.loc[rec[ROW]] if rec[ROW] in changed.index else rec
        assert (new["q"], new["n"]) == rerun[rec["cust_id"]]


@pytest.mark.spark
def test_what_if_replays_where_deltas_cannot_say(spark: Any) -> None:
    from pyspark.sql import functions as F

    # max(qty) of a group loses its holder: the next largest needs every member
    preview, label = _check(spark, drop=[4, 9, 14, 19, 24, 29], edit={})
    assert label not in preview.incremental
    # a distinct count is not decomposable: replayed, still right
    preview, label = _check(
        spark, drop=[i for i in range(len(ORDERS)) if i % 5 == 3], edit={},
        agg_out=lambda j: j.groupBy("region").agg(F.countDistinct("qty").alias("d")),
    )  # fmt: skip
    assert label not in preview.incremental and len(preview.changed[label]) == 3
    # a right join pads a customer whose orders all go: a new member of its group
    every = [i for i, r in enumerate(ORDERS) if r[1] == 0]
    preview, label = _check(spark, drop=every, edit={}, how="right")
    assert label not in preview.incremental
    # replayed: the group's record is keyed by a member that went, so it shows as one
    # record removed and one added
    assert len(preview.removed[label]) + len(preview.changed[label]) == 1
    # the same with sums and counts only (nothing else sends it to a replay)
    preview, label = _check(
        spark, drop=every, edit={}, how="right",
        agg_out=lambda j: j.groupBy("region").agg(F.sum("qty").alias("q"), F.count("*").alias("n")),
    )  # fmt: skip
    assert label not in preview.incremental
