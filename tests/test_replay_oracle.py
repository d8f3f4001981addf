"""Property-based: recomputation and what-if on random pipelines.

The pipelines are those of ``test_capture_oracle``.  For every intermediate dataset,
records recomputed from their lineage alone must equal the records of the fully
evaluated dataset; and a what-if preview (drop or edit source records), applied to the
records before the change, must give exactly the records of the pipeline re-run on the
changed inputs -- or say the dataset cannot be previewed.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tensprov_lab
from tensprov_lab._run import ROW
from tests._examples import spark_examples
from tests._replays import driver_and_job
from tests.oracle import Table, apply
from tests.test_capture_oracle import A_COLS, A_TYPES, B_COLS, B_TYPES, a_rows, b_rows, draw_step
from tests.test_capture_oracle import spark_step as _spark_step

pytestmark = pytest.mark.spark

EXAMPLES = int(os.environ.get("TENSPROV_REPLAY_EXAMPLES", "25"))


def _steps(data: st.DataObject, a: list, b: list, group_last: bool = False) -> list[tuple]:
    """A random pipeline's steps; ``group_last``: a few steps, then a groupBy."""
    t = Table.source("a", A_COLS, A_TYPES, a)
    tb = Table.source("b", B_COLS, B_TYPES, b)
    steps: list[tuple] = []
    prev, used_join = None, False
    n = data.draw(st.integers(1, 6)) if not group_last else data.draw(st.integers(0, 2))
    while len(steps) < n:
        step = draw_step(data, t, prev, used_join)
        if step is None:
            continue
        if step[0] == "dropDuplicates":  # keeps an arbitrary record: not replayable
            continue
        steps.append(step)
        used_join |= step[0] == "join"
        other = tb if step[0] == "join" or "w" in t.cols else Table.source("a", A_COLS, A_TYPES, a)
        t, prev = apply(step, t, other), step
    if group_last:
        others = [c for c in t.cols if t.types[c] == "int"]
        keys = [c for c in t.cols if c not in ("n", "t")]
        c = data.draw(st.sampled_from(keys)) if keys else None
        x = [o for o in others if o != c]
        if c is not None and x:
            steps.append(("groupBy", c, data.draw(st.sampled_from(x))))
    return steps


def _build(spark: Any, steps: list[tuple], a_df: Any, b_df: Any) -> list[Any]:
    frames, df = [], a_df
    for step in steps:
        df = _spark_step(step, df, a_df, b_df)
        frames.append(df)
    return frames


def _tracked(
    spark: Any, a: list, b: list, data: st.DataObject, name: str, group_last: bool = False,
    files: str | None = None,
) -> tuple:  # fmt: skip
    """A random pipeline over sources ``a`` and ``b``, built inside a tracked block:
    (run, steps, its DataFrames, a, b); ``files``: a folder where the sources are
    written as Parquet files, and read from."""
    steps = _steps(data, a, b, group_last)
    if files is None:
        a_df = spark.createDataFrame(a, "k bigint, v bigint, s string")
        b_df = spark.createDataFrame(b, "k bigint, w bigint")
    else:
        a_df, b_df = _parquet_sources(spark, a, b, files)
    with tensprov_lab.track(spark, name=name) as run:
        frames = _build(spark, steps, a_df, b_df)
    return run, steps, frames, a_df, b_df


def _parquet_sources(spark: Any, a: list, b: list, folder: str) -> tuple[Any, Any]:
    """Sources ``a`` and ``b`` written as Parquet files (one each, by pyarrow) in a new
    directory of ``folder``, and read from there."""
    import tempfile

    import pyarrow as pa
    import pyarrow.parquet as pq

    where = tempfile.mkdtemp(dir=folder)
    out = []
    for name, rows, types in (("a", a, A_PA), ("b", b, B_PA)):
        os.makedirs(os.path.join(where, name))
        cols = list(zip(*rows)) if rows else [[] for _ in types]
        table = pa.table(
            {c: pa.array(list(v), type=pa.type_for_alias(t)) for (c, t), v in zip(types, cols)}
        )
        pq.write_table(table, os.path.join(where, name, "part-0.parquet"))
        out.append(spark.read.parquet(os.path.join(where, name)))
    return out[0], out[1]


