"""IPython magics: ``%%provtrack`` tracks a cell, ``%provtrace`` queries what it captured.

>>> %load_ext tensprov_lab                                # doctest: +SKIP
>>> %%provtrack --name retail                             # doctest: +SKIP
... big = orders.filter("amount > 50")
... out = big.groupBy("region").count()
tensprov-lab run retail: 2 operations, 3 datasets, 14 tensor entries, 112 B, capture 0.41 s
>>> %provtrace out 0                                      # doctest: +SKIP

The tracked cell runs through IPython's own execution steps (input transformers, AST
transformers, ``run_ast_nodes``) under the number of the cell that holds the magic, so
its output, the display of its last expression and its tracebacks are the ones the
cell would give without the magic, and its errors mark the notebook cell as failed.
"""

from __future__ import annotations

import ast
import html
import re
import sys
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from IPython.core.error import InputRejected, UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from IPython.display import display
from IPython.utils.process import arg_split

from tensprov_lab import _api, _registry
from tensprov_lab.capture.spark._versions import quiet_analysis_errors as _quiet_spark_errors
from tensprov_lab.notebook._progress import (
    Progress,
    QueryProgress,
    in_notebook,
    one_line,
    summary_text,
)

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

    from tensprov_lab._run import Lineage, Run

__all__ = ["ProvenanceMagics", "load_ipython_extension"]

#: ``ROW_OR_PREDICATE`` read as row indices: ``3``, ``0 2 5``, ``0,2,5`` or ``[0, 2, 5]``
_ROWS = re.compile(r"\[?\s*-?\d+(?:\s*[,\s]\s*-?\d+)*\s*,?\s*\]?")


def load_ipython_extension(ipython: InteractiveShell) -> None:
    """Register the magics (``%load_ext tensprov_lab`` calls this).

    Examples
    --------
    >>> get_ipython().run_line_magic("load_ext", "tensprov_lab")  # doctest: +SKIP
    """
    ipython.register_magics(ProvenanceMagics)
    if "pyspark" in sys.modules:  # a session started before the extension was loaded
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession()
        if spark is not None:
            _registry.prepare(spark)
    if getattr(ipython, "kernel", None) is not None:
        from tensprov_lab.capture.memory._resident import on_progress

        on_progress(QueryProgress(ipython))


@dataclass
class _Outcome:
    """Where a cell's errors go when the magic is not run from a cell (no ExecutionResult)."""

    execution_count: int | None = None
    error_before_exec: BaseException | None = None
    error_in_exec: BaseException | None = None
    result: Any = None
    info: Any = None


@dataclass
class _Cell:
    """A cell body parsed and cached by IPython's compiler, ready to run."""

    filename: str
    body: list[ast.stmt]
    compiler: Any
    needs_loop: bool


