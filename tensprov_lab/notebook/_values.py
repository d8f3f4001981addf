"""Values between Spark records and the widget: JSON-ready cells and tables, and what a
user types into a what-if edit box converted to the column's Spark type."""

from __future__ import annotations

import datetime
import decimal
import math
import re
from typing import Any

import numpy as np

__all__ = ["LISTED_ROWS", "_convert", "_edit_json", "_jsonable", "_short", "_table"]

#: reached row indices listed per dataset (and per column) in the lineage panel, and
#: records shown per what-if table (the counts are exact)
LISTED_ROWS = 100

# -- what-if edits: text typed in the browser -> a value of the column's Spark type ---------
_INT_BITS = {"tinyint": 8, "byte": 8, "smallint": 16, "short": 16, "int": 32, "integer": 32,
             "bigint": 64, "long": 64}  # fmt: skip
_FLOATS = {"double", "float", "real"}
_TRUE = {"true", "t", "yes", "y", "1"}
_FALSE = {"false", "f", "no", "n", "0"}
_DECIMAL = re.compile(r"decimal\((\d+),\s*(\d+)\)")
_EDITABLE = "numbers, booleans, text, dates and timestamps"


def _convert(value: Any, dtype: str, where: str) -> Any:
    """``value`` (text from the browser, or a Python value) as a value of Spark type
    ``dtype`` for ``run.what_if(edit=...)``; a ``ValueError`` saying what to type instead
    when it is not one. ``""`` and None are null; for a column that is not text, so is
    ``"null"``. ``where`` names the cell's column in the message (``orders.amount``).

    Examples
    --------
    >>> _convert("42", "int", "orders.amount"), _convert("", "date", "orders.day")
    (42, None)
    >>> _convert("2024-03-02", "date", "orders.day")
    datetime.date(2024, 3, 2)
    """
    if isinstance(value, np.generic):
        value = value.item()
    t = dtype.strip().lower()
    if value is None or (isinstance(value, str) and value == ""):
        return None
    if isinstance(value, str) and t != "string" and value.strip().lower() in ("null", "none"):
        return None

    def refuse(what: str) -> ValueError:
        return ValueError(
            f"cannot set {where} to {value!r}: the column is {dtype}; type {what}, or "
            "leave the value empty for null"
        )

    if t == "string" or t.startswith(("varchar", "char")):
        return value if isinstance(value, str) else str(value)
    if t in _INT_BITS:
        hint = "a whole number such as 42"
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise refuse(hint)
        if isinstance(value, str):
            text = value.strip().replace("_", "")
            try:
                number = int(text)
            except ValueError:
                try:
                    as_float = float(text)
                except ValueError:
                    raise refuse(hint) from None
                if not as_float.is_integer():
                    raise refuse(hint) from None
                number = int(as_float)
        elif isinstance(value, float):
            if not value.is_integer():
                raise refuse(hint)
            number = int(value)
        else:
            number = value
        bits = _INT_BITS[t]
        lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
        if not lo <= number <= hi:
            raise refuse(f"a whole number from {lo} to {hi}")
        return number
    if t in _FLOATS:
        hint = "a number such as 3.5"
        if isinstance(value, bool) or not isinstance(value, (int, float, str, decimal.Decimal)):
            raise refuse(hint)
        try:
            return float(value.strip() if isinstance(value, str) else value)
        except ValueError:
            raise refuse(hint) from None
    if t == "boolean":
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise refuse("true or false")
    if t == "date":
        hint = "a date as YYYY-MM-DD, such as 2024-03-02"
        if isinstance(value, datetime.datetime):
            return value.date()
        if isinstance(value, datetime.date):
            return value
        try:
            return datetime.date.fromisoformat(str(value).strip())
        except ValueError:
            raise refuse(hint) from None
    if t in ("timestamp", "timestamp_ntz", "timestamp_ltz"):
        hint = "a date and time as YYYY-MM-DD HH:MM:SS, such as 2024-03-02 14:30:00"
        if isinstance(value, datetime.datetime):
            return value
        if isinstance(value, datetime.date):
            return datetime.datetime.combine(value, datetime.time())
        try:
            return datetime.datetime.fromisoformat(str(value).strip())
        except ValueError:
            raise refuse(hint) from None
    m = _DECIMAL.fullmatch(t)
    if m:
        precision, scale = int(m.group(1)), int(m.group(2))
        hint = (
            f"a number with at most {precision - scale} digit(s) before the point and {scale} after"
        )
        if isinstance(value, bool) or not isinstance(value, (int, float, str, decimal.Decimal)):
            raise refuse(hint)
        try:
            dec = decimal.Decimal(value.strip() if isinstance(value, str) else str(value))
        except decimal.InvalidOperation:
            raise refuse(hint) from None
        if not dec.is_finite():
            raise refuse(hint)
        rounded = dec.quantize(decimal.Decimal(1).scaleb(-scale), rounding=decimal.ROUND_HALF_UP)
        if rounded != dec or (rounded != 0 and len(rounded.as_tuple().digits) > precision):
            raise refuse(hint)
        return rounded
    raise ValueError(
        f"cannot edit {where}: the column is {dtype}, and the explorer edits {_EDITABLE} "
        f"only; give the value to run.what_if(edit=...) in Python instead"
    )


