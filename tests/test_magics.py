"""The notebook magics: ``%%provtrack`` runs a cell exactly as without the magic and
records a run; ``%provtrace`` shows lineage or a one-line error (DESIGN.md §1, §7).

Cells run through a real ``InteractiveShell`` (``shell.run_cell``), as in a notebook.
"""

from __future__ import annotations

import io
import re
import subprocess
import sys
import warnings
from types import SimpleNamespace
from typing import Any

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from IPython.core.magic_arguments import parse_argstring
from IPython.utils.capture import capture_output

import tensprov_lab
from tensprov_lab import _registry
from tensprov_lab._run import Run
from tensprov_lab.capture.recording._tracker import TensProvWarning
from tensprov_lab.notebook import ProvenanceMagics
from tensprov_lab.notebook._magics import _selection
from tensprov_lab.notebook._progress import Progress as _Progress
from tests._interrupts import ctrl_c

pytestmark = pytest.mark.spark

SETUP = """\
from pyspark.sql import functions as F
ORDERS = [(1, 1, 10.0), (2, 2, 60.0), (3, 3, 70.0), (4, 1, 80.0), (5, 2, 55.0)]
customers = spark.createDataFrame(
    [(1, "north"), (2, "south"), (3, "north")], "cust_id int, region string"
)
fresh = spark.range(3)
"""

BODY = """\
orders = spark.createDataFrame(ORDERS, "order_id int, cust_id int, amount double")
big = orders.filter(F.col("amount") > 50)
joined = big.join(customers, "cust_id")
out = joined.groupBy("region").agg(F.sum("amount").alias("total"))
"""
NAMES = {"orders", "big", "joined", "out"}
SUMMARY = re.compile(
    r"tensprov-lab run (\S+): \d+ operations, \d+ datasets, [\d,]+ tensor entries, .+, "
    r"capture \d+\.\d\d s"
)


def _classes() -> list[type]:
    from pyspark.sql.group import GroupedData

    from tensprov_lab.capture.spark._versions import classic_dataframe

    return [classic_dataframe(), GroupedData]


def _collected(df: Any) -> tuple[Any, list[tuple]]:
    return df.schema, sorted((tuple(r) for r in df.collect()), key=repr)


def _without_summary(text: str) -> list[str]:
    return [line for line in text.splitlines() if not SUMMARY.fullmatch(line)]


@pytest.fixture(scope="module")
def shell(spark: Any) -> InteractiveShell:
    # ``spark`` makes a SparkSession active: %%provtrack looks for the active one
    ip = InteractiveShell.instance()
    ip.run_line_magic("colors", "nocolor")
    assert ip.run_cell("%load_ext tensprov_lab").success
    ip.user_ns["spark"] = spark
    assert ip.run_cell(SETUP).success
    return ip


@pytest.fixture(scope="module")
def retail(shell: InteractiveShell) -> SimpleNamespace:
    """The §1 pipeline, once untracked and once in a ``%%provtrack`` cell."""
    ns = shell.user_ns
    assert shell.run_cell(BODY).success
    plain = {name: _collected(ns[name]) for name in NAMES}
    for name in NAMES:
        del ns[name]
    before = dict(ns)
    n_runs = len(tensprov_lab.runs())
    with capture_output() as cap:
        result = shell.run_cell("%%provtrack --name retail\n" + BODY)
    return SimpleNamespace(
        result=result,
        stdout=cap.stdout,
        before=before,
        plain=plain,
        new_runs=tensprov_lab.runs()[n_runs:],
    )


# -- %%provtrack ------------------------------------------------------------------------


def test_extension_registers_both_magics(shell: InteractiveShell) -> None:
    magics = shell.magics_manager.magics
    assert isinstance(magics["cell"]["provtrack"].__self__, ProvenanceMagics)
    assert isinstance(magics["line"]["provtrace"].__self__, ProvenanceMagics)


