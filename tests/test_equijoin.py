"""Equi-joins matched in NumPy: codes and pairs against brute force, and captures that
take this path against joins computed by hand."""

from __future__ import annotations

import datetime as dt
from unittest import mock

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tensprov_lab
from tensprov_lab.capture.plan import _equijoin
from tensprov_lab.capture.plan._equijoin import (
    TooManyPairs,
    arrow_codes,
    dense_pairs,
    first_appearance,
    groups_through,
    join_pairs,
    key_codes,
    semi_rows,
)
from tests._numpy_joins import numpy_joins

keys = st.lists(st.one_of(st.none(), st.integers(-3, 3)), max_size=12)
words = st.lists(st.one_of(st.none(), st.sampled_from(["a", "b", ""])), max_size=12)


def brute_pairs(left: list, right: list, keep_left: bool, keep_right: bool) -> list:
    """Matches of two lists of key tuples; a tuple with a None matches nothing."""

    def ok(k: tuple) -> bool:
        return all(v is not None for v in k)

    pairs = [(i, j) for i, x in enumerate(left) for j, y in enumerate(right) if ok(x) and x == y]
    if keep_left:
        pairs += [(i, -1) for i in range(len(left)) if all(p[0] != i for p in pairs)]
    if keep_right:
        pairs += [(-1, j) for j in range(len(right)) if all(p[1] != j for p in pairs)]
    return sorted(pairs)


@settings(deadline=None)
@given(keys, keys, st.booleans(), st.booleans())
def test_one_integer_key_matches_brute_force(left, right, keep_left, keep_right) -> None:  # noqa: ANN001
    codes = key_codes([pa.array(left, pa.int64())], [pa.array(right, pa.int64())])
    li, ri = join_pairs(*codes, keep_left, keep_right)
    got = sorted(zip(li.tolist(), ri.tolist()))
    assert got == brute_pairs([(x,) for x in left], [(y,) for y in right], keep_left, keep_right)


@settings(deadline=None)
@given(
    st.lists(st.integers(-1, 8), max_size=12),
    st.lists(st.integers(-1, 8), unique=True, max_size=10),
    st.booleans(),
)
def test_a_right_side_unique_on_its_key_gives_pairs_in_order(left, right, keep_left) -> None:  # noqa: ANN001
    """A dimension table (each right code once) takes the scatter-gather path; its pairs
    come in the documented order: matches by left row, then unmatched left rows."""
    li, ri = join_pairs(np.array(left, np.int64), np.array(right, np.int64), keep_left)
    matched = [(i, right.index(c)) for i, c in enumerate(left) if c >= 0 and c in right]
    lonely = [(i, -1) for i, c in enumerate(left) if c < 0 or c not in right]
    assert list(zip(li.tolist(), ri.tolist())) == matched + (lonely if keep_left else [])


def test_a_foreign_key_join_pairs_every_left_record_in_order() -> None:
    """Every left record matches one right record (orders of known customers): the
    pairs are every left row in order, each with its customer, outer or not."""
    right = np.array([30, 10, 20], np.int64)
    left = np.array([10, 30, 30, 20, 10], np.int64)
    for keep_left in (False, True):
        li, ri = join_pairs(left, right, keep_left)
        assert li.tolist() == [0, 1, 2, 3, 4]
        assert ri.tolist() == [1, 0, 0, 2, 1]


@settings(deadline=None)
@given(st.one_of(keys, st.lists(st.sampled_from([None, 0, 10**9]), max_size=12)), keys)
def test_semi_and_anti_rows_match_brute_force(left, right) -> None:  # noqa: ANN001
    """A semi join keeps the left records with a match, in order, each with every right
    record it matched (output row by output row); an anti join the others, null keys
    among them (dense and sparse codes)."""
    codes = key_codes([pa.array(left, pa.int64())], [pa.array(right, pa.int64())])
    kept, (outs, ri) = semi_rows(*codes)
    pairs = brute_pairs([(x,) for x in left], [(y,) for y in right], False, False)
    want = sorted({i for i, _ in pairs})
    assert kept.tolist() == want
    assert [(want[o], j) for o, j in zip(outs.tolist(), ri.tolist())] == pairs
    others, none = semi_rows(*codes, anti=True)
    assert none is None
    assert others.tolist() == [i for i in range(len(left)) if i not in want]


