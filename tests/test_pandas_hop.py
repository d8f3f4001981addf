"""A hop through pandas inside a tracked block (``capture/hops/_pandas.py``): never a
"not captured" error, an explicit opaque operation linked to the DataFrame the pandas
frame came from, exact lineage again below the hop, and the user's results unchanged."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

import tensprov_lab
from tensprov_lab.capture.recording._tracker import TensProvWarning

pytestmark = pytest.mark.spark

ROWS = [(i, float(i % 7)) for i in range(30)]


def _block(spark: Any) -> dict[str, Any]:
    df = spark.createDataFrame(ROWS, "id long, v double")
    big = df.filter("v > 2")
    pdf = big.toPandas()
    pdf2 = pdf[pdf.v > 3].assign(w=lambda x: x.v * 2)
    back = spark.createDataFrame(pdf2)
    out = back.groupBy("v").count()
    import pandas as pd

    other = spark.createDataFrame(pd.DataFrame({"x": [1, 2, 3]}))  # not from Spark
    return {"df": df, "big": big, "pdf2": pdf2, "back": back, "out": out, "other": other}


def test_a_pandas_filter_and_assign_keep_exact_lineage(spark: Any) -> None:
    """Records of the new DataFrame are matched back to ``big`` by the values of the
    columns both have (id, v): the hop is exact, lineage runs from ``out`` to ``df``."""
    import pandas as pd

    plain = _block(spark)
    df = spark.createDataFrame(ROWS, "id long, v double")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # the block of _block, written out: capture names datasets after its variables
        with tensprov_lab.track(spark, name="pandas-hop") as run:
            big = df.filter("v > 2")
            pdf = big.toPandas()
            pdf2 = pdf[pdf.v > 3].assign(w=lambda x: x.v * 2)
            back = spark.createDataFrame(pdf2)
            out = back.groupBy("v").count()
            other = spark.createDataFrame(pd.DataFrame({"x": [1, 2, 3]}))
    # the user's results are those of the untracked code
    assert sorted(out.collect()) == sorted(plain["out"].collect())
    assert pdf2.equals(plain["pdf2"])
    (hop,) = [op for op in run.operations if op.method == "toPandas/createDataFrame"]
    assert not hop.opaque and hop.tensors is not None
    assert run.store.datasets[hop.inputs[0]].label == "big"
    assert not [w for w in caught if "went through pandas" in str(w.message)]
    # each record of back is the record of big with its id (ids are unique here)
    big_ids = [r.id for r in big.collect()]  # big is scan-ordered: canonical order
    for i, rid in enumerate(pdf2["id"].tolist()):
        assert run.backward(back, rows=[i], to=big)[big].tolist() == [big_ids.index(rid)]
        assert run.backward(back, rows=[i], to=df)[df].tolist() == [rid]
    # columns: id and v from big's own, the new w from any of big's columns (a superset)
    cols = run.dataset(back).columns
    c = hop.contributing[0]
    assert c[cols.index("id")].tolist() == [True, False]
    assert c[cols.index("v")].tolist() == [False, True]
    assert c[cols.index("w")].all() and not hop.attributes_exact
    # through the hop and the aggregate: out's group of v = 4.0 comes from the source
    # records with v = 4.0
    got = run.rows(out)
    row = int(got.index[got["v"] == 4.0][0])
    assert run.backward(out, rows=[row], to=df)[df].tolist() == [i for i, v in ROWS if v == 4.0]
    # a pandas frame capture did not hand out makes an ordinary source
    made = run.dataset(other)
    assert made.role == "source" and run.store.producer(made.id) is None
    assert made.n_rows == 3


def test_duplicate_records_list_every_equal_upstream_record(spark: Any) -> None:
    df = spark.createDataFrame([(1, "a"), (1, "a"), (2, "b")], "k long, s string")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with tensprov_lab.track(spark, name="pandas-dups") as run:
            pdf = df.toPandas()
            back = spark.createDataFrame(pdf[pdf.k == 1].head(1))
    assert run.backward(back, rows=[0], to=df)[df].tolist() == [0, 1]
    assert any("equal several upstream records" in str(w.message) for w in caught)


def test_values_changed_in_pandas_make_an_explicit_opaque_step(spark: Any) -> None:
    df = spark.createDataFrame(ROWS, "id long, v double")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with tensprov_lab.track(spark, name="pandas-changed") as run:
            big = df.filter("v > 2")
            pdf = big.toPandas()
            pdf["v"] = pdf["v"] + 0.5  # no record of big has these values any more
            back = spark.createDataFrame(pdf)
            out = back.groupBy("v").count()
    (hop,) = [op for op in run.operations if op.method == "toPandas/createDataFrame"]
    assert hop.opaque and hop.category == "opaque" and not hop.attributes_exact
    messages = [str(w.message) for w in caught if issubclass(w.category, TensProvWarning)]
    assert any("went through pandas (toPandas of big, then createDataFrame)" in m
               for m in messages), messages  # fmt: skip
    # every column of `big` may have contributed to every column of `back` (a superset)
    assert hop.contributing is not None and hop.contributing[0].all()
    # below the hop: exact again (records numbered as the new DataFrame's)
    assert run.dataset(back).n_rows == len(pdf)
    lin = run.backward(out, rows=[0], to=back)
    first_v = pdf.iloc[0]["v"]
    assert lin[back].tolist() == [i for i, x in enumerate(pdf["v"].tolist()) if x == first_v]
    # above it: dataset level only, and said so
    with pytest.raises(ValueError, match="toPandas/createDataFrame.*is opaque"):
        run.mapping(df, out)
    assert run.backward(out, rows=[0]).blocked == [hop]


def test_an_rdd_hop_keeps_lineage_when_a_column_matches(spark: Any) -> None:
    df = spark.createDataFrame(ROWS, "id long, v double")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with tensprov_lab.track(spark, name="rdd-hop") as run:
            big = df.filter("v > 2")
            doubled = big.rdd.map(lambda r: (r.id, r.v * 2)).toDF(["id", "v2"])
            renamed = big.rdd.map(lambda r: (r.id + 100, r.v)).toDF(["key", "w"])
    assert renamed.count() == len([1 for _, v in ROWS if v > 2])
    plain = [(i, v * 2) for i, v in ROWS if v > 2]
    assert [tuple(r) for r in doubled.collect()] == plain
    ops = {run.store.datasets[o.output].label: o for o in run.operations}
    # doubled keeps big's ids: matched by id, exact
    assert ops["doubled"].method == "rdd/createDataFrame" and not ops["doubled"].opaque
    for i, (rid, _) in enumerate(plain):
        assert run.backward(doubled, rows=[i], to=df)[df].tolist() == [rid]
    # renamed shares no column with big: an explicit opaque step linked to big, said so
    assert ops["renamed"].opaque and run.store.datasets[ops["renamed"].inputs[0]].label == "big"
    assert any("went through an RDD (rdd of big" in str(w.message) for w in caught)


def test_hops_match_back_nested_and_typed_values(spark: Any) -> None:
    """Arrays, maps, structs, binary, decimals and timestamps: a pandas or RDD round trip
    over them keeps exact lineage (they were opaque: ``unhashable type``)."""
    import datetime as dt
    import decimal

    schema = (
        "id long, arr array<long>, m map<string,long>, s struct<a:long,b:string>, "
        "bin binary, dec decimal(10,2), ts timestamp"
    )
    rows = [
        (
            i,
            [i, i % 3] if i % 4 else None,
            {"k": i % 2},
            (i % 5, f"b{i % 3}"),
            bytes([i % 7]),
            decimal.Decimal(f"{i % 6}.25"),
            dt.datetime(2024, 1, 1 + i % 9, 3),
        )
        for i in range(24)
    ]
    df = spark.createDataFrame(rows, schema)
    with tensprov_lab.track(spark, name="nested-hop") as run:
        big = df.filter("id > 3")
        pdf = big.toPandas()
        back = spark.createDataFrame(pdf[pdf.id % 2 == 0], schema=big.schema)
        odd = big.rdd.filter(lambda r: r.id % 2 == 1).toDF(big.schema)
    ops = {run.store.datasets[o.output].label: o for o in run.operations}
    assert not ops["back"].opaque and not ops["odd"].opaque, (ops["back"], ops["odd"])
    big_ids = [r.id for r in big.collect()]
    for name, frame in (("back", back), ("odd", odd)):
        ids = [r.id for r in frame.collect()]
        assert ids, name
        for i, rid in enumerate(ids):
            # the fields of the records are not unique (many records share arrays,
            # maps, ...), but their ids are: each record is the one of big it came from
            assert run.backward(frame, rows=[i], to=big)[big].tolist() == [big_ids.index(rid)]
