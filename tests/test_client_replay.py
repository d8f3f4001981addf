"""Replays over Spark Connect run on the client (tensprov_lab.replay._client).

The oracle is Spark itself: the same replay run by the server
(:class:`~tensprov_lab.replay._connect.ConnectReplay`, ``client_replays = False``) and the
pipeline re-run on the changed inputs.  The random pipelines of ``test_replay_oracle``
read their sources from Parquet files (which the client reads) or from local relations
(which it fetches from the server); a spy counts the replays the client answered, so a
test whose replays all went to the server fails.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections import Counter
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tensprov_lab
from tests._connect_session import connect_session
from tests.test_capture_oracle import a_rows, b_rows
from tests.test_replay_oracle import _settings, check_recomputed, check_what_if

pytestmark = [pytest.mark.spark, pytest.mark.connect]

EXAMPLES = int(os.environ.get("TENSPROV_CONNECT_REPLAY_EXAMPLES", "10"))


@pytest.fixture(scope="module")
def connect(spark: Any) -> Iterator[Any]:
    with connect_session() as session:
        yield session


@pytest.fixture(scope="module")
def folder() -> Iterator[str]:
    with tempfile.TemporaryDirectory() as d:
        yield d


@contextlib.contextmanager
def counted() -> Iterator[Counter]:
    """Count the replays the client answered ("client") and left to Spark ("server"),
    and why ("why: ...")."""
    from tensprov_lab.replay import _client
    from tensprov_lab.replay._client_eval import Unsupported

    counts: Counter = Counter()
    originals = {n: getattr(_client.ClientReplay, n) for n in ("_records", "_replayed")}

    def spy(original: Any) -> Any:
        def wrapped(self: Any, *args: Any) -> Any:
            try:
                got = original(self, *args)
            except Unsupported as exc:
                counts["server"] += 1
                counts[f"why: {exc}"] += 1
                if os.environ.get("TP_DEBUG"):
                    print("UNSUPPORTED", exc, args[0], self.store.producer(args[0]).expression)
                raise
            counts["server" if got is None else "client"] += 1
            if got is None and os.environ.get("TP_DEBUG"):
                print("NONE", args[0], self.store.producer(args[0]).expression)
            return got

        return wrapped

    for name, original in originals.items():
        setattr(_client.ClientReplay, name, spy(original))
    try:
        yield counts
    finally:
        for name, original in originals.items():
            setattr(_client.ClientReplay, name, original)


def _on_random_pipelines(folder: str, check_one: Any) -> Counter:
    """Run ``check_one(a, b, data, files)`` on random pipelines whose sources are read
    from their files (``files``) or fetched from the server whole (None); the replays
    the client answered and left to Spark."""
    with counted() as counts:

        @settings(_settings(), max_examples=EXAMPLES)
        @given(a=a_rows, b=b_rows, data=st.data())
        def check(a, b, data) -> None:  # noqa: ANN001
            check_one(a, b, data, folder if data.draw(st.booleans()) else None)

        check()
    return counts


def test_recomputed_records_on_the_client_equal_full_evaluation(connect, folder) -> None:  # noqa: ANN001
    def one(a, b, data, files) -> None:  # noqa: ANN001
        check_recomputed(connect, a, b, data, files=files)

    counts = _on_random_pipelines(folder, one)
    # (windows, explodes and aggregates upstream send many of them to Spark)
    assert counts["client"] > 0, counts


def test_what_if_on_the_client_equals_rerun_on_changed_inputs(connect, folder) -> None:  # noqa: ANN001
    def one(a, b, data, files) -> None:  # noqa: ANN001
        check_what_if(connect, a, b, data, files=files)
        check_what_if(connect, a, b, data, group_last=True, files=files)

    counts = _on_random_pipelines(folder, one)
    assert counts["client"] > 0, counts


# -- handwritten pipelines: the client's evaluation against the server's ---------------------
T1 = pa.table({
    "id": pa.array(range(12), pa.int64()),
    "k": pa.array([1, 2, None, 4, 1, 2, 3, None, 5, 1, 2, 3], pa.int32()),
    "amt": pa.array([0.5, -1.25, 3.0, None, 2.5, 7.0, -0.0, 1e300, 4.0, 2.0, 0.0, 9.5]),
    "s": pa.array(["a", "b", None, "a", "é", "B", "", "c", "a", None, "b", "z"]),
    "big": pa.array([2**31 - 1, 5, -(2**31), 7, 0, 1, 2, 3, 4, 5, 6, None], pa.int32()),
    "day": pa.array([0, 1, None, 19000, -400000, 5, 6, 7, 8, 9, 10, 11], pa.date32()),
})  # fmt: skip
T2 = pa.table({
    "k": pa.array([1, 2, 2, None, 6], pa.int32()),
    "name": pa.array(["one", "two", "deux", "none", "six"]),
    "w": pa.array([10, 20, 30, 40, None], pa.int64()),
})  # fmt: skip
NAN = pa.table({"id": pa.array([0, 1, 2], pa.int64()), "amt": pa.array([1.0, float("nan"), None])})


def _pipelines(t1: Any, t2: Any, nan: Any) -> dict[str, tuple[Any, bool]]:
    """Name -> (DataFrame, whether the client evaluates it)."""
    from pyspark.sql import functions as F

    j = t1.join(t2, "k")
    cond = t1.join(t2, t1.k == t2.k, "left")
    return {
        "filter sql": (t1.filter("amt > 1 AND s IN ('a', 'b')"), True),
        "filter in with null": (t1.where(F.col("s").isin("a", None)), True),
        "arithmetic": (
            t1.select(
                "id",
                (F.col("k") * 2 + F.col("amt") / 4).alias("y"),
                (-F.col("k")).alias("n"),
                (F.col("id") - F.col("k")).alias("d"),
            ),
            True,
        ),  # fmt: skip
        "remainder": (
            t1.select(
                "id",
                (F.col("id") % 5).alias("m"),
                (-F.col("k") % 3).alias("n"),
                (F.col("amt") % 2).alias("f"),
            ),
            True,
        ),  # fmt: skip
        "int overflow": (t1.select("id", (F.col("big") + 1).alias("b1")), False),
        "division by zero": (t1.select("id", (F.col("id") / F.col("amt")).alias("q")), False),
        "nan compared": (nan.filter(F.col("amt") > 0), False),
        "case and coalesce": (
            t1.select(
                "id",
                F.when(F.col("k") > 2, "hi")
                .when(F.col("k") > 1, "mid")
                .otherwise(F.col("s"))
                .alias("c"),
                F.coalesce(F.col("k"), F.lit(-1)).alias("c2"),
            ),
            True,
        ),  # fmt: skip
        "casts": (t1.select("id", F.col("k").cast("bigint"), F.col("k").cast("double")), True),
        "with, renamed, drop": (
            t1.withColumn("k2", F.col("k") + 1).withColumnRenamed("s", "t").drop("amt"),
            True,
        ),
        "toDF": (t1.select("id", "s").toDF("a", "b"), True),
        "dropna": (t1.dropna(subset=["k", "s"]), True),
        "dropna nan": (nan.dropna(), True),
        "fillna": (t1.fillna(0).fillna("?"), True),
        "fillna nan": (nan.fillna(0.5), True),
        "join using": (j.withColumn("z", j.w + j.id), True),
        "join left on condition": (cond.select(t1.id, t2.k.alias("k2"), "name"), True),
        "join right": (t1.join(t2, "k", "right"), True),
        "join full": (t1.join(t2, "k", "full"), True),
        "join semi": (t1.join(t2, "k", "left_semi"), True),
        "join anti": (t1.join(t2, "k", "left_anti"), True),
        "join of expressions": (t1.join(t2, t1.k + 1 == t2.k), False),
        "dates": (t1.select("id", "day").filter(F.col("day").isNotNull()), True),
        "sorted": (t1.orderBy(F.col("amt").desc()).filter(F.col("k") < 3), True),
        "union": (t1.select("k", "s").union(t2.select("w", "name")), True),
        "union by name": (
            t2.select("name", "k").unionByName(t1.select("k", "s").toDF("k", "name")),
            True,
        ),  # fmt: skip
        "union self": (t1.union(t1).filter(F.col("id") > 3), True),
    }


def test_client_evaluation_equals_the_servers(connect, folder) -> None:  # noqa: ANN001
    """Every record of each pipeline recomputed on the client equals the server's replay
    (values, types, canonical rows), and the client evaluates the pipelines it should;
    the ones it should not (an overflow, a division by zero, NaN compared) go to Spark
    with the same answers."""
    paths = {}
    for name, table in (("t1", T1), ("t2", T2), ("nan", NAN)):
        os.makedirs(os.path.join(folder, "hand", name))
        pq.write_table(table, os.path.join(folder, "hand", name, "p.parquet"))
        paths[name] = os.path.join(folder, "hand", name)
    with tensprov_lab.track(connect, name="client-eval") as run:
        t1, t2, nan = (connect.read.parquet(paths[n]) for n in ("t1", "t2", "nan"))
        pipelines = _pipelines(t1, t2, nan)
    tracker = run._tracker
    for name, (df, on_client) in pipelines.items():
        n = run.dataset(df).n_rows or 0
        rows = np.arange(n)
        tracker.client_replays = False
        want = _rows_or_error(run, df, rows)
        tracker.client_replays = True
        with counted() as counts:
            got = _rows_or_error(run, df, rows)
        assert counts["client" if on_client else "server"] == 1, (name, counts)
        if isinstance(want, str):  # Spark's error (ANSI: an overflow), raised either way
            assert got == want, name
            continue
        pd.testing.assert_frame_equal(got, want, obj=name)
        assert got.attrs["recomputed"] == want.attrs["recomputed"]


def _rows_or_error(run: Any, df: Any, rows: np.ndarray) -> Any:
    try:
        return run.rows(df, rows=rows)
    except Exception as exc:  # noqa: BLE001
        return type(exc).__name__


def test_what_if_edits_on_the_client(connect, folder) -> None:  # noqa: ANN001
    """Edits of values (not keys) previewed on the client equal the server's previews."""
    from pyspark.sql import functions as F

    os.makedirs(os.path.join(folder, "edit", "t1"))
    os.makedirs(os.path.join(folder, "edit", "t2"))
    pq.write_table(T1, os.path.join(folder, "edit", "t1", "p.parquet"))
    pq.write_table(T2, os.path.join(folder, "edit", "t2", "p.parquet"))
    with tensprov_lab.track(connect, name="client-edit") as run:
        t1 = connect.read.parquet(os.path.join(folder, "edit", "t1"))
        t2 = connect.read.parquet(os.path.join(folder, "edit", "t2"))
        joined = t1.filter(F.col("id") > 0).join(t2, "k")
        priced = joined.withColumn("y", F.col("amt") * 2)
        total = priced.groupBy("name").agg(F.sum("y").alias("sy"), F.count("*").alias("n"))
    tracker = run._tracker
    change = {"edit": {t1: {1: {"amt": 100.0}, 4: {"amt": None}}}, "drop": {t2: [0]}}
    tracker.client_replays = False
    want = run.what_if(**change, to=[priced, total])
    tracker.client_replays = True
    with counted() as counts:
        got = run.what_if(**change, to=[priced, total])
    assert counts["client"] >= 1, counts
    pd.testing.assert_frame_equal(got.summary(), want.summary())
    for part in ("removed", "changed", "added"):
        for label, frame in getattr(want, part).items():
            pd.testing.assert_frame_equal(getattr(got, part)[label], frame, obj=f"{part} {label}")


