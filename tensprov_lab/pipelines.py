"""The German, COMPAS and Census data-preparation pipelines, written as plain PySpark.

These are the three real-world pipelines of the provenance literature (Table VIII of the
TensProv paper), as a data scientist would write them, in two variants:

``"dataframe"``
    DataFrame operations only (select, withColumn + ``F.when``, dropna, drop,
    withColumnRenamed); the one-hot columns are ``withColumn`` calls, one per category
    value. The categories are found by :func:`categories` *before* the pipeline is
    built, so :func:`build` itself is only lazy transformations.
``"ml"``
    The same cleaning with DataFrame operations, then ``pyspark.ml`` StringIndexer,
    OneHotEncoder and VectorAssembler in a :class:`pyspark.ml.Pipeline`, fitted on the
    cleaned data (fitting runs Spark jobs). After the filters it keeps every row: the
    output has the cleaned columns and a ``features`` vector.

:func:`build` does the same whether or not it runs inside ``tensprov_lab.track``.

Examples
--------
>>> from tensprov_lab import datasets, pipelines
>>> raw = datasets.load(spark, "compas")  # doctest: +SKIP
>>> cats = pipelines.categories("compas", raw)  # doctest: +SKIP
>>> with tensprov_lab.track(spark) as run:  # doctest: +SKIP
...     out = pipelines.build("compas", raw, categories=cats)
>>> run.backward(out, rows=[0])  # doctest: +SKIP
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = ["PIPELINES", "VARIANTS", "CATEGORICAL", "build", "categories", "run"]

PIPELINES = ("german", "compas", "census")
VARIANTS = ("dataframe", "ml")

#: the string columns each pipeline one-hot encodes (after its cleaning steps); the
#: published COMPAS pipeline keeps ``sex`` as a string (its ML variant indexes it)
CATEGORICAL: dict[str, tuple[str, ...]] = {
    "german": (
        "checking", "credit_history", "purpose", "savings", "employment", "other_debtors",
        "property", "other_inst", "housing", "job", "status",
    ),
    "compas": (),
    "census": (
        "workclass", "education", "marital-status", "occupation", "relationship", "race",
        "native-country",
    ),
}  # fmt: skip

# readable labels for the German credit codes (UCI Statlog documentation); short enough to
# make one-hot column names such as ``purpose_used_car``
_GERMAN_CODES: dict[str, dict[str, str]] = {
    "checking": {"A11": "negative", "A12": "under_200", "A13": "over_200", "A14": "none"},
    "credit_history": {
        "A30": "none_taken", "A31": "all_paid_here", "A32": "existing_paid",
        "A33": "delayed", "A34": "critical",
    },
    "purpose": {
        "A40": "new_car", "A41": "used_car", "A42": "furniture", "A43": "radio_tv",
        "A44": "appliances", "A45": "repairs", "A46": "education", "A47": "vacation",
        "A48": "retraining", "A49": "business", "A410": "other",
    },
    "savings": {
        "A61": "under_100", "A62": "100_to_500", "A63": "500_to_1000", "A64": "over_1000",
        "A65": "unknown",
    },
    "employment": {
        "A71": "unemployed", "A72": "under_1y", "A73": "1_to_4y", "A74": "4_to_7y",
        "A75": "over_7y",
    },
    "other_debtors": {"A101": "none", "A102": "co_applicant", "A103": "guarantor"},
    "property": {
        "A121": "real_estate", "A122": "savings_insurance", "A123": "car_other",
        "A124": "unknown",
    },
    "other_inst": {"A141": "bank", "A142": "stores", "A143": "none"},
    "housing": {"A151": "rent", "A152": "own", "A153": "free"},
    "job": {
        "A171": "unskilled_nonresident", "A172": "unskilled_resident", "A173": "skilled",
        "A174": "highly_qualified",
    },
}  # fmt: skip

# A92 is "female: divorced/separated/married": the code book does not tell them apart,
# so it counts as divorced (the more frequent reading in the literature's pipeline)
_STATUS = {"A91": "divorced", "A92": "divorced", "A93": "single", "A94": "married", "A95": "single"}
_FEMALE = ("A92", "A95")

_COMPAS_KEEP = (
    "age", "c_charge_degree", "race", "sex", "priors_count", "days_b_screening_arrest",
    "two_year_recid", "c_jail_in", "c_jail_out",
)  # fmt: skip

_CENSUS_STRINGS = (
    "workclass", "education", "marital-status", "occupation", "relationship", "race", "sex",
    "native-country", "label",
)  # fmt: skip

_ML_CATEGORICAL = {**CATEGORICAL, "compas": ("sex",)}

#: numeric columns that go into the ``features`` vector of the ML variant
_ML_NUMERIC: dict[str, tuple[str, ...]] = {
    "german": (
        "duration", "credit_amount", "inst_rate", "residence_time", "age", "num_credits",
        "dependants", "phone", "foreigner", "gender",
    ),
    "compas": (
        "age", "c_charge_degree", "race", "priors_count", "days_b_screening_arrest", "jailtime",
    ),
    "census": ("age", "education-num", "capital-gain", "capital-loss", "hours-per-week", "sex"),
}  # fmt: skip


def _check(name: str, variant: str = "dataframe") -> None:
    if name not in PIPELINES:
        raise ValueError(f"unknown pipeline {name!r}; choose one of {', '.join(PIPELINES)}")
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; choose one of {', '.join(VARIANTS)}")


def _recode(column: str, mapping: Mapping[str, Any]) -> Column:
    """``CASE WHEN column = k THEN v ...``; values outside ``mapping`` stay as they are."""
    from pyspark.sql import functions as F

    (first, value), *rest = mapping.items()
    expr = F.when(F.col(column) == first, F.lit(value))
    for code, value in rest:
        expr = expr.when(F.col(column) == code, F.lit(value))
    return expr.otherwise(F.col(column))


# -- cleaning (everything before the one-hot encoding) -------------------------------------


def _clean_german(df: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    for column, codes in _GERMAN_CODES.items():
        df = df.withColumn(column, _recode(column, codes))
    df = df.withColumn("phone", F.when(F.col("phone") == "A192", 1).otherwise(0))
    df = df.withColumn("foreigner", F.when(F.col("foreigner") == "A201", 1).otherwise(0))
    # label 1 = good credit, 2 = bad: make it a 0/1 target
    df = df.withColumn("label", F.when(F.col("label") == 2, 0).otherwise(F.col("label")))
    df = df.withColumn("status", _recode("personal_status", _STATUS))
    df = df.withColumn("gender", F.when(F.col("personal_status").isin(*_FEMALE), 0).otherwise(1))
    return df.drop("personal_status")


def _clean_compas(df: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    df = df.select(*_COMPAS_KEEP)
    df = df.dropna()
    df = df.withColumn("race", F.when(F.col("race") == "Caucasian", 1).otherwise(0))
    df = df.withColumnRenamed("two_year_recid", "label")
    df = df.withColumn("label", F.when(F.col("label") == 1, 0).otherwise(1))
    # local date-times (no time zone in the file): read them without the session's zone,
    # and floor like a timedelta's .days, so that 23 h in jail is 0 days and -1 h is -1
    # (SQL's timestampdiff: Spark 3.5 has no F.timestamp_diff)
    seconds = F.expr(
        "timestampdiff(SECOND, to_timestamp_ntz(c_jail_in), to_timestamp_ntz(c_jail_out))"
    )
    df = df.withColumn("jailtime", F.floor(seconds / 86400).cast("int"))
    df = df.drop("c_jail_in", "c_jail_out")
    return df.withColumn("c_charge_degree", F.when(F.col("c_charge_degree") == "M", 0).otherwise(1))


def _clean_census(df: DataFrame) -> DataFrame:
    from pyspark.sql import functions as F

    for column in _CENSUS_STRINGS:
        df = df.withColumn(column, F.trim(F.col(column)))
    for column in _CENSUS_STRINGS:
        df = df.withColumn(column, F.when(F.col(column) != "?", F.col(column)))
    return df


_CLEAN = {"german": _clean_german, "compas": _clean_compas, "census": _clean_census}


def _finish_census(df: DataFrame) -> DataFrame:
    """Census steps after the one-hot encoding."""
    from pyspark.sql import functions as F

    df = df.withColumn("sex", F.when(F.col("sex") == "Male", 1).otherwise(0))
    df = df.withColumn("label", F.when(F.col("label") == ">50K", 1).otherwise(0))
    return df.drop("fnlwgt")


# -- public API ----------------------------------------------------------------------------


def categories(name: str, df: DataFrame) -> dict[str, list[str]]:
    """The values the one-hot encoding of a pipeline makes columns for.

    Runs one Spark job over ``df`` (the raw input of the pipeline). Call it before a
    tracked block and pass the result to :func:`build`, so the tracked code is only the
    pipeline; nulls (e.g. census ``?``) get no column.

    Parameters
    ----------
    name : {"german", "compas", "census"}
    df : DataFrame
        The raw table, as :func:`tensprov_lab.datasets.load` gives it.

    Returns
    -------
    dict
        Column → sorted distinct non-null values (after the pipeline's cleaning).

    Examples
    --------
    >>> categories("german", raw)["status"]  # doctest: +SKIP
    ['divorced', 'married', 'single']
    """
    _check(name)
    return _discover(name, df)


def _discover(name: str, df: DataFrame) -> dict[str, list[str]]:
    from pyspark.sql import functions as F

    cleaned = _CLEAN[name](df)
    cols = CATEGORICAL[name]
    if not cols:
        return {}
    row = cleaned.select(*[F.collect_set(F.col(c)).alias(c) for c in cols]).first()
    assert row is not None
    return {c: sorted(row[c]) for c in cols}


def _one_hot(df: DataFrame, cats: Mapping[str, Sequence[str]], columns: Sequence[str]) -> DataFrame:
    from pyspark.sql import functions as F

    for column in columns:
        for value in cats[column]:
            df = df.withColumn(f"{column}_{value}", F.when(F.col(column) == value, 1).otherwise(0))
    return df.drop(*columns)


def _ml(name: str, df: DataFrame) -> DataFrame:
    from pyspark.ml import Pipeline
    from pyspark.ml.feature import OneHotEncoder, StringIndexer, VectorAssembler

    cats = list(_ML_CATEGORICAL[name])
    idx = [f"{c}_idx" for c in cats]
    vec = [f"{c}_vec" for c in cats]
    # "keep" gives nulls (census "?") and unseen values their own index instead of
    # dropping the row or failing: the encoding must not change which rows survive
    indexer = StringIndexer(inputCols=cats, outputCols=idx, handleInvalid="keep")
    encoder = OneHotEncoder(inputCols=idx, outputCols=vec)
    assembler = VectorAssembler(inputCols=[*_ML_NUMERIC[name], *vec], outputCol="features")
    model = Pipeline(stages=[indexer, encoder, assembler]).fit(df)
    return model.transform(df).drop(*idx, *vec)


def build(
    name: str,
    df: DataFrame,
    variant: str = "dataframe",
    categories: Mapping[str, Sequence[str]] | None = None,
) -> DataFrame:
    """Build a pipeline on a raw input DataFrame.

    Parameters
    ----------
    name : {"german", "compas", "census"}
    df : DataFrame
        The raw table (:func:`tensprov_lab.datasets.load`).
    variant : {"dataframe", "ml"}
        DataFrame-only one-hot encoding, or a ``pyspark.ml`` Pipeline (see the module).
    categories : mapping, optional
        For ``"dataframe"``: column → values that get a one-hot column, from
        :func:`categories`. Without it they are computed here, which runs a Spark job;
        pass them to keep the build lazy, and to rebuild on a subset of the rows with the
        same columns. Not used by ``"ml"``.

    Returns
    -------
    DataFrame
        German 1000 rows, COMPAS 6907 × 8 and Census 32,561 rows on the published data.
        The ``"ml"`` variant has the cleaned columns and a ``features`` vector.

    Examples
    --------
    >>> out = build("compas", raw)  # doctest: +SKIP
    >>> out.columns  # doctest: +SKIP
    ['age', 'c_charge_degree', 'race', 'sex', 'priors_count', 'days_b_screening_arrest',
     'label', 'jailtime']
    """
    _check(name, variant)
    cleaned = _CLEAN[name](df)
    if variant == "ml":
        # the assembler needs sex and the label as numbers already
        return _ml(name, _finish_census(cleaned) if name == "census" else cleaned)
    if not CATEGORICAL[name]:
        return cleaned
    cats = categories if categories is not None else _discover(name, df)
    missing = [c for c in CATEGORICAL[name] if c not in cats]
    if missing:
        raise ValueError(f"categories has no values for {', '.join(missing)}")
    out = _one_hot(cleaned, cats, CATEGORICAL[name])
    return _finish_census(out) if name == "census" else out


def run(
    name: str,
    spark: SparkSession,
    path: str | os.PathLike[str] | None = None,
    variant: str = "dataframe",
) -> DataFrame:
    """Load a dataset (:func:`tensprov_lab.datasets.load`) and build its pipeline.

    Examples
    --------
    >>> pipelines.run("census", spark).count()  # doctest: +SKIP
    32561
    """
    from tensprov_lab import datasets

    _check(name, variant)
    raw = datasets.load(spark, name, path=path)
    cats = categories(name, raw) if variant == "dataframe" else None
    return build(name, raw, variant=variant, categories=cats)
