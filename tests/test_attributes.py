"""Attribute maps (DESIGN.md §5) per operation family, against hand-written expectations.

Every expected map is written out as ``{output column: {input columns}}`` from what the
operation reads and computes.  *Contributing*: the input column's values flow into the
output column.  *Influencing*: the input column decides whether, where or in which group
the output record exists (filter and join conditions, group keys, sort keys, dedup keys:
for every output column; window partition and order columns: for the window's column
only).  The captured boolean matrices are compared whole, so an extra ``True`` fails as
surely as a missing one.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from pyspark.sql import Window
from pyspark.sql import functions as F

import tensprov_lab
from tests._operations import PEOPLE

pytestmark = pytest.mark.spark

Map = dict[str, set[str]]

PEOPLE_COLS = ["id", "name", "age", "grp"]
ORDERS = [(10, 1, 5), (11, 2, 7), (12, 1, 9), (13, 4, 1)]
CUSTOMERS = [(1, "n"), (2, "s"), (3, "s"), (1, "e")]


# ---------------------------------------------------------------------------------------------
# helpers


def same(cols: list[str]) -> Map:
    """Each column from the input column of the same name."""
    return {c: {c} for c in cols}


def every(cols: list[str], keys: set[str]) -> Map:
    """``keys`` influence every output column (conditions, group, sort and dedup keys)."""
    return {c: set(keys) for c in cols}


def _matrix(expected: Map, out_cols: list[str], in_cols: list[str]) -> np.ndarray:
    unknown = set(expected) - set(out_cols) | {c for v in expected.values() for c in v} - set(
        in_cols
    )
    assert not unknown, f"expected map names unknown columns {sorted(unknown)}"
    m = np.zeros((len(out_cols), len(in_cols)), dtype=bool)
    for o, ins in expected.items():
        for i in ins:
            m[out_cols.index(o), in_cols.index(i)] = True
    return m


def _pairs(m: np.ndarray, out_cols: list[str], in_cols: list[str]) -> set[str]:
    return {f"{out_cols[o]} <- {in_cols[i]}" for o, i in zip(*np.nonzero(m))}


def check_maps(
    run: Any,
    df: Any,
    inputs: list[Any],
    contributing: list[Map],
    influencing: list[Map],
) -> Any:
    """The operation producing ``df`` reads ``inputs`` (in this order) with exactly these
    maps; the failure message lists the missing and the unexpected ``out <- in`` pairs."""
    ds = run.dataset(df)
    op = run.store.producer(ds.id)
    assert op is not None and not op.opaque, op and op.warnings
    assert op.inputs == [run.dataset(x).id for x in inputs], (op.method, op.inputs)
    assert op.contributing is not None and op.influencing is not None, op.method
    assert op.attributes_exact, f"{op.method}: attribute map fell back to a superset"
    out_cols = ds.columns
    problems = []
    for k, x in enumerate(inputs):
        in_cols = run.dataset(x).columns
        for kind, got, want in (
            ("contributing", op.contributing[k], contributing[k]),
            ("influencing", op.influencing[k], influencing[k]),
        ):
            exp = _matrix(want, out_cols, in_cols)
            assert got.shape == exp.shape, (kind, k, got.shape, exp.shape)
            if not (got == exp).all():
                missing = _pairs(exp & ~got, out_cols, in_cols)
                extra = _pairs(got & ~exp, out_cols, in_cols)
                problems.append(
                    f"{op.method} input {k} {kind}: missing {sorted(missing)}, "
                    f"unexpected {sorted(extra)}"
                )
    assert not problems, "\n".join(problems)
    return op


def people(spark: Any) -> Any:
    return spark.createDataFrame(PEOPLE, "id int, name string, age int, grp string")


def orders_customers(spark: Any) -> tuple[Any, Any]:
    return (
        spark.createDataFrame(ORDERS, "oid int, cid int, amount int"),
        spark.createDataFrame(CUSTOMERS, "cid int, region string"),
    )


# ---------------------------------------------------------------------------------------------
# row-preserving operations


def test_projections(spark) -> None:  # noqa: ANN001
    p = people(spark)
    with tensprov_lab.track(spark, name="attr-projections") as run:
        sel = p.select(
            (F.col("id") + F.col("age")).alias("x"),
            F.concat("name", "grp").alias("y"),
            "id",
            F.lit(1).alias("one"),
            F.when(F.col("age") > 26, F.col("name")).otherwise(F.col("grp")).alias("z"),
        )
        wc = p.withColumn("age2", F.col("age") * 2)
        # replacing a column keeps its position; its new value reads two columns
        wc_old = p.withColumn("age", F.col("age") + F.col("id"))
        ren = p.withColumnRenamed("name", "who")
        dr = p.drop("grp", "age")
        fill = p.fillna(0, subset=["age"])
        fill_all = p.fillna({"age": 0, "grp": "?"})
    check_maps(
        run, sel, [p],
        [{"x": {"id", "age"}, "y": {"name", "grp"}, "id": {"id"}, "one": set(),
          "z": {"age", "name", "grp"}}],
        [{}],
    )  # fmt: skip
    check_maps(run, wc, [p], [{**same(PEOPLE_COLS), "age2": {"age"}}], [{}])
    check_maps(run, wc_old, [p], [{**same(PEOPLE_COLS), "age": {"age", "id"}}], [{}])
    check_maps(
        run, ren, [p], [{"id": {"id"}, "who": {"name"}, "age": {"age"}, "grp": {"grp"}}], [{}]
    )
    check_maps(run, dr, [p], [same(["id", "name"])], [{}])
    # fillna replaces nulls of a column by a constant: only that column is read
    check_maps(run, fill, [p], [same(PEOPLE_COLS)], [{}])
    check_maps(run, fill_all, [p], [same(PEOPLE_COLS)], [{}])


def test_projections_of_a_wide_table(spark) -> None:  # noqa: ANN001
    # wide projections are read by their new expressions only (capture/rewrite/_attributes.py):
    # the same maps as for a narrow table, whatever the column order
    cols = [f"c{i}" for i in range(30)]
    wide = spark.createDataFrame([tuple(range(30)), tuple(range(1, 31))], [*cols])
    with tensprov_lab.track(spark, name="attr-wide") as run:
        added = wide.withColumn("s", F.col("c3") + F.col("c7"))
        replaced = added.withColumn("c5", F.col("c5") * F.col("c9"))
        renamed = replaced.withColumnRenamed("c2", "two")
        reordered = renamed.select(*reversed(renamed.columns))
        dropped = reordered.drop("c0", "c29")
        twice = dropped.select("c1", "c1", *[c for c in dropped.columns if c != "c1"])
    check_maps(run, added, [wide], [{**same(cols), "s": {"c3", "c7"}}], [{}])
    check_maps(run, replaced, [added], [{**same([*cols, "s"]), "c5": {"c5", "c9"}}], [{}])
    rest = [c for c in [*cols, "s"] if c != "c2"]
    check_maps(run, renamed, [replaced], [{**same(rest), "two": {"c2"}}], [{}])
    check_maps(run, reordered, [renamed], [same(renamed.columns)], [{}])
    check_maps(run, dropped, [reordered], [same(dropped.columns)], [{}])
    # a column selected twice: both copies read it (the helper's map is by name)
    op = run.store.producer(run.dataset(twice).id)
    out, inp = run.dataset(twice).columns, dropped.columns
    assert out[:2] == ["c1", "c1"] and op is not None and op.attributes_exact
    want = np.array([[o == i for i in inp] for o in out])
    assert (op.contributing[0] == want).all() and not op.influencing[0].any()


def test_window_columns_are_influenced_by_partition_and_order_only(spark) -> None:  # noqa: ANN001
    p = people(spark)
    w = Window.partitionBy("grp").orderBy("age")
    with tensprov_lab.track(spark, name="attr-window") as run:
        rn = p.withColumn("rn", F.row_number().over(w))
        tot = p.withColumn("tot", F.sum("age").over(Window.partitionBy("grp")))
        lagged = p.withColumn("prev", F.lag("name").over(w))
    # row_number reads no column: its value comes only from the record's window place
    check_maps(run, rn, [p], [{**same(PEOPLE_COLS), "rn": set()}], [{"rn": {"grp", "age"}}])
    check_maps(run, tot, [p], [{**same(PEOPLE_COLS), "tot": {"age"}}], [{"tot": {"grp"}}])
    check_maps(
        run, lagged, [p], [{**same(PEOPLE_COLS), "prev": {"name"}}], [{"prev": {"grp", "age"}}]
    )


# ---------------------------------------------------------------------------------------------
# row-subsetting operations


def test_filters_and_dropna(spark) -> None:  # noqa: ANN001
    p = people(spark)
    with tensprov_lab.track(spark, name="attr-filters") as run:
        f1 = p.filter(F.col("age") > 26)
        f2 = p.where((F.col("grp") == "x") | F.col("name").startswith("e"))
        na_sub = p.dropna(subset=["age"])
        na_all = p.dropna()
        # a filter after a projection: the condition reads a column derived from two
        fsel = p.select((F.col("id") + F.col("age")).alias("s"), "name").filter("s > 30")
    all_cols = set(PEOPLE_COLS)
    check_maps(run, f1, [p], [same(PEOPLE_COLS)], [every(PEOPLE_COLS, {"age"})])
    check_maps(run, f2, [p], [same(PEOPLE_COLS)], [every(PEOPLE_COLS, {"grp", "name"})])
    check_maps(run, na_sub, [p], [same(PEOPLE_COLS)], [every(PEOPLE_COLS, {"age"})])
    check_maps(run, na_all, [p], [same(PEOPLE_COLS)], [every(PEOPLE_COLS, all_cols)])
    sel = run.store.producer(run.dataset(fsel).id).inputs[0]
    check_maps(run, fsel, [sel], [same(["s", "name"])], [every(["s", "name"], {"s"})])


def test_filters_are_read_alike_with_and_without_the_helper(spark) -> None:  # noqa: ANN001
    """With the helper a filter's maps come from the ids its condition references, in one
    round trip (TensProvHelper.filterRefs); without it, from the condition's JSON."""
    from tensprov_lab.capture.rewrite._attributes import attribute_maps
    from tensprov_lab.capture.spark._jvm import Jvm

    p = people(spark)
    filters = [
        p.filter(F.col("age") > 26),
        p.dropna(),
        p.dropna(subset=["age", "grp"]),
        p.filter(F.exists(F.array("age", "id"), lambda x: x > 3)),
        p.filter(F.col("name").isin("a", "b") | F.col("grp").isNull()),
        p.filter(F.lit(True)),
        p.select((F.col("id") + F.col("age")).alias("s"), "name").filter("s > 30 and name > 'b'"),
    ]
    fast, slow = Jvm(spark), Jvm(spark)
    slow._helper = None  # as where Janino is missing
    assert fast.helper is not None

    def no_json(node: Any) -> str:
        raise AssertionError("a filter read through JSON with the helper")

    fast.to_json = no_json  # type: ignore[method-assign]
    for f in filters[:-1]:
        got = attribute_maps(fast, fast.plan(f), [fast.plan(p)])
        want = attribute_maps(slow, slow.plan(f), [slow.plan(p)])
        assert got.exact == want.exact
        for a, b in zip(
            got.contributing + got.influencing, want.contributing + want.influencing, strict=True
        ):
            assert a.tolist() == b.tolist()
    # over a projection (the select's JSON is read; the filter's is not)
    del fast.to_json
    f = filters[-1]
    got = attribute_maps(fast, fast.plan(f), [fast.plan(p)])
    want = attribute_maps(slow, slow.plan(f), [slow.plan(p)])
    assert [m.tolist() for m in got.contributing + got.influencing] == [
        m.tolist() for m in want.contributing + want.influencing
    ]
    assert want.influencing[0].sum(axis=0).tolist() == [2, 2, 2, 0]  # id, name, age