def test_a_file_changed_since_capture_is_refused_by_name(connect, folder) -> None:  # noqa: ANN001
    """A source file rewritten after capture: a recomputation or a what-if over it is a
    clear error naming the file, on the client and on the server alike, never other
    records under the captured row numbers; lineage still answers."""
    from pyspark.sql import functions as F

    where = os.path.join(folder, "changed", "t1")
    os.makedirs(where)
    path = os.path.join(where, "p.parquet")
    pq.write_table(T1, path)
    with tensprov_lab.track(connect, name="client-changed") as run:
        t1 = connect.read.parquet(where)
        kept = t1.filter(F.col("id") > 2)
    assert len(run.rows(kept, rows=[0, 1])) == 2
    # the same number of records, other values: only the file's stamp tells
    pq.write_table(T1.set_column(0, "id", pa.array(range(100, 112), pa.int64())), path)
    os.utime(path, ns=(os.stat(path).st_atime_ns, os.stat(path).st_mtime_ns + 10**9))
    for on_client in (True, False):
        run._tracker.client_replays = on_client
        with pytest.raises(ValueError, match="p.parquet changed since capture"):
            run.rows(kept, rows=[0])
        with pytest.raises(ValueError, match="p.parquet changed since capture"):
            run.what_if(drop={t1: [3]}, to=[kept])
    run._tracker.client_replays = True
    assert run.backward(kept, rows=[0])[t1].tolist() == [3]


