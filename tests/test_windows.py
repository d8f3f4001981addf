"""Window functions: each output record from its frame (capture/rules/window.py).

The expected frames come from a plain-Python model of Spark's window semantics over
the same rows (partition, sort with ties, ROWS and RANGE frames, offsets, ranking), never
from the tensors under test.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tensprov_lab
from tensprov_lab.capture.spark._versions import spark_version
from tensprov_lab.store import FrameTensor, WindowTensor

# -- the tensors alone (no JVM) ---------------------------------------------------------


def _brute(order: list[int], lo: list[int], hi: list[int]) -> np.ndarray:
    n = len(order)
    m = np.zeros((n, n), dtype=bool)
    for p, r in enumerate(order):
        for q in range(lo[p], hi[p]):
            m[r, order[q]] = True
    return m


def test_frame_tensor_matches_its_matrix() -> None:
    rng = np.random.default_rng(3)
    for _ in range(40):
        n = int(rng.integers(1, 30))
        order = rng.permutation(n).tolist()
        # partitions of random sizes, each with a sliding frame [p - a, p + b]
        cuts = sorted(set(rng.integers(0, n, size=3).tolist()) | {0, n})
        lo, hi = [0] * n, [0] * n
        a, b = int(rng.integers(0, 3)), int(rng.integers(-1, 3))
        for s, e in zip(cuts[:-1], cuts[1:]):
            for p in range(s, e):
                lo[p] = min(max(p - a, s), e)
                hi[p] = max(min(p + b + 1, e), lo[p])
        # keep both bounds non-decreasing (an empty frame sits at its partition's start)
        hi = list(np.maximum.accumulate(hi))
        lo = [min(x, h) for x, h in zip(lo, hi)]
        lo = list(np.maximum.accumulate(lo))
        t = FrameTensor(order, lo, hi)
        m = _brute(order, lo, hi)
        assert (t.to_sparse().toarray() == m).all()
        for r in range(n):
            assert t.backward([r]).tolist() == np.flatnonzero(m[r]).tolist()
            assert t.forward([r]).tolist() == np.flatnonzero(m[:, r]).tolist()
        assert t.nnz == int(m.sum())


def _sliding_frames(rng: np.random.Generator, order: np.ndarray, k: int) -> list[FrameTensor]:
    """``k`` random sliding frames ``[p + a, p + b]`` over records in ``order``."""
    n = len(order)
    frames = []
    for _ in range(k):
        a, b = int(rng.integers(-3, 1)), int(rng.integers(-2, 3))
        lo = np.clip(np.arange(n) + a, 0, n)
        hi = np.maximum(np.clip(np.arange(n) + b + 1, 0, n), lo)
        frames.append(FrameTensor(order, lo, np.maximum.accumulate(hi)))
    return frames


def test_window_tensor_counts_its_entries_from_the_bounds() -> None:
    """Exact for frames of one sort order (one window spec); with two orders an upper
    bound that still counts each order's frames exactly."""
    rng = np.random.default_rng(5)
    for _ in range(30):
        n = int(rng.integers(1, 25))
        order = rng.permutation(n)
        frames = _sliding_frames(rng, order, int(rng.integers(1, 4)))
        for own in (True, False):
            t = WindowTensor(n, frames, {}, own=own)
            assert t.nnz == int(t.to_sparse().nnz)
        other = FrameTensor(rng.permutation(n), np.zeros(n, np.int64), np.full(n, n))
        mixed = WindowTensor(n, [*frames, other], {})
        assert mixed.nnz >= int(mixed.to_sparse().nnz) == n * n


def test_window_tensor_columns_and_localized() -> None:
    lag = FrameTensor([0, 1, 2, 3], [0, 0, 1, 2], [0, 1, 2, 3])
    whole = FrameTensor([0, 1, 2, 3], [0, 0, 0, 0], [4, 4, 4, 4])
    t = WindowTensor(4, [lag, whole], {2: [0], 3: [1], 4: [-1, 0]})
    assert t.backward([2]).tolist() == [0, 1, 2, 3]
    assert t.localized().backward([2]).tolist() == [2]
    assert t.for_column(0).backward([2]).tolist() == [2]
    assert t.for_column(2).backward([2]).tolist() == [1]
    assert t.for_column(4).backward([2]).tolist() == [1, 2]
    assert t.for_column(4).forward([1]).tolist() == [1, 2]
    with pytest.raises(ValueError, match="not decrease"):
        FrameTensor([0, 1], [1, 0], [1, 2])
    with pytest.raises(ValueError, match="permutation"):
        FrameTensor([0, 0], [0, 0], [1, 1])


