"""What capture keeps per dataset, per recorded call and per run (no Spark calls here)."""

from __future__ import annotations

import re
import time
import uuid as uuid_module
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Protocol

from tensprov_lab._warn import TensProvWarning
from tensprov_lab.capture.plan._keyed import Annotated
from tensprov_lab.capture.plan._keys import KeyIndex

__all__ = [
    "ROW",
    "Capturing",
    "Node",
    "Pending",
    "Persisting",
    "RunLog",
    "TensProvWarning",
    "call_inputs",
    "first_consumers",
    "named",
    "persisted",
    "result_limit",
]

#: name of the column holding the canonical row index in record tables
ROW = "_row"


class Persisting:
    """A DataFrame capture persists in its worker thread (``Node.cached`` until it is
    needed): registering a result with Spark's cache plans its query, 0.03 s a dataset,
    which capture need not wait for (the cache fills on first use anyway)."""

    def __init__(self, future: Future[Any]) -> None:
        self.future = future

    def result(self) -> Any:
        """The persisted DataFrame (None: the persist failed, the dataset is then
        recomputed from its plan, which gives the same records)."""
        try:
            return self.future.result()
        except Exception:  # noqa: BLE001 - a cache is an optimisation
            return None


def persisted(cached: Any) -> Any:
    """``Node.cached`` as a DataFrame (a persist still running is waited for)."""
    return cached.result() if isinstance(cached, Persisting) else cached


@dataclass
class Node:
    """Capture-side state of one dataset."""

    df: Any
    plan: Any
    ident: int
    ds_id: int | None = None
    ann: Annotated | None = None
    ki: KeyIndex | None = None
    n: int | None = None
    name: str | None = None
    #: the persisted annotated DataFrame when the dataset is materialized (a
    #: :class:`Persisting` while the persist runs: see :func:`persisted`)
    cached: Any = None
    #: a small materialized dataset's records once a replay read it whole, kept in the
    #: driver (replay._replay.replay_records): a what-if reads an aggregate's old
    #: groups again and again
    records: Any = None
    #: whether sorting its raw keys gives its canonical order (false below a global
    #: sort, which permutes records but keeps their keys)
    key_ordered: bool = True
    #: whether Spark itself returns its records in canonical order where a sort ties
    #: (false downstream of a sort of records that were not key-ordered)
    ties_exact: bool = True
    #: a source (or opaque output) may be cached for recomputation: the policy of the
    #: run that captured it
    cacheable: bool = True
    #: a source whose record index (``ki``, ``n``) its first consumer, a join, reads
    #: from the keys it collects anyway (see Tracker._join_keys)
    deferred: bool = False
    #: the run that recorded it (None: not recorded in a run yet)
    run: int | None = None
    #: its annotated plan reads a copy capture pinned (``localCheckpoint``: a persisted
    #: RDD that forgetting the run releases)
    pinned: bool = False
    #: the Arrow schema pyspark's ``toArrow`` gives its annotated records, and whether
    #: it uses large string and binary types (read once, for replays run in the driver:
    #: see replay._replay._local)
    arrow_schema: Any = None
    arrow_large: bool = False
    #: a source's files as capture found them (checked before its records are read:
    #: see :mod:`._files`); None when not known
    files: tuple[Any, ...] | None = None
    #: its one record is made from every record of its one input, and it has no plan
    #: (an ML fit: the model; see Tracker._capture_every_record)
    every_record: bool = False
    #: made by a call whose record lineage capture does not claim (a hop through
    #: pandas, see _pandas.py): why, with ``{upstream}`` for the input's name
    opaque_reason: str | None = None
    #: why capture does not read this dataset's records at all (a stream, files
    #: removed), for its consumers in this block and later ones (see _guard.screen)
    unread: str | None = None
    #: inputs of its operation that are the value of a scalar subquery its condition
    #: compares (one record that Spark computes within the plan, not a child of it)
    context: list[Node] = field(default_factory=list)
    #: the front-end call (the pandas API on Spark's) inside which its operation was
    #: made: ``(call id, name)``, see ``capture/recording/_patching.wrap_call``
    call: tuple[int, str] | None = None


@dataclass
class Pending:
    method: str
    inputs: list[Node]
    out: Node
    expression: str
    run: int


@dataclass
class RunLog:
    """What one tracked block recorded (filled in by the tracker)."""

    id: int
    name: str | None
    operations: list[int] = field(default_factory=list)
    datasets: list[int] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0
    failed: list[str] = field(default_factory=list)
    #: Spark jobs its capture ran (counting jobs, fused reads, operations' own jobs)
    jobs: int = 0
    #: fused reads its capture took straight from the sources' files (no Spark job)
    file_reads: int = 0
    #: its provenance was dropped (``tensprov_lab.forget``)
    forgotten: bool = False
    #: its capture was interrupted (Ctrl-C), and its provenance dropped with it
    interrupted: bool = False
    #: when the block started (epoch seconds), and the run's id in exported lineage
    started: float | None = field(default_factory=time.time)
    ended: float | None = None
    uuid: str = field(default_factory=lambda: str(uuid_module.uuid4()))
    #: its warnings are listed with the notebook's summary of the run (``%%provtrack``)
    #: instead of being raised as Python warnings
    listed: bool = False


def _describe(value: Any) -> str:
    from pyspark.sql import Column, DataFrame

    if isinstance(value, Column):
        if type(value).__module__.startswith("pyspark.sql.connect"):
            return str(value)  # a Connect column has no JVM object
        return str(value._jc.toString())  # type: ignore[operator]
    if isinstance(value, DataFrame):
        return "<DataFrame>"
    if isinstance(value, (list, tuple)):
        inner = ", ".join(_describe(v) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {_describe(v)}" for k, v in value.items()) + "}"
    if callable(value):
        return getattr(value, "__name__", "<function>")
    return repr(value)


