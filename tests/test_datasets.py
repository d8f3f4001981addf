"""Loading the German, COMPAS and Census tables: published files and synthetic stand-ins.

The published files are read from ``TENSPROV_DATA`` (CI sets it to ``../shared/datasets``);
tests that need them are skipped when it is not set.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tensprov_lab import datasets

NAMES = datasets.NAMES


def _real_folder() -> Path:
    folder = datasets.data_dir()
    if folder is None or not all((folder / f"{n}.csv").is_file() for n in NAMES):
        pytest.skip("the published datasets are absent: set TENSPROV_DATA to their folder")
    return folder


def _read_real(name: str) -> pd.DataFrame:
    folder = _real_folder()
    if name == "census":
        cols = [c for c, _ in datasets.COLUMNS["census"]]
        return pd.read_csv(folder / "census.csv", header=0, names=cols)
    return pd.read_csv(folder / f"{name}.csv")


# -- no JVM ---------------------------------------------------------------------------------


def test_data_dir_prefers_the_argument_then_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("TENSPROV_DATA", raising=False)
    assert datasets.data_dir() is None
    monkeypatch.setenv("TENSPROV_DATA", str(tmp_path / "env"))
    assert datasets.data_dir() == tmp_path / "env"
    assert datasets.data_dir(tmp_path / "arg") == tmp_path / "arg"
    assert datasets.data_dir(str(tmp_path)) == tmp_path
    assert not datasets.available("german", tmp_path)
    (tmp_path / "german.csv").write_text("checking\n")
    assert datasets.available("german", tmp_path) and not datasets.available("census", tmp_path)


@pytest.mark.parametrize("name", NAMES)
def test_synthetic_is_deterministic_and_seeded(name: str) -> None:
    a = datasets.synthetic(name, rows=300)
    b = datasets.synthetic(name, rows=300)
    other = datasets.synthetic(name, rows=300, seed=1)
    pd.testing.assert_frame_equal(a, b)
    assert not a.equals(other)


@pytest.mark.parametrize("name", NAMES)
def test_synthetic_has_the_published_columns_types_and_size(name: str) -> None:
    table = datasets.synthetic(name)
    assert len(table) == datasets.ROWS[name]
    assert list(table.columns) == [c for c, _ in datasets.COLUMNS[name]]
    expected = {"int": "int64", "double": "float64", "string": "object"}
    assert [str(t) for t in table.dtypes] == [expected[k] for _, k in datasets.COLUMNS[name]]
    assert len(datasets.synthetic(name, rows=7)) == 7


def test_synthetic_compas_misses_jail_times_in_about_four_percent_of_rows() -> None:
    table = datasets.synthetic("compas")
    missing = table["c_jail_in"].isna()
    # the published file misses all three together, 307 of 7214 rows
    assert (missing == table["c_jail_out"].isna()).all()
    assert (missing == table["days_b_screening_arrest"].isna()).all()
    assert 0.03 < missing.mean() < 0.055
    kept = table[["age", "sex", "race", "priors_count", "two_year_recid"]]
    assert kept.notna().all().all()


def test_synthetic_census_values_look_like_the_file() -> None:
    table = datasets.synthetic("census")
    strings = [c for c, k in datasets.COLUMNS["census"] if k == "string"]
    for column in strings:
        assert table[column].str.startswith(" ").all(), column
    assert (table["workclass"] == " ?").mean() == pytest.approx(0.056, abs=0.01)
    assert (table["native-country"] == " ?").any()
    assert set(table["label"]) == {" <=50K", " >50K"}
    # education and its number agree, as in the file
    assert table.groupby("education")["education-num"].nunique().max() == 1


def test_synthetic_german_uses_the_code_book() -> None:
    table = datasets.synthetic("german")
    assert set(table["checking"]) == {"A11", "A12", "A13", "A14"}
    assert set(table["personal_status"]) <= {"A91", "A92", "A93", "A94", "A95"}
    assert set(table["label"]) == {1, 2}
    assert table["age"].between(19, 75).all()


def test_unknown_dataset_is_refused() -> None:
    with pytest.raises(ValueError, match="german, compas, census"):
        datasets.synthetic("iris")


@pytest.mark.parametrize("name", NAMES)
def test_synthetic_values_come_from_the_published_domains(name: str) -> None:
    real = _read_real(name)
    fake = datasets.synthetic(name)
    assert list(fake.columns) == list(real.columns)
    for column, kind in datasets.COLUMNS[name]:
        if kind == "string" and real[column].nunique() <= 50:
            # rare published values may be missing from a synthetic table, never extra ones
            extra = set(fake[column].dropna()) - set(real[column].dropna())
            assert not extra, (column, extra)
        if kind == "int":
            assert np.issubdtype(real[column].dtype, np.integer), column
            lo, hi = real[column].min(), real[column].max()
            assert fake[column].between(lo, hi).all(), column


# -- Spark ----------------------------------------------------------------------------------


@pytest.mark.spark
def test_load_without_data_falls_back_to_synthetic(
    spark, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:  # noqa: ANN001
    monkeypatch.delenv("TENSPROV_DATA", raising=False)
    df = datasets.load(spark, "german", rows=50)
    # Spark's ints come back as int32: compare values, not widths
    got = df.toPandas()
    pd.testing.assert_frame_equal(got, datasets.synthetic("german", rows=50), check_dtype=False)
    # an empty folder is no different from no folder
    assert datasets.load(spark, "compas", path=tmp_path, rows=20).count() == 20
    with pytest.raises(FileNotFoundError, match="compas.csv"):
        datasets.load(spark, "compas", path=tmp_path, synthetic=False)


@pytest.mark.spark
def test_synthetic_nulls_are_nulls_in_spark(spark) -> None:  # noqa: ANN001
    df = datasets.load(spark, "compas", synthetic=True, rows=500)
    table = datasets.synthetic("compas", rows=500)
    # a pandas NaN must not become a Spark NaN: the pipeline's dropna relies on nulls
    assert df.filter("days_b_screening_arrest IS NULL").count() == int(
        table["days_b_screening_arrest"].isna().sum()
    )
    assert df.filter("isnan(days_b_screening_arrest)").count() == 0


@pytest.mark.spark
@pytest.mark.parametrize("name", NAMES)
def test_real_and_synthetic_load_with_the_same_schema(spark, name: str) -> None:  # noqa: ANN001
    folder = _real_folder()
    real = datasets.load(spark, name, path=folder)
    fake = datasets.load(spark, name, path=folder, synthetic=True, rows=100)
    assert real.schema == fake.schema == datasets.spark_schema(name)
    assert real.count() == datasets.ROWS[name]
    assert fake.count() == 100
    assert datasets.load(spark, name, path=folder, rows=10).count() == 10


@pytest.mark.spark
def test_real_values_are_kept_as_in_the_file(spark) -> None:  # noqa: ANN001
    folder = _real_folder()
    first = datasets.load(spark, "census", path=folder).first()
    assert first is not None
    assert (first["age"], first["workclass"], first["fnlwgt"]) == (39, " State-gov", 77516)
    assert first["label"] == " <=50K"
    compas = datasets.load(spark, "compas", path=folder)
    assert compas.filter("c_jail_in IS NULL").count() == 307
    row = compas.first()
    assert row is not None and row["decile_score.1"] == 1 and row["c_arrest_date"] is None
