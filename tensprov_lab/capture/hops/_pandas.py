"""Hops out of Spark inside a tracked block: ``df.toPandas()`` … ``spark.createDataFrame(pdf)``,
and ``df.rdd.map(...)`` … ``.toDF()`` / ``spark.createDataFrame(rdd)``.

The rule of this operation family (record, attribute and replay rule in one place):

- **record**: ``toPandas`` marks the pandas frame it returns with the DataFrame it came
  from (in ``DataFrame.attrs``, which pandas carries through filters, ``assign``,
  ``merge`` with it on the left, copies ...); ``createDataFrame`` of a marked frame
  records ``toPandas/createDataFrame`` from that DataFrame to the new one.  An RDD needs
  no mark: ``createDataFrame`` of an RDD (``rdd.toDF()`` calls it) follows the RDD's
  ``prev`` chain (``map``, ``filter``, ``flatMap``, ``mapPartitions``) back to the
  ``df.rdd`` (a cached property) of a tracked DataFrame and records ``rdd/createDataFrame`` from it.
- **tensors**: the pandas code in between is opaque to capture, and ``toPandas`` gives
  records in Spark's collect order (not the canonical one once a shuffle is involved),
  so records are matched back *by value* (:func:`match_rows`): each record of the new
  DataFrame to the upstream records equal to it on every column both have (a filter, a
  sort, ``assign`` of new columns, a merge with the frame on the left keep them). When
  every record matches, the operation is exact (a record matching several identical
  upstream records lists them all, with a note); when one does not (a value changed in
  pandas), it is an explicit *opaque* operation (DESIGN.md §7) with a warning that says
  what was lost. Either way the new DataFrame is numbered as a source of its own (its
  scan order), so lineage below it is exact.
- **attributes**: a column both have comes from the upstream column of its name; any
  other column may come from every upstream column (a superset).
- **replay**: none (records past the hop are read from the new DataFrame itself), so a
  what-if says a dataset past a hop cannot be previewed (``replay_blocker``).

A ``createDataFrame`` of anything else is an ordinary source (registered at once).
The mark is the one visible trace capture leaves on the user's objects: an entry of the
pandas frame's ``attrs``, which pandas ignores in comparisons, printing and computing.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from tensprov_lab.capture.plan._keys import arrow_keys
from tensprov_lab.capture.plan._nodes import ROW, Capturing, Node, _short_error
from tensprov_lab.capture.plan._pieces import read_whole
from tensprov_lab.capture.rewrite._annotate import annotate_source
from tensprov_lab.capture.spark._versions import cached_rdd, classic_dataframe, rdd_class
from tensprov_lab.store import tensor_from_pairs

__all__ = [
    "MARK",
    "REASON",
    "REPLAY_BLOCKER",
    "capture_hop",
    "hop_lineage",
    "match_rows",
    "properties",
    "record_call",
    "targets",
]

#: the key of ``DataFrame.attrs`` naming the tracked DataFrame a pandas frame came from
MARK = "tensprov_lab.from"


def targets(session_cls: type) -> list[tuple[type, list[str], Any]]:
    """The methods wrapped during a block for this rule."""
    return [(classic_dataframe(), ["toPandas"], None), (session_cls, ["createDataFrame"], None)]


def properties() -> list[tuple[type, str, Any]]:
    """The properties wrapped during a block for this rule: ``(class, name, make)``,
    ``make(tracker, original)`` giving the wrapped descriptor."""
    return [(classic_dataframe(), "rdd", _watch_rdd)]


def _watch_rdd(tracker: Any, original: Any) -> property:
    """``DataFrame.rdd`` (a cached property) during a block: a DataFrame whose RDD the
    user takes is a dataset of the block from then on (a source if it is new), so an RDD
    hop from it links to it even when nothing else in the block reads it."""

    def rdd(df: Any) -> Any:
        cached = cached_rdd(df)
        if cached is not None:
            return cached
        value = original.__get__(df, type(df))  # computes it and caches it on df
        if tracker._active is not None and not tracker._depth:
            try:
                tracker.register(df)
            except Exception as exc:  # recording must never break the user's code
                tracker._note(f"could not record rdd: {_short_error(exc)}")
        return value

    return property(rdd, doc=getattr(original, "__doc__", None))


def record_call(
    tracker: Capturing, method: str, obj: Any, args: tuple, kwargs: dict, out: Any
) -> bool:
    """Record a ``toPandas`` or ``createDataFrame`` call; False for any other method."""
    if method == "toPandas":
        import pandas as pd

        if isinstance(out, pd.DataFrame):
            # the node's identity in this tracker: kept by pandas through most operations
            out.attrs[MARK] = tracker.register(obj).ident
        return True
    if method != "createDataFrame":
        return False
    data = args[0] if args else kwargs.get("data")
    ident = getattr(data, "attrs", {}).get(MARK) if data is not None else None
    upstream: Node | None = tracker.nodes.get(ident) if isinstance(ident, int) else None
    how, reason = "toPandas/createDataFrame", REASON
    if upstream is None and data is not None:
        upstream = _rdd_origin(tracker, data)
        how, reason = "rdd/createDataFrame", RDD_REASON
    if upstream is None:
        # an ordinary source, registered now: a DataFrame made in a block is never "not
        # captured", even when nothing in the block reads it
        tracker.register(out)
        return True
    made = tracker.record_operation(how, [upstream.df], out)
    if made is not None and made.ds_id is None:  # not captured already
        made.opaque_reason = reason
    return True


def _rdd_origin(tracker: Capturing, data: Any) -> Node | None:
    """The tracked DataFrame whose ``df.rdd`` an RDD was made from, or None."""
    RDD = rdd_class()
    if RDD is None:  # pragma: no cover - pyspark without RDDs (Connect only)
        return None
    seen = 0
    rdd = data
    while isinstance(rdd, RDD) and seen < 1000:
        for node in tracker.nodes.values():
            # DataFrame.rdd is cached: the RDD sits in the instance's dict
            if hasattr(node.df, "__dict__") and cached_rdd(node.df) is rdd:
                return node
        rdd, seen = getattr(rdd, "prev", None), seen + 1
    return None


#: why a hop through an RDD is opaque (``{upstream}``: the dataset it came from)
RDD_REASON = (
    "its records went through an RDD (rdd of {upstream}, then createDataFrame or toDF) "
    "and could not be matched back by value, so lineage across the hop is kept at "
    "dataset level, and records are numbered anew after it"
)

#: why a hop through pandas is opaque (``{upstream}``: the dataset it came from)
REASON = (
    "its records went through pandas (toPandas of {upstream}, then createDataFrame) and "
    "could not be matched back by value (values changed in pandas), so lineage across "
    "the hop is kept at dataset level, and records are numbered anew after it"
)


#: the most upstream records matched back by value (the frame was in pandas already,
#: so this is a guard against a second copy of a very large one, not a routine limit)
MATCH_LIMIT = 5_000_000
#: the replay rule of a hop: what the pandas (or RDD) code did cannot be run again on
#: changed records, and the new DataFrame holds the records as they were
REPLAY_BLOCKER = (
    "its records went through code outside Spark (pandas or an RDD), which a what-if "
    "cannot run again on the changed records"
)


def _key(value: Any) -> Any:
    """A nested value (an array, a map's pairs, a struct) as a hashable value that is
    equal exactly when the values are: tuples all the way down."""
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, dict):
        return ("struct", tuple((k, _key(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_key(v) for v in value)
    return value


def _hashable(frame: Any) -> Any:
    """``frame`` with its columns of nested values (arrays, maps, structs: lists,
    arrays or dicts in pandas) turned into tuples that pandas can match on."""
    for col in frame.columns:
        values = frame[col]
        if values.dtype != object:
            continue
        first = next((v for v in values if v is not None), None)
        if isinstance(first, (np.ndarray, list, tuple, dict)):
            frame[col] = [None if v is None else _key(v) for v in values]
    return frame


def match_rows(hop: Any, upstream: Any, columns: list[str]) -> tuple[Any, Any] | None:
    """Match each record of ``hop`` to the ``upstream`` records equal to it on
    ``columns`` (nulls equal nulls): ``(hop rows, upstream rows)`` pairs, by hop row; None
    when a record of ``hop`` matches none.  Both frames are in their canonical order.

    Examples
    --------
    >>> import pandas as pd
    >>> up = pd.DataFrame({"k": [1, 2, 2, 3], "s": ["a", "b", "b", None]})
    >>> hop = pd.DataFrame({"k": [3, 2], "s": [None, "b"], "new": [0.5, 1.5]})
    >>> out, ins = match_rows(hop, up, ["k", "s"])
    >>> out.tolist(), ins.tolist()
    ([0, 1, 1], [3, 1, 2])
    >>> match_rows(pd.DataFrame({"k": [9], "s": ["z"]}), up, ["k", "s"]) is None
    True

    Nested values (arrays, maps as pairs, structs) match by value:

    >>> import numpy as np
    >>> up = pd.DataFrame({"a": [np.array([1, 2]), np.array([3]), None],
    ...                    "m": [[("x", 1)], [("y", 2)], []]})
    >>> hop = pd.DataFrame({"a": [np.array([3])], "m": [[("y", 2)]]})
    >>> [v.tolist() for v in match_rows(hop, up, ["a", "m"])]
    [[0], [1]]
    """
    import numpy as np

    left = _hashable(hop[columns].reset_index(drop=True))
    left.insert(0, "__tp_out", np.arange(len(left), dtype=np.int64))
    right = _hashable(upstream[columns].reset_index(drop=True))
    right.insert(0, "__tp_in", np.arange(len(right), dtype=np.int64))
    merged = left.merge(right, on=columns, how="left", sort=False)
    if bool(merged["__tp_in"].isna().any()):
        return None
    merged = merged.sort_values(["__tp_out", "__tp_in"], kind="stable")
    return (
        merged["__tp_out"].to_numpy(dtype=np.int64),
        merged["__tp_in"].to_numpy(dtype=np.int64),
    )


def capture_hop(
    tracker: Capturing, p: Any, run: Any, cols: list[str], types: list[str], t0: float
) -> bool:
    """A hop through pandas whose records all match upstream records by value
    (:func:`._pandas.match_rows`): recorded exactly, the new DataFrame numbered as a
    source of its own.  False (nothing recorded) when they do not all match."""
    (up,) = p.inputs
    try:
        tracker._index_deferred([up])
        if up.ds_id is None or up.n is None or up.n > MATCH_LIMIT:
            return False
        if not any(c in tracker._dataset(up).columns for c in cols):
            return False
        ann = annotate_source(tracker.jvm, p.out.plan, pin=True)
        ki = tracker._scan_index(ann)
        table = read_whole(tracker.jvm.to_df(ann.plan), tracker.jvm.to_arrow, tracker.jvm.spark)
        names = ann.key_names()
        hop = table.select(list(range(table.num_columns - len(names)))).to_pandas()
        hop.insert(0, ROW, ki.lookup(arrow_keys(table, names)))
        hop = hop.sort_values(ROW, kind="stable").reset_index(drop=True)
        upstream = tracker.records(up.ds_id, None, None)
        n = int(ki.n)
        matched = hop_lineage(
            hop, upstream, cols, tracker._dataset(up).columns, n, up.n, p.expression,
            tracker._label(up),
        )  # fmt: skip
    except Exception as exc:  # noqa: BLE001 - the hop stays opaque, as before
        tracker._note(f"{p.expression}: records not matched back ({_short_error(exc)})")
        return False
    if matched is None:
        return False
    tensor, contributing, exact, notes = matched
    ds = tracker.store.add_dataset(p.out.name, columns=cols, dtypes=types, n_rows=n, run=run.id)
    op = tracker._add_operation(
        ds.id, p.method, "transformation", [up.ds_id], [tensor], expression=p.expression,
        warnings=notes, seconds=time.perf_counter() - t0, run=run.id,
        contributing=[contributing], influencing=[np.zeros_like(contributing)],
        attributes_exact=exact,
        replay_blocker=REPLAY_BLOCKER,
    )  # fmt: skip
    p.out.ann, p.out.ki, p.out.n, p.out.ds_id = ann, ki, n, ds.id
    p.out.pinned = True
    p.out.cacheable = tracker.materialize != "none"
    tracker._recorded(run, p.out, op.id, notes[1:])
    return True


def hop_lineage(
    hop: Any, upstream: Any, cols: list[str], in_cols: list[str], n: int, n_up: int,
    expression: str, label: str,
) -> tuple[Any, np.ndarray, bool, list[str]] | None:  # fmt: skip
    """The lineage of a hop whose ``n`` records (``hop``, in canonical order) all match
    records of ``upstream`` (its ``n_up`` records with their ``ROW``) by the values of
    the columns both have: its tensor, attribute map (``cols`` × ``in_cols``), whether
    that map is exact, and notes (the first says how records were matched); None when
    a record matches none.

    >>> import pandas as pd
    >>> up = pd.DataFrame({ROW: [0, 1, 2], "k": [1, 2, 2]})
    >>> t, maps, exact, notes = hop_lineage(
    ...     pd.DataFrame({"k": [2, 1], "x": [0, 0]}), up, ["k", "x"], ["k"], 2, 3, "hop", "up")
    >>> t.backward([0]).tolist(), maps.tolist(), exact, len(notes)
    ([1, 2], [[True], [True]], False, 2)
    """
    common = [c for c in cols if c in in_cols]
    if not common:
        return None
    matched = match_rows(hop, upstream, common)
    if matched is None:
        return None
    out_rows, in_rows = matched
    tensor = tensor_from_pairs(out_rows, upstream[ROW].to_numpy()[in_rows], n, n_up)
    same = np.array([[c == u for u in in_cols] for c in cols], dtype=bool).reshape(
        len(cols), len(in_cols)
    )
    new: np.ndarray = ~np.asarray(same.any(axis=1), dtype=bool)
    contributing = same | new.reshape(-1, 1)
    notes = [f"{expression}: records matched back to {label} by the values of {', '.join(common)}"]
    if len(out_rows) > n:
        several = np.unique(out_rows[1:][np.diff(out_rows) == 0])
        notes.append(
            f"{expression}: {len(several)} record(s) equal several upstream records; "
            "their lineage lists every one"
        )
    return tensor, contributing, not bool(new.any()), notes