sparse_codes = st.lists(st.one_of(st.just(-1), st.sampled_from([0, 7, 10**6, 10**9])), max_size=12)


@settings(deadline=None)
@given(sparse_codes, sparse_codes, st.booleans(), st.booleans())
def test_pairs_of_sparse_codes_match_brute_force(left, right, keep_left, keep_right) -> None:  # noqa: ANN001
    # codes far apart take the binary-search path, not the counting sort
    li, ri = join_pairs(np.array(left, np.int64), np.array(right, np.int64), keep_left, keep_right)
    expected = brute_pairs(
        [(None if c < 0 else c,) for c in left],
        [(None if c < 0 else c,) for c in right],
        keep_left,
        keep_right,
    )
    assert sorted(zip(li.tolist(), ri.tolist())) == expected


@settings(deadline=None)
@given(st.data(), st.booleans(), st.booleans())
def test_composite_keys_match_brute_force(data, keep_left, keep_right) -> None:  # noqa: ANN001
    n, m = data.draw(st.integers(0, 10)), data.draw(st.integers(0, 10))
    lk = data.draw(st.lists(st.one_of(st.none(), st.integers(0, 2)), min_size=n, max_size=n))
    ls = data.draw(st.lists(st.one_of(st.none(), st.sampled_from("ab")), min_size=n, max_size=n))
    rk = data.draw(st.lists(st.one_of(st.none(), st.integers(0, 2)), min_size=m, max_size=m))
    rs = data.draw(st.lists(st.one_of(st.none(), st.sampled_from("ab")), min_size=m, max_size=m))
    codes = key_codes(
        [pa.array(lk, pa.int32()), pa.array(ls, pa.string())],
        [pa.array(rk, pa.int32()), pa.array(rs, pa.string())],
    )
    li, ri = join_pairs(*codes, keep_left, keep_right)
    got = sorted(zip(li.tolist(), ri.tolist()))
    assert got == brute_pairs(list(zip(lk, ls)), list(zip(rk, rs)), keep_left, keep_right)


@settings(deadline=None)
@given(words, words)
def test_string_keys_and_pair_order(left, right) -> None:  # noqa: ANN001
    codes = key_codes([pa.array(left, pa.string())], [pa.array(right, pa.string())])
    li, ri = join_pairs(*codes)
    # matched pairs come in canonical order: by left, then right
    assert list(zip(li.tolist(), ri.tolist())) == brute_pairs(
        [(x,) for x in left], [(y,) for y in right], False, False
    )


def test_wide_integer_range_and_chunked_input() -> None:
    big = [-(2**62), 2**62, 5, None]
    left = pa.chunked_array([pa.array(big[:2], pa.int64()), pa.array(big[2:], pa.int64())])
    codes = key_codes([left], [pa.array([5, 2**62, None], pa.int64())])
    li, ri = join_pairs(*codes)
    assert sorted(zip(li.tolist(), ri.tolist())) == [(1, 1), (2, 0)]


def _expected_map(pairs: list, n_out: int, n_in: int, side: int) -> np.ndarray:
    m = np.zeros((n_out, n_in), dtype=bool)
    for r, p in enumerate(pairs):
        if p[side] >= 0:
            m[r, p[side]] = True
    return m