def test_order_limit_sample(spark) -> None:  # noqa: ANN001
    p = people(spark)
    with tensprov_lab.track(spark, name="attr-sort") as run:
        srt = p.orderBy(F.desc("age"), "name")
        top = srt.limit(2)
        smp = p.sample(fraction=0.5, seed=3)
    check_maps(run, srt, [p], [same(PEOPLE_COLS)], [every(PEOPLE_COLS, {"age", "name"})])
    # a limit keeps a prefix by position: no column decides it (the sort did, upstream)
    check_maps(run, top, [srt], [same(PEOPLE_COLS)], [{}])
    # a seeded sample keeps records by a random draw, not by any column
    check_maps(run, smp, [p], [same(PEOPLE_COLS)], [{}])


# ---------------------------------------------------------------------------------------------
# joins


def test_join_on_a_condition(spark) -> None:  # noqa: ANN001
    o, c = orders_customers(spark)
    with tensprov_lab.track(spark, name="attr-join-cond") as run:
        j = o.join(c, (o.cid == c.cid) & (c.region != "e"))
    out = ["oid", "cid", "amount", "cid", "region"]
    assert run.dataset(j).columns == out
    # the output has two columns named cid: positions matter, so the expected matrices
    # are written by position here
    op = run.store.producer(run.dataset(j).id)
    assert op.inputs == [run.dataset(o).id, run.dataset(c).id]
    assert op.attributes_exact
    eye_o = np.zeros((5, 3), dtype=bool)
    eye_o[[0, 1, 2], [0, 1, 2]] = True
    eye_c = np.zeros((5, 2), dtype=bool)
    eye_c[[3, 4], [0, 1]] = True
    assert op.contributing[0].tolist() == eye_o.tolist()
    assert op.contributing[1].tolist() == eye_c.tolist()
    # o.cid decides, on the left; c.cid and c.region decide, on the right
    assert op.influencing[0].tolist() == [[False, True, False]] * 5
    assert op.influencing[1].tolist() == [[True, True]] * 5