def test_forgetting_every_run_frees_the_decoded_files(connect, folder) -> None:  # noqa: ANN001
    from pyspark.sql import functions as F

    from tensprov_lab.replay import _client

    where = os.path.join(folder, "forget", "t1")
    os.makedirs(where)
    pq.write_table(T1, os.path.join(where, "p.parquet"))
    with tensprov_lab.track(connect, name="client-forget") as run:
        kept = connect.read.parquet(where).filter(F.col("id") > 2)
    with counted() as counts:
        run.rows(kept, rows=[0])
    assert counts["client"] == 1 and _client._CACHE._tables
    tensprov_lab.forget()
    assert not _client._CACHE._tables


def test_a_source_too_large_to_fetch_is_replayed_by_the_server(connect, monkeypatch) -> None:  # noqa: ANN001
    """A source the client cannot read from files is fetched whole once, when it fits
    in half the cache; else its replays go to the server, with the same records."""
    from pyspark.sql import functions as F

    from tensprov_lab.replay import _client

    rows = [(i, i % 4, f"s{i}") for i in range(200)]
    for budget, where in ((1000, "server"), (_client.CACHE_BYTES, "client")):
        monkeypatch.setattr(_client, "CACHE_BYTES", budget)
        src = connect.createDataFrame(rows, "id bigint, g bigint, s string")
        with tensprov_lab.track(connect, name=f"fetch-{where}") as run:
            odd = src.filter(F.col("id") % 2 == 1).withColumn("h", F.col("g") * 2)
        with counted() as counts:
            got = run.rows(odd, rows=[0, 7])
        assert counts[where] == 1, counts
        assert got["id"].tolist() == [1, 15] and got["h"].tolist() == [2, 6]
        kept = "source, kept in the client for recomputation" if where == "client" else \
            "source, cached for recomputation"  # fmt: skip
        assert run.dataset(src).materialized == kept


