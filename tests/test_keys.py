"""Key indexes translate raw keys read back from Spark into canonical rows (no JVM)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tensprov_lab.capture.plan._keys import (
    ComposedKeyIndex,
    KeyError_,
    MappedKeyIndex,
    RangeKeyIndex,
    UniqueKeyIndex,
)


@given(st.lists(st.integers(0, 2**40), unique=True, max_size=50), st.randoms())
def test_unique_index_is_the_inverse_of_values(values, rnd) -> None:  # noqa: ANN001
    arr = np.array(values, dtype=np.int64)
    ki = UniqueKeyIndex(arr)
    rows = list(range(len(values)))
    rnd.shuffle(rows)
    assert ki.lookup(arr[rows].reshape(-1, 1)).tolist() == rows
    assert ki.values(np.array(rows, dtype=np.int64)).tolist() == arr[rows].tolist()


def test_unknown_and_null_keys() -> None:
    ki = UniqueKeyIndex(np.array([3, 8, 20]))
    assert ki.lookup(np.array([[-1], [8]])).tolist() == [-1, 1]
    with pytest.raises(KeyError_):
        ki.lookup(np.array([[4]]))
    with pytest.raises(KeyError_):
        UniqueKeyIndex(np.array([5, 1, 5]))
    empty = UniqueKeyIndex(np.zeros(0, np.int64))
    assert empty.lookup(np.array([[-1]])).tolist() == [-1]


def test_mapped_index_follows_the_input_then_the_map() -> None:
    parent = UniqueKeyIndex(np.array([10, 20, 30, 40]))
    # a filter kept input rows 1 and 3
    ki = MappedKeyIndex(parent, np.array([-1, 0, -1, 1]), 2)
    assert ki.lookup(np.array([[40], [20]])).tolist() == [1, 0]
    with pytest.raises(KeyError_):
        ki.lookup(np.array([[30]]))
    agg = MappedKeyIndex(parent, np.array([0, 0, 1, 1]), 3, null_row=2)
    assert agg.lookup(np.array([[-1], [30]])).tolist() == [2, 1]


def test_composed_index_codes_sort_like_canonical_order() -> None:
    left = UniqueKeyIndex(np.array([100, 200, 300]))
    right = UniqueKeyIndex(np.array([7, 9]))
    blocks = [(left, 0), (right, 1)]
    pairs = [(0, 1), (1, 0), (2, -1), (-1, 1)]
    radix = ComposedKeyIndex.radix(blocks, 1)
    codes = ComposedKeyIndex.encode(
        [
            np.zeros(4, np.int64),
            np.array([p[0] for p in pairs]) + 1,
            np.array([p[1] for p in pairs]) + 1,
        ],
        radix,
    )
    order = np.argsort(codes)
    assert [pairs[i] for i in order] == sorted(pairs)
    ki = ComposedKeyIndex(blocks, None, 1, codes[order], width=2)
    raw = np.array([[300, -1], [100, 9], [-1, 9], [-1, -1]])
    assert ki.lookup(raw).tolist() == [3, 1, 0, -1]
    assert RangeKeyIndex(3).lookup(np.array([2, 0, -1])).tolist() == [2, 0, -1]


def test_records_after_spark_stopped_say_so() -> None:
    from types import SimpleNamespace
    from unittest.mock import MagicMock

    from tensprov_lab.capture.recording._tracker import Node, Tracker
    from tensprov_lab.store import Store

    store = Store()
    ds = store.add_dataset("orders", n_rows=1, role="source")
    # what a SparkSession looks like after spark.stop(): no JVM context any more
    stopped = SimpleNamespace(
        _jvm=MagicMock(), sparkContext=SimpleNamespace(_gateway=None, _jsc=None)
    )
    tracker = Tracker(stopped, store)
    ki = UniqueKeyIndex(np.array([0]))
    tracker.by_ds[ds.id] = Node(
        df=None, plan=None, ident=1, ds_id=ds.id, ann=MagicMock(), ki=ki, n=1
    )
    with pytest.raises(ValueError, match="SparkSession of this run was stopped"):
        tracker.records(ds.id, None, None)


@pytest.mark.spark
@pytest.mark.parametrize("wanted", [[], [7], [0, 2**40, 5], list(range(0, 3000, 3))])
def test_keys_in_keeps_exactly_the_given_keys(spark, wanted) -> None:  # noqa: ANN001
    from pyspark.sql import functions as F

    from tensprov_lab.capture.plan._keys import keys_in

    df = spark.range(0, 3000).withColumn("k", F.col("id"))
    df = df.union(spark.createDataFrame([(-1, 2**40)], "id long, k long"))
    got = sorted(r.k for r in df.where(keys_in("k", np.array(wanted, np.int64))).collect())
    assert got == sorted(wanted)


@given(
    st.lists(st.tuples(st.integers(-1, 5), st.integers(-1, 6)), min_size=1, max_size=30),
    st.data(),
)
def test_column_values_cover_the_raw_keys_of_the_rows(pairs, data) -> None:  # noqa: ANN001
    """What a filter on ``column_values(rows)`` keeps includes every record of ``rows``
    (a join of two keyed inputs, -1 the missing side of an outer join, then a map)."""
    pairs = sorted({p for p in pairs if p != (-1, -1)}) or [(0, 0)]
    left = UniqueKeyIndex(np.arange(6, dtype=np.int64) * 10 + 7)
    right = UniqueKeyIndex(np.arange(7, dtype=np.int64) * 3 + 1)
    blocks = [(left, 0), (right, 1)]
    parts = [np.zeros(len(pairs), np.int64)]
    parts += [np.array([p[k] + 1 for p in pairs], dtype=np.int64) for k in (0, 1)]
    ki = ComposedKeyIndex(
        blocks, None, 1, ComposedKeyIndex.encode(parts, ComposedKeyIndex.radix(blocks, 1)), width=2
    )
    raw = np.array(
        [[left.values(np.array([a]))[0] if a >= 0 else -1,
          right.values(np.array([b]))[0] if b >= 0 else -1] for a, b in pairs]
    )  # fmt: skip
    assert ki.lookup(raw).tolist() == list(range(len(pairs)))
    rows = np.array(sorted(data.draw(st.sets(st.integers(0, len(pairs) - 1), min_size=1))))
    for index, want in ((ki, rows), (MappedKeyIndex(ki, None, len(pairs)), rows)):
        cols = index.column_values(want)
        assert cols is not None and set(cols) == {0, 1}
        keep = np.all([np.isin(raw[:, c], v) for c, v in cols.items()], axis=0)
        assert set(want.tolist()) <= set(np.flatnonzero(keep).tolist())
    # a map that folds rows (an aggregate): the rows' members are covered
    fold = np.arange(len(pairs)) // 2
    agg = MappedKeyIndex(ki, fold, int(fold.max()) + 1)
    groups = np.unique(fold[rows])
    cols = agg.column_values(groups)
    assert cols is not None
    keep = np.all([np.isin(raw[:, c], v) for c, v in cols.items()], axis=0)
    assert set(groups.tolist()) <= set(fold[keep].tolist())
