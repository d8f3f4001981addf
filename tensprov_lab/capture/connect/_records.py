"""Reading the records of a dataset traced over Spark Connect (queries' ``rows``): its
plan run again with its keys, each record numbered by its key index."""

from __future__ import annotations

from typing import Any

import numpy as np

from tensprov_lab.capture.connect._index import KeyIndex, key_array
from tensprov_lab.capture.plan import _proto as P
from tensprov_lab.capture.plan._nodes import ROW, _short_error, result_limit
from tensprov_lab.capture.spark._versions import to_arrow

__all__ = ["keyed_frame", "keyed_records", "read_records"]


def keyed_records(
    table: Any, names: list[str], index: Any, shared: bool = False
) -> tuple[Any, np.ndarray]:
    """The user's columns of an Arrow table of keyed records (a pandas DataFrame) and
    each record's row in the dataset ``index`` numbers (-1: a record it does not know);
    ``shared``: records that share their keys are told apart by their order."""
    raw = key_array(table, names)
    idx = index.occurrences(raw) if shared else index.lookup(raw)
    # by position: a join's output may name two columns alike
    user = [i for i, c in enumerate(table.column_names) if not c.startswith(P.KEY_PREFIX)]
    return table.select(user).to_pandas(), np.asarray(idx, dtype=np.int64)


def keyed_frame(tracker: Any, ds_id: int) -> tuple[Any, list[str], Any]:
    """The DataFrame of ``ds_id``'s plan with its key columns, their names, its node."""
    node = tracker.by_ds.get(ds_id)
    label = tracker.store.datasets[ds_id].label
    if node is None or node.index is None:
        raise LookupError(f"cannot read the records of {label}: it was not traced record "
                          "by record")  # fmt: skip
    annotator = tracker._annotator()
    keyed = annotator.annotate(P.relation(node.df))
    return P.dataframe(tracker.spark, keyed.rel), keyed.keys, node


def read_records(tracker: Any, ds_id: int, rows: np.ndarray | None, where: str | None) -> Any:
    """Records of ``ds_id`` (its plan run again with its keys), with their ``_row``."""
    df, names, node = keyed_frame(tracker, ds_id)
    shared = isinstance(node.index, KeyIndex) and not node.index.unique
    if where is not None:
        if shared:
            raise LookupError(
                f"where= over {tracker.store.datasets[ds_id].label}: its records share "
                "their keys (an explode) and are told apart by their order, which a "
                "predicate changes; read them by rows= instead"
            )
        try:
            df = df.where(where)
            df.schema  # noqa: B018 - analysed now so a bad predicate fails here
        except Exception as exc:
            ds = tracker.store.datasets[ds_id]
            raise ValueError(
                f"where={where!r} is not a valid predicate over {ds.label} "
                f"(columns: {', '.join(ds.columns)}): {_short_error(exc)}"
            ) from None
    try:
        table = to_arrow(df)
    except Exception as exc:
        limit = result_limit(exc)
        if limit is None:
            raise
        ds = tracker.store.datasets[ds_id]
        raise RuntimeError(
            f"the records of {ds.label} asked for are more than the server's "
            f"spark.driver.maxResultSize ({limit}) lets one job return: ask for fewer "
            "(rows=, where=) or start the server with a larger spark.driver.maxResultSize"
        ) from None
    pdf, idx = keyed_records(table, names, node.index, shared)
    pdf.insert(0, ROW, idx)
    if rows is not None:
        pdf = pdf[np.isin(idx, rows)]
    pdf = pdf.sort_values(ROW, kind="stable").reset_index(drop=True)
    op = tracker.store.producer(ds_id)
    pdf.attrs["recomputed"] = op is not None and not op.opaque
    return pdf