@pytest.mark.parametrize(
    "how, key_from",
    [
        ("inner", ["left"]),
        ("left", ["left"]),
        ("right", ["right"]),
        # full outer USING: cid = coalesce(o.cid, c.cid), so both sides contribute
        ("full", ["left", "right"]),
    ],
)
def test_using_join(spark, how: str, key_from: list[str]) -> None:  # noqa: ANN001
    o, c = orders_customers(spark)
    with tensprov_lab.track(spark, name=f"attr-using-{how}") as run:
        j = o.join(c, "cid", how)
    out = ["cid", "oid", "amount", "region"]
    assert run.dataset(j).columns == out
    left: Map = {"oid": {"oid"}, "amount": {"amount"}}
    right: Map = {"region": {"region"}}
    if "left" in key_from:
        left["cid"] = {"cid"}
    if "right" in key_from:
        right["cid"] = {"cid"}
    check_maps(run, j, [o, c], [left, right], [every(out, {"cid"}), every(out, {"cid"})])


@pytest.mark.parametrize("how", ["left_semi", "left_anti"])
def test_semi_and_anti_join(spark, how: str) -> None:  # noqa: ANN001
    o, c = orders_customers(spark)
    with tensprov_lab.track(spark, name=f"attr-{how}") as run:
        j = o.join(c, (o.cid == c.cid) & (c.region == "n"), how)
    out = ["oid", "cid", "amount"]
    # nothing of c comes out, but its key and region decide which orders survive
    check_maps(
        run, j, [o, c], [same(out), {}], [every(out, {"cid"}), every(out, {"cid", "region"})]
    )


