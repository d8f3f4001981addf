"""The rule registry (capture/rules/): one module per plan-node kind, and dispatch through it."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import warnings

import pytest

import tensprov_lab
from tensprov_lab.capture import rules
from tensprov_lab.capture.rules import KEEPS_RECORDS, RULES, TRIVIAL, Rule, rule_for


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
    assert rule_for("Intersect") is None and rule_for("Except") is None
    assert rule_for("GlobalLimit").replay_blocker(None, None)
    assert rule_for("Filter").replay_blocker(None, None) is None


@pytest.mark.spark
def test_a_node_kind_without_a_rule_is_opaque_and_named(spark) -> None:  # noqa: ANN001
    a = spark.createDataFrame([(1,), (2,), (3,)], "k int")
    b = spark.createDataFrame([(2,), (3,), (4,)], "k int")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with tensprov_lab.track(spark, name="rules-intersect") as run:
            both = a.intersect(b)
    (op,) = [o for o in run.operations if o.method == "intersect"]
    assert op.opaque and op.tensors is None
    assert any("Intersect" in str(w.message) for w in caught)
    assert sorted(r.k for r in both.collect()) == [2, 3]


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