def bound_dataframes(frame: Any) -> list[tuple[str, Any]]:
    """The DataFrames a block's scope binds now, by variable (its locals, then its
    globals at module level), pandas-on-Spark frames and series among them: no Spark
    call, so a background capture takes them before the block returns and names its
    datasets later."""
    from pyspark.sql import DataFrame

    scopes: list[dict[str, Any]] = [frame.f_locals]
    if frame.f_globals is not frame.f_locals:
        scopes.append(frame.f_globals)
    return [
        (var, value)
        for scope in scopes
        for var, value in list(scope.items())
        if not var.startswith("_")
        and (
            isinstance(value, DataFrame)
            or type(value).__module__ in ("pyspark.pandas.frame", "pyspark.pandas.series")
        )
    ]


def _dataframes_in(value: Any) -> list[Any]:
    from pyspark.sql import DataFrame

    if isinstance(value, DataFrame):
        return [value]
    if isinstance(value, (list, tuple)):
        return [d for v in value for d in _dataframes_in(v)]
    return []


def call_inputs(obj: Any, args: tuple, kwargs: dict, out: Any, frame: type) -> list[Any] | None:
    """The DataFrames a call that made the DataFrame ``out`` read: the one it was called
    on (a grouped DataFrame's own), then those among its arguments; None when it made no
    DataFrame of type ``frame`` or was not called on one."""
    if not isinstance(out, frame):
        return None
    base = obj if isinstance(obj, frame) else getattr(obj, "_df", None)
    if base is None:
        return None
    return [base, *_dataframes_in(list(args)), *_dataframes_in(list(kwargs.values()))]


def result_limit(exc: BaseException) -> str | None:
    """The ``spark.driver.maxResultSize`` a job failed on (as Spark writes it), if it
    failed on that.

    >>> result_limit(RuntimeError("... is bigger than spark.driver.maxResultSize (1024.0 KiB)"))
    '1024.0 KiB'
    """
    found = re.search(r"bigger than spark\.driver\.maxResultSize \(([^)]*)\)", str(exc))
    return None if found is None else found.group(1)


def _short_error(exc: Exception) -> str:
    """The first line of an error's message (a py4j error's is the Java one), or what
    to do about a known one.

    >>> why = _short_error(RuntimeError("Total size of serialized results of 2 tasks "
    ...     "(39.1 MiB) is bigger than spark.driver.maxResultSize (20.0 MiB)\\nJVM ..."))
    >>> why[:36]
    'the keys capture reads are more than'
    >>> why[why.index("("):]
    '(20.0 MiB) lets one job return to the driver: set it higher where the session or server starts'
    """
    limit = result_limit(exc)
    if limit is not None:
        return (
            "the keys capture reads are more than Spark's spark.driver.maxResultSize "
            f"({limit}) lets one job return to the driver: set it higher where the "
            "session or server starts"
        )
    lines = str(exc).strip().splitlines()
    # (Spark ends some first lines with the ';' before its plan)
    first = lines[0][:300].rstrip(" ;") if lines else ""
    return first or type(exc).__name__


class Capturing(Protocol):
    """What the per-operation-family modules (SQL statements, Spark ML stages, replays)
    use of the tracker, so they need not import it (``_tracker`` imports them)."""

    nodes: dict[int, Node]
    by_ds: dict[int, Node]
    pending: list[Any]
    jvm: Any
    spark: Any
    store: Any

    @property
    def replay_spark(self) -> Any: ...

    def source_plan(self, node: Node) -> Any: ...

    def register(self, df: Any) -> Node: ...

    def record_operation(
        self, method: str, in_dfs: list[Any], out: Any, args: tuple = (), kwargs: dict | None = None
    ) -> Node | None: ...

    def add_source(self, node: Node) -> Node: ...

    def add_pending(self, method: str, inputs: list[Node], out: Node, expression: str) -> Node: ...

    def planless_ident(self) -> int: ...

    def _known_below(self, plan: Any) -> list[Node]: ...

    def _note(self, message: str) -> None: ...

    # what the pandas hop rule (_pandas.capture_hop) records a matched hop with
    materialize: str

    def _index_deferred(self, nodes: list[Node]) -> None: ...

    def _dataset(self, node: Node) -> Any: ...

    def _scan_index(self, ann: Annotated) -> Any: ...

    def records(self, ds_id: int, rows: Any, where: str | None) -> Any: ...

    def _add_operation(
        self, out: int, method: str, category: str, inputs: list[Any], tensors: Any, **kwargs: Any
    ) -> Any: ...

    def _recorded(self, run: Any, node: Node, op_id: int, notes: list[str]) -> None: ...

    def _label(self, node: Node) -> str: ...


def named(name: str | None, message: str) -> str:
    """``message`` led by ``name``, the variable holding the DataFrame it is about (so a
    note says which of the user's DataFrames it means), unless it leads already.

    >>> named("few", "limit(2) is not deterministic")
    'few: limit(2) is not deterministic'
    >>> named(None, "the memory budget is used up")
    'the memory budget is used up'
    """
    if not name or message.startswith(f"{name}:") or message.startswith(f"{name} "):
        return message
    return f"{name}: {message}"


def first_consumers(pending: list[Any]) -> dict[int, Pending]:
    """The first recorded operation reading each node (by ``id``)."""
    first: dict[int, Pending] = {}
    for item in pending:
        if isinstance(item, Pending):
            for n in item.inputs:
                first.setdefault(id(n), item)
    return first
