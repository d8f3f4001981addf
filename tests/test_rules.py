"""The rule registry (capture/rules/): one module per operation kind for both engines (the
classic plan nodes and the Spark Connect relations), and dispatch through it."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import tensprov_lab
from tensprov_lab.capture import rules
from tensprov_lab.capture.rules import (
    CONNECT,
    CONNECT_OPAQUE,
    KEEPS_RECORDS,
    METHODS,
    RULES,
    TRIVIAL,
    Rule,
    rule_for,
)


def _rule_modules() -> list:
    return [
        importlib.import_module(f"tensprov_lab.capture.rules.{m.name}")
        for m in pkgutil.iter_modules(rules.__path__)
        if not m.name.startswith("_")
    ]


def test_every_rule_class_is_registered_once() -> None:
    registered = {type(r) for r in RULES.values()}
    for module in _rule_modules():
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, Rule) and cls.__module__ == module.__name__ and cls.nodes:
                assert cls in registered, f"{cls.__name__} of {module.__name__} is not in _RULES"
    seen: dict[str, Rule] = {}
    for name, rule in RULES.items():
        assert name in rule.nodes
        assert seen.setdefault(name, rule) is rule


def test_each_rule_module_says_what_it_covers_with_an_example() -> None:
    for module in _rule_modules():
        doc = module.__doc__ or ""
        assert "Record rule" in doc or "record rule" in doc.lower(), module.__name__
        assert ">>>" in doc, f"{module.__name__} has no example"


def test_flags_agree() -> None:
    assert TRIVIAL <= KEEPS_RECORDS
    assert {"Project", "Window", "Sort"} <= KEEPS_RECORDS
    assert not {"Filter", "Join", "Aggregate", "Union", "Generate"} & KEEPS_RECORDS
    assert rule_for("Window").contextual and not rule_for("Project").contextual
    assert rule_for("Intersect") is rule_for("Except") and "Intersect" not in KEEPS_RECORDS
    assert rule_for("MapInPandas") is None
    assert rule_for("GlobalLimit").replay_blocker(None, None)
    assert rule_for("Filter").replay_blocker(None, None) is None


@pytest.mark.spark
def test_a_node_kind_without_a_rule_is_opaque_and_named(spark) -> None:  # noqa: ANN001
    a = spark.createDataFrame([(1, "x"), (2, "y"), (3, "z")], "k int, s string")

    def _same_frames(frames: Iterator[Any]) -> Iterator[Any]:  # (pickled by value)
        yield from frames

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with tensprov_lab.track(spark, name="rules-map-in-pandas") as run:
            mapped = a.mapInPandas(_same_frames, a.schema)
    (op,) = [o for o in run.operations if o.method == "mapInPandas"]
    assert op.opaque and op.tensors is None
    assert any("MapInPandas" in str(w.message) for w in caught)
    assert sorted(r.k for r in mapped.collect()) == [1, 2, 3]


@pytest.mark.spark
def test_dispatch_goes_through_the_registry(spark, monkeypatch) -> None:  # noqa: ANN001
    """Taking a node kind's rule out of the registry is all it takes to stop tracing
    it, and putting it back brings exact lineage back: no other place decides."""
    df = spark.createDataFrame([(i, float(i)) for i in range(20)], "k int, v double")

    def sampled(name: str):  # noqa: ANN202
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with tensprov_lab.track(spark, name=name) as run:
                out = df.sample(fraction=0.5, seed=7)
        (op,) = [o for o in run.operations if o.method == "sample"]
        return run, out, op

    monkeypatch.delitem(RULES, "Sample")
    _, _, op = sampled("rules-no-sample")
    assert op.opaque
    monkeypatch.undo()
    run, out, op = sampled("rules-sample")
    assert not op.opaque
    kept = [r.k for r in out.collect()]
    # output row i comes from exactly the input record with key kept[i] (k = row index)
    mapping = run.mapping(df, out).toarray()
    assert mapping.shape == (len(kept), 20)
    assert (mapping.sum(axis=1) == 1).all()
    assert mapping.argmax(axis=1).tolist() == kept


@pytest.mark.spark
def test_with_watermark_on_a_batch_dataframe_keeps_records(spark) -> None:  # noqa: ANN001
    """A one-line rule (passthrough.py): a watermark changes nothing in a batch query."""
    df = spark.createDataFrame(
        [(1, "2026-01-01 00:00:00"), (2, "2026-01-01 00:05:00")], "k int, ts string"
    ).selectExpr("k", "cast(ts as timestamp) ts")
    with tensprov_lab.track(spark, name="rules-watermark") as run:
        marked = df.withWatermark("ts", "1 minute")
        out = marked.filter("k > 1")
    ops = {o.method: o for o in run.operations}
    assert not ops["withWatermark"].opaque and ops["withWatermark"].category == "trivial"
    assert run.mapping(df, out).toarray().tolist() == [[0, 1]]
    assert [r.k for r in out.collect()] == [2]


@pytest.mark.spark
@pytest.mark.parametrize("join_first", [False, True])
def test_an_aggregate_rewrite_makes_its_expressions_without_the_analyzer(
    spark,
    monkeypatch,
    join_first: bool,  # noqa: ANN001
) -> None:
    """The aggregate rule builds its smallest-member and member-list expressions
    directly (``min``, or ``min_by`` over several keys): the analysed-DataFrame path is
    only the fallback, and the groups are the same."""
    from tensprov_lab.capture.rules import aggregate

    def refuse(*args: object) -> None:
        raise AssertionError("the aggregate's expressions went through the analyzer")

    monkeypatch.setattr(aggregate, "_analyzed_group_plan", refuse)
    df = spark.createDataFrame([(i, i % 3) for i in range(12)], "k int, g int")
    other = spark.createDataFrame([(g, f"n{g}") for g in range(3)], "g int, name string")
    with tensprov_lab.track(spark, name=f"rules-agg-{join_first}") as run:
        src = df.join(other, "g") if join_first else df
        out = src.groupBy("g").count().orderBy("g")
    assert not [o for o in run.operations if o.opaque]
    mapping = run.mapping(df, out).toarray()
    assert [sorted(row.nonzero()[0].tolist()) for row in mapping] == [
        [k for k in range(12) if k % 3 == g] for g in range(3)
    ]


# -- both engines ---------------------------------------------------------------------------
def _window(a: Any) -> Any:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    return a.select("k", F.sum("v").over(Window.partitionBy("g").orderBy("k")).alias("s"))


def _f() -> Any:
    from pyspark.sql import functions as F

    return F


#: an example of each DataFrame method capture records (the rules' ``methods``), and of
#: the other ways to make a rule's operation (a grouping, an explode, a window), over
#: ``a`` (k, v, g, ts) and ``b`` (g, n)
EXAMPLES: dict[str, Callable[[Any, Any], Any]] = {
    "select": lambda a, b: a.select("k", (_f().col("v") * 2).alias("w")),
    "selectExpr": lambda a, b: a.selectExpr("k", "v + 1 as w"),
    "withColumn": lambda a, b: a.withColumn("w", _f().col("v") + 1),
    "withColumns": lambda a, b: a.withColumns({"w": _f().col("v") + 1}),
    "withColumnRenamed": lambda a, b: a.withColumnRenamed("v", "w"),
    "withColumnsRenamed": lambda a, b: a.withColumnsRenamed({"v": "w"}),
    "drop": lambda a, b: a.drop("v"),
    "toDF": lambda a, b: a.toDF("x", "y", "z", "t"),
    "fillna": lambda a, b: a.fillna(0.0),
    "replace": lambda a, b: a.replace(1.0, 2.0),
    "withMetadata": lambda a, b: a.withMetadata("v", {"note": "x"}),
    "to": lambda a, b: a.to(a.select("v", "k").schema),
    "filter": lambda a, b: a.filter(_f().col("v") > 1),
    "where": lambda a, b: a.where("v > 1"),
    "dropna": lambda a, b: a.dropna(),
    "limit": lambda a, b: a.orderBy("k").limit(2),
    "offset": lambda a, b: a.orderBy("k").offset(5),
    "sample": lambda a, b: a.sample(fraction=0.5, seed=3),
    "orderBy": lambda a, b: a.orderBy(_f().desc("v")),
    "sort": lambda a, b: a.sort("g"),
    "sortWithinPartitions": lambda a, b: a.sortWithinPartitions("v"),
    "join": lambda a, b: a.join(b, "g"),
    "crossJoin": lambda a, b: a.crossJoin(b),
    "union": lambda a, b: a.union(a.where("k > 4")),
    "unionAll": lambda a, b: a.unionAll(a.sort(_f().desc("k"))),
    "unionByName": lambda a, b: a.unionByName(a.select("ts", "g", "v", "k").where("k < 3")),
    "groupBy": lambda a, b: a.groupBy("g").agg(_f().sum("v")),
    "rollup": lambda a, b: a.rollup("g").count(),
    "cube": lambda a, b: a.cube("g").count(),
    "pivot": lambda a, b: a.groupBy("k").pivot("g", [1, 2]).count(),
    "dropDuplicates": lambda a, b: a.dropDuplicates(["g", "v"]),
    "drop_duplicates": lambda a, b: a.drop_duplicates(["g", "v"]),
    "distinct": lambda a, b: a.distinct(),
    "explode": lambda a, b: a.select("k", _f().explode(_f().array("v", "v")).alias("e")),
    "posexplode": lambda a, b: a.select("k", _f().posexplode(_f().array("v", "v"))),
    "melt": lambda a, b: a.melt("k", ["v"], "var", "val"),
    "unpivot": lambda a, b: a.unpivot("k", ["v"], "var", "val"),
    "window": lambda a, b: _window(a),
    "alias": lambda a, b: a.alias("t"),
    "repartition": lambda a, b: a.repartition(2),
    "repartitionByRange": lambda a, b: a.repartitionByRange(2, "k"),
    "coalesce": lambda a, b: a.coalesce(1),
    "hint": lambda a, b: a.hint("broadcast"),
    "observe": lambda a, b: a.observe("obs", _f().count(_f().lit(1))),
    "withWatermark": lambda a, b: a.withWatermark("ts", "1 minute"),
    "intersect": lambda a, b: a.intersect(a.where("k > 2")),
    "intersectAll": lambda a, b: a.intersectAll(a.where("k > 2")),
    "subtract": lambda a, b: a.subtract(a.where("k > 2")),
    "exceptAll": lambda a, b: a.exceptAll(a.where("k > 2")),
}
#: examples traced on a classic session, opaque over Spark Connect (with why)
CLASSIC_ONLY = {"intersect", "intersectAll", "subtract", "exceptAll"}
#: examples a classic session plans as their input's plan: Spark drops a watermark on a
#: batch DataFrame, so the classic capture sees its input (its records, one for one)
SAME_PLAN_CLASSIC = {"withWatermark"}


def test_every_method_capture_records_has_an_example() -> None:
    assert METHODS <= set(EXAMPLES), sorted(METHODS - set(EXAMPLES))


def test_each_connect_relation_kind_has_one_rule_or_says_why_not() -> None:
    """Every relation kind is traced by one rule, or is a rule's explicit opaque kind,
    never both; every rule module says what it does over Connect."""
    assert not set(CONNECT) & set(CONNECT_OPAQUE)
    for kind, rule in CONNECT.items():
        assert kind in rule.relations
    for module in _rule_modules():
        assert "Spark Connect" in " ".join((module.__doc__ or "").split()), module.__name__
    from pyspark.sql.connect import proto

    fields = {f.name for f in proto.Relation.DESCRIPTOR.oneofs_by_name["rel_type"].fields}
    assert set(CONNECT) | set(CONNECT_OPAQUE) <= fields


@pytest.fixture(scope="module")
def connect(spark) -> Iterator[Any]:  # noqa: ANN001
    """A Spark Connect session (after the classic one: see tests/_connect_session.py)."""
    from tests._connect_session import connect_session

    with connect_session() as session:
        yield session


def _track_examples(session: Any, name: str) -> tuple[Any, Any, Any, dict[str, Any], list[str]]:
    from pyspark.sql import functions as F

    a = session.createDataFrame(
        [(i, float(i % 4), i % 3, None) for i in range(8)], "k int, v double, g int, ts timestamp"
    ).withColumn("v", F.when(F.col("k") == 5, None).otherwise(F.col("v")))
    b = session.createDataFrame([(1, "x"), (2, "y")], "g int, n string")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with tensprov_lab.track(session, name=name) as run:
            made = {what: make(a, b) for what, make in EXAMPLES.items()}
    return run, a, b, made, [str(w.message) for w in caught]


def _lineage(run: Any, df: Any, sources: list[Any]) -> list[np.ndarray]:
    return [run.mapping(s, df).toarray() for s in sources]


@pytest.mark.spark
@pytest.mark.connect
def test_every_operation_is_traced_alike_by_both_engines_or_opaque_with_why(
    spark,
    connect,  # noqa: ANN001
) -> None:
    """Each example on a classic session and over Spark Connect: traced by both with the
    same records and the same lineage, or an opaque operation with a warning saying why,
    where the rules say so (a set operation over Connect, or a rule's ``connect_opaque``)."""
    from tensprov_lab.capture.plan import _proto as P
    from tests import test_operations as ops
    from tests._connect_session import classic_code

    with classic_code():
        classic, ca, cb, c_made, c_said = _track_examples(spark, "rules-classic")
    remote, ra, rb, r_made, r_said = _track_examples(connect, "rules-connect")
    for what in SAME_PLAN_CLASSIC:
        made = c_made.pop(what)
        assert ops.records(classic, made) == ops.records(classic, ca)
        assert np.array_equal(classic.mapping(ca, made).toarray(), np.eye(8, dtype=bool))
        r_op = ops.op_of(remote, r_made[what])
        assert not r_op.opaque and r_op.category == "trivial", (what, r_op.warnings)
        assert ops.records(remote, r_made[what]) == ops.records(remote, ra)
    for what in c_made:
        c_op, r_op = ops.op_of(classic, c_made[what]), ops.op_of(remote, r_made[what])
        kind = P.kind(P.relation(r_made[what]))
        if what in CLASSIC_ONLY:
            assert not c_op.opaque, (what, c_op.warnings)
            assert r_op.opaque and "Spark Connect" in r_op.warnings[0], (what, r_op.warnings)
            continue
        assert not c_op.opaque, (what, c_op.warnings)
        if kind in CONNECT_OPAQUE:
            assert r_op.opaque and CONNECT_OPAQUE[kind] in r_op.warnings[0], (what, r_op.warnings)
            assert "Spark Connect" in r_op.warnings[0]
            assert any(r_op.warnings[0] in m for m in r_said), what
            continue
        assert kind in CONNECT and not r_op.opaque, (what, kind, r_op.warnings)
        assert r_op.category == c_op.category, (what, r_op.category, c_op.category)
        with classic_code():  # a classic record index may count its source only now
            c_records = ops.records(classic, c_made[what])
        assert ops.records(remote, r_made[what]) == c_records, what
        sides = [1, 1] if what in ("join", "crossJoin") else [1, 0]
        c_lin = _lineage(classic, c_made[what], [s for s, u in zip([ca, cb], sides) if u])
        r_lin = _lineage(remote, r_made[what], [s for s, u in zip([ra, rb], sides) if u])
        for c_m, r_m in zip(c_lin, r_lin):
            assert np.array_equal(c_m, r_m), what
