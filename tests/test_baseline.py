"""The observation-based baseline agrees with our engine on record lineage; TPC-DI generator."""

from __future__ import annotations

import numpy as np
import pytest

from tensprov_lab.bench import _baseline as B
from tensprov_lab.bench import _tpcdi

# -------------------------------------------------------------------------------------------
# generator (no JVM)


def test_sizes_follow_the_paper_and_interpolate() -> None:
    assert _tpcdi.sizes(3) == (362_342, 390_978)
    assert _tpcdi.sizes(20) == (2_411_006, 2_601_648)
    for sf, (c, a) in _tpcdi.PAPER_SIZES.items():
        assert _tpcdi.sizes(sf) == (c, a)
    c9, c15 = _tpcdi.sizes(9)[0], _tpcdi.sizes(15)[0]
    assert c9 < _tpcdi.sizes(10)[0] < c15
    small = _tpcdi.sizes(0.05)
    assert 5_000 < small[0] < small[1] < 7_000
    with pytest.raises(ValueError):
        _tpcdi.sizes(0)


@pytest.mark.parametrize("accounts", _tpcdi.ACCOUNT_ORDERS)
def test_generator_is_exact_deterministic_and_skewed(accounts: str) -> None:
    t = _tpcdi.generate(0.05, seed=3, trades=True, accounts=accounts)
    n_c, n_a = _tpcdi.sizes(0.05)
    assert (t.n_customers, t.n_accounts) == (n_c, n_a)
    assert len(np.unique(t.customers["c_id"])) == n_c
    # every account belongs to a customer, so the join has one row per account
    owner = t.accounts["ca_c_id"]
    assert np.isin(owner, t.customers["c_id"]).all()
    per = np.unique(owner, return_counts=True)[1]
    assert per.max() >= 5  # a heavy tail
    first = np.unique(owner, return_index=True)[1]  # each customer's first account
    if accounts == "random":
        assert len(per) < n_c  # customers without accounts
        assert not np.all(np.diff(owner[np.sort(first)]) > 0)
    else:
        # a customer opens its first account when it arrives, in c_id order; the others
        # come later, in among the newer customers' first accounts
        assert len(per) == n_c
        assert np.all(np.diff(owner[np.sort(first)]) > 0)
        later = np.setdiff1d(np.arange(n_a), first)
        assert 0 < len(later) == n_a - n_c
        assert np.mean(np.diff(owner[later]) < 0) > 0.3  # not in customer order
    assert t.trades is not None and np.isin(t.trades["t_ca_id"], t.accounts["ca_id"]).all()
    again = _tpcdi.generate(0.05, seed=3, trades=True, accounts=accounts)
    for table in ("customers", "accounts", "trades"):
        for col, values in getattr(t, table).items():
            assert np.array_equal(values, getattr(again, table)[col]), (table, col)
    other = _tpcdi.generate(0.05, seed=4, accounts=accounts)
    assert not np.array_equal(other.accounts["ca_c_id"], t.accounts["ca_c_id"])


def test_generator_rejects_an_unknown_order() -> None:
    with pytest.raises(ValueError, match="accounts must be one of"):
        _tpcdi.generate(0.01, accounts="sorted")


# -------------------------------------------------------------------------------------------
# baseline vs engine


def _agree(run: object, obs: B.Observation, pairs: list[tuple[object, str, object, str]]) -> None:
    for src, src_name, dst, dst_name in pairs:
        ours = run.mapping(src, dst).astype(bool)  # type: ignore[attr-defined]
        theirs = obs.mapping(src_name, dst_name)
        assert ours.shape == theirs.shape, (src_name, dst_name)
        assert (ours != theirs).nnz == 0, (src_name, dst_name)


@pytest.fixture(scope="module")
def frames(spark):  # type: ignore[no-untyped-def]
    orders = spark.createDataFrame(
        [(i, i % 5, float((i * 7) % 11), "x" if i % 3 else None) for i in range(40)]
        + [(3, 3, 10.0, "x")] * 2,  # identical records: told apart only by position
        "oid long, cid long, amount double, tag string",
    )
    cust = spark.createDataFrame(
        [(0, "a"), (1, "b"), (1, "b2"), (2, "c"), (2, "c"), (4, "d"), (9, "z")],
        "cid long, region string",
    )
    return orders, cust


@pytest.mark.spark
def test_filter_withcolumn_join_agree_with_engine(spark, frames) -> None:  # type: ignore[no-untyped-def]
    from pyspark.sql import functions as F

    import tensprov_lab

    orders, cust = frames
    with tensprov_lab.track(spark, name="baseline-agree") as run:
        big = orders.filter(F.col("amount") > 3)
        priced = big.withColumn("eur", F.col("amount") * 0.9)
        joined = priced.join(cust, "cid")
        out = joined.select("oid", "region", "eur")
    obs = B.observe(
        {"orders": orders, "cust": cust},
        [
            B.Step("big", lambda o: o.filter(F.col("amount") > 3), ["orders"]),
            B.Step("priced", lambda b: b.withColumn("eur", F.col("amount") * 0.9), ["big"]),
            B.Step("joined", lambda p, c: p.join(c, "cid"), ["priced", "cust"]),
            B.Step("out", lambda j: j.select("oid", "region", "eur"), ["joined"]),
        ],
    )
    assert [s.kind for s in obs.steps] == ["filter", "map", "join", "map"]
    assert obs.n_rows("out") == run.dataset(out).n_rows
    _agree(
        run,
        obs,
        [
            (orders, "orders", big, "big"),
            (orders, "orders", priced, "priced"),
            (orders, "orders", joined, "joined"),
            (cust, "cust", joined, "joined"),
            (orders, "orders", out, "out"),
            (cust, "cust", out, "out"),
        ],
    )
    for r in (0, 5, obs.n_rows("out") - 1):
        ours = run.backward(out, rows=[r])
        theirs = obs.backward("out", [r])
        assert np.array_equal(ours[orders], theirs["orders"])
        assert np.array_equal(ours[cust], theirs["cust"])
    assert obs.nbytes > 0 and obs.snapshot_nbytes > obs.pairs_nbytes > 0


