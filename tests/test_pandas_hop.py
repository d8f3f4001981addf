"""A hop through pandas inside a tracked block (``capture/_pandas.py``): never a
"not captured" error, an explicit opaque operation linked to the DataFrame the pandas
frame came from, exact lineage again below the hop, and the user's results unchanged."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

import tensprov_lab
from tensprov_lab.capture._tracker import TensProvWarning

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


def test_a_pandas_round_trip_is_an_explicit_opaque_step(spark: Any) -> None:
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
    got = {"df": df, "pdf2": pdf2, "back": back, "out": out, "other": other}
    # the user's results are those of the untracked code
    assert sorted(got["out"].collect()) == sorted(plain["out"].collect())
    assert got["pdf2"].equals(plain["pdf2"])
    hops = [op for op in run.operations if op.method == "toPandas/createDataFrame"]
    assert len(hops) == 1
    (hop,) = hops
    assert hop.opaque and hop.category == "opaque" and not hop.attributes_exact
    assert run.store.datasets[hop.inputs[0]].label == "big"
    assert run.store.datasets[hop.output].label == "back"
    messages = [str(w.message) for w in caught if issubclass(w.category, TensProvWarning)]
    assert any("went through pandas (toPandas of big, then createDataFrame)" in m
               for m in messages), messages  # fmt: skip
    # every column of `big` may have contributed to every column of `back` (a superset)
    assert hop.contributing is not None and hop.contributing[0].all()

    # below the hop: exact again (records numbered as the new DataFrame's)
    back, out = got["back"], got["out"]
    assert run.dataset(back).n_rows == len(got["pdf2"])
    # out row 0 is the group of back's first record (groups by smallest member)
    lin = run.backward(out, rows=[0], to=back)
    first_v = got["pdf2"].iloc[0]["v"]
    want = [i for i, x in enumerate(got["pdf2"]["v"].tolist()) if x == first_v]
    assert lin[back].tolist() == want and len(want) > 1
    # above it: dataset level only, and said so
    with pytest.raises(ValueError, match="toPandas/createDataFrame.*is opaque"):
        run.mapping(got["df"], out)
    assert run.backward(out, rows=[0]).blocked == [hop]
    # a pandas frame capture did not hand out makes an ordinary source, captured even
    # though nothing in the block reads it
    other = run.dataset(got["other"])
    assert other.role == "source" and run.store.producer(other.id) is None
    assert other.n_rows == 3