@settings(deadline=None)
@given(st.data(), st.booleans())
def test_dense_pairs_match_the_general_path(data, keep_left) -> None:  # noqa: ANN001
    """The foreign-key path gives join_pairs' pairs over the same records (chunked
    columns, records picked by ascending positions), or declines (None) when the keys
    are not a foreign key's: nulls, negatives, a key twice on the right, a wide range."""
    # nulls and repeated right keys (both decline) only now and then: most examples
    # are foreign keys, so the pairs themselves are compared
    key = st.integers(0, 12)
    if data.draw(st.booleans()):
        key = st.one_of(key, st.none())
    left_keys = data.draw(st.lists(key, max_size=40))
    right_keys = data.draw(st.lists(key, max_size=12, unique=data.draw(st.booleans())))
    if data.draw(st.booleans()):  # a wide range or a negative key
        right_keys.append(data.draw(st.sampled_from([-1, 10**6])))
    cut = data.draw(st.integers(0, len(left_keys)))
    left = pa.chunked_array([left_keys[:cut], left_keys[cut:]], pa.int64())
    right = pa.array(right_keys, pa.int64())
    lrows = data.draw(st.one_of(st.none(), st.sets(st.integers(0, max(len(left_keys) - 1, 0)))))
    rrows = data.draw(st.one_of(st.none(), st.sets(st.integers(0, max(len(right_keys) - 1, 0)))))
    if lrows is not None:
        lrows = np.array(sorted(i for i in lrows if i < len(left_keys)), dtype=np.int64)
    if rrows is not None:
        rrows = np.array(sorted(i for i in rrows if i < len(right_keys)), dtype=np.int64)
    # records gathered a few at a time as well (at scale, blocks of a million)
    block = data.draw(st.sampled_from([1, 3, 1 << 20]))
    with mock.patch.object(_equijoin, "_BLOCK", block):
        got = dense_pairs(left, lrows, right, rrows, keep_left)
    lsel = left if lrows is None else left.take(lrows)
    rsel = right if rrows is None else right.take(rrows)
    want = join_pairs(*key_codes([lsel], [rsel]), keep_left, False)
    # it declines exactly when the columns read (all their records: nulls and the key
    # range are looked at over them) are not a foreign key's
    present = [k for k in left_keys + right_keys if k is not None]
    picked = rsel.to_pylist()
    declines = bool(
        left.null_count or right.null_count or len(rsel) == 0 or len(left_keys) == 0
        or len(picked) != len(set(picked))
        or min(present) < 0 or max(present) >= 2 * (len(lsel) + len(rsel)) + 1024
    )  # fmt: skip
    assert (got is None) == declines
    if got is None:
        return
    assert [a.tolist() for a in got] == [a.tolist() for a in want]


@settings(deadline=None)
@given(
    st.lists(st.integers(0, 9), max_size=30),
    st.permutations(range(10)),
    st.sets(st.integers(0, 29)),
    st.integers(0, 30),
    st.integers(1, 4),
    st.booleans(),
    st.sampled_from([pa.int32(), pa.int64()]),  # (Connect reads bigint keys as int)
)
def test_dense_pairs_gather_block_by_block(  # noqa: ANN001
    left_keys, right_keys, rows, cut, block, keep_left, kind
) -> None:
    """A foreign key's pairs are the same whatever the blocks the left records are
    gathered in, across the chunks of the left column."""
    cut = min(cut, len(left_keys))
    left = pa.chunked_array([left_keys[:cut], left_keys[cut:]], kind)
    right = pa.array(right_keys[:7], kind)  # keys 7..9: no match on the right
    picked = np.array(sorted(i for i in rows if i < len(left_keys)), dtype=np.int64)
    with mock.patch.object(_equijoin, "_BLOCK", block):
        got = dense_pairs(left, picked, right, None, keep_left)
    want = join_pairs(*key_codes([left.take(picked)], [right]), keep_left, False)
    if len(left_keys) == 0:
        assert got is None
        return
    assert got is not None
    assert [a.tolist() for a in got] == [a.tolist() for a in want]


@settings(deadline=None)
@given(st.data())
def test_groups_through_a_side_match_grouping_the_join_records(data) -> None:  # noqa: ANN001
    """Grouping a join's records by one side's columns, numbered over that side first,
    gives the grouping of the gathered values themselves (a -1 record: every value
    null, the same group as a record whose values are all null)."""
    n_side = data.draw(st.integers(0, 8))
    region = data.draw(st.lists(st.one_of(st.none(), st.sampled_from("xyz")), min_size=n_side,
                                max_size=n_side))  # fmt: skip
    level = data.draw(st.lists(st.one_of(st.none(), st.integers(0, 2)), min_size=n_side,
                               max_size=n_side))  # fmt: skip
    at = np.array(data.draw(st.lists(st.integers(-1, n_side - 1), max_size=30)), dtype=np.int64)
    columns = [arrow_codes(pa.array(region, pa.string())), arrow_codes(pa.array(level, pa.int64()))]
    # blocks of a few records too (at scale: from 65,536 records, counted after a
    # million), so stopping once every possible group is seen is put to the test
    first, count_after, block = data.draw(st.sampled_from([(1 << 16, 1 << 20, 1 << 20), (1, 3, 2)]))
    with (
        mock.patch.object(_equijoin, "_FIRST_BLOCK", first),
        mock.patch.object(_equijoin, "_COUNT_AFTER", count_after),
        mock.patch.object(_equijoin, "_BLOCK", block),
    ):
        parent, n = groups_through(columns, at)
    # oracle: the values of each picked record as a tuple, numbered by first appearance
    picked = [(region[a], level[a]) if a >= 0 else (None, None) for a in at.tolist()]
    numbers: dict = {}
    want = [numbers.setdefault(v, len(numbers)) for v in picked]
    assert parent.tolist() == want and n == len(numbers)