@pytest.mark.spark
def test_observe_function_left_join_and_union_agree(spark, frames) -> None:  # type: ignore[no-untyped-def]
    from pyspark.sql import functions as F

    import tensprov_lab

    orders, cust = frames

    def pipeline(o, c):  # type: ignore[no-untyped-def]
        kept = o.where(F.col("tag").isNotNull()).drop("tag")
        both = kept.unionByName(o.filter("oid < 4").drop("tag"))
        return both.join(c, "cid", "left").withColumnRenamed("region", "r")

    with tensprov_lab.track(spark, name="baseline-fn") as run:
        out = pipeline(orders, cust)
    obs, result = B.observe_function(pipeline, orders, cust)
    assert [s.kind for s in obs.steps][-2:] == ["join", "map"]
    last = obs.steps[-1].name
    assert obs.n_rows(last) == run.dataset(out).n_rows == result.count()
    _agree(run, obs, [(orders, "source0", out, last), (cust, "source1", out, last)])


@pytest.mark.spark
def test_unexplainable_steps_are_refused(spark, frames) -> None:  # type: ignore[no-untyped-def]
    orders, _ = frames
    with pytest.raises(B.Unexplained):
        B.observe_function(lambda o: o.groupBy("cid").count(), orders)
    with pytest.raises(B.Unexplained):
        B.observe_function(lambda o: o.select("cid").distinct(), orders)


@pytest.mark.spark
@pytest.mark.parametrize("accounts", _tpcdi.ACCOUNT_ORDERS)
def test_tpcdi_join_agrees_and_reads_in_generator_order(spark, tmp_path, accounts) -> None:  # type: ignore[no-untyped-def]
    import tensprov_lab

    tables = _tpcdi.load(spark, 0.01, str(tmp_path), accounts=accounts)
    cust, acct = tables["customers"], tables["accounts"]
    n_c, n_a = _tpcdi.sizes(0.01)
    gen = _tpcdi.generate(0.01, accounts=accounts)
    assert cust.count() == n_c
    head = [r.ca_c_id for r in acct.select("ca_c_id").limit(20).collect()]
    assert head == gen.accounts["ca_c_id"][:20].tolist()
    with tensprov_lab.track(spark, name="baseline-tpcdi") as run:
        joined = cust.join(acct, cust.c_id == acct.ca_c_id)
    obs = B.observe(
        {"customers": cust, "accounts": acct},
        [B.Step("join", lambda c, a: c.join(a, c.c_id == a.ca_c_id), ["customers", "accounts"])],
    )
    assert obs.n_rows("join") == run.dataset(joined).n_rows == n_a
    _agree(run, obs, [(cust, "customers", joined, "join"), (acct, "accounts", joined, "join")])


# The "dataframe" variants of German and Census make 66 and 118 snapshots (one Spark job
# each), so here they run in their "ml" variant (18 and 23 steps); the full benchmark
# (tensprov-lab bench --suite paper) checks every pipeline and variant at full size
@pytest.mark.spark
@pytest.mark.parametrize(
    ("name", "variant"), [("german", "ml"), ("compas", "dataframe"), ("census", "ml")]
)
def test_pipelines_agree_with_engine(spark, name: str, variant: str) -> None:  # type: ignore[no-untyped-def]
    import tensprov_lab
    from tensprov_lab import datasets, pipelines

    raw = datasets.load(spark, name, synthetic=True, rows=60)
    cats = pipelines.categories(name, raw) if variant == "dataframe" else None
    with tensprov_lab.track(spark, name=f"baseline-{name}-{variant}") as run:
        out = pipelines.build(name, raw, variant=variant, categories=cats)
    obs, _ = B.observe_function(pipelines.build, name, raw, variant=variant, categories=cats)
    last = obs.steps[-1].name
    assert obs.n_rows(last) == run.dataset(out).n_rows
    if name == "compas":
        assert "filter" in [s.kind for s in obs.steps]  # dropna
        assert obs.n_rows(last) < 60
    _agree(run, obs, [(raw, "source0", out, last)])


@pytest.mark.spark
def test_sort_is_matched_by_values(spark, frames) -> None:  # type: ignore[no-untyped-def]
    from pyspark.sql import functions as F

    import tensprov_lab

    orders = frames[0].filter("oid != 3")  # no identical records: every row tells apart
    with tensprov_lab.track(spark, name="baseline-sort") as run:
        ranked = orders.orderBy(F.desc("amount"), "oid")
    obs = B.observe(
        {"orders": orders},
        [B.Step("ranked", lambda o: o.orderBy(F.desc("amount"), "oid"), ["orders"], "sort")],
    )
    _agree(run, obs, [(orders, "orders", ranked, "ranked")])
    perm = obs.mapping("orders", "ranked").toarray()
    assert not np.array_equal(perm, np.eye(len(perm), dtype=bool))
