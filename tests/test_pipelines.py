"""The German, COMPAS and Census pipelines: published shapes, values, and their lineage.

Shapes and values are checked on the published files (``TENSPROV_DATA``; skipped without
it). Tracking and lineage are checked on whatever :func:`datasets.load` gives (the
published files, else synthetic tables), so they run everywhere.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

import tensprov_lab
from tensprov_lab import datasets, pipelines

pytestmark = pytest.mark.spark

PIPELINES = pipelines.PIPELINES
#: (rows, columns) of the outputs on the published data
SHAPES = {
    ("german", "dataframe"): (1000, 60),
    ("compas", "dataframe"): (6907, 8),
    ("census", "dataframe"): (32561, 104),
    # the cleaned columns and a ``features`` vector
    ("german", "ml"): (1000, 23),
    ("compas", "ml"): (6907, 9),
    ("census", "ml"): (32561, 15),
}
#: columns that identify a source record in the output of the ML variant
KEYS = {
    "german": ["duration", "credit_amount", "age", "inst_rate"],
    "compas": ["age", "priors_count", "days_b_screening_arrest", "sex"],
    "census": ["age", "education-num", "capital-gain", "hours-per-week"],
}


def _real() -> Any:
    folder = datasets.data_dir()
    if folder is None or not all((folder / f"{n}.csv").is_file() for n in PIPELINES):
        pytest.skip("the published datasets are absent: set TENSPROV_DATA to their folder")
    return folder


def _plain(table: pd.DataFrame) -> list[tuple[Any, ...]]:
    """Rows for ``spark.createDataFrame`` with nulls as None (a NaN would stay a NaN)."""
    boxed = table.astype(object)
    return [tuple(None if pd.isna(v) else v for v in row) for row in boxed.itertuples(index=False)]


class Tracked:
    """One pipeline built on the available data, untracked and tracked."""

    def __init__(self, spark: Any, name: str, variant: str) -> None:
        self.name, self.variant = name, variant
        self.raw = datasets.load(spark, name)
        self.cats = pipelines.categories(name, self.raw)
        self.plain = pipelines.build(name, self.raw, variant, categories=self.cats)
        with tensprov_lab.track(spark, name=f"test-{name}-{variant}") as run:
            out = pipelines.build(name, self.raw, variant, categories=self.cats)
        self.run, self.out = run, out
        self._rows: list[Any] | None = None

    @property
    def rows(self) -> list[Any]:
        """The untracked output, collected once."""
        if self._rows is None:
            self._rows = self.plain.collect()
        return self._rows


@pytest.fixture(scope="module")
def tracked(spark: Any) -> Any:
    cache: dict[tuple[str, str], Tracked] = {}

    def get(name: str, variant: str) -> Tracked:
        if (name, variant) not in cache:
            cache[name, variant] = Tracked(spark, name, variant)
        return cache[name, variant]

    return get


def _sample(n: int) -> list[int]:
    picked = np.random.default_rng(7).choice(n, size=3, replace=False)
    return sorted({0, n - 1, *map(int, picked)})


# -- published shapes and values ------------------------------------------------------------


@pytest.mark.parametrize("name,variant", list(SHAPES), ids=[f"{n}-{v}" for n, v in SHAPES])
def test_output_shape_on_published_data(tracked: Any, name: str, variant: str) -> None:
    _real()
    t = tracked(name, variant)
    assert (len(t.rows), len(t.plain.columns)) == SHAPES[name, variant]
    if variant == "ml":
        assert t.plain.columns[-1] == "features"


def test_german_records_are_decoded_and_encoded(tracked: Any) -> None:
    _real()
    rows = tracked("german", "dataframe").rows
    # first record: A11 A34 A43 ... A93 A192 A201, label 1 (good credit)
    first = rows[0].asDict()
    assert first["checking_negative"] == 1 and first["checking_none"] == 0
    assert first["credit_history_critical"] == 1 and first["purpose_radio_tv"] == 1
    assert (first["phone"], first["foreigner"], first["label"]) == (1, 1, 1)
    assert (first["gender"], first["status_single"], first["status_married"]) == (1, 1, 0)
    assert "personal_status" not in first and "checking" not in first
    # second record: A12, female (A92), phone A191, label 2 (bad credit)
    second = rows[1].asDict()
    assert second["checking_under_200"] == 1
    assert (second["gender"], second["status_divorced"]) == (0, 1)
    assert (second["phone"], second["label"]) == (0, 0)
    # exactly one one-hot column per encoded attribute is set in every record
    for column in pipelines.CATEGORICAL["german"]:
        hot = [c for c in first if c.startswith(f"{column}_")]
        assert all(sum(r[c] for c in hot) == 1 for r in rows), column


def test_compas_records_are_recoded(tracked: Any) -> None:
    folder = _real()
    t = tracked("compas", "dataframe")
    out = pd.DataFrame([r.asDict() for r in t.rows])
    assert list(out.columns) == [
        "age", "c_charge_degree", "race", "sex", "priors_count", "days_b_screening_arrest",
        "label", "jailtime",
    ]  # fmt: skip
    # first record: Other race, F charge, 23 h in jail, no recidivism in two years
    assert out.iloc[0][["race", "c_charge_degree", "label", "jailtime"]].tolist() == [0, 1, 1, 0]
    src = pd.read_csv(folder / "compas.csv").dropna(subset=["c_jail_in"])
    days = (pd.to_datetime(src["c_jail_out"]) - pd.to_datetime(src["c_jail_in"])).dt.days
    assert out["jailtime"].tolist() == days.tolist()
    assert (out["jailtime"] == -1).sum() > 0  # released before booked: floor, not truncation
    assert out["race"].sum() == (src["race"] == "Caucasian").sum()
    assert out["label"].sum() == (src["two_year_recid"] == 0).sum()
    assert out["c_charge_degree"].sum() == (src["c_charge_degree"] != "M").sum()


def test_census_records_are_cleaned_and_encoded(tracked: Any) -> None:
    _real()
    t = tracked("census", "dataframe")
    columns = t.plain.columns
    assert "fnlwgt" not in columns and "workclass" not in columns
    assert not [c for c in columns if c.endswith("?") or " " in c]
    first = t.rows[0]
    assert (first["workclass_State-gov"], first["sex"], first["label"]) == (1, 1, 0)
    assert first["native-country_United-States"] == 1
    workclass = [i for i, c in enumerate(columns) if c.startswith("workclass_")]
    # '?' became null and so got no one-hot column: those rows are all zeros
    assert sum(1 for r in t.rows if not any(r[i] for i in workclass)) == 1836
    assert sum(r["label"] for r in t.rows) == 7841  # >50K
    assert sum(r["sex"] for r in t.rows) == 21790  # Male


def test_census_dag_is_readable_rolled_up(tracked: Any) -> None:
    """Census (100+ operations, mostly withColumn) drawn step by step is one line tens of
    thousands of pixels wide; rolled up (the default) it fits a notebook cell, with every
    step still listed in its stage."""
    import re

    _real()
    t = tracked("census", "dataframe")
    width = lambda svg: float(re.search(r'<svg[^>]* width="([\d.]+)"', svg).group(1))  # noqa: E731
    flat, rolled = t.run.to_svg(rollup=False), t.run.to_svg()
    assert len(t.run.operations) > 100
    assert width(flat) > 20_000 and width(rolled) < 1_500, (width(flat), width(rolled))
    from tensprov_lab.notebook._graph_view import build_graph
    from tensprov_lab.notebook._rollup import rollup_chains

    full = build_graph(t.run)
    R = rollup_chains(full)
    steps = [s for _, a in R.nodes(data=True) if a.get("category") == "stage" for s in a["steps"]]
    drawn = [n for n, a in R.nodes(data=True) if a["kind"] == "operation" and n.startswith("o")]
    # every operation is either drawn or a step of a stage, once
    assert sorted(steps + drawn) == sorted(n for n, a in full.nodes(data=True)
                                           if a["kind"] == "operation")  # fmt: skip


def test_categories_are_the_cleaned_values(spark: Any) -> None:
    raw = datasets.load(spark, "census", rows=2000)
    cats = pipelines.categories("census", raw)
    assert list(cats) == list(pipelines.CATEGORICAL["census"])
    assert all(v == v.strip() and v != "?" for values in cats.values() for v in values)
    assert cats["race"] == sorted(cats["race"]) and "White" in cats["race"]
    german = pipelines.categories("german", datasets.load(spark, "german", rows=300))
    assert german["status"] == ["divorced", "married", "single"]
    assert pipelines.categories("compas", datasets.load(spark, "compas", rows=10)) == {}


def test_build_finds_the_categories_itself_when_not_given(spark: Any, tracked: Any) -> None:
    t = tracked("german", "dataframe")
    assert pipelines.build("german", t.raw).columns == t.plain.columns
    with pytest.raises(ValueError, match="status"):
        pipelines.build("german", t.raw, categories={"checking": ["none"]})


def test_run_loads_and_builds(spark: Any, tmp_path: Any) -> None:
    # an empty folder: the synthetic German table, of the published size and shape
    out = pipelines.run("german", spark, path=tmp_path)
    assert (out.count(), len(out.columns)) == SHAPES["german", "dataframe"]


def test_unknown_pipeline_or_variant_is_refused(spark: Any) -> None:
    raw = datasets.load(spark, "german", rows=5)
    with pytest.raises(ValueError, match="german, compas, census"):
        pipelines.build("iris", raw)
    with pytest.raises(ValueError, match="dataframe, ml"):
        pipelines.build("german", raw, variant="sklearn")


# -- tracking and lineage -------------------------------------------------------------------


@pytest.mark.parametrize("variant", pipelines.VARIANTS)
@pytest.mark.parametrize("name", PIPELINES)
def test_tracked_output_equals_untracked(tracked: Any, name: str, variant: str) -> None:
    t = tracked(name, variant)
    assert t.out.columns == t.plain.columns
    assert t.out.collect() == t.rows
    assert t.run.dataset(t.out).n_rows == len(t.rows)
    if variant == "dataframe":
        assert not [op.expression for op in t.run.operations if op.opaque]


@pytest.mark.parametrize("name", PIPELINES)
def test_dataframe_lineage_replays(spark: Any, tracked: Any, name: str) -> None:
    t = tracked(name, "dataframe")
    picked = _sample(t.run.dataset(t.out).n_rows)
    sources = []
    for i in picked:
        reached = t.run.backward(t.out, rows=[i])[t.raw]
        # every output record of these pipelines comes from exactly one raw record
        assert len(reached) == 1, (name, i, reached)
        sources.append(int(reached[0]))
    assert sources == sorted(set(sources))
    # replay on just those raw records (one job for all): the pipelines keep the order
    # of their input, so replayed record k is the one of the k-th sampled output row
    lineage = t.run.backward(t.out, rows=picked)
    source = lineage.to_pandas(t.raw)
    assert source["_row"].tolist() == sources
    sub = spark.createDataFrame(_plain(source.drop(columns="_row")), schema=t.raw.schema)
    replayed = pipelines.build(name, sub, categories=t.cats).collect()
    expected = t.run.rows(t.out, rows=picked).drop(columns="_row")
    assert [list(r) for r in replayed] == expected.values.tolist()
    assert [list(r) for r in replayed] == [list(t.rows[i]) for i in picked]


@pytest.mark.parametrize("name", PIPELINES)
def test_ml_lineage_reaches_the_source_record(tracked: Any, name: str) -> None:
    t = tracked(name, "ml")
    raw = t.raw.toPandas()
    # the ML variant keeps every row that survives the cleaning filters, in order
    survivors = _survivors(name, raw)
    n = t.run.dataset(t.out).n_rows
    assert n == len(survivors)
    picked = _sample(n)
    out = t.run.rows(t.out, rows=picked)
    for j, i in enumerate(picked):
        reached = t.run.backward(t.out, rows=[i])[t.raw]
        assert reached.tolist() == [survivors[i]], (name, i)
        record = raw.iloc[survivors[i]]
        for key in KEYS[name]:
            want = record[key].strip() if isinstance(record[key], str) else record[key]
            assert out.iloc[j][key] == want, (name, i, key)


def _survivors(name: str, raw: pd.DataFrame) -> np.ndarray:
    if name != "compas":
        return np.arange(len(raw))
    kept = raw[list(pipelines._COMPAS_KEEP)]
    return np.flatnonzero(kept.notna().all(axis=1).to_numpy())


def test_compas_dropped_rows_are_the_rows_with_nulls(tracked: Any) -> None:
    t = tracked("compas", "dataframe")
    raw = t.raw.toPandas()
    reaches = np.asarray((t.run.mapping(t.raw, t.out) != 0).sum(axis=0)).ravel()
    dropped = np.flatnonzero(reaches == 0)
    assert dropped.tolist() == np.setdiff1d(np.arange(len(raw)), _survivors("compas", raw)).tolist()
    assert len(dropped) > 0 and reaches.max() == 1
    if datasets.available("compas"):
        assert len(dropped) == 307
    # the record stops at the dropna step
    fwd = t.run.forward(t.raw, rows=[int(dropped[0])], to=t.out)
    assert fwd[t.out].size == 0


def test_census_one_hot_column_comes_from_its_raw_value(tracked: Any) -> None:
    t = tracked("census", "dataframe")
    value = t.cats["race"][0]
    hot = t.run.rows(t.out, where=f"`race_{value}` = 1")["_row"].to_numpy()
    assert len(hot) > 0
    source = t.run.backward(t.out, rows=hot)[t.raw]
    assert len(source) == len(hot)
    races = t.run.rows(t.raw, rows=source)["race"]
    assert set(races) == {f" {value}"}