def test_self_join_has_one_map_pair_per_occurrence(spark) -> None:  # noqa: ANN001
    c = spark.createDataFrame(CUSTOMERS, "cid int, region string")
    with tensprov_lab.track(spark, name="attr-self-join") as run:
        j = c.join(c.withColumnRenamed("cid", "cid2"), "region")
        sj = c.join(c, "cid")
    ren = run.store.producer(run.dataset(j).id).inputs[1]
    out = ["region", "cid", "cid2"]
    check_maps(
        run, j, [c, ren],
        [{"region": {"region"}, "cid": {"cid"}}, {"cid2": {"cid2"}}],
        [every(out, {"region"}), every(out, {"region"})],
    )  # fmt: skip
    # the same dataset twice: the first occurrence gives cid and the left region, the
    # second the right region, and each occurrence's key influences everything
    out2 = ["cid", "region", "region"]
    assert run.dataset(sj).columns == out2
    op = run.store.producer(run.dataset(sj).id)
    cid = run.dataset(c).id
    assert op.inputs == [cid, cid]
    assert op.contributing[0].tolist() == [[True, False], [False, True], [False, False]]
    assert op.contributing[1].tolist() == [[False, False], [False, False], [False, True]]
    assert op.influencing[0].tolist() == [[True, False]] * 3
    assert op.influencing[1].tolist() == [[True, False]] * 3


# ---------------------------------------------------------------------------------------------
# unions, dedup, aggregates