#: the sources' columns as Parquet types (bigint, bigint, string; bigint, bigint)
A_PA = [("k", "int64"), ("v", "int64"), ("s", "string")]
B_PA = [("k", "int64"), ("w", "int64")]


def _records(pdf: pd.DataFrame, cols: list[str]) -> list[tuple]:
    vals = pdf[cols].astype(object).where(pdf[cols].notna(), None)
    return sorted((tuple(r) for r in vals.itertuples(index=False)), key=repr)


def _settings() -> Any:
    return spark_examples("TENSPROV_REPLAY_EXAMPLES", EXAMPLES)


@_settings()
@given(a=a_rows, b=b_rows, data=st.data())
def test_recomputed_records_equal_full_evaluation(spark, a, b, data) -> None:  # noqa: ANN001
    # every key filter of two or more keys also tests them as a hash set (the path of
    # replays of many records), single keys take the plain IN list
    from tensprov_lab.capture.spark._jvm import Jvm

    before = Jvm.HASHED
    Jvm.HASHED = 2
    try:
        check_recomputed(spark, a, b, data)
    finally:
        Jvm.HASHED = before


@_settings()
@given(a=a_rows, b=b_rows, data=st.data())
def test_what_if_equals_rerun_on_changed_inputs(spark, a, b, data) -> None:  # noqa: ANN001
    check_what_if(spark, a, b, data)


def test_what_if_through_aggregates_equals_rerun(spark) -> None:  # noqa: ANN001
    """Pipelines ending in a groupBy (count, sum): previews updated from the deltas
    (replay._incremental) equal running the pipeline again, and the deltas are used."""
    used: list[str] = []

    @settings(_settings(), max_examples=EXAMPLES * 2)
    @given(a=a_rows, b=b_rows, data=st.data())
    def check(a, b, data) -> None:  # noqa: ANN001
        used.extend(check_what_if(spark, a, b, data, group_last=True))

    check()
    assert used  # the examples took the deltas path, not only the replay


@contextlib.contextmanager
def _large_key_sets() -> Any:
    """Replays of these tiny sources take the paths meant for many records: a key join
    (semi or anti) instead of an IN list, and whole sources minus the dropped or edited
    records once a replay wants half of a source."""
    from tensprov_lab.replay import _frontier

    before = _frontier.IN_LIST, _frontier.WHOLE
    _frontier.IN_LIST, _frontier.WHOLE = 1, 0.5
    try:
        yield
    finally:
        _frontier.IN_LIST, _frontier.WHOLE = before