@settings(deadline=None)
@given(st.lists(st.integers(0, 6), max_size=300), st.integers(0, 3))
def test_first_appearance_numbers_as_factorize(codes, extra) -> None:  # noqa: ANN001
    import pandas as pd

    values = np.array(codes, dtype=np.int16)
    parent, n = first_appearance(values, 7 + extra)
    want, uniq = pd.factorize(values)
    assert parent.tolist() == want.tolist() and n == len(uniq)


@settings(deadline=None)
@given(st.lists(st.integers(0, 5), max_size=60), st.integers(1, 8), st.integers(0, 3))
def test_first_appearance_counts_codes_after_a_few_blocks(  # noqa: ANN001
    codes, count_after, extra
) -> None:
    """With blocks from one record up and the codes that appear counted after a few
    records (at scale: from 65,536, and a million), the numbering is factorize's
    still, whether every code appears or not."""
    import pandas as pd

    values = np.array(codes, dtype=np.int16)
    with (
        mock.patch.object(_equijoin, "_FIRST_BLOCK", 1),
        mock.patch.object(_equijoin, "_COUNT_AFTER", count_after),
    ):
        parent, n = first_appearance(values, 6 + extra)
    want, uniq = pd.factorize(values)
    assert parent.tolist() == want.tolist() and n == len(uniq)


def test_first_appearance_past_its_first_block() -> None:
    """A code first seen far past the first block (65,536 codes) is still found."""
    values = np.zeros(300_000, dtype=np.int16)
    values[200_000] = 3
    values[250_000:] = 1
    parent, n = first_appearance(values, 5)
    assert n == 3 and parent[0] == 0 and parent[200_000] == 1 and parent[-1] == 2


@pytest.mark.spark
@pytest.mark.parametrize("how", ["inner", "left", "right", "full"])
def test_captured_joins_match_hand_computed_pairs(spark, how) -> None:  # noqa: ANN001
    from pyspark.sql import functions as F

    day = dt.date(2024, 1, 1)
    left_rows = [(1, "x", day), (2, None, day), (1, "x", day), (None, "x", day), (3, "y", None)]
    right_rows = [(1, "x", day), (1, "x", day), (3, "y", None), (4, "z", day), (2, None, day)]
    a = spark.createDataFrame(left_rows, "k int, s string, d date")
    b = spark.createDataFrame(right_rows, "k2 bigint, s2 string, d2 date")
    with numpy_joins(spark) as calls, tensprov_lab.track(spark, name=f"eqjoin-{how}") as run:
        kept = a.filter(F.col("s").isNull() | (F.col("k") < 9))  # an intermediate side
        cond = (kept.k == b.k2) & (kept.s == b.s2) & (kept.d == b.d2)
        joined = kept.join(b, cond, how)
        by_date = joined.join(b.select(F.col("d2").alias("d")), "d", "inner")
    assert calls == [True, True]  # both joins matched in NumPy
    assert not any(op.opaque for op in run.operations)
    keep_left, keep_right = how in ("left", "full"), how in ("right", "full")
    # the filter keeps a null `s`, or a `k` below 9 (a null `k` is not)
    kept_at = [i for i, r in enumerate(left_rows) if r[1] is None or (r[0] or 99) < 9]
    pairs = brute_pairs([left_rows[i] for i in kept_at], right_rows, keep_left, keep_right)
    assert run.dataset(joined).n_rows == len(pairs)
    assert (run.mapping(kept, joined).toarray() == _expected_map(pairs, len(pairs), 4, 0)).all()
    in_a = [(kept_at[i] if i >= 0 else -1, j) for i, j in pairs]
    assert (run.mapping(a, joined).toarray() == _expected_map(in_a, len(pairs), 5, 0)).all()
    assert (run.mapping(b, joined).toarray() == _expected_map(pairs, len(pairs), 5, 1)).all()
    # the records the capture numbered are the join's records, in canonical order
    got = run.rows(joined).astype(object)
    got = got.where(got.notna(), None)
    for r, (i, j) in enumerate(pairs):
        assert got["k"][r] == (left_rows[kept_at[i]][0] if i >= 0 else None)
        assert got["k2"][r] == (right_rows[j][0] if j >= 0 else None)
    # the second join: its left side is the first join's output, a date key with nulls
    dates = [r[2] for r in right_rows]
    joined_dates = [left_rows[kept_at[i]][2] if i >= 0 else None for i, j in pairs]
    second = brute_pairs([(d,) for d in joined_dates], [(d,) for d in dates], False, False)
    assert run.dataset(by_date).n_rows == len(second)
    assert (
        run.mapping(joined, by_date).toarray() == _expected_map(second, len(second), len(pairs), 0)
    ).all()