def test_tracked_cell_prints_summary_and_records_a_run(retail: SimpleNamespace) -> None:
    assert retail.result.success
    assert len(retail.new_runs) == 1
    run = retail.new_runs[0]
    assert run in tensprov_lab.runs()
    assert run.name == "retail"
    assert retail.stdout.splitlines() == [run.summary()]
    assert SUMMARY.fullmatch(run.summary())
    assert [op.method for op in run.operations if not op.trivial] == ["filter", "join", "agg"]


def test_values_are_those_of_the_untracked_cell(shell: InteractiveShell, retail: Any) -> None:
    for name in NAMES:
        assert _collected(shell.user_ns[name]) == retail.plain[name], name


def test_namespace_gets_only_what_the_cell_binds(shell: InteractiveShell, retail: Any) -> None:
    ns = shell.user_ns
    added = set(ns) - set(retail.before)
    assert added == NAMES
    # nothing rebound: the magic binds no helper and reassigns nothing
    assert [k for k, v in retail.before.items() if ns.get(k, object()) is not v] == []


def test_datasets_are_named_after_notebook_variables(retail: SimpleNamespace) -> None:
    run = retail.new_runs[0]
    names = [d.name for d in run.datasets]
    assert set(names) == NAMES | {"customers"}  # customers: an earlier, untracked cell
    assert run.dataset("out").id == run.operations[-1].output


def _plain_then_tracked(shell: InteractiveShell, capsys: Any, cell: str) -> tuple[Any, ...]:
    """Run ``cell`` as it is, then under ``%%provtrack``: each result and what it printed."""
    plain = shell.run_cell(cell)
    plain_out = capsys.readouterr().out
    tracked = shell.run_cell("%%provtrack\n" + cell)
    return plain, plain_out, tracked, capsys.readouterr().out