def test_a_source_is_fetched_in_pieces_of_every_partition(connect, monkeypatch) -> None:  # noqa: ANN001
    """A fetched source comes in requests of at most a ``PIECE_SHARE`` th of the server's
    memory of each partition's records (the server holds a partition's result whole
    while it sends it), and the pieces make the same records as one request."""
    from pyspark.sql import functions as F

    from tensprov_lab.capture.connect import _arrow
    from tensprov_lab.capture.plan import _pieces

    requests: list[int] = []
    read = _arrow.read_arrow

    def counting(spark: Any, rel: Any) -> Any:
        table = read(spark, rel)
        requests.append(table.num_rows)
        return table

    monkeypatch.setattr(_arrow, "read_arrow", counting)
    monkeypatch.setattr(_pieces, "FEWEST", 1)
    got, whole = {}, 1 << 30
    # 48 bytes a record (key, two bigints, a string): pieces of 30 records per partition
    for piece_bytes in (30 * 48, whole):
        server = (piece_bytes * _pieces.PIECE_SHARE, 1 << 40)
        monkeypatch.setattr(_pieces, "driver_limits", lambda session, server=server: server)
        src = connect.range(0, 300, 1, 3).select(
            "id", (F.col("id") % 4).alias("g"), F.concat(F.lit("s"), "id").alias("s")
        )
        with tensprov_lab.track(connect, name=f"pieces-{piece_bytes}") as run:
            odd = src.filter(F.col("id") % 2 == 1).withColumn("h", F.col("g") * 2)
        requests.clear()
        with counted() as counts:
            got[piece_bytes] = run.rows(odd, rows=list(range(0, 150, 7)))
        assert counts["client"] == 1, counts
        assert sum(requests) == 300, requests  # every record once
        if piece_bytes < whole:  # 100 records a partition, 30 a piece
            assert len(requests) == 4 and max(requests) == 3 * 30, requests
        else:
            assert len(requests) == 1, requests
    ids = [2 * r + 1 for r in range(0, 150, 7)]
    for frame in got.values():
        assert frame["id"].tolist() == ids
        assert frame["h"].tolist() == [(i % 4) * 2 for i in ids]
        assert frame["s"].tolist() == [f"s{i}" for i in ids]
