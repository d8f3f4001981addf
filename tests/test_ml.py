"""Spark ML feature stages inside a tracked block (capture/hops/_ml.py).

``fit`` and ``transform`` calls are operations (Pipeline calls are recorded stage by
stage, each once); a transform's output equals the untracked one; its column lineage
comes from the plan and its vector slots lead back to the raw input cells.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from pyspark.ml import Pipeline
from pyspark.ml.base import Estimator, Transformer
from pyspark.ml.feature import (
    Binarizer,
    Bucketizer,
    Imputer,
    MinMaxScaler,
    OneHotEncoder,
    SQLTransformer,
    StandardScaler,
    StringIndexer,
    VectorAssembler,
)

import tensprov_lab

pytestmark = pytest.mark.spark

ROWS = [
    (1, "a", 10.0, 1.0),
    (2, "b", 20.0, None),
    (3, "a", 30.0, 3.0),
    (4, "c", 3.0, 4.0),
    (5, "b", 12.0, 2.0),
    (6, "a", 7.0, None),
]
CATS = ["a", "b", "a", "c", "b", "a"]  # StringIndexer (frequencyDesc): a = 0, b = 1, c = 2


@pytest.fixture(scope="module")
def df(spark):  # noqa: ANN001, ANN201
    return spark.createDataFrame(ROWS, "id int, cat string, x double, y double")


def _rows(frame: Any) -> list[tuple]:
    out = []
    for r in frame.collect():
        out.append(tuple(v.toArray().round(9).tolist() if hasattr(v, "toArray") else v for v in r))
    return sorted(out, key=repr)


def _stages() -> list[Any]:
    return [
        StringIndexer(inputCol="cat", outputCol="cat_idx"),
        OneHotEncoder(inputCol="cat_idx", outputCol="cat_vec"),
        VectorAssembler(inputCols=["cat_vec", "x"], outputCol="raw"),
        StandardScaler(inputCol="raw", outputCol="features", withMean=True),
    ]


def test_pipeline_slot_traced_to_raw_cell(spark, df) -> None:  # noqa: ANN001
    plain = Pipeline(stages=_stages()).fit(df).transform(df)
    with tensprov_lab.track(spark) as run:
        model = Pipeline(stages=_stages()).fit(df)
        out = model.transform(df)
    assert out.schema == plain.schema
    assert _rows(out) == _rows(plain)
    # stages recorded one by one, each call once; no pipeline-level or DataFrame-level op
    methods = Counter(op.method for op in run.operations)
    assert methods == {
        "StringIndexer.fit": 1,
        "OneHotEncoder.fit": 1,
        "StandardScaler.fit": 1,
        # fit transforms the data for the next estimators, then transform() does it again
        "StringIndexerModel.transform": 2,
        "OneHotEncoderModel.transform": 2,
        "VectorAssembler.transform": 2,
        "StandardScalerModel.transform": 1,
    }
    assert not run.warnings
    for op in run.operations:
        assert not op.opaque and not op.nondeterministic
        assert op.category == ("ml_fit" if op.method.endswith(".fit") else "ml_transform")
    last = run.store.producer(run.dataset(out).id)
    assert last is not None and last.model is model.stages[-1]
    assert len(last.slots["features"]) == 3  # cat a, cat b (dropLast), x

    # slot 1 of the features: one-hot slot of category 1 = 'b', from the cat column
    path = run.slot_lineage(out, "features", slot=1)
    assert path["column"].tolist() == ["features", "raw", "cat_vec", "cat_idx", "cat"]
    assert path["slot"].tolist()[:3] == [1, 1, 1]
    assert path["dataset"].iloc[-1] == run.dataset(df).label
    assert "cat_idx = 1 ('b')" in path["detail"].tolist()
    for row in (1, 3):  # 'b' and 'c': the slot holds 1.0, then 0.0
        cat = CATS[row]
        cells = run.slot_lineage(out, "features", slot=1, row=row)
        assert cells[["row", "column", "value"]].values.tolist() == [[row, "cat", cat]]
        assert "cat_idx = 1 ('b')" in cells["detail"].iloc[0]
    # slot 2: the assembled x column
    cells = run.slot_lineage(out, "features", slot=2, row=3)
    assert cells[["row", "column", "value"]].values.tolist() == [[3, "x", 3.0]]
    with pytest.raises(IndexError):
        run.slot_lineage(out, "features", slot=3)
    with pytest.raises(ValueError, match="slot="):
        run.slot_lineage(out, "features")


def test_fit_is_contextual_and_keeps_the_model(spark, df) -> None:  # noqa: ANN001
    with tensprov_lab.track(spark) as run:
        model = Imputer(inputCols=["y"], outputCols=["y_imp"], strategy="median").fit(df)
    (op,) = run.operations
    assert op.method == "Imputer.fit" and op.category == "ml_fit"
    assert op.contextual and op.model is model
    ds = run.store.datasets[op.output]
    assert ds.role == "model" and ds.n_rows == 1 and ds.dtypes == ["ImputerModel"]
    # the one model record is made from every input record
    assert op.tensors is not None
    np.testing.assert_array_equal(op.tensors[0].to_sparse().toarray(), np.ones((1, len(ROWS))))
    assert run.forward(df, rows=[3], to=ds).result.rows[ds.id].tolist() == [0]
    cols = run.dataset(df).columns
    assert op.contributing is not None
    assert [cols[c] for c in np.flatnonzero(op.contributing[0][0])] == ["y"]


def test_a_fit_over_records_that_cannot_be_read_is_opaque(spark, df, monkeypatch) -> None:  # noqa: ANN001
    """A fit's tensor needs its input's records: when an opaque step before it left them
    unreadable, the fit is kept as an opaque operation with its one-record model."""
    from tensprov_lab.capture.recording import _guard
    from tensprov_lab.capture.recording._tracker import TensProvWarning

    real = _guard.annotate_source

    def no_pinning(jvm, plan, pin):  # noqa: ANN001, ANN202 - an opaque output is pinned
        if pin:
            raise RuntimeError("no checkpoint directory")
        return real(jvm, plan, pin)

    def same(batches):  # noqa: ANN001, ANN202
        yield from batches

    monkeypatch.setattr(_guard, "annotate_source", no_pinning)  # (where opaque steps pin)
    with pytest.warns(TensProvWarning, match="cannot be read|no record-level provenance"):
        with tensprov_lab.track(spark) as run:
            mapped = df.mapInPandas(same, schema=df.schema)
            model = Imputer(inputCols=["y"], outputCols=["y_imp"]).fit(mapped)
    mapping, fit = run.operations
    assert mapping.opaque and run.dataset(mapped).n_rows is None
    assert fit.method == "Imputer.fit" and fit.opaque and fit.tensors is None
    assert fit.category == "opaque" and fit.contextual and fit.model is model
    assert any("no record-level provenance" in w for w in fit.warnings)
    ds = run.store.datasets[fit.output]
    assert ds.role == "model" and ds.n_rows == 1


def _fitted(stage: Any, df: Any) -> Any:
    return stage.fit(df) if isinstance(stage, Estimator) else stage


def _vector_input(df: Any) -> Any:
    return VectorAssembler(inputCols=["x", "id"], outputCol="v").transform(df)


STAGES: list[Any] = [
    pytest.param(lambda: StringIndexer(inputCol="cat", outputCol="o"), None, id="StringIndexer"),
    pytest.param(
        lambda: Pipeline(
            stages=[
                StringIndexer(inputCol="cat", outputCol="ci"),
                OneHotEncoder(inputCol="ci", outputCol="o", dropLast=False),
            ]
        ),
        None,
        id="OneHotEncoder",
    ),
    pytest.param(
        lambda: VectorAssembler(inputCols=["x", "id"], outputCol="o"), None, id="Assembler"
    ),
    pytest.param(
        lambda: VectorAssembler(inputCols=["x", "y"], outputCol="o", handleInvalid="skip"),
        None,
        id="Assembler_skip",
    ),
    pytest.param(
        lambda: StandardScaler(inputCol="v", outputCol="o"), _vector_input, id="StandardScaler"
    ),
    pytest.param(lambda: Imputer(inputCol="y", outputCol="o"), None, id="Imputer"),
    pytest.param(
        lambda: Bucketizer(splits=[-1e9, 5.0, 25.0, 1e9], inputCol="x", outputCol="o"),
        None,
        id="Bucketizer",
    ),
    pytest.param(
        lambda: Binarizer(threshold=15.0, inputCol="x", outputCol="o"), None, id="Binarizer"
    ),
    pytest.param(
        lambda: MinMaxScaler(inputCol="v", outputCol="o"), _vector_input, id="MinMaxScaler"
    ),
    pytest.param(
        lambda: SQLTransformer(statement="SELECT *, x * 2 AS o FROM __THIS__ WHERE x > 5"),
        None,
        id="SQLTransformer",
    ),
]


@pytest.mark.parametrize(("make", "prepare"), STAGES)
def test_transform_output_equals_untracked(
    spark, df, make: Callable[[], Any], prepare: Callable[[Any], Any] | None
) -> None:  # noqa: ANN001
    plain_data = prepare(df) if prepare else df
    plain = _fitted(make(), plain_data).transform(plain_data)
    with tensprov_lab.track(spark) as run:
        data = prepare(df) if prepare else df
        tracked = _fitted(make(), data).transform(data)
    assert tracked.schema == plain.schema
    assert _rows(tracked) == _rows(plain)
    last = run.store.producer(run.dataset(tracked).id)
    assert last is not None and not last.opaque, run.warnings
    assert last.method.endswith(".transform") and last.model is not None
    n = run.dataset(tracked).n_rows
    assert n == plain.count()
    # record lineage: each output row comes from one input row
    for r in range(n or 0):
        assert len(run.backward(tracked, rows=[r], to=data)[data]) == 1


def _contributors(run: Any, out: Any, column: str) -> dict[str, list[str]]:
    op = run.store.producer(run.dataset(out).id)
    o = run.dataset(out).columns.index(column)
    names = run.store.datasets[op.inputs[0]].columns
    return {
        "contributing": [names[c] for c in np.flatnonzero(op.contributing[0][o])],
        "influencing": [names[c] for c in np.flatnonzero(op.influencing[0][o])],
    }


def test_attribute_lineage_of_feature_stages(spark, df) -> None:  # noqa: ANN001
    with tensprov_lab.track(spark) as run:
        vec = _vector_input(df)
        imputed = Imputer(inputCols=["y", "x"], outputCols=["y_imp", "x_imp"]).fit(df).transform(df)
        buckets = Bucketizer(splits=[-1e9, 5.0, 25.0, 1e9], inputCol="x", outputCol="xb").transform(
            df
        )
        binary = Binarizer(threshold=15.0, inputCol="x", outputCol="xbin").transform(df)
        scaled = MinMaxScaler(inputCol="v", outputCol="vs").fit(vec).transform(vec)
        sql = SQLTransformer(
            statement="SELECT id, x * 2 AS x2 FROM __THIS__ WHERE y > 1"
        ).transform(df)
    none: list[str] = []
    assert _contributors(run, imputed, "y_imp") == {"contributing": ["y"], "influencing": none}
    assert _contributors(run, imputed, "x_imp") == {"contributing": ["x"], "influencing": none}
    assert _contributors(run, buckets, "xb") == {"contributing": ["x"], "influencing": none}
    assert _contributors(run, binary, "xbin") == {"contributing": ["x"], "influencing": none}
    assert _contributors(run, scaled, "vs") == {"contributing": ["v"], "influencing": none}
    # the SQL statement runs through the SQL capture: the filter's column influences
    cells = run.backward(sql, rows=[0], columns=["x2"])
    assert cells.columns(df) == {"contributing": ["x"], "influencing": ["y"]}
    assert run.store.producer(run.dataset(sql).id).method == "SQLTransformer.transform"

    def slots(out: Any, column: str) -> list[tuple[int, str, str]]:
        op = run.store.producer(run.dataset(out).id)
        return op.slots[column]

    assert [s[:2] for s in slots(imputed, "y_imp")] == [(0, "y")]
    assert [s[:2] for s in slots(buckets, "xb")] == [(0, "x")]
    assert slots(binary, "xbin") == [(0, "x", "x > 15.0")]
    assert [s[:2] for s in slots(scaled, "vs")] == [(0, "v"), (0, "v")]
    # a MinMaxScaler slot leads back through the assembler to its own raw column
    assert run.slot_lineage(scaled, "vs", slot=1)["column"].tolist() == ["vs", "v", "id"]
    assert run.slot_lineage(scaled, "vs", slot=0, row=4)["value"].tolist() == [12.0]


def test_transform_with_params_and_skip(spark, df) -> None:  # noqa: ANN001
    indexer = StringIndexer(inputCol="cat", outputCol="ci").fit(df)
    with tensprov_lab.track(spark) as run:
        renamed = indexer.transform(df, {indexer.outputCol: "renamed"})
        kept = VectorAssembler(inputCols=["x", "y"], outputCol="v", handleInvalid="skip").transform(
            df
        )
    op = run.store.producer(run.dataset(renamed).id)
    assert list(op.slots) == ["renamed"]
    # skipping rows with nulls: a mask of the input rows with a y
    assert [run.backward(kept, rows=[r])[df].tolist() for r in range(4)] == [[0], [2], [3], [4]]


def test_ml_classes_unpatched(spark, df) -> None:  # noqa: ANN001
    before = {cls: dict(vars(cls)) for cls in (Transformer, Estimator)}
    with pytest.raises(RuntimeError, match="boom"):
        with tensprov_lab.track(spark):
            StringIndexer(inputCol="cat", outputCol="ci").fit(df)
            raise RuntimeError("boom")
    assert {cls: dict(vars(cls)) for cls in (Transformer, Estimator)} == before
