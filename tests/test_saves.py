"""``tensprov_lab.save`` / ``load``: a tracked run queried after a restart, by name,
without Spark; what needs Spark says so."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from typing import Any

import numpy as np
import pytest

import tensprov_lab
from tests._retail import orders_and_customers

pytestmark = pytest.mark.spark


def _pipeline(spark: Any) -> tuple[Any, dict[str, Any]]:
    orders, customers = orders_and_customers(spark, 300, 13, 50)
    with tensprov_lab.track(spark, name="saved-retail") as run:
        big = orders.filter("amount > 20")
        joined = big.join(customers, "cust")
        both = joined.unionByName(joined.filter("region = 'r1'"))
        out = both.groupBy("region").agg({"amount": "sum"})
    return run, {"orders": orders, "customers": customers, "big": big,
                 "joined": joined, "both": both, "out": out}  # fmt: skip


def _answers(run: Any, refs: dict[str, Any]) -> dict[str, Any]:
    """Lineage answers, each dataset named by ``refs`` (DataFrames or names)."""
    back = run.backward(refs["out"], rows=[0, 2])
    fwd = run.forward(refs["orders"], rows=[21, 40, 299], to=refs["out"])
    cells = run.backward(refs["out"], rows=[1], columns=["sum(amount)"])
    return {
        "back_orders": back[refs["orders"]].tolist(),
        "back_customers": back[refs["customers"]].tolist(),
        "forward": fwd[refs["out"]].tolist(),
        "cells": cells.to_pandas().sort_values(list(cells.to_pandas().columns)).values.tolist(),
        "mapping": run.mapping(refs["orders"], refs["both"]).toarray().tolist(),
        "how": run.backward(refs["out"], rows=[0], how=True).how.astype(str).values.tolist(),
    }


def test_a_saved_run_answers_like_the_live_one(spark: Any, tmp_path: Any) -> None:
    run, dfs = _pipeline(spark)
    live = _answers(run, dfs)
    info = tensprov_lab.save(tmp_path / "retail", runs=run)
    assert info.runs == ["saved-retail"] and info.nbytes > 0
    assert "saved-retail" in repr(info)

    (loaded,) = tensprov_lab.load(tmp_path / "retail")
    assert tensprov_lab.last_run() is loaded and loaded.name == "saved-retail"
    names = {k: k for k in dfs}
    assert _answers(loaded, names) == live
    assert [op.method for op in loaded.operations] == [op.method for op in run.operations]
    assert [op.nbytes for op in loaded.operations] == [op.nbytes for op in run.operations]
    assert loaded.to_svg().startswith("<svg")

    # what needs records (Spark and the sources) says so, and what to do
    with pytest.raises(LookupError, match="loaded from .* run the tracked block again"):
        loaded.rows("out")
    with pytest.raises(LookupError, match="where=.*needs Spark and the sources"):
        loaded.backward("orders", where="amount > 3")
    with pytest.raises(LookupError, match="what-if previews: this run was loaded from"):
        loaded.what_if(drop={"orders": [21]})
    with pytest.raises(KeyError, match="refer to their datasets by name"):
        loaded.backward(dfs["out"], rows=[0])

    loaded.forget()
    assert loaded not in tensprov_lab.runs()
    with pytest.raises(LookupError, match="forgotten"):
        loaded.backward("out", rows=[0])
    # the live run is untouched by all that
    assert _answers(run, dfs) == live


def test_a_later_run_is_saved_with_the_run_it_reads(spark: Any, tmp_path: Any) -> None:
    run, dfs = _pipeline(spark)
    with tensprov_lab.track(spark, name="saved-later") as later:
        top = dfs["out"].filter("region = 'r0'")
    info = tensprov_lab.save(tmp_path / "both", runs=[later])
    assert info.runs == ["saved-retail", "saved-later"]
    loaded = tensprov_lab.load(tmp_path / "both")
    assert [r.name for r in loaded] == ["saved-retail", "saved-later"]
    want = later.backward(top, rows=[0])[dfs["orders"]].tolist()
    assert loaded[1].backward("top", rows=[0])["orders"].tolist() == want
    assert len(want) > 0


def test_a_save_is_queried_by_another_process_without_spark(spark: Any, tmp_path: Any) -> None:
    run, dfs = _pipeline(spark)
    tensprov_lab.save(tmp_path / "retail", runs=run)
    want = run.backward(dfs["out"], rows=[1])[dfs["orders"]].tolist()
    script = textwrap.dedent(
        f"""
        import sys, tensprov_lab
        (run,) = tensprov_lab.load({str(tmp_path / "retail")!r})
        print(run.backward("out", rows=[1])["orders"].tolist())
        print("pyspark" in sys.modules)
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_SUBMIT_ARGS"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, timeout=120, check=True)  # fmt: skip
    lines = done.stdout.strip().splitlines()
    assert lines == [str(want), "False"]


def test_save_refuses_what_it_cannot_save(spark: Any, tmp_path: Any) -> None:
    run, _ = _pipeline(spark)
    with pytest.raises(TypeError, match="runs= takes Run objects"):
        tensprov_lab.save(tmp_path / "x", runs=["saved-retail"])
    tensprov_lab.save(tmp_path / "one", runs=run)
    (loaded,) = tensprov_lab.load(tmp_path / "one")
    with pytest.raises(ValueError, match="different stores"):
        tensprov_lab.save(tmp_path / "two", runs=[run, loaded])
    assert not os.path.exists(tmp_path / "two")
    # the loaded run saves again on its own, and loads the same
    tensprov_lab.save(tmp_path / "again", runs=loaded)
    (again,) = tensprov_lab.load(tmp_path / "again")
    assert np.array_equal(
        again.backward("out", rows=[0])["orders"], loaded.backward("out", rows=[0])["orders"]
    )


def test_provsave_and_provload_magics(spark: Any, tmp_path: Any) -> None:
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    run, _ = _pipeline(spark)
    ip = InteractiveShell.instance()
    assert ip.run_cell("%load_ext tensprov_lab").success
    path = tmp_path / "magic"
    with capture_output() as cap:
        assert ip.run_cell(f"%provsave {path} --run saved-retail").success
    assert f"tensprov-lab save {path}: 1 run(s) (saved-retail)" in cap.stdout
    with capture_output() as cap:
        bad = ip.run_cell(f"%provsave {path} --run nosuchrun")
    assert "no run named 'nosuchrun'" in str(bad.error_in_exec)
    with capture_output() as cap:
        assert ip.run_cell(f"%provload {path}").success
    assert "tensprov-lab run saved-retail: 5 operations" in cap.stdout
    loaded = tensprov_lab.last_run()
    try:
        assert loaded is not run and loaded.name == "saved-retail"
        # %provtrace on a loaded run: datasets by name
        ip.user_ns.pop("out", None)
        want = repr(loaded.backward("out", rows=[0]))
        with capture_output() as cap:
            assert ip.run_cell("%provtrace out 0").success
        assert want in [o.data.get("text/plain") for o in cap.outputs]
        assert "the records cannot be shown: the records of" in cap.stdout
        with capture_output() as cap:
            missing = ip.run_cell(f"%provload {tmp_path / 'nowhere'}")
        assert "no tensprov-lab save at" in str(missing.error_in_exec)
        assert len(str(missing.error_in_exec).splitlines()) == 1
    finally:
        loaded.forget()