def test_window_tensors_are_saved_and_loaded(tmp_path) -> None:  # noqa: ANN001
    from tensprov_lab.store import Store
    from tensprov_lab.store._persist import read_store, write_store

    lag = FrameTensor([2, 0, 1], [0, 0, 1], [0, 1, 2])
    t = WindowTensor(3, [lag], {1: [0], 2: [-1, 0]})
    s = Store()
    a = s.add_dataset("a", columns=["x"], n_rows=3, role="source")
    b = s.add_dataset("b", columns=["x", "prev", "d"], n_rows=3)
    s.add_operation("withColumn", "window", [a.id], b.id, [t], contextual=True)
    write_store(s, str(tmp_path / "save"), [], [a.id, b.id], list(s.operations))
    back = read_store(str(tmp_path / "save")).store
    (op,) = back.operations.values()
    got = op.tensors[0]
    assert isinstance(got, WindowTensor)
    assert (got.to_sparse().toarray() == t.to_sparse().toarray()).all()
    for c in range(3):
        assert (
            got.for_column(c).to_sparse().toarray() == t.for_column(c).to_sparse().toarray()
        ).all()


def test_window_tensor_keeping_some_records_is_its_rows_of_the_whole(tmp_path) -> None:  # noqa: ANN001
    """A window step that also filters: its matrix is the whole window's matrix
    restricted to the kept records' rows, column views and localized view included."""
    from tensprov_lab.store import MaskTensor, Store
    from tensprov_lab.store._persist import read_store, write_store

    rng = np.random.default_rng(11)
    for trial in range(30):
        n = int(rng.integers(1, 20))
        frames = _sliding_frames(rng, rng.permutation(n), int(rng.integers(1, 3)))
        columns = {1: [0], 2: [-1, *range(len(frames))]}
        rows = np.flatnonzero(rng.random(n) < 0.5)
        whole = WindowTensor(n, frames, columns)
        t = WindowTensor(n, frames, columns, kept=MaskTensor.from_kept(rows, n))
        dense = whole.to_sparse().toarray()[rows]
        assert t.shape == (len(rows), n)
        assert (t.to_sparse().toarray() == dense).all()
        assert t.nnz == int(dense.sum())
        for o in range(len(rows)):
            assert t.backward([o]).tolist() == np.flatnonzero(dense[o]).tolist()
        for j in range(n):
            assert t.forward([j]).tolist() == np.flatnonzero(dense[:, j]).tolist()
        for c in (0, 1, 2):
            want = whole.for_column(c).to_sparse().toarray()[rows]
            assert (t.for_column(c).to_sparse().toarray() == want).all(), (trial, c)
        assert (t.localized().to_sparse().toarray() == np.eye(n, dtype=bool)[rows]).all()
    # saved and loaded with its kept records
    lag = FrameTensor([2, 0, 1], [0, 0, 1], [0, 1, 2])
    t = WindowTensor(3, [lag], {1: [0]}, kept=MaskTensor.from_kept([0, 2], 3))
    s = Store()
    a = s.add_dataset("a", columns=["x"], n_rows=3, role="source")
    b = s.add_dataset("b", columns=["x", "prev"], n_rows=2)
    s.add_operation("withColumn", "window", [a.id], b.id, [t], contextual=True)
    write_store(s, str(tmp_path / "save"), [], [a.id, b.id], list(s.operations))
    (op,) = read_store(str(tmp_path / "save")).store.operations.values()
    got = op.tensors[0]
    assert isinstance(got, WindowTensor) and got.shape == (2, 3)
    assert (got.to_sparse().toarray() == t.to_sparse().toarray()).all()
    with pytest.raises(ValueError, match="kept records"):
        WindowTensor(4, [], {}, kept=MaskTensor.from_kept([0], 3))


# -- capture, against a model of Spark's windows ----------------------------------------

#: (id, partition, order value with ties, amount or None)
ROWS = [
    (0, "a", 3, 1.0), (1, "b", 1, 2.0), (2, "a", 1, None), (3, "a", 3, 4.0),
    (4, "b", 2, 5.0), (5, "a", 2, 6.0), (6, "c", 7, 7.0), (7, "a", 5, 8.0),
    (8, "b", 2, 9.0), (9, "a", 1, 10.0), (10, "b", 9, 11.0),
]  # fmt: skip


def _partitions(order_by: str | None) -> dict[str, list[int]]:
    """Rows of each partition in sort order (ties in input order)."""
    out: dict[str, list[int]] = {}
    for r in ROWS:
        out.setdefault(r[1], []).append(r[0])
    if order_by == "o":
        for k in out:
            out[k].sort(key=lambda i: (ROWS[i][2], i))
    elif order_by == "id":
        for k in out:
            out[k].sort()
    return out


