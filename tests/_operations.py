"""The tiny data sets of the operation tests, written out literally, and the helpers that
read a run's records, operations and lineage (shared by the classic, Connect and rule
tests)."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pandas as pd
from pyspark.sql import Row

PEOPLE = [
    (1, "ann", 30, "x"),
    (2, "bob", None, "y"),
    (3, "cid", 25, "x"),
    (4, "dan", 30, None),
    (5, "eve", 40, "y"),
]
PEOPLE_SCHEMA = "id int, name string, age int, grp string"
LEFT = [(1, "a"), (2, "b"), (2, "c"), (4, "d")]
RIGHT = [(2, "X"), (3, "Y"), (1, "Z"), (2, "W")]
SALES = [("x", 1), ("y", 2), ("x", 3), (None, 4), ("y", None), ("x", 5)]
SALES_SCHEMA = "region string, amount int"


# ---------------------------------------------------------------------------------------------
# helpers


def _py(v: Any) -> Any:
    if isinstance(v, (np.ndarray, list, tuple)):
        return [_py(x) for x in v]
    if v is None or v is pd.NA:
        return None
    if isinstance(v, float) and math.isnan(v):
        return None
    if isinstance(v, np.generic):
        return _py(v.item())
    return v


def records(run: Any, df: Any) -> list[tuple]:
    """``run.rows(df)`` as plain tuples, checking the ``_row`` column is 0..n-1."""
    pdf = run.rows(df)
    assert list(pdf.columns)[0] == "_row"
    assert pdf["_row"].tolist() == list(range(len(pdf)))
    assert run.dataset(df).n_rows == len(pdf)
    body = pdf.drop(columns=["_row"])
    return [tuple(_py(v) for v in row) for row in body.itertuples(index=False, name=None)]


def op_of(run: Any, df: Any) -> Any:
    op = run.store.producer(run.dataset(df).id)
    assert op is not None, "no operation produced this DataFrame"
    return op


def check_op(run: Any, df: Any, categories: set[str]) -> Any:
    op = op_of(run, df)
    assert not op.opaque, op.warnings
    assert op.tensors is not None
    assert op.category in categories, (op.method, op.category)
    return op


def back(run: Any, df: Any, i: int) -> dict[str, list[int]]:
    return run.backward(df, rows=[i]).to_dict()


def fwd(run: Any, src: Any, j: int, dst: Any) -> list[int]:
    return run.forward(src, rows=[j], to=dst)[dst].tolist()


def people_df(spark: Any) -> Any:
    return spark.createDataFrame(PEOPLE, PEOPLE_SCHEMA)


def sales_df(spark: Any) -> Any:
    return spark.createDataFrame(SALES, SALES_SCHEMA)


def join_sides(spark: Any) -> tuple[Any, Any]:
    return (
        spark.createDataFrame(LEFT, "k int, lv string"),
        spark.createDataFrame(RIGHT, "k int, rv string"),
    )


# ---------------------------------------------------------------------------------------------
# sources


SCAN = [(3, "c"), (1, "a"), (2, "b")]  # deliberately not sorted: scan order is the order


def _src_csv(spark: Any, tmp: Any) -> tuple[Any, list[tuple]]:
    path = tmp / "people.csv"
    path.write_text("id,name\n3,c\n1,a\n2,b\n")
    return spark.read.csv(str(path), header=True), [("3", "c"), ("1", "a"), ("2", "b")]


def _src_parquet(spark: Any, tmp: Any) -> tuple[Any, list[tuple]]:
    path = tmp / "people.parquet"
    pd.DataFrame({"id": [3, 1, 2], "name": ["c", "a", "b"]}).to_parquet(path, index=False)
    return spark.read.parquet(str(path)), SCAN


def _src_json(spark: Any, tmp: Any) -> tuple[Any, list[tuple]]:
    path = tmp / "people.json"
    path.write_text("".join(json.dumps({"id": i, "name": n}) + "\n" for i, n in SCAN))
    return spark.read.json(str(path)), SCAN


def _src_range(spark: Any, tmp: Any) -> tuple[Any, list[tuple]]:
    return spark.range(3), [(0,), (1,), (2,)]


def _src_table(spark: Any, tmp: Any) -> tuple[Any, list[tuple]]:
    spark.createDataFrame(SCAN, "id int, name string").createOrReplaceTempView("tp_ops_view")
    return spark.table("tp_ops_view"), SCAN


def _src_pandas(spark: Any, tmp: Any) -> tuple[Any, list[tuple]]:
    return spark.createDataFrame(pd.DataFrame({"id": [3, 1, 2], "name": ["c", "a", "b"]})), SCAN


def _src_tuples(spark: Any, tmp: Any) -> tuple[Any, list[tuple]]:
    return spark.createDataFrame(SCAN, "id int, name string"), SCAN


def _src_rows(spark: Any, tmp: Any) -> tuple[Any, list[tuple]]:
    return spark.createDataFrame([Row(id=i, name=n) for i, n in SCAN]), SCAN


SOURCES = {
    "csv": _src_csv,
    "parquet": _src_parquet,
    "json": _src_json,
    "range": _src_range,
    "table": _src_table,
    "pandas": _src_pandas,
    "tuples": _src_tuples,
    "rows": _src_rows,
}