@pytest.mark.spark
def test_join_of_two_datasets_reading_one_source(spark) -> None:  # noqa: ANN001
    """Both sides carry the same source's keys; it used to turn opaque (duplicate key
    names when read back from Spark)."""
    from pyspark.sql import functions as F

    b = spark.createDataFrame([(1, "x"), (2, "y"), (3, "x")], "k2 bigint, s2 string")
    a = spark.createDataFrame([(1, "x"), (2, "z")], "k bigint, s string")
    with tensprov_lab.track(spark, name="shared-source") as run:
        j = a.join(b, a.k == b.k2)  # (a0, b0), (a1, b1)
        names = b.select(F.col("s2").alias("s"))
        j2 = j.join(names, "s")  # j0 (s = x) with b0 and b2
    assert not any(op.opaque for op in run.operations)
    assert run.dataset(j2).n_rows == 2
    assert run.mapping(j, j2).toarray().tolist() == [[True, False], [True, False]]
    assert run.mapping(b, j2).toarray().astype(int).tolist() == [[1, 0, 0], [1, 0, 1]]


@pytest.mark.spark
@pytest.mark.parametrize("how", ["inner", "left", "full"])
def test_a_broadcast_join_of_uncounted_sources_counts_them_from_its_keys(
    spark, monkeypatch, tmp_path, how
) -> None:  # noqa: ANN001
    """Spark would broadcast these small sides, but reading their keys also numbers the
    two sources, which otherwise takes a Spark job each; once they are numbered, the
    next capture leaves the join to Spark."""
    from tensprov_lab._api import _tracker as tracker_of
    from tensprov_lab.capture.recording import _tracker
    from tensprov_lab.capture.rules import join as join_rule

    assert int(spark.conf.get("spark.sql.autoBroadcastJoinThreshold").rstrip("b")) > 0
    taken: list[bool] = []
    counted: list[object] = []
    real_join, real_scan = join_rule._numpy_join_keys, _tracker.Tracker._scan_index

    def join_spy(reader, rw, occ):  # noqa: ANN001, ANN202
        out = real_join(reader, rw, occ)
        taken.append(out is not None)
        return out

    def scan_spy(self, ann):  # noqa: ANN001, ANN202
        counted.append(ann)
        return real_scan(self, ann)

    monkeypatch.setattr(join_rule, "_numpy_join_keys", join_spy)
    monkeypatch.setattr(_tracker.Tracker, "_scan_index", scan_spy)
    # the join's own capture (a fused one reads the sources itself: tests/test_fused.py)
    monkeypatch.setattr(tracker_of(spark), "fuse", False)
    left_rows = [(2, "b"), (1, "a"), (9, "z"), (2, "c")]
    right_rows = [(2, 20.0), (3, 30.0), (1, 10.0), (2, 21.0)]
    # parquet files, whose size Spark estimates (a local relation read again has none)
    for name, rows, schema in (("a", left_rows, "k bigint, s string"),
                               ("b", right_rows, "k2 bigint, v double")):  # fmt: skip
        spark.createDataFrame(rows, schema).coalesce(1).write.parquet(str(tmp_path / name))
    a = spark.read.parquet(str(tmp_path / "a"))
    b = spark.read.parquet(str(tmp_path / "b"))
    with tensprov_lab.track(spark, name=f"broadcast-{how}") as run:
        joined = a.join(b, a.k == b.k2, how)
    assert taken == [True] and counted == []
    assert run.dataset(a).n_rows == 4 and run.dataset(b).n_rows == 4
    keep_left, keep_right = how in ("left", "full"), how == "full"
    pairs = brute_pairs([(r[0],) for r in left_rows], [(r[0],) for r in right_rows],
                        keep_left, keep_right)  # fmt: skip
    assert run.dataset(joined).n_rows == len(pairs)
    assert (run.mapping(a, joined).toarray() == _expected_map(pairs, len(pairs), 4, 0)).all()
    assert (run.mapping(b, joined).toarray() == _expected_map(pairs, len(pairs), 4, 1)).all()
    # a second run reads the same, now numbered, sources: Spark's broadcast join it is
    with tensprov_lab.track(spark, name=f"broadcast-{how}-again") as again:
        joined2 = a.join(b, a.k == b.k2, how)
    assert taken == [True, False] and counted == []
    assert (again.mapping(a, joined2).toarray() == _expected_map(pairs, len(pairs), 4, 0)).all()
    assert (again.mapping(b, joined2).toarray() == _expected_map(pairs, len(pairs), 4, 1)).all()