@magics_class
class ProvenanceMagics(Magics):
    """``%%provtrack`` (track the provenance of a cell) and ``%provtrace`` (query it).

    Examples
    --------
    >>> from IPython import get_ipython                     # doctest: +SKIP
    >>> get_ipython().register_magics(ProvenanceMagics)     # doctest: +SKIP
    """

    #: the progress line of the last tracked cell (its summary comes later when the
    #: capture runs in the background)
    progress: Progress | None = None

    @property
    def _ip(self) -> InteractiveShell:
        # a registered Magics always has its shell (``Magics.shell`` is typed Optional)
        assert self.shell is not None
        return self.shell

    # -- %%provtrack ---------------------------------------------------------------
    @magic_arguments()
    @argument("--name", help="name of the run (default: its number)")
    @argument(
        "--budget",
        metavar="SIZE",
        help="most bytes of tensors the store may hold in memory, e.g. 512MB; tensors "
        "past it spill to local disk (memory-mapped)",
    )
    @argument(
        "--no-spill",
        action="store_true",
        help="past the budget, keep coarse lineage only instead of spilling to disk",
    )
    @argument(
        "--storage",
        choices=("disk", "spark"),
        default="disk",
        help="where tensors past the budget go: local disk (memory-mapped, the default) "
        "or Parquet tables Spark keeps, queried by Spark jobs (without --budget: all)",
    )
    @argument(
        "--spark-dir",
        metavar="DIR",
        help="the directory of Spark-resident tables (on a cluster: a shared mount)",
    )
    @argument(
        "--no-capture",
        action="store_true",
        help="run the cell untracked (the other options are then ignored)",
    )
    @argument(
        "--wait",
        action="store_true",
        help="capture before the cell ends (the default in a terminal, where no line "
        "above the prompt can be updated later)",
    )
    @argument(
        "--background",
        action="store_true",
        help="capture in the background (the default in a notebook): the cell ends as "
        "soon as its code has run, queries wait for the capture, and the summary line "
        "updates itself when it is done",
    )
    @argument("--explore", action="store_true", help="open the lineage explorer after capture")
    @cell_magic
    def provtrack(self, line: str, cell: str) -> None:
        """Run the cell and capture the provenance of its DataFrame operations.

        The cell runs in the notebook namespace exactly as it would without the magic
        (same values, output and errors); the datasets of the run are named after the
        notebook variables that hold them. A one-line summary follows the cell, with
        the run's warnings listed under it, and the run is added to
        ``tensprov_lab.runs()`` (re-running the cell adds a new run). Needs an active
        SparkSession.

        In a notebook the capture runs in the background: the cell ends when its code
        has run, and the summary shows the capture's progress until it turns into the
        summary line (or says why the capture failed). A query, ``%provtrace``, the
        explorer or the next tracked cell wait for it; a Ctrl-C while they wait drops
        the run. ``--wait`` captures before the cell ends (the default in a terminal).

        Examples
        --------
        ::

            %%provtrack --name retail --budget 512MB
            big = orders.filter("amount > 50")
            out = big.join(customers, "cust_id").groupBy("region").count()
        """
        args = parse_argstring(self.provtrack, line)
        if args.wait and args.background:
            raise UsageError("--wait and --background: choose one")
        background = args.background or (not args.wait and in_notebook(self._ip))
        if args.no_capture:
            prepared = self._prepare(cell)
            if prepared is not None:
                self._execute(prepared)
            return
        try:
            budget = _api.parse_size(_unquote(args.budget)) if args.budget else None
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        spark = _active_spark()
        prepared = self._prepare(cell)
        if prepared is None:  # the cell does not compile: shown as IPython shows it, nothing run
            return
        tracked = self._begin(
            spark,
            _unquote(args.name) if args.name else None,
            budget,
            not args.no_spill,
            background=background,
            storage=args.storage,
            spark_dir=_unquote(args.spark_dir) if args.spark_dir else None,
        )
        try:
            self._execute(prepared)
        finally:
            # capture also when the cell raised: what it built before the error is recorded
            run = self._capture(tracked)
        if args.explore:
            self._explore(run)

    def _outcome(self) -> Any:
        # The ExecutionResult of the cell holding the magic.  Errors recorded there make
        # Jupyter mark the cell as failed (and stop "Run All"), as without the magic.
        result = getattr(self._ip.displayhook, "exec_result", None)
        return result if result is not None else _Outcome(self._ip.execution_count)

    def _prepare(self, cell: str) -> _Cell | None:
        """Transform, parse and cache the cell as ``InteractiveShell.run_cell`` does.

        Returns None when that fails; the error is then shown exactly as IPython shows
        it and recorded as the cell's ``error_before_exec``.
        """
        shell = self._ip
        outcome = self._outcome()
        info = getattr(outcome, "info", None)
        compiler = shell.compile if getattr(info, "shell_futures", True) else shell.compiler_class()
        try:
            transformed = shell.transform_cell(cell)
        except Exception as exc:
            shell.showtraceback()
            outcome.error_before_exec = exc
            return None
        # the number of the cell holding the magic: tracebacks then say "Cell In[n]"
        # exactly as without the magic (the shell's counter has already moved on)
        number = outcome.execution_count
        if number is None:
            number = shell.execution_count
        filename = compiler.cache(transformed, number, raw_code=cell)
        # how IPython shows an error before the cell runs, by kind (in this order)
        shows: list[tuple[Any, Callable[[], object]]] = [
            (shell.custom_exceptions, lambda: shell.CustomTB(*sys.exc_info())),
            (IndentationError, shell.showindentationerror),
            (
                (OverflowError, SyntaxError, ValueError, TypeError, MemoryError),
                shell.showsyntaxerror,
            ),
            (InputRejected, shell.showtraceback),
        ]
        try:
            tree = compiler.ast_parse(transformed, filename=filename)
            tree = shell.transform_ast(tree)
        except Exception as exc:
            show = next((show for kinds, show in shows if isinstance(exc, kinds)), None)
            if show is None:
                raise
            show()
            outcome.error_before_exec = exc
            return None
        needs_loop = shell.should_run_async(
            cell, transformed_cell=transformed, preprocessing_exc_tuple=None
        )
        return _Cell(filename, tree.body, compiler, needs_loop)

    def _execute(self, cell: _Cell) -> bool:
        """Run a prepared cell in the user namespace; True when it raised.

        Errors are shown by IPython's ``run_code`` and stored on the cell's
        ExecutionResult; the last expression goes through the display hook.
        """
        shell = self._ip
        outcome = self._outcome()
        silent = bool(getattr(getattr(outcome, "info", None), "silent", False))
        coro = shell.run_ast_nodes(
            cell.body,
            cell.filename,
            interactivity="none" if silent else shell.ast_node_interactivity,
            compiler=cell.compiler,
            result=outcome,
        )
        runner = shell.trio_runner or (shell.loop_runner if cell.needs_loop else _run_sync)
        # both traps are already held by the cell running the magic; they nest
        with shell.builtin_trap, shell.display_trap:
            return bool(runner(coro))

    def _begin(
        self,
        spark: Any,
        name: str | None,
        budget: int | None,
        spill: bool = True,
        background: bool = False,
        storage: str = "disk",
        spark_dir: str | None = None,
    ) -> _api.track:
        tracker = _api._tracker(spark)
        tracker.wait()  # the previous cell's capture, when it runs in the background
        if tracker._active is not None:
            raise UsageError(
                "a tracked block is already running in this session; tracked blocks "
                "do not nest (use --no-capture inside it)"
            )
        tracked = _api.track(
            spark,
            name=name,
            budget=budget,
            spill=spill,
            background=background,
            storage=storage,
            spark_dir=spark_dir,
        )
        try:
            tracked.__enter__()
        except BaseException:
            tracker.abort()  # patching may have stopped half way: leave pyspark as it was
            raise
        # the run's warnings are listed with its summary, not raised at our lines: a
        # notebook shows the summary whenever the capture ends; a terminal only when it
        # ends before the prompt (there a background capture's warnings are raised by
        # the first query that waits for it, at the user's line)
        assert tracked.run is not None
        tracked.run._runlog.listed = in_notebook(self._ip) or not background
        return tracked

    def _capture(self, tracked: _api.track) -> Run:
        """Capture what the cell recorded, as ``track.__exit__`` does, and record the run.

        ``track.__exit__`` names datasets after the variables of its caller's frame;
        the cell's variables live in the user namespace, so a stand-in frame over
        that namespace is passed instead.
        """
        shell = self._ip
        scope = SimpleNamespace(f_locals=shell.user_ns, f_globals=shell.user_global_ns)
        progress = self.progress = Progress(shell)
        tracked._progress = progress
        run = tracked.run
        assert run is not None
        recorded = False
        failure: str | None = None
        try:
            try:
                # a terminal gets no progress from a capture in the background: its
                # lines would land under the prompt of whatever runs next
                live = progress if not tracked.background or progress.notebook else None
                if tracked.background:
                    progress.say("tensprov-lab: capturing provenance in the background…")
                tracked._tracker.end(scope, progress=live, background=tracked.background)
            except Exception as err:  # the cell has run: report, keep what was captured
                tracked._tracker.abort()
                failure = one_line(err)
            _registry._RUNS.append(run)
            recorded = True
        finally:
            if recorded and tracked.background:
                progress.later(run)
            else:
                progress.finish(summary_text(run, failure) if recorded else None)
        return run

    def _explore(self, run: Run) -> None:
        explore = getattr(run, "explore", None)
        if not callable(explore):
            print(
                "tensprov-lab: the lineage explorer is not available in this version; "
                "query the run with %provtrace or tensprov_lab.last_run().backward(...)"
            )
            return
        widget = explore()
        if widget is not None:
            display(widget)

    # -- %provtrace ----------------------------------------------------------------
    @magic_arguments()
    @argument("--forward", action="store_true", help="forward lineage (default: backward)")
    @argument(
        "--to",
        metavar="VAR",
        help="the dataset to trace to (default: every source, or every output with --forward)",
    )
    @argument("var", metavar="VAR", help="notebook variable holding a captured DataFrame")
    @argument(
        "selection",
        metavar="ROW_OR_PREDICATE",
        nargs="+",
        help="row indices (3, or 0,2,5) or an SQL predicate over VAR's columns",
    )
    @line_magic
    def provtrace(self, line: str) -> None:
        """Show the lineage of records of a DataFrame captured by the last run.

        Displays the lineage (rows reached per dataset) and the reached records of
        each dataset as tables. Programmatic form: ``tensprov_lab.last_run().backward(...)``.

        Examples
        --------
        ::

            %provtrace out 3
            %provtrace out "region = 'north'"
            %provtrace orders 17 --forward --to out
        """
        args = parse_argstring(self.provtrace, line)
        try:
            run = _api.last_run()
        except LookupError as exc:
            raise UsageError(one_line(exc)) from None
        # a run loaded from a save has no DataFrames here: its datasets go by name
        loaded = run._tracker.spark is None
        df = self._dataframe(_unquote(args.var), loaded)
        to = self._dataframe(_unquote(args.to), loaded) if args.to else None
        rows, where = _selection(line, args.var, args.selection)
        try:
            query = run.forward if args.forward else run.backward
            with _quiet_spark_errors():
                lineage = query(df, rows=rows, where=where, to=to)
        except (LookupError, ValueError, TypeError) as exc:  # KeyError/IndexError included
            raise UsageError(one_line(exc)) from None
        _show(lineage)

    def _dataframe(self, name: str, by_name: bool = False) -> Any:
        if by_name and not _is_dataframe(self._ip.user_ns.get(name)):
            return name
        from pyspark.sql import DataFrame

        if name not in self._ip.user_ns:
            raise UsageError(f"no variable named {name!r} in the notebook")
        value = self._ip.user_ns[name]
        if not isinstance(value, DataFrame):
            raise UsageError(f"{name!r} is a {type(value).__name__}, not a Spark DataFrame")
        return value

    # -- %provsave / %provload -----------------------------------------------------
    @magic_arguments()
    @argument("path", metavar="PATH", help="directory to write (an earlier save is replaced)")
    @argument(
        "--run", dest="runs", action="append", metavar="NAME",
        help="a run to save, by name (repeat for more; default: every run)",
    )  # fmt: skip
    @line_magic
    def provsave(self, line: str) -> None:
        """Save runs' provenance to PATH (``tensprov_lab.save``).

        Examples
        --------
        ::

            %provsave retail.tpl
            %provsave retail.tpl --run retail
        """
        from tensprov_lab._saves import save

        args = parse_argstring(self.provsave, line)
        try:
            runs = None
            if args.runs:
                known = {r.name: r for r in _api.runs() if r.name}
                missing = [n for n in args.runs if n not in known]
                if missing:
                    raise LookupError(
                        f"no run named {', '.join(map(repr, missing))}; known runs: "
                        f"{', '.join(map(repr, known)) or 'none'}"
                    )
                runs = [known[n] for n in args.runs]
            info = save(_unquote(args.path), runs=runs)
        except (LookupError, ValueError, TypeError, OSError) as exc:
            raise UsageError(one_line(exc)) from None
        print(repr(info))

    @magic_arguments()
    @argument("path", metavar="PATH", help="a directory written by %%provsave")
    @line_magic
    def provload(self, line: str) -> None:
        """Load saved runs (``tensprov_lab.load``): queryable by dataset name, without Spark.

        Examples
        --------
        ::

            %provload retail.tpl
            %provtrace out 0
        """
        from tensprov_lab._saves import load

        args = parse_argstring(self.provload, line)
        try:
            runs = load(_unquote(args.path))
        except (LookupError, ValueError, OSError) as exc:
            raise UsageError(one_line(exc)) from None
        for run in runs:
            print(run.summary().replace("capture", "captured in", 1))

    # -- %provdiff ------------------------------------------------------------------
    @magic_arguments()
    @argument(
        "runs", metavar="RUN", nargs="*",
        help="NAME or NAME@VERSION (two of them; one NAME: its last two versions; "
        "none: the last two versions of the last run's name)",
    )  # fmt: skip
    @argument("--output", metavar="NAME", help="the dataset whose records to compare")
    @argument("--explore", action="store_true", help="open the explorer's diff view too")
    @line_magic
    def provdiff(self, line: str) -> None:
        """What changed between two runs (``tensprov_lab.diff``): operations, schemas,
        row counts and an output's records.

        Examples
        --------
        ::

            %provdiff                      # the last two versions of the last run
            %provdiff retail               # the last two versions of run retail
            %provdiff retail@1 retail@3 --output out
            %provdiff retail --explore     # and the explorer with the changes marked
        """
        from tensprov_lab._diff import diff, history

        args = parse_argstring(self.provdiff, line)
        try:
            names = [_unquote(r) for r in args.runs]
            if len(names) > 2:
                raise ValueError("give at most two runs: %provdiff [BEFORE] [AFTER]")
            if len(names) < 2:
                name = names[0] if names else _api.last_run().name
                if name is None:
                    raise LookupError("the last run has no name: give two runs as NAME@VERSION")
                versions = history(name)
                if len(versions) < 2:
                    raise LookupError(
                        f"run {name!r} has {len(versions)} version(s): re-run its cell to "
                        "compare, or give two runs"
                    )
                before, after = versions[-2:]
            else:
                before, after = (_version(n) for n in names)
            output = _unquote(args.output) if args.output else None
            with _quiet_spark_errors():
                result = diff(before, after, output=output)
        except (LookupError, ValueError) as exc:
            raise UsageError(one_line(exc)) from None
        print(result.summary())
        for label, table in result.records.items():
            moved = table[table["status"] != "same"]
            if len(moved):
                display({"text/plain": f"records of {label} that differ:"}, raw=True)
                display(moved)
        if args.explore:
            display(result.explore())