def _edit_json(v: Any) -> Any:
    """An edited value as JSON that :func:`_convert` turns back into it (``edited``)."""
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)  # "nan", "inf", "-inf": JSON has no such numbers
    if isinstance(v, datetime.datetime):
        return v.isoformat(sep=" ")
    if isinstance(v, datetime.date):
        return v.isoformat()
    return _jsonable(v)


def _short(exc: BaseException) -> str:
    """An exception in one line: Spark's message without the JVM stack trace."""
    text = str(exc).strip()
    desc = getattr(exc, "desc", None)  # pyspark's CapturedException
    if isinstance(desc, str) and desc.strip():
        text = desc.strip()
    # py4j: "An error occurred while calling o12.x.", then ": <the Java exception>"
    skip = ("at ", "Traceback", "File ", "An error occurred while calling")
    lines = [ln.strip().lstrip(":").strip() for ln in text.splitlines()]
    first = next((ln for ln in lines if ln and not ln.startswith(skip)), "")
    first = first or type(exc).__name__
    return first if len(first) <= 400 else first[:397] + "..."


def _table(df: Any, columns: list[str], *, before: bool = False) -> dict[str, Any]:
    """A what-if table for the front end: ``_row`` and the dataset's columns, at most
    ``LISTED_ROWS`` records (``total`` is exact); with ``before``, the old values of the
    changed cells of each record (the ``"<col> (before)"`` columns of ``WhatIf.changed``)."""
    cols = ["_row", *columns]
    if df is None or not len(df):
        return {"columns": cols, "rows": [], "total": 0, "truncated": False}
    head = df.head(LISTED_ROWS)
    present = [c for c in cols if c in head.columns]
    out: dict[str, Any] = {
        "columns": present,
        "rows": [[_jsonable(v) for v in rec] for rec in head[present].itertuples(index=False)],
        "total": int(len(df)),
        "truncated": len(df) > LISTED_ROWS,
    }
    if before:
        old = [(c, f"{c} (before)") for c in columns if f"{c} (before)" in head.columns]
        out["before"] = [
            {c: _jsonable(rec[b]) for c, b in old if not _missing_before(rec, b)}
            for _, rec in head.iterrows()
        ]
    return out


def _missing_before(rec: Any, col: str) -> bool:
    """Whether a changed record has no old value in ``col``: the column did not change
    (pandas fills the ``(before)`` columns of the records where it did not with NaN)."""
    return col not in rec.index or bool(_missing(rec[col]))


def _jsonable(v: Any) -> Any:
    """A cell value the widget's JSON can carry (NaN/NaT become null, the rest text)."""
    if v is None:
        return None
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return None if math.isnan(float(v)) else float(v)
    if isinstance(v, str):
        return v
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, (list, tuple, np.ndarray)):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    # dates, timestamps and anything else: text, or null for pandas' missing markers
    return None if _missing(v) else str(v)


def _missing(v: Any) -> bool:
    import pandas as pd

    try:
        return bool(pd.isna(v))
    except (TypeError, ValueError):
        return False