def test_null_aware_anti_rows_are_not_in_as_sql_says() -> None:
    """``x NOT IN (right)`` by brute force over SQL's three-valued logic (a comparison
    with a null is no answer): the left records a null-aware anti join keeps."""
    rng = np.random.default_rng(3)
    for _ in range(300):
        left = rng.integers(-1, 4, size=int(rng.integers(0, 7)))
        right = rng.integers(-1, 4, size=int(rng.integers(0, 4)))
        want = []
        for i, x in enumerate(left):
            answers = [None if x < 0 or y < 0 else bool(x != y) for y in right]
            if all(a is True for a in answers):  # (NOT IN: true for every right value)
                want.append(i)
        kept, matches = _equijoin.semi_rows(left, right, anti=True, null_aware=True)
        assert kept.tolist() == want and matches is None


@settings(deadline=None)
@given(keys, keys, st.integers(1, 6), st.integers(0, 3))
def test_semi_and_anti_rows_with_a_condition_match_in_ranges_as_whole(
    left,
    right,
    max_pairs,
    drop,  # noqa: ANN001
) -> None:
    """A semi or anti join with a condition beyond its keys matches a range of left
    records at a time (at most ``max_pairs`` pairs each): the records kept and a semi
    join's matches are brute force's, where the condition holds; a single record
    pairing more than ``max_pairs`` (or a semi join matching more) says so."""
    codes = key_codes([pa.array(left, pa.int64())], [pa.array(right, pa.int64())])

    def holds(li: np.ndarray, ri: np.ndarray) -> np.ndarray:
        return (li + ri) % 4 != drop  # (a condition over both records of a pair)

    pairs = [
        (i, j)
        for i, j in brute_pairs([(x,) for x in left], [(y,) for y in right], False, False)
        if (i + j) % 4 != drop
    ]
    want = sorted({i for i, _ in pairs})
    per = [sum(1 for y in right if x is not None and x == y) for x in left]
    for anti in (False, True):
        too_many = max(per, default=0) > max_pairs or (
            not anti and len(pairs) > _equijoin.MATCHES_PER_PAIR * max_pairs
        )
        try:
            kept, matched = semi_rows(*codes, anti=anti, max_pairs=max_pairs, holds=holds)
        except TooManyPairs:
            assert too_many
            continue
        assert not too_many
        if anti:
            assert kept.tolist() == [i for i in range(len(left)) if i not in want]
            assert matched is None
        else:
            assert kept.tolist() == want
            assert matched is not None
            outs, ri = matched
            assert [(want[o], j) for o, j in zip(outs.tolist(), ri.tolist())] == pairs
