"""The three data-preparation datasets of the provenance literature, real or synthetic.

German credit, COMPAS and Census (UCI Adult) are the inputs of the pipelines in
:mod:`tensprov_lab.pipelines`. :func:`load` reads the published CSV when a data folder
has it (the ``path`` argument or the ``TENSPROV_DATA`` environment variable) and
otherwise makes a synthetic table with the same columns, types, codes and roughly the
same value distributions, so that notebooks run on a fresh machine without downloads.

Examples
--------
>>> from tensprov_lab import datasets
>>> table = datasets.synthetic("german", rows=5)
>>> table.shape
(5, 21)
>>> set(table["checking"]) <= {"A11", "A12", "A13", "A14"}
True
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "NAMES", "ROWS", "COLUMNS", "available", "data_dir", "load", "synthetic", "spark_schema",
]  # fmt: skip

#: datasets known to :func:`load`
NAMES = ("german", "compas", "census")

#: rows of the published files (the default size of a synthetic table)
ROWS = {"german": 1000, "compas": 7214, "census": 32561}

_INT, _DOUBLE, _STR = "int", "double", "string"

_GERMAN = [
    ("checking", _STR), ("duration", _INT), ("credit_history", _STR), ("purpose", _STR),
    ("credit_amount", _INT), ("savings", _STR), ("employment", _STR), ("inst_rate", _INT),
    ("personal_status", _STR), ("other_debtors", _STR), ("residence_time", _INT),
    ("property", _STR), ("age", _INT), ("other_inst", _STR), ("housing", _STR),
    ("num_credits", _INT), ("job", _STR), ("dependants", _INT), ("phone", _STR),
    ("foreigner", _STR), ("label", _INT),
]  # fmt: skip

_COMPAS = [
    ("id", _INT), ("name", _STR), ("first", _STR), ("last", _STR),
    ("compas_screening_date", _STR), ("sex", _STR), ("dob", _STR), ("age", _INT),
    ("age_cat", _STR), ("race", _STR), ("juv_fel_count", _INT), ("decile_score", _INT),
    ("juv_misd_count", _INT), ("juv_other_count", _INT), ("priors_count", _INT),
    ("days_b_screening_arrest", _DOUBLE), ("c_jail_in", _STR), ("c_jail_out", _STR),
    ("c_case_number", _STR), ("c_offense_date", _STR), ("c_arrest_date", _STR),
    ("c_days_from_compas", _DOUBLE), ("c_charge_degree", _STR), ("c_charge_desc", _STR),
    ("is_recid", _INT), ("r_case_number", _STR), ("r_charge_degree", _STR),
    ("r_days_from_arrest", _DOUBLE), ("r_offense_date", _STR), ("r_charge_desc", _STR),
    ("r_jail_in", _STR), ("r_jail_out", _STR), ("violent_recid", _DOUBLE),
    ("is_violent_recid", _INT), ("vr_case_number", _STR), ("vr_charge_degree", _STR),
    ("vr_offense_date", _STR), ("vr_charge_desc", _STR), ("type_of_assessment", _STR),
    ("decile_score.1", _INT), ("score_text", _STR), ("screening_date", _STR),
    ("v_type_of_assessment", _STR), ("v_decile_score", _INT), ("v_score_text", _STR),
    ("v_screening_date", _STR), ("in_custody", _STR), ("out_custody", _STR),
    ("priors_count.1", _INT), ("start", _INT), ("end", _INT), ("event", _INT),
    ("two_year_recid", _INT),
]  # fmt: skip

# the census file's header is 0..14: these are the names its README gives
_CENSUS = [
    ("age", _INT), ("workclass", _STR), ("fnlwgt", _INT), ("education", _STR),
    ("education-num", _INT), ("marital-status", _STR), ("occupation", _STR),
    ("relationship", _STR), ("race", _STR), ("sex", _STR), ("capital-gain", _INT),
    ("capital-loss", _INT), ("hours-per-week", _INT), ("native-country", _STR),
    ("label", _STR),
]  # fmt: skip

_SCHEMAS = {"german": _GERMAN, "compas": _COMPAS, "census": _CENSUS}

#: column names and types (``"int"``, ``"double"`` or ``"string"``) of each dataset
COLUMNS: dict[str, list[tuple[str, str]]] = {k: list(v) for k, v in _SCHEMAS.items()}


def _check(name: str) -> str:
    if name not in NAMES:
        raise ValueError(f"unknown dataset {name!r}; choose one of {', '.join(NAMES)}")
    return name


def data_dir(path: str | os.PathLike[str] | None = None) -> Path | None:
    """The folder holding the published CSV files, if any.

    Parameters
    ----------
    path : str or PathLike, optional
        Use this folder. Without it, the ``TENSPROV_DATA`` environment variable is used.

    Returns
    -------
    pathlib.Path or None
        ``None`` when neither is set (then :func:`load` makes synthetic data).

    Examples
    --------
    >>> data_dir("/data/provenance").name
    'provenance'
    """
    if path is not None:
        return Path(path)
    env = os.environ.get("TENSPROV_DATA")
    return Path(env) if env else None


def available(name: str, path: str | os.PathLike[str] | None = None) -> bool:
    """Whether the published file of a dataset is in the data folder.

    Examples
    --------
    >>> available("german", "/nonexistent")
    False
    """
    folder = data_dir(path)
    return folder is not None and (folder / f"{_check(name)}.csv").is_file()


def spark_schema(name: str) -> Any:
    """The explicit Spark schema (``StructType``) of a dataset.

    Examples
    --------
    >>> spark_schema("census").fieldNames()[:3]  # doctest: +SKIP
    ['age', 'workclass', 'fnlwgt']
    """
    from pyspark.sql import types as T

    kinds = {_INT: T.IntegerType(), _DOUBLE: T.DoubleType(), _STR: T.StringType()}
    return T.StructType([T.StructField(c, kinds[k], True) for c, k in _SCHEMAS[_check(name)]])


def load(
    spark: SparkSession,
    name: str,
    path: str | os.PathLike[str] | None = None,
    synthetic: bool | None = None,
    rows: int | None = None,
) -> DataFrame:
    """A dataset as a Spark DataFrame: the published file, or a synthetic stand-in.

    Parameters
    ----------
    spark : SparkSession
    name : {"german", "compas", "census"}
    path : str or PathLike, optional
        Folder with ``<name>.csv`` (default: :func:`data_dir`).
    synthetic : bool, optional
        ``True``: always synthetic. ``False``: the file must exist. ``None`` (default):
        the file when the folder has it, else synthetic.
    rows : int, optional
        Size of a synthetic table (default: the size of the published file). With the
        real file, only its first ``rows`` records are read.

    Returns
    -------
    pyspark.sql.DataFrame
        Columns and types as in :data:`COLUMNS`; values exactly as in the file
        (the census values keep their leading space and ``?``: the pipeline cleans them).

    Examples
    --------
    >>> german = load(spark, "german")  # doctest: +SKIP
    >>> german.count()  # doctest: +SKIP
    1000
    """
    folder = data_dir(path)
    real = available(name, folder)
    csv = folder / f"{name}.csv" if folder is not None else None
    if synthetic is False and not real:
        where = csv if csv is not None else "(no path given and TENSPROV_DATA is not set)"
        raise FileNotFoundError(f"no {name}.csv at {where}")
    schema = spark_schema(name)
    if real and not synthetic:
        assert csv is not None
        # an explicit schema keeps the types independent of what inference would guess;
        # it also replaces the census header 0..14 by the real names
        df = spark.read.csv(str(csv), header=True, schema=schema, enforceSchema=True)
        return df.limit(rows) if rows is not None else df
    table = _synthetic(name, rows, seed=0)
    return spark.createDataFrame(_records(table), schema=schema)


def _records(table: pd.DataFrame) -> list[tuple[Any, ...]]:
    """Plain Python tuples with ``None`` for missing values.

    Spark keeps a pandas ``NaN`` in a double column as NaN, not as null; the published
    files have nulls there, so missing values are converted first.
    """
    cols = [table[c].to_numpy(dtype=object) for c in table.columns]
    missing = [pd.isna(table[c]).to_numpy() for c in table.columns]
    out = []
    for i in range(len(table)):
        out.append(
            tuple(
                None if m[i] else (v[i].item() if isinstance(v[i], np.generic) else v[i])
                for v, m in zip(cols, missing)
            )
        )
    return out


def synthetic(name: str, rows: int | None = None, seed: int = 0) -> pd.DataFrame:
    """A synthetic table with the schema and codes of a published dataset.

    The values follow the published marginal distributions (and a few obvious
    dependencies, e.g. COMPAS ``score_text`` from ``decile_score``), deterministically
    for a given ``seed``. They are not real people and carry no real correlations.

    Parameters
    ----------
    name : {"german", "compas", "census"}
    rows : int, optional
        Number of records (default: the size of the published file, :data:`ROWS`).
    seed : int
        Seed of the NumPy generator.

    Returns
    -------
    pandas.DataFrame
        Integer columns as int64, double columns as float64 (NaN when missing), string
        columns as object (``None`` when missing), like ``pandas.read_csv`` of the file.

    Examples
    --------
    >>> t = synthetic("compas", rows=200)
    >>> t.shape
    (200, 53)
    >>> bool(t["c_jail_in"].isna().any())
    True
    >>> bool(synthetic("census", rows=3)["sex"].str.startswith(" ").all())
    True
    """
    return _synthetic(_check(name), rows, seed)


def _synthetic(name: str, rows: int | None, seed: int) -> pd.DataFrame:
    n = ROWS[name] if rows is None else int(rows)
    if n < 0:
        raise ValueError("rows must be >= 0")
    rng = np.random.default_rng(seed)
    table = _MAKERS[name](rng, n)
    cols = [c for c, _ in _SCHEMAS[name]]
    table = table[cols]
    for c, kind in _SCHEMAS[name]:
        if kind == _INT:
            table[c] = table[c].astype("int64")
        elif kind == _DOUBLE:
            table[c] = table[c].astype("float64")
        else:
            table[c] = table[c].astype(object).where(table[c].notna(), None)
    return table.reset_index(drop=True)


# -- generators --------------------------------------------------------------------------


def _pick(rng: np.random.Generator, freq: dict[str, float], n: int) -> np.ndarray:
    values = list(freq)
    p = np.array([freq[v] for v in values], dtype=float)
    return np.asarray(values, dtype=object)[rng.choice(len(values), size=n, p=p / p.sum())]


def _ints(rng: np.random.Generator, freq: dict[int, float], n: int) -> np.ndarray:
    values = np.array(list(freq), dtype=np.int64)
    p = np.array(list(freq.values()), dtype=float)
    return values[rng.choice(len(values), size=n, p=p / p.sum())]


def _german(rng: np.random.Generator, n: int) -> pd.DataFrame:
    # marginal frequencies of the published file (rounded)
    dur = np.clip(np.round(rng.lognormal(np.log(18), 0.55, n) / 6) * 6, 4, 72)
    t = {
        "checking": _pick(rng, {"A11": 0.274, "A12": 0.269, "A13": 0.063, "A14": 0.394}, n),
        "duration": dur.astype(np.int64),
        "credit_history": _pick(
            rng, {"A30": 0.04, "A31": 0.049, "A32": 0.53, "A33": 0.088, "A34": 0.293}, n
        ),
        "purpose": _pick(
            rng,
            {
                "A40": 0.234,
                "A41": 0.103,
                "A410": 0.012,
                "A42": 0.181,
                "A43": 0.28,
                "A44": 0.012,
                "A45": 0.022,
                "A46": 0.05,
                "A48": 0.009,
                "A49": 0.097,
            },
            n,
        ),  # fmt: skip
        "credit_amount": np.clip(rng.lognormal(np.log(2320), 0.75, n), 250, 18424).astype(np.int64),
        "savings": _pick(
            rng, {"A61": 0.603, "A62": 0.103, "A63": 0.063, "A64": 0.048, "A65": 0.183}, n
        ),
        "employment": _pick(
            rng, {"A71": 0.062, "A72": 0.172, "A73": 0.339, "A74": 0.174, "A75": 0.253}, n
        ),
        "inst_rate": _ints(rng, {1: 0.136, 2: 0.231, 3: 0.157, 4: 0.476}, n),
        "personal_status": _pick(rng, {"A91": 0.05, "A92": 0.31, "A93": 0.548, "A94": 0.092}, n),
        "other_debtors": _pick(rng, {"A101": 0.907, "A102": 0.041, "A103": 0.052}, n),
        "residence_time": _ints(rng, {1: 0.13, 2: 0.308, 3: 0.149, 4: 0.413}, n),
        "property": _pick(rng, {"A121": 0.282, "A122": 0.232, "A123": 0.332, "A124": 0.154}, n),
        "age": np.clip(19 + rng.gamma(2.0, 8.0, n), 19, 75).astype(np.int64),
        "other_inst": _pick(rng, {"A141": 0.139, "A142": 0.047, "A143": 0.814}, n),
        "housing": _pick(rng, {"A151": 0.179, "A152": 0.713, "A153": 0.108}, n),
        "num_credits": _ints(rng, {1: 0.633, 2: 0.333, 3: 0.028, 4: 0.006}, n),
        "job": _pick(rng, {"A171": 0.022, "A172": 0.2, "A173": 0.63, "A174": 0.148}, n),
        "dependants": _ints(rng, {1: 0.845, 2: 0.155}, n),
        "phone": _pick(rng, {"A191": 0.596, "A192": 0.404}, n),
        "foreigner": _pick(rng, {"A201": 0.963, "A202": 0.037}, n),
        "label": _ints(rng, {1: 0.7, 2: 0.3}, n),
    }
    return pd.DataFrame(t)


_FIRST = ["michael", "james", "john", "robert", "david", "william", "christopher", "anthony",
          "kevin", "brandon", "jessica", "ashley", "jennifer", "maria", "tiffany", "angel",
          "jose", "carlos", "tyrone", "marcus", "darnell", "emily", "sarah", "latoya"]  # fmt: skip
_LAST = ["smith", "johnson", "williams", "brown", "jones", "garcia", "miller", "davis",
         "rodriguez", "martinez", "hernandez", "lopez", "wilson", "anderson", "thomas",
         "jackson", "white", "harris", "martin", "thompson", "moore", "clark", "lewis"]  # fmt: skip
_CHARGES = ["Battery", "Grand Theft in the 3rd Degree", "Driving While License Revoked",
            "Possession of Cocaine", "Driving Under The Influence", "Petit Theft",
            "Resist/Obstruct W/O Violence", "Possess Cannabis/20 Grams Or Less",
            "Aggravated Assault w/Firearm", "Felony Battery w/Prior Convict",
            "Burglary Unoccupied Dwelling", "Operating W/O Valid License"]  # fmt: skip
_DEGREES = {"(M1)": 0.346, "(M2)": 0.319, "(F3)": 0.257, "(F2)": 0.048, "(F1)": 0.015,
            "(MO3)": 0.011, "(F7)": 0.002, "(F6)": 0.001, "(CO3)": 0.001}  # fmt: skip
_VIOLENT_DEGREES = {"(M1)": 0.42, "(F3)": 0.278, "(F2)": 0.198, "(F1)": 0.046, "(M2)": 0.023,
                    "(F7)": 0.022, "(MO3)": 0.006, "(F6)": 0.005}  # fmt: skip


def _days(base: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    return base + offsets.astype("timedelta64[D]")


def _masked(values: np.ndarray, missing: np.ndarray) -> np.ndarray:
    out = np.asarray(values, dtype=object).copy()
    out[missing] = None
    return out


def _fmt_date(d: np.ndarray, missing: np.ndarray | None = None) -> np.ndarray:
    out = np.datetime_as_string(d.astype("datetime64[D]"), unit="D").astype(object)
    if missing is not None:
        out[missing] = None
    return out


def _fmt_time(t: np.ndarray, missing: np.ndarray | None = None) -> np.ndarray:
    s = np.datetime_as_string(t.astype("datetime64[s]"), unit="s").astype(object)
    out = np.array([v.replace("T", " ") for v in s], dtype=object)
    if missing is not None:
        out[missing] = None
    return out


def _case(rng: np.random.Generator, dates: np.ndarray, degree: np.ndarray) -> np.ndarray:
    yy = np.datetime_as_string(dates.astype("datetime64[Y]"), unit="Y")
    num = rng.integers(0, 10**6, len(dates))
    kind = np.where(np.char.startswith(degree.astype(str), "(M"), "MM", "CF")
    return np.array([f"{y[2:]}{k:06d}{c}10A" for y, k, c in zip(yy, num, kind)], dtype=object)


def _compas(rng: np.random.Generator, n: int) -> pd.DataFrame:
    first = _pick(rng, dict.fromkeys(_FIRST, 1.0), n)
    last = _pick(rng, dict.fromkeys(_LAST, 1.0), n)
    screening = np.datetime64("2013-01-01") + rng.integers(0, 730, n).astype("timedelta64[D]")
    age = np.clip(18 + np.round(rng.gamma(1.6, 9.5, n)), 18, 96).astype(np.int64)
    dob = _days(screening, -(age * 365 + rng.integers(0, 365, n)))
    age_cat = np.where(age < 25, "Less than 25", np.where(age > 45, "Greater than 45", "25 - 45"))
    # low scores are the most frequent in the published file
    decile = _ints(rng, dict(zip(range(1, 11), np.linspace(2.0, 0.6, 10))), n)
    v_decile = np.clip(decile + rng.integers(-3, 4, n), 1, 10)
    priors = np.minimum(rng.negative_binomial(1, 0.3, n), 38).astype(np.int64)
    degree = _pick(rng, {"F": 0.647, "M": 0.353}, n)
    # the published file misses the arrest and jail times together (307 of 7214)
    no_jail = rng.random(n) < 307 / 7214
    far = np.where(rng.random(n) < 0.05, 40.0, 0.0)
    days_b = np.where(rng.random(n) < 0.7, -1.0, np.round(rng.normal(0, 3, n)) - far)
    days_b[no_jail] = np.nan
    # booked the day before the screening, at any time of day
    jail_in = (screening - np.timedelta64(1, "D")).astype("datetime64[s]") + rng.integers(
        0, 86400, n
    ).astype("timedelta64[s]")
    stay = np.round(rng.exponential(12 * 86400, n)).astype(np.int64) + 3600
    jail_out = jail_in + stay.astype("timedelta64[s]")
    no_case = rng.random(n) < 22 / 7214
    offense_missing = rng.random(n) < 0.16
    is_recid = (rng.random(n) < 0.48).astype(np.int64)
    r_deg = _pick(rng, _DEGREES, n)
    vr_deg = _pick(rng, _VIOLENT_DEGREES, n)
    r_date = _days(screening, rng.integers(20, 700, n))
    r_jailed = (is_recid == 1) & (rng.random(n) < 0.55)
    violent = (is_recid == 1) & (rng.random(n) < 0.23)
    recid_two = ((is_recid == 1) & (rng.random(n) < 0.94)).astype(np.int64)
    custody_missing = rng.random(n) < 236 / 7214
    in_custody = _days(screening, rng.integers(-30, 300, n))
    end = rng.integers(0, 1187, n)

    def score(d: np.ndarray) -> np.ndarray:
        return np.where(d <= 4, "Low", np.where(d <= 7, "Medium", "High"))

    t: dict[str, Any] = {
        "id": np.cumsum(1 + rng.geometric(0.85, n) - 1).astype(np.int64),
        "name": np.array([f"{a} {b}" for a, b in zip(first, last)], dtype=object),
        "first": first,
        "last": last,
        "compas_screening_date": _fmt_date(screening),
        "sex": _pick(rng, {"Male": 0.807, "Female": 0.193}, n),
        "dob": _fmt_date(dob),
        "age": age,
        "age_cat": age_cat.astype(object),
        "race": _pick(
            rng,
            {
                "African-American": 0.512,
                "Caucasian": 0.34,
                "Hispanic": 0.088,
                "Other": 0.052,
                "Asian": 0.004,
                "Native American": 0.002,
            },
            n,
        ),  # fmt: skip
        "juv_fel_count": np.minimum(rng.poisson(0.07, n), 20),
        "decile_score": decile,
        "juv_misd_count": np.minimum(rng.poisson(0.09, n), 13),
        "juv_other_count": np.minimum(rng.poisson(0.11, n), 17),
        "priors_count": priors,
        "days_b_screening_arrest": days_b,
        "c_jail_in": _fmt_time(jail_in, no_jail),
        "c_jail_out": _fmt_time(jail_out, no_jail),
        "c_case_number": _masked(_case(rng, screening, degree), no_case),
        "c_offense_date": _fmt_date(_days(screening, -rng.integers(0, 3, n)), offense_missing),
        "c_arrest_date": _fmt_date(_days(screening, -rng.integers(1, 60, n)), ~offense_missing),
        "c_days_from_compas": np.where(no_case, np.nan, rng.integers(0, 3, n).astype(float)),
        "c_charge_degree": degree,
        "c_charge_desc": _masked(
            _pick(rng, dict.fromkeys(_CHARGES, 1.0), n), no_case | (rng.random(n) < 0.001)
        ),
        "is_recid": is_recid,
        "r_case_number": _masked(_case(rng, r_date, r_deg), is_recid == 0),
        "r_charge_degree": _masked(r_deg, is_recid == 0),
        "r_days_from_arrest": np.where(r_jailed, rng.integers(-1, 30, n).astype(float), np.nan),
        "r_offense_date": _fmt_date(r_date, is_recid == 0),
        "r_charge_desc": _masked(_pick(rng, dict.fromkeys(_CHARGES, 1.0), n), is_recid == 0),
        "r_jail_in": _fmt_date(r_date, ~r_jailed),
        "r_jail_out": _fmt_date(_days(r_date, rng.integers(0, 20, n)), ~r_jailed),
        "violent_recid": np.full(n, np.nan),
        "is_violent_recid": violent.astype(np.int64),
        "vr_case_number": _masked(_case(rng, r_date, vr_deg), ~violent),
        "vr_charge_degree": _masked(vr_deg, ~violent),
        "vr_offense_date": _fmt_date(r_date, ~violent),
        "vr_charge_desc": _masked(np.full(n, "Battery", dtype=object), ~violent),
        "type_of_assessment": np.full(n, "Risk of Recidivism", dtype=object),
        "decile_score.1": decile,
        "score_text": score(decile).astype(object),
        "screening_date": _fmt_date(screening),
        "v_type_of_assessment": np.full(n, "Risk of Violence", dtype=object),
        "v_decile_score": v_decile,
        "v_score_text": score(v_decile).astype(object),
        "v_screening_date": _fmt_date(screening),
        "in_custody": _fmt_date(in_custody, custody_missing),
        "out_custody": _fmt_date(_days(in_custody, rng.integers(0, 40, n)), custody_missing),
        "priors_count.1": priors,
        "start": rng.integers(0, 10, n),
        "end": end,
        "event": ((recid_two == 1) & (rng.random(n) < 0.85)).astype(np.int64),
        "two_year_recid": recid_two,
    }
    return pd.DataFrame(t)


_WORKCLASS = {"Private": 0.697, "Self-emp-not-inc": 0.078, "Local-gov": 0.0643, "?": 0.0564,
              "State-gov": 0.0399, "Self-emp-inc": 0.0343, "Federal-gov": 0.0295,
              "Without-pay": 0.0004, "Never-worked": 0.0002}  # fmt: skip
_EDUCATION = {"HS-grad": (0.3225, 9), "Some-college": (0.2239, 10), "Bachelors": (0.1645, 13),
              "Masters": (0.0529, 14), "Assoc-voc": (0.0424, 11), "11th": (0.0361, 7),
              "Assoc-acdm": (0.0328, 12), "10th": (0.0287, 6), "7th-8th": (0.0198, 4),
              "Prof-school": (0.0177, 15), "9th": (0.0158, 5), "12th": (0.0133, 8),
              "Doctorate": (0.0127, 16), "5th-6th": (0.0102, 3), "1st-4th": (0.0052, 2),
              "Preschool": (0.0016, 1)}  # fmt: skip
_MARITAL = {"Married-civ-spouse": 0.4599, "Never-married": 0.3281, "Divorced": 0.1365,
            "Separated": 0.0315, "Widowed": 0.0305, "Married-spouse-absent": 0.0128,
            "Married-AF-spouse": 0.0007}  # fmt: skip
_OCCUPATION = {"Prof-specialty": 0.1271, "Craft-repair": 0.1259, "Exec-managerial": 0.1249,
               "Adm-clerical": 0.1158, "Sales": 0.1121, "Other-service": 0.1012,
               "Machine-op-inspct": 0.0615, "Transport-moving": 0.049,
               "Handlers-cleaners": 0.0421, "Farming-fishing": 0.0305, "Tech-support": 0.0285,
               "Protective-serv": 0.0199, "Priv-house-serv": 0.0046,
               "Armed-Forces": 0.0003}  # fmt: skip
_RACE = {"White": 0.8543, "Black": 0.0959, "Asian-Pac-Islander": 0.0319,
         "Amer-Indian-Eskimo": 0.0096, "Other": 0.0083}  # fmt: skip
_COUNTRY = {"United-States": 0.8959, "Mexico": 0.0197, "?": 0.0179, "Philippines": 0.0061,
            "Germany": 0.0042, "Canada": 0.0037, "Puerto-Rico": 0.0035, "El-Salvador": 0.0033,
            "India": 0.0031, "Cuba": 0.0029, "England": 0.0028, "Jamaica": 0.0025,
            "South": 0.0025, "China": 0.0023, "Italy": 0.0022, "Dominican-Republic": 0.0021,
            "Vietnam": 0.0021, "Guatemala": 0.002, "Japan": 0.0019, "Poland": 0.0018,
            "Columbia": 0.0018, "Taiwan": 0.0016, "Haiti": 0.0014, "Iran": 0.0013,
            "Portugal": 0.0011, "Nicaragua": 0.001, "Peru": 0.001, "France": 0.0009,
            "Greece": 0.0009, "Ecuador": 0.0009, "Ireland": 0.0007, "Hong": 0.0006,
            "Trinadad&Tobago": 0.0006, "Cambodia": 0.0006, "Thailand": 0.0006,
            "Laos": 0.0006, "Yugoslavia": 0.0005, "Outlying-US(Guam-USVI-etc)": 0.0004,
            "Honduras": 0.0004, "Hungary": 0.0004, "Scotland": 0.0004,
            "Holand-Netherlands": 0.00003}  # fmt: skip


def _census(rng: np.random.Generator, n: int) -> pd.DataFrame:
    workclass = _pick(rng, _WORKCLASS, n)
    education = _pick(rng, {k: p for k, (p, _) in _EDUCATION.items()}, n)
    edu_num = np.array([_EDUCATION[e][1] for e in education], dtype=np.int64)
    marital = _pick(rng, _MARITAL, n)
    married = np.char.startswith(marital.astype(str), "Married-")
    sex = np.where(rng.random(n) < np.where(married, 0.88, 0.52), "Male", "Female")
    # the relationship has to agree with marital status and sex to look like a census
    spouse = np.where(sex == "Male", "Husband", "Wife")
    single = _pick(
        rng, {"Not-in-family": 0.43, "Own-child": 0.26, "Unmarried": 0.18,
              "Other-relative": 0.05, "Husband": 0.0, "Wife": 0.0}, n,
    )  # fmt: skip
    relationship = np.where(married & (rng.random(n) < 0.92), spouse, single)
    # the published file has no occupation exactly when it has no workclass (+ Never-worked)
    occupation = np.where(
        (workclass == "?") | (workclass == "Never-worked"), "?", _pick(rng, _OCCUPATION, n)
    )
    gain = np.where(rng.random(n) < 0.0833, np.round(rng.lognormal(8.5, 1.0, n)), 0.0)
    gain = np.where((gain > 41310) & (rng.random(n) < 0.9), 99999, np.minimum(gain, 41310))
    loss = np.where(rng.random(n) < 0.0467, np.round(rng.normal(1870, 360, n)), 0.0)
    hours = np.where(rng.random(n) < 0.47, 40, np.round(rng.normal(40, 13, n)))
    rich = rng.random(n) < np.clip(0.05 + 0.03 * (edu_num - 9) + 0.17 * married, 0.01, 0.9)
    t = {
        "age": np.clip(17 + np.round(rng.gamma(2.2, 9.6, n)), 17, 90).astype(np.int64),
        "workclass": workclass,
        "fnlwgt": np.clip(rng.lognormal(np.log(178000), 0.5, n), 12285, 1484705).astype(np.int64),
        "education": education,
        "education-num": edu_num,
        "marital-status": marital,
        "occupation": occupation,
        "relationship": relationship,
        "race": _pick(rng, _RACE, n),
        "sex": sex,
        "capital-gain": gain.astype(np.int64),
        "capital-loss": np.clip(loss, 0, 4356).astype(np.int64),
        "hours-per-week": np.clip(hours, 1, 99).astype(np.int64),
        "native-country": _pick(rng, _COUNTRY, n),
        "label": np.where(rich, ">50K", "<=50K"),
    }
    table = pd.DataFrame(t)
    # the published values all start with a space (the file was written with ", ")
    for c, kind in _CENSUS:
        if kind == _STR:
            table[c] = " " + table[c].astype(str)
    return table


_MAKERS = {"german": _german, "compas": _compas, "census": _census}