def test_unions(spark) -> None:  # noqa: ANN001
    p = people(spark)
    q = spark.createDataFrame([("zed", 9, 50, "z")], "name string, id int, age int, grp string")
    with tensprov_lab.track(spark, name="attr-union") as run:
        u = p.union(p.filter("age > 26"))
        ubn = p.unionByName(q)
    filt = run.store.producer(run.dataset(u).id).inputs[1]
    check_maps(run, u, [p, filt], [same(PEOPLE_COLS), same(PEOPLE_COLS)], [{}, {}])
    # by name: q's columns come in another order (the reordering projection is part of
    # the union's plan), each output column still reads the input column of its name
    check_maps(run, ubn, [p, q], [same(PEOPLE_COLS), same(PEOPLE_COLS)], [{}, {}])


def test_union_of_a_union_keeps_its_first_input(spark) -> None:  # noqa: ANN001
    # Spark flattens u.union(x) with u = p.union(p) into one Union of three children;
    # the two first children are u, not two more copies of x (same result as p): u's
    # columns must flow into the output (they came out all False before the fix)
    p = people(spark)
    with tensprov_lab.track(spark, name="attr-union-union") as run:
        u = p.union(p)
        sel = p.select(*PEOPLE_COLS)
        uu = u.unionByName(sel)
    check_maps(run, uu, [u, sel], [same(PEOPLE_COLS), same(PEOPLE_COLS)], [{}, {}])
    cells = run.backward(uu, rows=[0, 5], columns=["age"])
    assert {c: r.tolist() for c, r in cells[p]["contributing"].items()} == {"age": [0]}


def test_distinct_and_drop_duplicates(spark) -> None:  # noqa: ANN001
    p = people(spark)
    with tensprov_lab.track(spark, name="attr-dedup") as run:
        d = p.select("age", "grp").distinct()
        dd = p.dropDuplicates(["age"])
        dd2 = p.dropDuplicates(["grp", "age"])
    sel = run.store.producer(run.dataset(d).id).inputs[0]
    # the whole record is the key of distinct: every column decides every column
    check_maps(run, d, [sel], [same(["age", "grp"])], [every(["age", "grp"], {"age", "grp"})])
    check_maps(run, dd, [p], [same(PEOPLE_COLS)], [every(PEOPLE_COLS, {"age"})])
    check_maps(run, dd2, [p], [same(PEOPLE_COLS)], [every(PEOPLE_COLS, {"grp", "age"})])


def test_group_by_and_rollup(spark) -> None:  # noqa: ANN001
    p = people(spark)
    with tensprov_lab.track(spark, name="attr-groupby") as run:
        g = p.groupBy("grp").agg(
            F.sum("age").alias("s"),
            F.count("*").alias("n"),
            F.count("name").alias("nn"),
            F.max(F.col("id") * F.col("age")).alias("m"),
        )
        g2 = p.groupBy(F.col("age") > 26).count()
        r = p.rollup("grp", "name").agg(F.sum("age").alias("s"))
    out = ["grp", "s", "n", "nn", "m"]
    # count(*) reads no column; count(name) reads name (it skips nulls)
    check_maps(
        run, g, [p],
        [{"grp": {"grp"}, "s": {"age"}, "n": set(), "nn": {"name"}, "m": {"id", "age"}}],
        [every(out, {"grp"})],
    )  # fmt: skip
    out2 = run.dataset(g2).columns
    assert out2 == ["(age > 26)", "count"]
    check_maps(run, g2, [p], [{"(age > 26)": {"age"}, "count": set()}], [every(out2, {"age"})])
    out_r = ["grp", "name", "s"]
    check_maps(
        run, r, [p],
        [{"grp": {"grp"}, "name": {"name"}, "s": {"age"}}],
        [every(out_r, {"grp", "name"})],
    )  # fmt: skip


# ---------------------------------------------------------------------------------------------
# explode


def test_explode_and_posexplode(spark) -> None:  # noqa: ANN001
    arrs = spark.createDataFrame(
        [(1, [20, 10], 5), (2, [], 6), (4, [30], 7)], "id int, xs array<int>, y int"
    )
    with tensprov_lab.track(spark, name="attr-explode") as run:
        ex2 = arrs.select("id", F.explode(F.array("id", "y")).alias("v"))
        pex = arrs.select("id", F.posexplode(F.array("id", "y")))
    # array(id, y) always has two elements: no value decides how many records come out
    check_maps(run, ex2, [arrs], [{"id": {"id"}, "v": {"id", "y"}}], [{}])
    # the position is read off the array as much as the element is
    check_maps(run, pex, [arrs], [{"id": {"id"}, "pos": {"id", "y"}, "col": {"id", "y"}}], [{}])


