"""SQL statements inside a tracked block (capture/hops/_sql.py).

Each statement is run untracked and tracked (same records, same schema), and its record
lineage is compared with the lineage of the equivalent DataFrame-API pipeline: the
whole-dataset mappings from each source to the result must be equal, whatever the
statement's plan was decomposed into.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from pyspark.sql import functions as F

import tensprov_lab
from tensprov_lab.capture.recording._tracker import TensProvWarning

pytestmark = pytest.mark.spark

# duplicates and nulls, so that canonical order and join fan-out matter
A_ROWS = [
    (1, "a", 10),
    (2, "b", 20),
    (3, "a", 30),
    (4, "c", 3),
    (3, "a", 30),
    (5, None, 7),
    (6, "b", None),
]
B_ROWS = [(1, "north"), (2, "south"), (3, "north"), (3, "east"), (7, "west")]


@pytest.fixture(scope="module")
def a(spark):  # noqa: ANN001, ANN201
    df = spark.createDataFrame(A_ROWS, "k int, s string, x int")
    df.createOrReplaceTempView("tp_sql_a")
    return df


@pytest.fixture(scope="module")
def b(spark):  # noqa: ANN001, ANN201
    df = spark.createDataFrame(B_ROWS, "k int, region string")
    df.createOrReplaceTempView("tp_sql_b")
    return df


def _rows(df: Any, ordered: bool = False) -> list[tuple]:
    rows = [tuple(r) for r in df.collect()]
    return rows if ordered else sorted(rows, key=repr)


def _tracked(spark: Any, make: Callable[[], Any]) -> tuple[Any, Any]:
    with tensprov_lab.track(spark) as run:
        out = make()
    return run, out


def _check(
    spark: Any,
    statement: str,
    pipeline: Callable[[], Any],
    sources: list[Any],
    ordered: bool = False,
) -> tuple[Any, Any]:
    """The statement tracked gives the untracked records, and the same record lineage
    from every source as the DataFrame-API ``pipeline``."""
    plain = spark.sql(statement)
    run, out = _tracked(spark, lambda: spark.sql(statement))
    assert out.schema == plain.schema
    assert _rows(out, ordered) == _rows(plain, ordered)
    ds = run.dataset(out)
    assert ds.n_rows == plain.count()
    assert run.store.producer(ds.id) is not None
    assert not any(op.opaque for op in run.operations), run.warnings
    ref_run, ref = _tracked(spark, pipeline)
    assert _rows(ref, ordered) == _rows(plain, ordered)
    for src in sources:
        got = run.mapping(src, out).toarray()
        want = ref_run.mapping(src, ref).toarray()
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, want)
    return run, out


def test_select_where(spark, a) -> None:  # noqa: ANN001
    run, out = _check(
        spark,
        "SELECT k, x * 2 AS y FROM tp_sql_a WHERE x > 5",
        lambda: a.where("x > 5").select("k", (F.col("x") * 2).alias("y")),
        [a],
    )
    assert all(op.method.startswith("sql:") for op in run.operations)
    assert run.backward(out, rows=[0])[a].tolist() == [0]


def test_join_of_two_views(spark, a, b) -> None:  # noqa: ANN001
    run, out = _check(
        spark,
        "SELECT a.k, a.x, b.region FROM tp_sql_a a JOIN tp_sql_b b ON a.k = b.k",
        lambda: a.join(b, a.k == b.k).select(a.k, a.x, b.region),
        [a, b],
    )
    join = [op for op in run.operations if op.method == "sql:Join"]
    assert len(join) == 1 and join[0].category == "join"
    assert set(join[0].inputs) == {run.dataset(a).id, run.dataset(b).id}


STATEMENT = (
    "SELECT region, sum(x) AS total FROM tp_sql_a JOIN tp_sql_b USING (k) "
    "WHERE x > 5 GROUP BY region"
)


def _pipeline(a: Any, b: Any) -> Any:
    return a.join(b, "k").where("x > 5").groupBy("region").agg(F.sum("x").alias("total"))


def test_group_by_after_join_is_decomposed(spark, a, b) -> None:  # noqa: ANN001
    run, out = _check(spark, STATEMENT, lambda: _pipeline(a, b), [a, b])
    methods = [op.method for op in run.operations]
    assert methods == ["sql:Join", "sql:Filter", "sql:Aggregate"]
    assert [op.category for op in run.operations] == ["join", "horizontal_reduction", "aggregate"]
    # every step is a dataset of the graph, the last one is the user's DataFrame
    last = run.operations[-1]
    assert last.output == run.dataset(out).id
    assert "spark.sql: SELECT region" in last.expression
    for op in run.operations[:-1]:
        assert run.store.consumers(op.output)


def test_column_lineage_exact_for_join_aggregate(spark, a, b) -> None:  # noqa: ANN001
    run, out = _tracked(spark, lambda: spark.sql(STATEMENT))
    ref_run, ref = _tracked(spark, lambda: _pipeline(a, b))
    for op in run.operations:
        assert op.contributing is not None and op.attributes_exact
    for row in range(run.dataset(out).n_rows or 0):
        cells = run.backward(out, rows=[row], columns=["total"])
        assert cells.columns(a) == {"contributing": ["x"], "influencing": ["k", "x"]}
        assert cells.columns(b) == {"contributing": [], "influencing": ["k", "region"]}
    key = run.backward(out, rows=[0], columns=["region"])
    assert key.columns(b) == {"contributing": ["region"], "influencing": ["k", "region"]}
    # the same cells as the DataFrame API, record by record
    got = run.rows(out).sort_values("region")["_row"].tolist()
    want = ref_run.rows(ref).sort_values("region")["_row"].tolist()
    for r_sql, r_df in zip(got, want, strict=True):
        c_sql = run.backward(out, rows=[r_sql], columns=["total"]).to_pandas()
        c_df = ref_run.backward(ref, rows=[r_df], columns=["total"]).to_pandas()
        key_cols = ["dataset", "row", "column", "kind"]
        assert sorted(map(tuple, c_sql[key_cols].values)) == sorted(
            map(tuple, c_df[key_cols].values)
        )


def test_union(spark, a, b) -> None:  # noqa: ANN001
    run, _ = _check(
        spark,
        "SELECT k FROM tp_sql_a UNION ALL SELECT k FROM tp_sql_b",
        lambda: a.select("k").union(b.select("k")),
        [a, b],
    )
    assert "append" in [op.category for op in run.operations]


def test_distinct(spark, a) -> None:  # noqa: ANN001
    run, _ = _check(spark, "SELECT DISTINCT s FROM tp_sql_a", lambda: a.select("s").distinct(), [a])
    assert run.operations[-1].category == "dedup"


def test_union_distinct(spark, a, b) -> None:  # noqa: ANN001
    _check(
        spark,
        "SELECT s FROM tp_sql_a UNION SELECT region FROM tp_sql_b",
        lambda: a.select("s").union(b.select("region")).distinct(),
        [a, b],
    )


def test_order_by_limit(spark, a) -> None:  # noqa: ANN001
    run, out = _check(
        spark,
        "SELECT * FROM tp_sql_a ORDER BY x DESC NULLS LAST, k LIMIT 3",
        lambda: a.orderBy(F.desc_nulls_last("x"), "k").limit(3),
        [a],
        ordered=True,
    )
    assert [op.category for op in run.operations][-2:] == ["sort", "horizontal_reduction"]
    assert not any(op.nondeterministic for op in run.operations)
    # ties (rows 2 and 4 are equal) are broken by input row, as for the DataFrame API
    assert [run.backward(out, rows=[r])[a].tolist() for r in range(3)] == [[2], [4], [1]]


def test_subquery_and_cte(spark, a) -> None:  # noqa: ANN001
    _check(
        spark,
        "WITH big AS (SELECT * FROM tp_sql_a WHERE x > 5) "
        "SELECT s, count(*) AS c FROM (SELECT * FROM big WHERE s IS NOT NULL) t GROUP BY s",
        lambda: a.where("x > 5").where("s IS NOT NULL").groupBy("s").agg(F.count("*").alias("c")),
        [a],
    )


def test_cte_used_twice_and_downstream_calls(spark, a) -> None:  # noqa: ANN001
    statement = (
        "WITH big AS (SELECT k, x FROM tp_sql_a WHERE x > 5) "
        "SELECT l.k, l.x, r.x AS x2 FROM big l JOIN big r ON l.k = r.k"
    )
    big = a.where("x > 5").select("k", "x")
    run, out = _check(
        spark,
        statement,
        lambda: (
            big.alias("l")
            .join(big.alias("r"), F.col("l.k") == F.col("r.k"))
            .select("l.k", "l.x", F.col("r.x").alias("x2"))
        ),
        [a],
    )
    # a DataFrame call on the result finds it (the user's plan, not the inlined copy)
    with tensprov_lab.track(spark) as later:
        more = out.where("x2 > 10")
    assert [op.opaque for op in later.operations] == [False]
    assert later.store.operations[later.operations[0].id].inputs == [run.dataset(out).id]
    assert later.dataset(more).n_rows == more.count()


def test_view_of_a_tracked_dataframe_made_in_the_block(spark, a) -> None:  # noqa: ANN001
    with tensprov_lab.track(spark) as run:
        kept = a.where("x IS NOT NULL")
        kept.createOrReplaceTempView("tp_sql_kept")
        out = spark.sql("SELECT s, max(x) AS m FROM tp_sql_kept GROUP BY s")
    ops = run.operations
    assert [op.method for op in ops] == ["where", "sql:Aggregate"]
    assert ops[1].inputs == [run.dataset(kept).id]
    assert _rows(out) == _rows(spark.sql("SELECT s, max(x) AS m FROM tp_sql_kept GROUP BY s"))


def test_commands_record_nothing(spark, a) -> None:  # noqa: ANN001
    with tensprov_lab.track(spark) as run:
        spark.sql("CREATE OR REPLACE TEMP VIEW tp_sql_v AS SELECT k FROM tp_sql_a")
        spark.sql("SHOW TABLES").collect()
        spark.sql("SELECT 1 AS one")  # reads nothing the run knows: a source and a select
    assert [op.method for op in run.operations] == ["sql:Project"]
    spark.catalog.dropTempView("tp_sql_v")


@pytest.mark.parametrize(
    "statement",
    [
        pytest.param("SELECT * FROM tp_sql_a, LATERAL (SELECT tp_sql_a.k + 1 AS k2)", id="lateral"),
    ],
)
def test_unsupported_statement_is_opaque(spark, a, b, statement: str) -> None:  # noqa: ANN001
    plain = _rows(spark.sql(statement))
    with pytest.warns(TensProvWarning, match="opaque operation") as caught:
        run, out = _tracked(spark, lambda: spark.sql(statement))
    said = [w for w in caught if issubclass(w.category, TensProvWarning)]
    assert len(said) == 1, [str(w.message) for w in said]  # one warning, not one a step
    assert _rows(out) == plain
    last = run.store.producer(run.dataset(out).id)
    assert last is not None and last.opaque and last.tensors is None
    # coarse lineage still names every relation the statement reads
    reads = {a, b} if "tp_sql_b" in statement else {a}
    upstream = set(run.transformations(out)["inputs"].sum())
    assert {run.dataset(d).label for d in reads} <= upstream
    assert run.dataset(out).n_rows == len(plain)


def test_intersect_and_except_statements_are_record_level(spark, a, b) -> None:  # noqa: ANN001
    """``INTERSECT`` / ``EXCEPT`` [ALL]: each kept record traced to its equal records
    (rows 2 and 4 of ``tp_sql_a`` are equal: one record of ``INTERSECT``, two of ``ALL``)."""
    statement = "SELECT k FROM tp_sql_a {} SELECT k FROM tp_sql_b"
    keys = {r[0] for r in B_ROWS}
    for op, rows in [
        ("INTERSECT", [[0], [1], [2, 4]]),
        ("INTERSECT ALL", [[0], [1], [2], [4]]),
        ("EXCEPT", [[3], [5], [6]]),
        ("EXCEPT ALL", [[3], [5], [6]]),
    ]:
        text = statement.format(op)
        run, out = _tracked(spark, lambda text=text: spark.sql(text))
        last = run.store.producer(run.dataset(out).id)
        assert last is not None and not last.opaque, (op, last and last.warnings)
        got = run.rows(out)["k"].tolist()
        assert got == [A_ROWS[r[0]][0] for r in rows], op
        assert sorted(got) == sorted(k for (k,) in _rows(out)), op
        back = [run.backward(out, rows=[i], to=a)[a].tolist() for i in range(len(rows))]
        assert back == rows, op
        if op.startswith("INTERSECT"):
            witnesses = run.backward(out, rows=[2], to=b)[b].tolist()
            assert all(B_ROWS[j][0] == got[2] for j in witnesses) and witnesses, op
        else:
            assert not {A_ROWS[r[0]][0] for r in rows} & keys, op


_MATCHES = {i: [j for j, (k, _) in enumerate(B_ROWS) if k == r[0]] for i, r in enumerate(A_ROWS)}
_MEAN_X = sum(r[2] for r in A_ROWS if r[2] is not None) / sum(r[2] is not None for r in A_ROWS)


@pytest.mark.parametrize(
    "statement, kept, lineage",
    [
        pytest.param(
            "SELECT * FROM tp_sql_a WHERE x > (SELECT avg(x) FROM tp_sql_a)",
            [i for i, r in enumerate(A_ROWS) if r[2] is not None and r[2] > _MEAN_X],
            # the record, and every record the compared average is made of
            lambda i: ({*range(len(A_ROWS))}, set()),
            id="scalar_subquery",
        ),
        pytest.param(
            "SELECT * FROM tp_sql_a WHERE EXISTS "
            "(SELECT 1 FROM tp_sql_b WHERE tp_sql_b.k = tp_sql_a.k)",
            [i for i in range(len(A_ROWS)) if _MATCHES[i]],
            lambda i: ({i}, set(_MATCHES[i])),  # the record and the ones it matched
            id="correlated_exists",
        ),
        pytest.param(
            "SELECT * FROM tp_sql_a WHERE k IN (SELECT k FROM tp_sql_b)",
            [i for i in range(len(A_ROWS)) if _MATCHES[i]],
            lambda i: ({i}, set(_MATCHES[i])),
            id="in_subquery",
        ),
        pytest.param(
            "SELECT * FROM tp_sql_a WHERE NOT EXISTS "
            "(SELECT 1 FROM tp_sql_b WHERE tp_sql_b.k = tp_sql_a.k)",
            [i for i in range(len(A_ROWS)) if not _MATCHES[i]],
            lambda i: ({i}, set()),  # made from the absence of a match: the record alone
            id="not_exists",
        ),
    ],
)
def test_subqueries_are_record_level(spark, a, b, statement, kept, lineage) -> None:  # noqa: ANN001
    """EXISTS / IN become semi joins, NOT EXISTS an anti join, an uncorrelated scalar
    subquery an input of the filter comparing it (they were opaque steps)."""
    plain = _rows(spark.sql(statement))
    run, out = _tracked(spark, lambda: spark.sql(statement))
    assert _rows(out) == plain
    assert not [op.warnings for op in run.operations if op.opaque]
    got = run.rows(out)

    def plain_value(v: Any) -> Any:
        if v is None or (isinstance(v, float) and v != v):
            return None
        return int(v) if isinstance(v, float) else v

    values = [
        tuple(map(plain_value, r)) for r in got.drop(columns=["_row"]).itertuples(index=False)
    ]
    assert values == [A_ROWS[i] for i in kept]  # in a's order: canonical
    for row, i in enumerate(kept):
        back = run.backward(out, rows=[row]).result.rows
        want_a, want_b = lineage(i)
        assert set(back.get(run.dataset(a).id, [])) == want_a, (row, i)
        b_id = run.dataset(b).id if b_id_known(run, b) else None
        assert set(back.get(b_id, [])) == want_b, (row, i)


def b_id_known(run: Any, df: Any) -> bool:
    try:
        run.dataset(df)
    except KeyError:
        return False
    return True


def test_session_unpatched_after_error(spark, a) -> None:  # noqa: ANN001
    cls = type(spark)
    before = dict(vars(cls))
    with pytest.raises(ZeroDivisionError):
        with tensprov_lab.track(spark):
            spark.sql("SELECT k FROM tp_sql_a")
            1 / 0  # noqa: B018
    assert dict(vars(cls)) == before
    with warnings.catch_warnings():
        warnings.simplefilter("error", TensProvWarning)
        assert spark.sql("SELECT count(*) FROM tp_sql_a").collect()[0][0] == len(A_ROWS)
