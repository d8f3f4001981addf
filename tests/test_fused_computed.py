"""Aggregate values computed from fused groups (capture/sources/_fused_computed.py).

The oracle is Spark: each group's ``avg`` computed here must equal, value for value and
type for type, what Spark's ``avg`` of the same records gives, or step aside
(:class:`KeyError_`, then the step reads the value through Spark).  The values are
drawn to make ties of the result's scale (a sum of 0.01 over 32 records is 0.0003125,
rounded half away from zero to 0.000313) and of either sign.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tensprov_lab.capture.plan._keys import KeyError_
from tensprov_lab.capture.sources._fused_computed import group_averages
from tests._examples import spark_examples

#: decimal types (precision, scale) of the averaged column: TPC-H's, and the edges
TYPES = [(15, 2), (12, 2), (5, 0), (18, 5), (3, 3)]


@st.composite
def decimal_groups(draw: Any) -> tuple[tuple[int, int], list[tuple[int, Any]]]:
    p, s = draw(st.sampled_from(TYPES))
    top = 10 ** min(p, 6) - 1  # (units of the scale: small, so that ties are common)
    unit = st.one_of(st.integers(-3, 3), st.integers(-top, top), st.just(10**p - 1))
    value = st.one_of(st.none(), unit.map(lambda u: Decimal(u).scaleb(-s)))
    # a few groups of up to 64 records: counts with factors of 2 and 5 make ties
    sizes = draw(st.lists(st.sampled_from([1, 2, 3, 8, 16, 32, 64, 7]), min_size=1, max_size=4))
    rows = []
    for g, size in enumerate(sizes):
        first = draw(value)
        same = draw(st.booleans())  # (one value repeated: sum / count exactly a tie)
        rows += [(g, first if same else draw(value)) for _ in range(size)]
    return (p, s), rows


@pytest.mark.spark
@spark_examples("TENSPROV_AVG_EXAMPLES", 30)
@given(case=decimal_groups())
def test_decimal_averages_equal_sparks(spark: Any, case: Any) -> None:
    from pyspark.sql import functions as F

    (p, s), rows = case
    df = spark.createDataFrame(rows, f"g int, v decimal({p},{s})")
    out = df.groupBy("g").agg(F.avg("v").alias("a")).orderBy("g")
    result = out.schema["a"].dataType.simpleString()
    expected = {r["g"]: r["a"] for r in out.collect()}
    parent = np.array([g for g, _ in rows])
    values = pa.array([v for _, v in rows], pa.decimal128(p, s))
    n_groups = int(parent.max()) + 1
    try:
        got = group_averages(values, parent, n_groups, result)
    except KeyError_:
        # only a type past what is computed here, or sums past int64, step aside
        spread = sum(abs(v.scaleb(s)) for _, v in rows if v is not None)
        assert p > 18 or spread >= 2**62, (p, s, result)
        return
    assert got.type == pa.decimal128(p + 4, s + 4) and result == f"decimal({p + 4},{s + 4})"
    assert got.to_pylist() == [expected[g] for g in range(n_groups)]


@pytest.mark.spark
@spark_examples("TENSPROV_AVG_EXAMPLES", 20)
@given(
    rows=st.lists(
        st.tuples(
            st.integers(0, 3),
            st.one_of(st.none(), st.integers(-(2**40), 2**40), st.integers(-3, 3)),
        ),
        min_size=1,
        max_size=40,
    )
)
def test_integer_averages_equal_sparks(spark: Any, rows: list[tuple[int, Any]]) -> None:
    from pyspark.sql import functions as F

    out = spark.createDataFrame(rows, "g int, v bigint").groupBy("g").agg(F.avg("v").alias("a"))
    expected = {r["g"]: r["a"] for r in out.collect()}
    parent = np.array([g for g, _ in rows])
    got = group_averages(pa.array([v for _, v in rows], pa.int64()), parent, 4, "double")
    assert got.to_pylist() == [expected.get(g) for g in range(4)]


def test_averages_spark_might_round_otherwise_step_aside() -> None:
    """Past what the single rounding is known to agree on, or a sum past 2**53 as
    doubles: Spark computes those."""
    big = pa.array([2**52, 2**52], pa.int64())
    with pytest.raises(KeyError_):
        group_averages(big, np.array([0, 0]), 1, "double")
    wide = pa.array([Decimal("1")], pa.decimal128(20, 0))
    with pytest.raises(KeyError_):
        group_averages(wide, np.array([0]), 1, "decimal(24,4)")
    many = pa.array(np.ones(10**6 + 1, dtype=np.int8)).cast(pa.decimal128(18, 0))
    with pytest.raises(KeyError_):  # (10**6 records of a decimal(18,0): 10**(24-18))
        group_averages(many, np.zeros(10**6 + 1, dtype=np.int64), 1, "decimal(22,4)")


@given(
    rows=st.lists(
        st.tuples(
            st.integers(0, 4),
            st.one_of(st.none(), st.integers(-2, 2)),
            st.one_of(st.none(), st.sampled_from(["a", "b", "ab", ""])),
        ),
        max_size=60,
    ),
    encoded=st.booleans(),
)
@settings(deadline=None)  # (the first example imports pandas)
def test_distinct_counts_equal_pandas(rows: list[tuple[int, Any, Any]], encoded: bool) -> None:
    """``count(DISTINCT x, y)`` of each group: the distinct pairs without a null, the
    strings plain or dictionary-encoded in chunks (as Parquet dictionaries are read);
    the oracle is pandas' distinct rows of each group."""
    import pandas as pd

    from tensprov_lab.capture.sources._fused_computed import distinct_counts

    parent = np.array([g for g, _, _ in rows], dtype=np.int64)
    x = pa.array([v for _, v, _ in rows], pa.int64())
    words = [w for _, _, w in rows]
    half = len(words) // 2
    y: Any = pa.array(words, pa.string())
    if encoded:  # (two chunks, two dictionaries, one with a repeated value)
        y = pa.chunked_array(
            [pa.array(words[:half], pa.string()).dictionary_encode(),
             pa.DictionaryArray.from_arrays(
                 pa.array([None if w is None else (i % 2) * 2 if w == "b"
                           else ["b", "a", "b", "ab", ""].index(w)
                           for i, w in enumerate(words[half:])], pa.int32()),
                 pa.array(["b", "a", "b", "ab", ""]))],
            pa.dictionary(pa.int32(), pa.string()),
        )  # fmt: skip
    valid = np.array([v is not None and w is not None for _, v, w in rows], dtype=bool)
    got = distinct_counts(parent, [x, y], valid, 5)
    frame = pd.DataFrame(rows, columns=["g", "x", "y"]).dropna()
    want = frame.drop_duplicates().groupby("g").size().reindex(range(5), fill_value=0)
    assert got.tolist() == want.tolist()
