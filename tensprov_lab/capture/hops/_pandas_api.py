"""The pandas API on Spark as a front end: which captured DataFrame a pandas-on-Spark
frame is.

A pandas-on-Spark DataFrame (or Series) is a Spark DataFrame, its *spark frame*, plus
the columns that make its index and data.  After most of its calls (filters, merges,
groupings, sorts) those columns are plain columns of the spark frame, which is the
DataFrame capture recorded; after a few (``where``, ``assign``, ``fillna``, ``mask``,
arithmetic) they are expressions over it that pandas-on-Spark applies only with its
next call.  When such a call of the user's returns a frame, :func:`settle` makes the
DataFrame that applies them (``InternalFrame.resolved_copy``, the one pandas-on-Spark
makes for its next call and keeps) while the call is recorded, so the frame's values
are a captured dataset too.  A series of such expressions, or a frame made outside a
block, has no such dataset, and a query says so rather than answer for the frame
below.

Its default index is attached by ``InternalFrame.attach_distributed_sequence_column``:
on pyspark 4 a ``select`` capture sees anyway, on pyspark 3.5 a call into the JVM no
DataFrame method makes, so the call itself is wrapped (:func:`targets`) to link the
indexed frame to the DataFrame it numbers, from the moment that module is imported (a
block's first ``pandas_api()`` imports it).
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["MODULE", "PACKAGE", "calls", "settle", "spark_frame_of", "targets"]

#: where the default index is attached, in the package a block imports itself on
#: first use (``pandas_api()`` does)
MODULE = "pyspark.pandas.internal"
PACKAGE = "pyspark.pandas"

#: how a column that only names a column of its frame is held (classic, Connect)
_PLAIN = {"UnresolvedAttribute", "AttributeReference", "ColumnReference"}


def targets() -> list[tuple[type, list[str], Any]]:
    """The calls wrapped during a block: the default index's, when the pandas API on
    Spark is in use (it is not imported for this: importing it costs a second)."""
    internal = sys.modules.get(MODULE)
    frame = getattr(internal, "InternalFrame", None)
    if frame is None or not hasattr(frame, "attach_distributed_sequence_column"):
        return []
    return [(frame, ["attach_distributed_sequence_column"], None)]


#: operators of pandas-on-Spark frames and series, as the user writes them
_SYMBOLS = {
    "__add__": "+", "__radd__": "+", "__sub__": "-", "__rsub__": "-", "__mul__": "*",
    "__rmul__": "*", "__truediv__": "/", "__rtruediv__": "/", "__floordiv__": "//",
    "__rfloordiv__": "//", "__mod__": "%", "__rmod__": "%", "__pow__": "**",
    "__rpow__": "**", "__neg__": "-", "__abs__": "abs", "__invert__": "~", "__and__": "&",
    "__rand__": "&", "__or__": "|", "__ror__": "|", "__xor__": "^", "__rxor__": "^",
    "__eq__": "==", "__ne__": "!=", "__lt__": "<", "__le__": "<=", "__gt__": ">",
    "__ge__": ">=", "__matmul__": "@", "__getitem__": "[]", "__setitem__": "[]=",
    "__repr__": "repr", "__len__": "len",
}  # fmt: skip
#: prefixes of the calls of an object a call returned (``psdf.groupby("k")`` ...)
_PREFIXES = {
    "GroupBy": "groupby.", "DataFrameGroupBy": "groupby.", "SeriesGroupBy": "groupby.",
    "Rolling": "rolling.", "RollingGroupby": "rolling.", "Expanding": "expanding.",
    "ExpandingGroupby": "expanding.", "ExponentialMoving": "ewm.",
    "ExponentialMovingGroupby": "ewm.",
}  # fmt: skip


def _named(name: str) -> Callable[[tuple], str]:
    return lambda args: name


def _column(prefix: str) -> Callable[[tuple], str]:
    """``psdf.v``: the column a ``__getattr__`` reads."""
    return lambda args: f"{prefix}.{args[1]}" if len(args) > 1 else f"{prefix}getattr"


def _indexer(args: tuple) -> str:
    """``psdf.loc[...]`` / ``psdf.iloc[...]``: one class serves both."""
    return "iloc[]" if type(args[0]).__name__.startswith("iLoc") else "loc[]"


def calls(dataframe: type | None = None) -> list[tuple[Any, str, Callable[[tuple], str]]]:
    """The calls of the pandas API on Spark a user makes, each with how the operations
    it makes are named in the DAG: public methods of frames, series, groupings and
    windows, their operators and indexers, the ``pyspark.pandas`` functions, once the
    pandas API is imported (it is not imported for this: importing it costs a second);
    and ``dataframe.pandas_api`` (a classic or Connect DataFrame class), which may
    import it.

    >>> import pyspark.pandas
    >>> named = {(o.__name__, n): label((None, "v")) for o, n, label in calls()}
    >>> named["GroupBy", "sum"], named["DataFrame", "__getattr__"], named["IndexOpsMixin", "__gt__"]
    ('groupby.sum', '.v', '>')
    >>> named["pyspark.pandas", "merge"]
    'merge'
    >>> calls(object)[0][1:2]
    ('pandas_api',)
    """
    found: list[tuple[Any, str, Callable[[tuple], str]]] = []
    if dataframe is not None:
        found.append((dataframe, "pandas_api", _named("pandas_api")))
    if PACKAGE not in sys.modules or not hasattr(sys.modules[PACKAGE], "merge"):
        return found  # not imported, or still importing
    import pyspark.pandas as ps
    from pyspark.pandas import base, frame, generic, groupby, indexing, namespace, series, window

    owners: list[tuple[type, str]] = [
        (frame.DataFrame, ""), (series.Series, ""), (generic.Frame, ""),
        (base.IndexOpsMixin, ""),
    ]  # fmt: skip
    for kind, prefix in _PREFIXES.items():
        for module in (groupby, window):
            cls = getattr(module, kind, None)
            if isinstance(cls, type) and (cls, prefix) not in owners:
                owners.append((cls, prefix))
    for cls, prefix in owners:
        for name, value in list(cls.__dict__.items()):
            if not inspect.isfunction(value):
                continue
            if name == "__getattr__":
                found.append((cls, name, _column(prefix.rstrip("."))))
            elif name == "__init__" and not prefix:
                found.append((cls, name, _named(cls.__name__)))
            elif name in _SYMBOLS:
                found.append((cls, name, _named(prefix + _SYMBOLS[name])))
            elif not name.startswith("_"):
                found.append((cls, name, _named(prefix + name)))
    for name in ("__getitem__", "__setitem__"):
        if name in indexing.LocIndexerLike.__dict__:
            found.append((indexing.LocIndexerLike, name, _indexer))
    for name in namespace.__all__:
        if inspect.isfunction(getattr(ps, name, None)):
            found.append((ps, name, _named(name)))
    return found


def _plain(column: Any) -> bool:
    """Whether ``column`` only names a column of its frame (renamed or not)."""
    jc = getattr(column, "_jc", None)
    if jc is None:  # Spark Connect
        expr: Any = getattr(column, "_expr", None)
        while type(expr).__name__ == "ColumnAlias":
            expr = expr._child
        return type(expr).__name__ in _PLAIN
    try:
        held = jc.node()  # Spark 4: the column's node
    except Exception:  # noqa: BLE001 - Spark 3.5: its Catalyst expression
        held = jc.expr()
    for _ in range(64):
        kind = str(held.getClass().getSimpleName())
        if kind == "ExpressionColumnNode":  # Spark 4: a Catalyst expression held as is
            held = held.expression()
        elif kind == "Alias":  # a rename (rename, set_index, ...) keeps the values
            held = held.child()
        else:
            return kind in _PLAIN
    return False


def spark_frame_of(ref: Any) -> Any:
    """The Spark DataFrame behind pandas-on-Spark frame ``ref`` (its index and ordering
    columns included); anything else as it is.

    Raises
    ------
    ValueError
        when ``ref``'s last calls are column expressions not applied yet, and no
        DataFrame applying them was made in a block (:func:`settle`).
    """
    if not type(ref).__module__.startswith("pyspark.pandas"):
        # (a Spark DataFrame's attributes are its columns: ``df._internal`` is one)
        return ref
    internal: Any = getattr(ref, "_internal", None)
    frame = getattr(internal, "spark_frame", None)
    if frame is None:
        return ref
    if _pending(internal):
        if _RESOLVED in vars(internal):  # (made by settle, inside the block)
            return internal.resolved_copy.spark_frame
        raise ValueError(
            "this pandas-on-Spark object ends with column expressions (where, assign, "
            "fillna, mask, arithmetic, ...) that pandas-on-Spark applies only with its "
            "next call, and no captured dataset holds its values: make it inside the "
            "tracked block (a Series as a frame: `psser.to_frame()`) and query that"
        )
    return frame


#: where pandas-on-Spark keeps an InternalFrame's resolved copy once made
#: (``pyspark.pandas.utils.lazy_property``)
_RESOLVED = "_lazy_resolved_copy"


def _pending(internal: Any) -> bool:
    """Whether a pandas-on-Spark InternalFrame's columns hold expressions not applied."""
    columns = [*internal.index_spark_columns, *internal.data_spark_columns]
    return not all(_plain(c) for c in columns)


def settle(out: Any) -> None:
    """When ``out``, what a pandas-on-Spark call of the user's returned, is a frame
    whose columns are expressions not applied yet (``where``, ``fillna``, ...), make the
    DataFrame that applies them now, while the call is recorded: pandas-on-Spark keeps
    it and uses it for the frame's next call, so nothing changes but when it is made."""
    kind = type(out)
    if kind.__name__ != "DataFrame" or not kind.__module__.startswith("pyspark.pandas"):
        return
    internal = getattr(out, "_internal", None)
    if internal is not None and _RESOLVED not in vars(internal) and _pending(internal):
        internal.resolved_copy  # noqa: B018 - made for its side effect: the select
