"""SQL statements over Spark Connect: ``spark.sql(...)`` over temporary views of tracked
DataFrames.

A Connect client holds only the statement's text, and the server runs it when it is
made (the DataFrame it returns reads the cached result), so its records cannot be
traced here.  It is an explicit *opaque* operation from the datasets of the views it
reads, with a warning (coarse lineage), and its records are numbered as a source's so
that what follows it is traced.  Which views it reads is what Spark's analyzer says
(the ``View (`name`, ...)`` nodes of the analyzed plan the server explains), matched to
the views the block's DataFrames were registered as (``createOrReplaceTempView`` and
its kin, recorded when called, so a view replaced later still names the DataFrame it
named then).  A statement that reads no such view is a source of the block.

Examples
--------
>>> views_in('''== Analyzed Logical Plan ==
... Join Inner, (k#8 = k#17)
... :- SubqueryAlias ta
... :  +- View (`ta`, [k#8, s#9])
... +- SubqueryAlias global_temp.tb
...    +- View (`global_temp`.`tb`, [k#17, s#18])
... == Optimized Logical Plan ==
... View (`nope`, [x#1])''')
['ta', 'global_temp.tb']
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

__all__ = ["SQL", "VIEW_METHODS", "capture_sql", "record_sql", "sql_inputs", "views_in"]

#: the method name of a SQL statement's operation
SQL = "sql"
#: DataFrame methods that register a view, and whether it is a global one
VIEW_METHODS = {
    "createTempView": False,
    "createOrReplaceTempView": False,
    "createGlobalTempView": True,
    "createOrReplaceGlobalTempView": True,
}
#: a view node of an analyzed plan: its (possibly qualified) name
_VIEW = re.compile(r"View \(((?:`(?:[^`]|``)*`\.?)+),")


def views_in(explained: str) -> list[str]:
    """The views an explained plan's analyzed section reads, by lower-case name
    (``global_temp.`` before a global one), in order of first mention."""
    start = explained.find("== Analyzed Logical Plan ==")
    if start < 0:
        return []
    end = explained.find("== Optimized Logical Plan ==", start)
    section = explained[start : end if end >= 0 else None]
    found: list[str] = []
    for m in _VIEW.finditer(section):
        parts = re.findall(r"`((?:[^`]|``)*)`", m.group(1))
        name = ".".join(p.replace("``", "`") for p in parts).lower()
        if name not in found:
            found.append(name)
    return found


def record_sql(tracker: Any, method: str, obj: Any, args: tuple, kwargs: dict, out: Any) -> bool:
    """Record a view's registration or a ``spark.sql`` statement; False for any other
    method."""
    if method in VIEW_METHODS:
        name = args[0] if args else kwargs.get("name")
        if isinstance(name, str):
            key = name.lower()
            if VIEW_METHODS[method] and not key.startswith("global_temp."):
                key = f"global_temp.{key}"
            tracker.views[key] = tracker.register(obj)
        return True
    if method != SQL:
        return False
    from pyspark.sql.connect.dataframe import DataFrame

    if isinstance(out, DataFrame):
        query = args[0] if args else kwargs.get("sqlQuery", "")
        short = " ".join(str(query).split())
        short = short if len(short) <= 80 else short[:77] + "..."
        tracker.add_pending(SQL, [], out, f"sql({short!r})")
        # the views as they are now: a view replaced later named this DataFrame here
        tracker.pending[-1].views = dict(tracker.views)
    return True


def sql_inputs(tracker: Any, p: Any) -> list[Any]:
    """The nodes of the tracked views a statement reads (empty: none)."""
    views = getattr(p, "views", None) or {}
    if not views:
        return []
    try:
        explained = p.out.df._explain_string(extended=True)
    except Exception:  # noqa: BLE001 - cannot tell: a source
        return []
    found = []
    for name in views_in(explained):
        node = views.get(name)
        if node is not None and node.ds_id is not None and node not in found:
            found.append(node)
    return found


def capture_sql(tracker: Any, p: Any, run: Any, annotator: Any, t0: float) -> None:
    """Capture a SQL statement: an opaque step from the tracked views it reads; with
    none, a source of the block."""
    p.inputs = sql_inputs(tracker, p)
    if not p.inputs:
        tracker._capture_source(p.out, run, annotator)
        return
    cols, types = tracker._schema(p.out)
    inputs = [tracker.store.datasets[n.ds_id] for n in p.inputs if n.ds_id is not None]
    maps = [np.ones((len(cols), len(d.columns)), dtype=np.bool_) for d in inputs]
    names = ", ".join(d.label for d in inputs)
    reason = (
        "sql: a SQL statement, whose plan a Spark Connect client cannot read; its "
        f"lineage from the views it reads ({names}) is kept at dataset level"
    )
    influencing = [m.copy() for m in maps]
    tracker._opaque(p, run, annotator, cols, types, reason, t0, maps, influencing, False)