def test_last_expression_is_displayed_as_without_magic(
    shell: InteractiveShell, retail: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    cell = "n_big = big.count()\nn_big * 10\n"
    plain, plain_out, tracked, tracked_out = _plain_then_tracked(shell, capsys, cell)
    assert plain.result == tracked.result == 40
    assert "Out[" in plain_out
    assert _without_summary(tracked_out) == plain_out.splitlines()
    assert SUMMARY.fullmatch(tracked_out.splitlines()[-1])


def test_exception_is_shown_as_without_magic_and_nothing_stays_patched(
    shell: InteractiveShell, retail: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    cell = "partial = orders.select('order_id', 'amount')\n1 / 0\n"
    plain = shell.run_cell(cell)
    plain_out = capsys.readouterr().out
    del shell.user_ns["partial"]
    before = [dict(vars(cls)) for cls in _classes()]
    n_runs = len(tensprov_lab.runs())

    tracked = shell.run_cell("%%provtrack --name failing\n" + cell)
    tracked_out = capsys.readouterr().out

    assert isinstance(plain.error_in_exec, ZeroDivisionError)
    assert type(tracked.error_in_exec) is ZeroDivisionError
    assert "ZeroDivisionError" in plain_out
    assert _without_summary(tracked_out) == plain_out.splitlines()  # same traceback text
    assert [dict(vars(cls)) for cls in _classes()] == before
    # what the cell built before the error is recorded
    assert len(tensprov_lab.runs()) == n_runs + 1
    run = tensprov_lab.last_run()
    assert run.name == "failing"
    assert [d.name for d in run.datasets] == ["partial"]
    assert run.rows("partial")["order_id"].tolist() == [1, 2, 3, 4, 5]


def test_spark_error_in_cell_keeps_its_type(shell: InteractiveShell, retail: Any) -> None:
    before = [dict(vars(cls)) for cls in _classes()]
    plain = shell.run_cell("bad = orders.select('nope')")
    tracked = shell.run_cell("%%provtrack\nbad = orders.select('nope')")
    assert plain.error_in_exec is not None
    assert type(tracked.error_in_exec) is type(plain.error_in_exec)
    assert "bad" not in shell.user_ns
    assert [dict(vars(cls)) for cls in _classes()] == before
    # the tracker is free again: the next tracked cell runs and records
    assert shell.run_cell("%%provtrack --name after\nfine = orders.select('amount')").success
    assert tensprov_lab.last_run().name == "after"


def test_syntax_error_runs_nothing_and_records_nothing(
    shell: InteractiveShell, retail: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    n_runs = len(tensprov_lab.runs())
    plain, plain_out, tracked, tracked_out = _plain_then_tracked(shell, capsys, "x = (1,\n")
    assert type(tracked.error_before_exec) is type(plain.error_before_exec) is SyntaxError
    assert tracked_out == plain_out
    assert len(tensprov_lab.runs()) == n_runs


def test_rerunning_a_cell_records_a_new_run(
    shell: InteractiveShell, retail: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    cell = "%%provtrack --name again\nsel = orders.select('order_id')\n"
    n_runs = len(tensprov_lab.runs())
    assert shell.run_cell(cell).success
    first_df = shell.user_ns["sel"]
    assert shell.run_cell(cell).success
    new = tensprov_lab.runs()[n_runs:]
    assert len(new) == 2 and new[0] is not new[1] and new[0].id != new[1].id
    assert [r.name for r in new] == ["again", "again"]
    assert [len(r.operations) for r in new] == [1, 1]
    out = capsys.readouterr().out.splitlines()
    assert out == [new[0].summary(), new[1].summary()]
    # the history keeps the first run queryable
    assert new[0].dataset(first_df).id != new[1].dataset(shell.user_ns["sel"]).id


def test_no_capture_runs_the_cell_untracked(
    shell: InteractiveShell, retail: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    n_runs = len(tensprov_lab.runs())
    cell = "%%provtrack --no-capture --name x\nuntracked = orders.select('amount')"
    result = shell.run_cell(cell)
    assert result.success
    assert len(tensprov_lab.runs()) == n_runs
    amounts = [(10.0,), (55.0,), (60.0,), (70.0,), (80.0,)]
    assert _collected(shell.user_ns["untracked"])[1] == amounts
    assert capsys.readouterr().out == ""
    with pytest.raises(KeyError, match="not captured"):
        tensprov_lab.last_run().dataset(shell.user_ns["untracked"])


def test_quoted_name_and_no_nesting(
    shell: InteractiveShell, retail: Any, spark: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    assert shell.run_cell('%%provtrack --name "q run"\nq = orders.select("cust_id")').success
    assert tensprov_lab.last_run().name == "q run"
    capsys.readouterr()
    with tensprov_lab.track(spark):
        result = shell.run_cell("%%provtrack\ninner = orders.select('order_id')")
    assert isinstance(result.error_in_exec, UsageError)
    assert "tracked blocks do not nest" in capsys.readouterr().err
    assert "inner" not in shell.user_ns


def test_no_active_session_gives_a_clear_message(
    shell: InteractiveShell, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from pyspark.sql import SparkSession

    monkeypatch.setattr(SparkSession, "getActiveSession", classmethod(lambda cls: None))
    result = shell.run_cell("%%provtrack\nnever = 1")
    captured = capsys.readouterr()
    assert isinstance(result.error_in_exec, UsageError)
    assert "no active SparkSession" in captured.err and "getOrCreate()" in captured.err
    assert "Traceback" not in captured.out + captured.err
    assert "never" not in shell.user_ns


def test_budget_is_passed_to_the_capture(
    shell: InteractiveShell, retail: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    cell = "lean = orders.filter('amount > 20')\nleaner = lean.select('order_id')\n"
    store = tensprov_lab.store()

    def spilled() -> int:
        return sum(1 for op in store.operations.values() if op.spilled)

    # without spilling: coarse lineage past the budget, with the warning, nothing spilled
    before = spilled()
    capsys.readouterr()
    with warnings.catch_warnings(record=True) as raised:
        warnings.simplefilter("always")
        assert shell.run_cell("%%provtrack --budget 1B --no-spill\n" + cell).success
    # the warnings are listed under the summary, led by the user's variable, not raised
    listed = capsys.readouterr().out.splitlines()
    assert listed[1].startswith("  warning: lean: filter('amount > 20'): record-level")
    assert "memory budget of 1 bytes" in listed[1]
    assert not [w for w in raised if issubclass(w.category, TensProvWarning)]
    run = tensprov_lab.last_run()
    assert [op.opaque for op in run.operations] == [True, True]
    assert spilled() == before
    # by default tensors spill to disk past the budget (record-level lineage within a
    # budget is tests/test_spill.py's; 1 byte leaves no room even for column maps)
    assert shell.run_cell("%%provtrack --budget 1B\n" + cell).success
    assert "every tensor and key spilled to disk" in capsys.readouterr().out
    assert spilled() > before
    # --storage spark (no budget): every tensor goes to Spark-resident tables under
    # --spark-dir (their queries: tests/test_resident.py)
    import tempfile

    where = tempfile.mkdtemp(prefix="magic-spark-")
    assert shell.run_cell(f"%%provtrack --storage spark --spark-dir {where}\n" + cell).success
    run = tensprov_lab.last_run()
    in_spark = [op for op in run.operations if op.spilled]
    assert in_spark and not any(op.opaque for op in run.operations)
    assert all(any(t.kind == "spark" for t in op.tensors) for op in in_spark)
    assert all(p.startswith(where) for op in in_spark for p in op.spilled)

    bad = shell.run_cell("%%provtrack --budget lots\nnot_run = 1")
    assert isinstance(bad.error_in_exec, UsageError)
    assert "cannot read the size 'lots'" in capsys.readouterr().err
    assert "not_run" not in shell.user_ns


def test_explore_calls_run_explore_or_says_it_is_missing(
    shell: InteractiveShell,
    retail: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    cell = "%%provtrack --explore --name ex\nex = orders.select('order_id')\n"
    monkeypatch.delattr(Run, "explore", raising=False)
    assert shell.run_cell(cell).success
    assert "the lineage explorer is not available" in capsys.readouterr().out

    monkeypatch.setattr(Run, "explore", lambda self: f"explorer of {self.name}", raising=False)
    assert shell.run_cell(cell).success
    out = capsys.readouterr().out.splitlines()
    assert out == [tensprov_lab.last_run().summary(), "'explorer of ex'"]


def test_capture_warnings_are_listed_with_the_summary_each_time_a_cell_runs(
    shell: InteractiveShell, retail: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    cell = "%%provtrack\nfew = orders.limit(2)\n"
    capsys.readouterr()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")  # the usual "once per code location"
        assert shell.run_cell(cell).success
        assert shell.run_cell(cell).success
    out = capsys.readouterr().out.splitlines()
    listed = [line for line in out if line.startswith("  warning: few: ")]
    assert len(listed) == 2
    assert all("not deterministic" in line for line in listed)
    # listed once, with the summary: not raised as well (pointing at our modules)
    assert not [w for w in caught if issubclass(w.category, TensProvWarning)]


# -- progress ---------------------------------------------------------------------------


def test_progress_in_a_notebook_turns_into_the_summary(
    shell: InteractiveShell, retail: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shell, "kernel", object(), raising=False)  # as in ipykernel
    with capture_output() as cap:
        result = shell.run_cell("%%provtrack --wait --name nb\nnb = orders.filter('amount > 20')")
    assert result.success
    outputs = cap.outputs
    ids = {o.transient.get("display_id") for o in outputs}
    assert len(ids) == 1 and None not in ids  # one display, updated in place
    assert [o.update for o in outputs] == [False] + [True] * (len(outputs) - 1)
    assert outputs[0].data["text/plain"].startswith("tensprov-lab: capturing provenance 1/")
    assert "<progress" in outputs[0].data["text/html"]
    assert outputs[-1].data == {"text/plain": tensprov_lab.last_run().summary()}
    assert cap.stdout == ""


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_on_a_terminal_is_one_line_erased_at_the_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    tty = _Tty()
    monkeypatch.setattr(sys, "stdout", tty)
    progress = _Progress(SimpleNamespace())
    progress(0, 2, "source")
    progress(1, 2, "filter")
    progress.finish("SUMMARY")
    first = "tensprov-lab: capturing provenance 1/2 (source)"
    second = "tensprov-lab: capturing provenance 2/2 (filter)"
    assert tty.getvalue() == f"\r{first}\r{second}\r{' ' * len(second)}\rSUMMARY\n"


# -- %provtrace -------------------------------------------------------------------------


def test_provtrace_rows_shows_lineage_and_records(
    shell: InteractiveShell, retail: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    run = retail.new_runs[0]
    expected = run.backward(shell.user_ns["out"], rows=[0])
    assert {label for label, _ in expected.items()} == {"orders", "customers"}
    assert shell.run_cell("%provtrace out 0").success
    out = capsys.readouterr().out
    assert repr(expected) in out
    for label, rows in expected.items():
        assert f"{label}: {len(rows)} record(s)" in out
    assert out.count("_row") == 2  # one record table per source


@pytest.mark.parametrize(
    ("line", "query"),
    [
        ("out \"region = 'north'\"", ("backward", "out", {"where": "region = 'north'"})),
        ("out region = 'north'", ("backward", "out", {"where": "region = 'north'"})),
        ("orders 1 --forward --to out", ("forward", "orders", {"rows": [1], "to": "out"})),
        ("--forward orders 0,3", ("forward", "orders", {"rows": [0, 3]})),
        ("out [0, 1] --to orders", ("backward", "out", {"rows": [0, 1], "to": "orders"})),
    ],
)
def test_provtrace_selections_and_directions(
    shell: InteractiveShell,
    retail: Any,
    capsys: pytest.CaptureFixture[str],
    line: str,
    query: tuple[str, str, dict[str, Any]],
) -> None:
    run = retail.new_runs[0]
    ns = shell.user_ns
    direction, var, kwargs = query
    if "to" in kwargs:
        kwargs = {**kwargs, "to": ns[kwargs["to"]]}
    expected = getattr(run, direction)(ns[var], **kwargs)
    assert len(expected)  # the query reaches something
    assert shell.run_cell(f"%provtrace {line}").success
    assert repr(expected) in capsys.readouterr().out


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("nosuchvar 0", "no variable named 'nosuchvar' in the notebook"),
        ("ORDERS 0", "'ORDERS' is a list, not a Spark DataFrame"),
        ("fresh 0", "this DataFrame was not captured"),
        ("out nosuchcol > 1", "where='nosuchcol > 1' is not a valid predicate over out"),
        ("out 99", "row indices must be in 0..1 for out"),
        ("out 0 --to nosuchvar", "no variable named 'nosuchvar'"),
    ],
)
def test_provtrace_errors_are_one_line(
    shell: InteractiveShell,
    retail: Any,
    capsys: pytest.CaptureFixture[str],
    line: str,
    message: str,
) -> None:
    result = shell.run_cell(f"%provtrace {line}")
    captured = capsys.readouterr()
    assert isinstance(result.error_in_exec, UsageError)
    assert len(str(result.error_in_exec).splitlines()) == 1
    assert message in str(result.error_in_exec)
    assert captured.err.startswith(f"UsageError: {message}")
    assert captured.err.count("\n") == 1
    assert captured.out == ""


@pytest.mark.parametrize(
    ("line", "parsed"),
    [
        ("out 3", ([3], None)),
        ("out 0 2 5", ([0, 2, 5], None)),
        ("out [0, 2]", ([0, 2], None)),
        ("out \"region = 'north'\"", (None, "region = 'north'")),
        ("out name = 'a  b' --forward", (None, "name = 'a  b'")),  # spacing in literals kept
        ("--to out2 out amount > -5", (None, "amount > -5")),
    ],
)
def test_selection_parsing(line: str, parsed: tuple[Any, Any]) -> None:
    args = parse_argstring(ProvenanceMagics.provtrace, line)
    assert _selection(line, args.var, args.selection) == parsed


def test_importing_the_package_imports_neither_ipython_nor_pyspark() -> None:
    code = (
        "import sys, tensprov_lab, tensprov_lab.notebook; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'IPython', 'pyspark'}))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


# -- --background -----------------------------------------------------------------------


def test_notebook_cell_ends_before_its_capture_by_default_and_says_so(
    shell: InteractiveShell, retail: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shell, "kernel", object(), raising=False)  # as in ipykernel
    magics = shell.magics_manager.magics["cell"]["provtrack"].__self__
    with capture_output() as cap:
        result = shell.run_cell("%%provtrack --name bgcell\n" + BODY)  # no --background
        assert result.success
        run = tensprov_lab.last_run()  # waits for the capture
        magics.progress.summarizer.join(30)
    assert run.name == "bgcell" and not run.capturing
    assert [op.method for op in run.operations if not op.trivial] == ["filter", "join", "agg"]
    assert {d.name for d in run.datasets} >= NAMES  # named after the cell's variables
    ns = shell.user_ns
    assert {name: _collected(ns[name]) for name in NAMES} == retail.plain
    outputs = cap.outputs
    assert len({o.transient.get("display_id") for o in outputs}) == 1
    assert "in the background" in outputs[0].data["text/plain"]
    assert outputs[-1].update and outputs[-1].data == {"text/plain": run.summary()}
    assert SUMMARY.fullmatch(run.summary())


def test_next_cell_waits_for_a_background_capture(shell: InteractiveShell, retail: Any) -> None:
    assert shell.run_cell(
        "%%provtrack --background --name one\na1 = orders.select('amount')"
    ).success
    assert shell.run_cell("%%provtrack --name two\na2 = a1.filter('amount > 50')").success
    one, two = tensprov_lab.runs()[-2:]
    assert (one.name, two.name) == ("one", "two")
    assert two.dataset(shell.user_ns["a2"]).n_rows == sum(
        1 for o in [10.0, 60.0, 70.0, 80.0, 55.0] if o > 50
    )


def test_background_capture_writes_nothing_under_a_terminal_prompt(
    shell: InteractiveShell, retail: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("tensprov_lab.notebook._progress._isatty", lambda stream: True)
    with capture_output() as cap:
        assert shell.run_cell("%%provtrack --background --name term\nt1 = orders.limit(1)").success
        run = tensprov_lab.last_run()  # the capture has ended: it wrote what it would
    assert run.name == "term" and run.operations
    assert "capturing provenance" not in cap.stdout and "\r" not in cap.stdout
    # a foreground cell on the same terminal shows its progress line
    with capture_output() as cap:
        assert shell.run_cell("%%provtrack --name term2\nt2 = orders.limit(1)").success
    assert "capturing provenance" in cap.stdout


def _notebook_cell(shell: InteractiveShell, cell: str) -> tuple[Any, Any, Any]:
    """Run ``cell`` as a notebook kernel would (capture in the background), wait for
    its capture and its summary: (the cell's result, its outputs, the run)."""
    magics = shell.magics_manager.magics["cell"]["provtrack"].__self__
    with capture_output() as cap:
        result = shell.run_cell(cell)
        run = tensprov_lab.last_run()
        magics.progress.summarizer.join(60)
    return result, cap.outputs, run


def test_a_notebook_summary_lists_the_runs_warnings_once(
    shell: InteractiveShell, retail: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shell, "kernel", object(), raising=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result, outputs, run = _notebook_cell(
            shell, "%%provtrack --name nbwarn\nfew = orders.limit(2)"
        )
        assert run.dataset(shell.user_ns["few"]).n_rows == 2  # a query: nothing raised
    assert result.success
    lines = outputs[-1].data["text/plain"].splitlines()
    assert lines[0] == run.summary()
    assert lines[1].startswith("  warning: few: limit(2) is not deterministic")
    assert len(lines) == 2 == len(run.warnings) + 1
    assert not [w for w in caught if issubclass(w.category, TensProvWarning)]


def test_a_failed_notebook_capture_shows_in_its_summary_once(
    shell: InteractiveShell, retail: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tensprov_lab.capture.recording._tracker import Tracker

    def boom(self: Tracker, run: Any) -> None:
        raise RuntimeError("boom while materializing")

    monkeypatch.setattr(shell, "kernel", object(), raising=False)
    monkeypatch.setattr(Tracker, "_materialize", boom)
    magics = shell.magics_manager.magics["cell"]["provtrack"].__self__
    with capture_output() as cap:
        assert shell.run_cell(
            "%%provtrack --name nbfails\nbad = orders.filter('amount > 50')"
        ).success
        # the failure is one of the run's notes: listed with the summary, not said
        # again by the next query (which waits for the capture)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            failed = tensprov_lab.last_run().wait()
        magics.progress.summarizer.join(60)
    assert [w for w in caught if issubclass(w.category, TensProvWarning)] == []
    assert any("capture failed: boom while materializing" in w for w in failed.warnings)
    assert failed.dataset(shell.user_ns["bad"]).n_rows == 4
    shown = cap.outputs[-1].data["text/plain"]
    assert "capture failed: boom while materializing" in shown
    monkeypatch.undo()
    monkeypatch.setattr(shell, "kernel", object(), raising=False)
    result, _, run = _notebook_cell(
        shell, "%%provtrack --name nbthen\nok = orders.filter('amount > 50')"
    )
    assert result.success and run.dataset(shell.user_ns["ok"]).n_rows == 4


SLOW = """\
import time as _time
@F.udf("boolean")
def slow(x):
    _time.sleep(0.02)
    return x % 2 == 0
ids = spark.createDataFrame([(i,) for i in range({n})], "id long")
"""


def test_rerunning_a_notebook_cell_while_its_capture_runs_is_safe(
    shell: InteractiveShell, retail: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shell, "kernel", object(), raising=False)
    assert shell.run_cell(SLOW.format(n=200)).success  # a capture of ~2 s
    cell = "%%provtrack --name again\nkept = ids.filter(slow('id'))"
    with capture_output():
        assert shell.run_cell(cell).success
        first = _registry._RUNS[-1]  # (runs() would wait for the capture)
        assert first.capturing  # the cell has ended, its capture has not
        assert shell.run_cell(cell).success  # waits for the first capture, then its own
    second = tensprov_lab.last_run()
    assert first is not second and not first.capturing
    for run in (first, second):
        assert run.name == "again" and run.dataset(shell.user_ns["kept"]).n_rows == 100
    assert [op.method for op in first.operations] == [op.method for op in second.operations]


def test_ctrl_c_while_a_notebook_capture_runs_drops_it_and_restores_pyspark(
    shell: InteractiveShell, retail: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    from pyspark.sql import DataFrame

    monkeypatch.setattr(shell, "kernel", object(), raising=False)
    assert shell.run_cell(SLOW.format(n=4000)).success  # a capture of ~40 s
    filter_before = DataFrame.filter
    runs_before = len(tensprov_lab.runs())
    store = tensprov_lab.store()
    state = (len(store.datasets), len(store.operations))
    with capture_output():
        assert shell.run_cell("%%provtrack --name cut\ncut = ids.filter(slow('id'))").success
        assert DataFrame.filter is filter_before  # restored when the cell's code has run
        timer = threading.Timer(1.5, ctrl_c)
        timer.start()
        # Ctrl-C while the next query waits for the capture: the run is dropped whole
        waited = shell.run_cell("import tensprov_lab; tensprov_lab.last_run().wait()")
        timer.cancel()
    assert isinstance(waited.error_in_exec, KeyboardInterrupt)
    assert len(tensprov_lab.runs()) == runs_before
    store = tensprov_lab.store()
    assert (len(store.datasets), len(store.operations)) == state
    assert DataFrame.filter is filter_before
    result, _, after = _notebook_cell(shell, "%%provtrack --name after\nafter = orders.limit(2)")
    assert result.success and after.dataset(shell.user_ns["after"]).n_rows == 2