def _rows_frame(order_by: str, a: float, b: float) -> list[set[int]]:
    """ROWS BETWEEN a AND b (inf: unbounded) of every record."""
    frames: list[set[int]] = [set() for _ in ROWS]
    for members in _partitions(order_by).values():
        for p, r in enumerate(members):
            lo = 0 if a == -np.inf else max(p + int(a), 0)
            hi = len(members) if b == np.inf else min(p + int(b) + 1, len(members))
            frames[r] = set(members[lo:hi]) if lo < hi else set()
    return frames


def _range_frame(a: float, b: float) -> list[set[int]]:
    """RANGE BETWEEN a AND b over the order value o (ties are peers)."""
    frames: list[set[int]] = [set() for _ in ROWS]
    for members in _partitions("o").values():
        for r in members:
            v = ROWS[r][2]
            frames[r] = {s for s in members if v + a <= ROWS[s][2] <= v + b}
    return frames


def _whole() -> list[set[int]]:
    frames: list[set[int]] = [set() for _ in ROWS]
    for members in _partitions(None).values():
        for r in members:
            frames[r] = set(members)
    return frames


def _cases() -> list[tuple[str, Callable[[Any, Any], Any], list[set[int]]]]:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    by_id = Window.partitionBy("p").orderBy("id")
    by_o = Window.partitionBy("p").orderBy("o")
    inf = np.inf
    return [
        ("lag", lambda: F.lag("amount").over(by_id), _rows_frame("id", -1, -1)),
        ("lag2", lambda: F.lag("amount", 2).over(by_id), _rows_frame("id", -2, -2)),
        ("lead", lambda: F.lead("amount").over(by_id), _rows_frame("id", 1, 1)),
        (
            "running",
            lambda: F.sum("amount").over(by_id.rowsBetween(Window.unboundedPreceding, 0)),
            _rows_frame("id", -inf, 0),
        ),
        (
            "sliding",
            lambda: F.avg("amount").over(by_id.rowsBetween(-1, 1)),
            _rows_frame("id", -1, 1),
        ),
        # the default frame with an order: RANGE unbounded preceding .. current row (peers)
        ("default", lambda: F.sum("amount").over(by_o), _range_frame(-inf, 0)),
        ("range", lambda: F.max("amount").over(by_o.rangeBetween(-1, 0)), _range_frame(-1, 0)),
        ("ahead", lambda: F.count("amount").over(by_o.rangeBetween(1, 3)), _range_frame(1, 3)),
        ("total", lambda: F.sum("amount").over(Window.partitionBy("p")), _whole()),
        ("row_number", lambda: F.row_number().over(by_o), _whole()),
        ("rank", lambda: F.rank().over(by_o), _whole()),
    ]  # fmt: skip


@pytest.fixture(scope="module")
def frame(spark) -> Any:  # noqa: ANN001
    return spark.createDataFrame(ROWS, "id int, p string, o int, amount double")


@pytest.mark.spark
@pytest.mark.parametrize("case", [
    "lag", "lag2", "lead", "running", "sliding", "default", "range", "ahead", "total",
    "row_number", "rank",
])  # fmt: skip
def test_each_record_comes_from_its_frame(spark, frame, case) -> None:  # noqa: ANN001
    (make, frames) = next((m, f) for name, m, f in _cases() if name == case)
    with tensprov_lab.track(spark, name=f"window-{case}") as run:
        out = frame.withColumn("w", make())
    (op,) = run.operations
    assert op.category == "window" and not op.opaque
    assert isinstance(op.tensors[0], WindowTensor)
    n = len(ROWS)
    for r in range(n):
        want = sorted(frames[r] | {r})
        assert run.backward(out, rows=[r])[frame].tolist() == want, (case, r)
        assert run.backward(out, rows=[r], localized=True)[frame].tolist() == [r]
        # the window column's cells: its frame's amounts (none for a ranking function)
        cells = run.backward(out, rows=[r], columns=["w"])[frame]
        rows_of_amount = sorted(cells["contributing"].get("amount", []))
        if case in ("row_number", "rank"):
            assert rows_of_amount == []
            assert sorted(cells["influencing"].get("o", [])) == sorted(frames[r])
        else:
            assert rows_of_amount == sorted(frames[r]), (case, r)
        # a column the operation keeps comes from its own record only
        kept = run.backward(out, rows=[r], columns=["amount"])[frame]
        assert {k: sorted(v) for k, v in kept["contributing"].items()} == {"amount": [r]}
    m = run.mapping(frame, out).toarray()
    for j in range(n):
        users = sorted({j} | {r for r in range(n) if j in frames[r]})
        assert run.forward(frame, rows=[j], to=out)[out].tolist() == users
        assert np.flatnonzero(m[:, j]).tolist() == users