@settings(_settings(), max_examples=max(EXAMPLES // 2, 1))
@given(a=a_rows, b=b_rows, data=st.data())
def test_replays_reading_sources_whole_or_by_key_join(spark, a, b, data) -> None:  # noqa: ANN001
    check_with_large_key_sets(spark, a, b, data)


def check_with_large_key_sets(spark, a, b, data) -> None:  # noqa: ANN001
    """Recomputation and what-if with the thresholds that read sources whole or join
    them with their keys (see _large_key_sets)."""
    with _large_key_sets():
        check_recomputed(spark, a, b, data)
        check_what_if(spark, a, b, data)


def check_recomputed(spark, a, b, data, files: str | None = None) -> None:  # noqa: ANN001
    """Records recomputed from lineage equal the dataset evaluated in full (``files``:
    with the sources read from Parquet files there)."""
    run, steps, frames, a_df, b_df = _tracked(spark, a, b, data, "replay-prop", files=files)
    for df in frames:
        ds = run.dataset(df)
        if run.store.producer(ds.id).nondeterministic:  # type: ignore[union-attr]
            continue
        everything = run.rows(df)
        n = ds.n_rows or 0
        picks = sorted({0, n // 2, n - 1}) if n else []
        for r in picks:
            got = run.rows(df, rows=[r])
            want = everything[everything[ROW] == r].reset_index(drop=True)
            pd.testing.assert_frame_equal(got, want, check_dtype=False)
        if n > 1:
            got = run.rows(df, rows=picks)
            want = everything[everything[ROW].isin(picks)].reset_index(drop=True)
            pd.testing.assert_frame_equal(got, want, check_dtype=False)
        check_driver_replay(run, df, picks)


def check_driver_replay(run: Any, df: Any, rows: list[int]) -> None:
    """A replay run in the driver gives what the same replay as a Spark job gives,
    values, dtypes and canonical rows alike."""
    import numpy as np

    tracker, ds = run._tracker, run.dataset(df).id
    if not rows or run.store.producer(ds) is None or tracker.jvm is None:
        return  # (no driver replay over Spark Connect: replays there are Connect plans)
    picked = np.array(rows, dtype=np.int64)
    pair = driver_and_job(run, df, picked)
    if pair is None:  # not covered: said so without an error
        assert tracker.jvm.replayer is None or tracker.jvm.replayer.getFailure() == ""
        return
    # the job may read more than asked for (a source read whole), never less
    sides = []
    for frame, idx in pair:
        keep = np.flatnonzero(np.isin(idx, picked))
        sides.append((frame.iloc[keep].reset_index(drop=True), idx[keep].tolist()))
    assert sides[0][1] == sides[1][1] == rows
    # pandas gives an int column with a null among the extra records floats
    exact = len(pair[1][1]) == len(rows)
    pd.testing.assert_frame_equal(sides[0][0], sides[1][0], check_dtype=exact)


def check_what_if(  # noqa: ANN001
    spark, a, b, data, group_last: bool = False, files: str | None = None
) -> list[str]:
    """A what-if preview equals running the pipeline again on the changed inputs;
    returns the datasets previewed from deltas (replay._incremental); ``files``: with
    the sources read from Parquet files there."""
    run, steps, frames, a_df, b_df = _tracked(
        spark, a, b, data, "whatif-prop", group_last, files=files
    )
    if not a:
        return []
    drop = data.draw(st.lists(st.integers(0, len(a) - 1), max_size=2, unique=True))
    edit_row = data.draw(st.integers(0, len(a) - 1))
    column = data.draw(st.sampled_from(["v", "s"]))
    value = data.draw(st.integers(-3, 3) if column == "v" else st.sampled_from(["x", "q"]))
    edit = (
        {} if edit_row in drop or data.draw(st.booleans()) else {a_df: {edit_row: {column: value}}}
    )
    if not drop and not edit:
        return []
    preview = run.what_if(drop={a_df: drop} if drop else None, edit=edit or None)
    changed_a = [list(r) for r in a]
    if edit:
        changed_a[edit_row][["k", "v", "s"].index(column)] = value
    changed_a = [r for i, r in enumerate(changed_a) if i not in set(drop)]
    new_a = spark.createDataFrame([tuple(r) for r in changed_a], a_df.schema)
    again = _build(spark, steps, new_a, b_df)
    for df, df2 in zip(frames, again):
        label = run.dataset(df).label
        cols = df.columns
        rerun = _records(df2.toPandas(), cols)
        if label in preview.not_previewable:
            continue
        before = run.rows(df)
        if label not in preview.removed:  # not reached by the change: unchanged
            assert _records(before, cols) == rerun, label
            continue
        removed = set(preview.removed[label][ROW]) if len(preview.removed[label]) else set()
        changed = preview.changed[label]
        moved = set(changed[ROW]) if len(changed) else set()
        after = [before[~before[ROW].isin(removed | moved)]]
        if len(changed):
            after.append(changed[[ROW, *cols]])
        if len(preview.added[label]):
            after.append(preview.added[label][[ROW, *cols]])
        got = _records(pd.concat(after, ignore_index=True), cols)
        assert got == rerun, (label, steps, drop, edit and (edit_row, column, value))
    # previews that say "cannot" must give a reason
    assert all(isinstance(w, str) and w for w in preview.not_previewable.values())
    return preview.incremental