def test_explode_of_a_variable_length_array_is_influenced_by_it(spark) -> None:  # noqa: ANN001
    arrs = spark.createDataFrame(
        [(1, [20, 10], 5), (2, [], 6), (4, [30], 7)], "id int, xs array<int>, y int"
    )
    with tensprov_lab.track(spark, name="attr-explode-var") as run:
        ex = arrs.select("id", F.explode("xs").alias("x"))
        pex = arrs.select("id", F.posexplode("xs"))
    # row 1 (xs = []) yields no record and row 0 two: xs decides whether and where every
    # output record exists, as a join condition does
    check_maps(run, ex, [arrs], [{"id": {"id"}, "x": {"xs"}}], [every(["id", "x"], {"xs"})])
    check_maps(
        run, pex, [arrs],
        [{"id": {"id"}, "pos": {"xs"}, "col": {"xs"}}],
        [every(["id", "pos", "col"], {"xs"})],
    )  # fmt: skip


# ---------------------------------------------------------------------------------------------
# cell lineage end to end


def test_cell_lineage_of_a_three_step_pipeline(spark) -> None:  # noqa: ANN001
    orders = spark.createDataFrame(ORDERS + [(14, 2, 3)], "oid int, cid int, amount int")
    customers = spark.createDataFrame(CUSTOMERS, "cid int, region string")
    with tensprov_lab.track(spark, name="attr-cells") as run:
        j = orders.join(customers, "cid")
        f = j.filter(F.col("amount") > 4)
        g = f.groupBy("region").agg(F.sum("amount").alias("total"))
    # j (cid, oid, amount, region), by (order, customer):
    #   0 (1,10,5,n) o0 c0 | 1 (1,10,5,e) o0 c3 | 2 (2,11,7,s) o1 c1
    #   3 (1,12,9,n) o2 c0 | 4 (1,12,9,e) o2 c3 | 5 (2,14,3,s) o4 c1
    # f keeps j0..j4; g by smallest member: 0 n {f0, f3}, 1 e {f1, f4}, 2 s {f2}
    rows = run.rows(g)
    assert rows[["region", "total"]].values.tolist() == [["n", 14], ["e", 14], ["s", 7]]

    def as_lists(cells: dict[str, np.ndarray]) -> dict[str, list[int]]:
        return {c: r.tolist() for c, r in cells.items()}

    # total of group n: its amounts contribute (orders 0 and 2); the filter read amount
    # and the join read cid, so both influence; customers only decide (key, group)
    total = run.backward(g, rows=[0], columns=["total"])
    assert as_lists(total[orders]["contributing"]) == {"amount": [0, 2]}
    assert as_lists(total[orders]["influencing"]) == {"cid": [0, 2], "amount": [0, 2]}
    assert as_lists(total[customers]["contributing"]) == {}
    assert as_lists(total[customers]["influencing"]) == {"cid": [0], "region": [0]}
    # region of group s: customer 1's region flows in; order 1's amount passed the filter
    region = run.backward(g, rows=[2], columns=["region"])
    assert as_lists(region[orders]["contributing"]) == {}
    assert as_lists(region[orders]["influencing"]) == {"cid": [1], "amount": [1]}
    assert as_lists(region[customers]["contributing"]) == {"region": [1]}
    assert as_lists(region[customers]["influencing"]) == {"cid": [1], "region": [1]}
    table = region.to_pandas()
    got = sorted(map(tuple, table[["dataset", "row", "column", "kind"]].values.tolist()))
    names = (run.dataset(orders).label, run.dataset(customers).label)
    assert got == sorted(
        [
            (names[0], 1, "cid", "influencing"),
            (names[0], 1, "amount", "influencing"),
            (names[1], 1, "region", "contributing"),
            (names[1], 1, "cid", "influencing"),
            (names[1], 1, "region", "influencing"),
        ]
    )
    # forward: customer 3's region reaches j1 and j4, then group e, where as the group
    # key it decides every column of the group's record
    fw = run.forward(customers, rows=[3], columns=["region"], to=g)
    assert as_lists(fw[g]["contributing"]) == {"region": [1]}
    assert as_lists(fw[g]["influencing"]) == {"region": [1], "total": [1]}