@pytest.mark.spark
def test_top_one_per_group_comes_from_its_whole_group(spark, frame) -> None:  # noqa: ANN001
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    w = Window.partitionBy("p").orderBy(F.desc("amount"), "id")
    with tensprov_lab.track(spark, name="window-top1") as run:
        ranked = frame.withColumn("rn", F.row_number().over(w))
        top = ranked.filter("rn = 1")
    kept = [r.id for r in top.orderBy("id").collect()]
    groups = _partitions(None)
    for i, rid in enumerate(sorted(kept)):
        members = groups[ROWS[rid][1]]
        assert run.backward(top, rows=[i])[frame].tolist() == sorted(members)
        assert run.backward(top, rows=[i], localized=True)[frame].tolist() == [rid]


@pytest.mark.spark
def test_a_window_filtered_in_the_same_step_keeps_its_frames(spark, frame) -> None:  # noqa: ANN001
    """The quickstart's fix: ``row_number().over(w)``, ``filter("n = 1")`` and ``drop``
    written between two tracked cells reach capture as one step over the earlier run's
    source: each kept record comes from its whole partition, a running sum's cells from
    its frame, with no warning."""
    import warnings

    from pyspark.sql import Window
    from pyspark.sql import functions as F

    with tensprov_lab.track(spark, name="window-step-0"):
        frame.select("id").count()
    latest = Window.partitionBy("p").orderBy(F.desc("amount"), "id")
    running = Window.partitionBy("p").orderBy("id").rowsBetween(Window.unboundedPreceding, 0)
    top = (
        frame.withColumn("n", F.row_number().over(latest))
        .withColumn("s", F.sum("amount").over(running))
        .filter("n = 1")
        .drop("n")
    )
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        with tensprov_lab.track(spark, name="window-step") as run:
            out = top.select("id", "p", "s")
    from tensprov_lab._warn import TensProvWarning

    assert [str(w.message) for w in said if issubclass(w.category, TensProvWarning)] == []
    step = next(op for op in run.operations if op.inputs and op.contextual)
    assert isinstance(step.tensors[0], WindowTensor) and not step.opaque
    kept = sorted(r.id for r in top.collect())
    groups, sums = _partitions(None), _rows_frame("id", -np.inf, 0)
    assert run.rows(out)["id"].tolist() == kept
    for i, rid in enumerate(kept):
        assert run.backward(out, rows=[i])[frame].tolist() == sorted(groups[ROWS[rid][1]])
        assert run.backward(out, rows=[i], localized=True)[frame].tolist() == [rid]
        cells = run.backward(out, rows=[i], columns=["s"])[frame]["contributing"]
        assert sorted(cells["amount"]) == sorted(sums[rid])
    for j in range(len(ROWS)):
        # a record reaches the kept record of its partition (every record has one)
        want = [kept.index(next(r for r in kept if ROWS[r][1] == ROWS[j][1]))]
        assert run.forward(frame, rows=[j], to=out)[out].tolist() == want


@pytest.mark.spark
def test_a_column_computed_from_a_window_comes_from_frame_and_record(spark, frame) -> None:  # noqa: ANN001
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    w = Window.partitionBy("p").orderBy("id")
    with tensprov_lab.track(spark, name="window-diff") as run:
        out = frame.withColumn("d", F.col("amount") - F.lag("amount").over(w))
    prev = _rows_frame("id", -1, -1)
    for r in range(len(ROWS)):
        got = run.backward(out, rows=[r], columns=["d"])[frame]["contributing"]
        assert sorted(got["amount"]) == sorted(prev[r] | {r})


@pytest.mark.spark
def test_frames_do_not_depend_on_partitioning(spark, frame) -> None:  # noqa: ANN001
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    w = Window.partitionBy("p").orderBy("o")
    got = []
    for parts in (1, 3, 7):
        spark.conf.set("spark.sql.shuffle.partitions", str(parts))
        with tensprov_lab.track(spark, name=f"window-parts-{parts}") as run:
            out = frame.repartition(parts).withColumn("s", F.sum("amount").over(w))
        got.append(run.mapping(frame, out).toarray())
    spark.conf.unset("spark.sql.shuffle.partitions")
    assert all((g == got[0]).all() for g in got[1:])


@pytest.mark.spark
@pytest.mark.skipif(spark_version() < (4, 0), reason="Spark 3.5's lag has no ignoreNulls argument")
def test_lag_skipping_nulls_takes_every_earlier_row(spark, frame) -> None:  # noqa: ANN001
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    w = Window.partitionBy("p").orderBy("id")
    with tensprov_lab.track(spark, name="window-ignorenulls") as run:
        out = frame.withColumn("w", F.expr("lag(amount, 1, null, true)").over(w))
    # the row it reads is the last earlier one with an amount: any earlier row may be
    earlier = _rows_frame("id", -np.inf, -1)
    for r in range(len(ROWS)):
        assert run.backward(out, rows=[r])[frame].tolist() == sorted(earlier[r] | {r})
    assert not run.operations[0].opaque