# -- helpers --------------------------------------------------------------------------


def _version(ref: str) -> Any:
    """The run ``NAME`` (its last version) or ``NAME@VERSION``."""
    from tensprov_lab._diff import history

    name, _, version = ref.partition("@")
    versions = history(name)
    if not versions:
        known = sorted({r.name for r in _api.runs() if r.name})
        raise LookupError(f"no run named {name!r}; known runs: {', '.join(known) or 'none'}")
    if not version:
        return versions[-1]
    if not version.isdigit() or not 1 <= int(version) <= len(versions):
        raise LookupError(f"run {name!r} has versions 1..{len(versions)}, not {version!r}")
    return versions[int(version) - 1]


def _is_dataframe(value: Any) -> bool:
    if "pyspark" not in sys.modules:  # loading a save must not import pyspark
        return False
    from pyspark.sql import DataFrame

    return isinstance(value, DataFrame)


def _run_sync(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run a coroutine that never awaits (IPython's pseudo-sync runner)."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value
    coro.close()
    raise RuntimeError("this cell needs an event loop")


def _active_spark() -> Any:
    from pyspark.sql import SparkSession

    spark = SparkSession.getActiveSession()
    if spark is None:
        raise UsageError(
            "no active SparkSession: create one first, e.g. "
            "`spark = SparkSession.builder.getOrCreate()`, then run this cell again "
            "(or run it untracked with %%provtrack --no-capture)"
        )
    return spark


def _unquote(text: str) -> str:
    """``"a b"`` → ``a b`` (IPython's argument splitting keeps the quotes)."""
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"" and text[0] not in text[1:-1]:
        return text[1:-1]
    return text


def _selection(line: str, var: str, selection: list[str]) -> tuple[list[int] | None, str | None]:
    """Row indices or a predicate, from the text of ``line`` after ``VAR``.

    The predicate is taken verbatim from the line (spacing inside literals kept) when
    the options do not interleave with it; otherwise from the parsed tokens.

    >>> _selection("out 0, 2", "out", ["0,", "2"])
    ([0, 2], None)
    >>> _selection("out region = 'north'  --forward", "out", ["region", "=", "'north'"])
    (None, "region = 'north'")
    """
    tokens = arg_split(line, strict=True)
    spans = []
    cursor = 0
    for tok in tokens:  # non-POSIX splitting: each token is a verbatim slice of the line
        start = line.index(tok, cursor)
        cursor = start + len(tok)
        spans.append((start, cursor))
    positional: list[int] = []
    skip = False
    for k, tok in enumerate(tokens):
        if skip:
            skip = False
        elif tok == "--to":
            skip = True
        elif not tok.startswith("--") or tok == "--":
            positional.append(k)
    text = " ".join(selection)
    if [tokens[k] for k in positional] == [var, *selection] and len(positional) > 1:
        first, last = positional[1], positional[-1]
        if positional[1:] == list(range(first, last + 1)):
            text = line[spans[first][0] : spans[last][1]]
    text = _unquote(text)
    if _ROWS.fullmatch(text):
        return [int(v) for v in re.findall(r"-?\d+", text)], None
    return None, text


def _show(lineage: Lineage) -> None:
    """Display a lineage and the records it reached, one table per dataset."""
    display(lineage)
    try:
        tables = lineage.to_pandas()
    except (LookupError, ValueError) as exc:
        print(f"tensprov-lab: the records cannot be shown: {one_line(exc)}")
        return
    if not isinstance(tables, dict):  # one dataset reached: a single table
        tables = {label: tables for label, _ in lineage.items()}
    for label, table in tables.items():
        count = f"{len(table)} record(s)"
        heading = f"<p><b>{html.escape(label)}</b>: {count}</p>"
        display({"text/plain": f"{label}: {count}", "text/html": heading}, raw=True)
        display(table)
