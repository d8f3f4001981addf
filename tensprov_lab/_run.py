"""Runs (one tracked block each) and lineage results: the user-facing query API."""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from tensprov_lab._results import (
    CellLineage,
    Lineage,
    _as_rows,
    _flags,
    _human_bytes,
    _short,
)
from tensprov_lab.capture.plan._nodes import ROW
from tensprov_lab.query import (
    backward,
    cell_lineage,
    co_contributors,
    co_dependents,
    forward,
    how,
    mapping,
    transformations,
)
from tensprov_lab.store import Dataset, Operation, Store
from tensprov_lab.store._sets import unique

if TYPE_CHECKING:
    import pandas as pd
    import scipy.sparse

    from tensprov_lab.capture.recording._tracker import RunLog, Tracker
    from tensprov_lab.replay import WhatIf

__all__ = ["Run", "Lineage", "CellLineage", "ROW"]


class Run:
    """The provenance recorded by one tracked block (queries see the whole graph).

    Datasets are referred to by the DataFrame object, by the variable name it was bound
    to, or by a :class:`~tensprov_lab.store.Dataset`.
    """

    def __init__(self, tracker: Tracker, log: RunLog) -> None:
        self._tracker = tracker
        self._runlog = log

    @property
    def _log(self) -> RunLog:
        # everything that reads the run goes through here: a capture still running in
        # the background (track(..., background=True)) is waited for first
        if self._capture() is not None:
            self._tracker.wait()
        return self._runlog

    def _capture(self) -> Any:
        """The tracker's capture in the background, if any (a loaded run has none)."""
        return getattr(self._tracker, "_background", None)

    # -- a capture in the background ----------------------------------------------------
    @property
    def capturing(self) -> bool:
        """Whether the run's capture still runs in the background
        (``track(..., background=True)``); queries wait for it."""
        bg = self._capture()
        return bg is not None and bg.run is self._runlog and not bg.done

    def wait(self) -> Run:
        """Wait until the run's capture has ended (at once for a foreground capture);
        a Ctrl-C meanwhile cancels it, as :meth:`cancel` does.

        Examples
        --------
        >>> with tensprov_lab.track(spark, background=True) as run:  # doctest: +SKIP
        ...     big = orders.filter("amount > 50")
        >>> run.wait().summary()  # doctest: +SKIP
        """
        if self._capture() is not None:
            self._tracker.wait()
        return self

    def cancel(self) -> None:
        """Stop the run's capture running in the background: its Spark jobs are
        cancelled and its provenance is dropped whole (queries then raise
        ``LookupError``; earlier runs are untouched).  Nothing happens when the capture
        has ended already."""
        bg = self._capture()
        if bg is not None and bg.run is self._runlog:
            bg.cancel()
            self._tracker.wait()

    # -- structure -------------------------------------------------------------------
    @property
    def store(self) -> Store:
        self._check()
        return self._tracker.store

    @property
    def forgotten(self) -> bool:
        """Whether the run's provenance was freed (:func:`tensprov_lab.forget`)."""
        return self._log.forgotten

    def _check(self) -> None:
        if self._log.interrupted:
            raise LookupError(
                f"the capture of run {self.name or self.id} was interrupted: its "
                "provenance was dropped; track the block again to query it"
            )
        if self._log.forgotten:
            raise LookupError(
                f"run {self.name or self.id} was forgotten (tensprov_lab.forget): its "
                "provenance is no longer kept; track the block again to query it"
            )

    def forget(self) -> None:
        """Free this run's provenance: ``tensprov_lab.forget(run)``.

        Examples
        --------
        >>> run.forget()  # doctest: +SKIP
        >>> run.backward(out, rows=[0])  # doctest: +SKIP
        Traceback (most recent call last):
        LookupError: run retail was forgotten (tensprov_lab.forget): ...
        """
        from tensprov_lab._registry import forget

        forget(self)

    def spill(self, to: str = "disk") -> list[Operation]:
        """Move this run's tensors out of the process: ``to="disk"`` writes them to
        local files read back memory-mapped (queries answer in milliseconds),
        ``to="spark"`` into Parquet tables Spark keeps, where queries run as Spark jobs
        (under a second backward, seconds forward).  Lineage stays record-level and
        every query answers as before.  Returns the operations moved.

        A capture does this by itself past its budget (``track(..., budget=...,
        storage=...)``).  Window frames stay on disk (they are ranges, not pairs).

        Examples
        --------
        >>> moved = run.spill(to="spark")  # doctest: +SKIP
        >>> run.backward(out, rows=[0])   # a Spark job now  # doctest: +SKIP
        """
        from tensprov_lab.capture.memory._budget import Budget

        self._check()
        budget = getattr(self._tracker, "budget", None) or Budget()
        ids = [op.id for op in self.operations]
        moved = set(budget.move(self.store, ids, to))
        return [op for op in self.operations if op.id in moved]

    @property
    def id(self) -> int:
        return self._log.id

    @property
    def name(self) -> str | None:
        return self._log.name

    @property
    def version(self) -> int:
        """Which kept run of its name this is (1: the oldest); re-running a cell (or a
        ``track(name=...)`` block) adds a version: ``tensprov_lab.history(name)``."""
        from tensprov_lab._registry import runs

        same = [r for r in runs() if r.name == self.name]
        return next((i + 1 for i, r in enumerate(same) if r._runlog is self._runlog), len(same) + 1)

    @property
    def datasets(self) -> list[Dataset]:
        return [self.store.datasets[d] for d in self._log.datasets]

    @property
    def operations(self) -> list[Operation]:
        return [self.store.operations[o] for o in self._log.operations]

    @property
    def warnings(self) -> list[str]:
        return list(self._log.warnings)

    @property
    def seconds(self) -> float:
        """Wall time of capture (reading record keys back from Spark)."""
        return self._log.seconds

    @property
    def nbytes(self) -> int:
        """Bytes of every tensor and inverse index of this run's operations."""
        return sum(op.nbytes + op.index_nbytes for op in self.operations)

    @property
    def entries(self) -> int:
        return sum(op.entries for op in self.operations)

    def dataset(self, ref: Any) -> Dataset:
        """The dataset of a DataFrame (or a pandas-on-Spark DataFrame), a variable name, a
        dataset id or a Dataset."""
        return self.store.datasets[self._ds_id(ref)]

    def _ds_id(self, ref: Any) -> int:
        self._check()
        if isinstance(ref, Dataset):
            return ref.id
        if isinstance(ref, (int, np.integer)) and not isinstance(ref, bool):
            if int(ref) in self.store.datasets:
                return int(ref)
            raise KeyError(f"no dataset with id {ref}")
        if isinstance(ref, str):
            mine = [d for d in self.datasets if d.name == ref]
            found = mine or [d for d in self.store.datasets.values() if d.name == ref]
            if not found:
                names = sorted({d.name for d in self.store.datasets.values() if d.name})
                raise KeyError(
                    f"no dataset named {ref!r}; known names: {', '.join(names) or 'none'}"
                )
            return found[-1].id
        from tensprov_lab.capture.hops._pandas_api import spark_frame_of

        node = self._tracker.node_of(spark_frame_of(ref))
        if node is None or node.ds_id is None:
            raise KeyError(
                "this DataFrame was not captured: create it inside a tracked block "
                "(tensprov_lab.track or %%provtrack)"
            )
        return node.ds_id

    def summary(self) -> str:
        ops = self.operations
        return (
            f"tensprov-lab run {self.name or self.id}: {len(ops)} operations, "
            f"{len(self.datasets)} datasets, {self.entries:,} tensor entries, "
            f"{_human_bytes(self.nbytes)}, capture {self.seconds:.2f} s"
        )

    def __repr__(self) -> str:
        if self.forgotten:
            return f"<Run {self.name or self.id}: forgotten>"
        return f"<Run {self.summary()}>"

    def _repr_html_(self) -> str:
        if self.forgotten:
            return f"<div><b>{html.escape(repr(self))}</b></div>"
        rows = "".join(
            f"<tr><td>{op.id}</td><td>{html.escape(op.method)}</td><td>{op.category}</td>"
            f"<td>{html.escape(', '.join(self.store.datasets[i].label for i in op.inputs))}</td>"
            f"<td>{html.escape(self.store.datasets[op.output].label)}</td>"
            f"<td>{self.store.datasets[op.output].n_rows}</td>"
            f"<td>{_human_bytes(op.nbytes)}</td>"
            f"<td>{_flags(op)}</td></tr>"
            for op in self.operations
            if not op.trivial
        )
        return (
            f"<div><b>{html.escape(self.summary())}</b><table><tr><th>op</th><th>method</th>"
            f"<th>category</th><th>inputs</th><th>output</th><th>rows</th><th>bytes</th>"
            f"<th>flags</th></tr>{rows}</table></div>"
        )

    # -- pictures --------------------------------------------------------------------
    def explore(self, rollup: bool = True) -> Any:
        """The interactive lineage explorer widget (JupyterLab, Notebook 7, VS Code);
        ``rollup``: each chain of three or more row-preserving steps as one stage node
        (expand it from its details, or untick "roll up chains")."""
        from tensprov_lab.notebook._widget import explore

        return explore(self, rollup=rollup)

    def to_svg(self, rollup: bool = True) -> str:
        """The operator DAG as a static SVG (for GitHub, nbviewer, exported HTML);
        ``rollup``: each chain of three or more row-preserving steps as one stage."""
        from tensprov_lab.notebook._svg import to_svg

        return to_svg(self, rollup=rollup)

    # -- export ----------------------------------------------------------------------
    def to_openlineage(
        self, namespace: str = "tensprov-lab", job: str | None = None
    ) -> list[dict[str, Any]]:
        """OpenLineage RunEvents (START, COMPLETE) of this run, as JSON-ready dicts:
        input and output datasets with ``schema`` facets, outputs with the
        ``columnLineage`` facet (DIRECT: contributing, INDIRECT: influencing columns),
        and a ``tensprovLab`` run facet with the record-level tensors' sizes.

        Parameters
        ----------
        namespace : the OpenLineage namespace of the job and its datasets
        job : the job's name (default: the run's name)

        Examples
        --------
        >>> events = run.to_openlineage(namespace="notebooks")  # doctest: +SKIP
        >>> [e["eventType"] for e in events]  # doctest: +SKIP
        ['START', 'COMPLETE']
        """
        from tensprov_lab.export import to_openlineage

        self._check()
        return to_openlineage(self, namespace, job)

    def emit_openlineage(
        self, transport: Any, namespace: str = "tensprov-lab", job: str | None = None
    ) -> int:
        """Send :meth:`to_openlineage`'s events through an ``openlineage-python``
        transport (``HttpTransport`` to Marquez, ``FileTransport``, ``ConsoleTransport``,
        ...); returns how many were sent.

        Examples
        --------
        >>> from openlineage.client.transport.http import HttpConfig, HttpTransport
        >>> marquez = HttpTransport(HttpConfig(url="http://marquez:5000"))
        >>> run.emit_openlineage(marquez)  # doctest: +SKIP
        2
        """
        from tensprov_lab.export import emit_openlineage

        self._check()
        return emit_openlineage(self, transport, namespace, job)

    def to_prov(self, records: dict[Any, Any] | None = None) -> Any:
        """This run as a W3C PROV ``prov.model.ProvDocument``: datasets as entities,
        operations as activities (used / wasGeneratedBy / wasDerivedFrom); with
        ``records={df: rows}`` also those records and the source records they derive
        from.

        Examples
        --------
        >>> doc = run.to_prov(records={out: [0]})  # doctest: +SKIP
        >>> prov_json = doc.serialize(format="json")  # doctest: +SKIP
        >>> prov_n = doc.get_provn()  # doctest: +SKIP
        """
        from tensprov_lab.export import to_prov

        self._check()
        return to_prov(self, records)

    # -- records ---------------------------------------------------------------------
    def rows(
        self, df: Any, rows: Sequence[int] | np.ndarray | None = None, where: str | None = None
    ) -> pd.DataFrame:
        """Records of a dataset with their canonical row index (column ``_row``).

        Sources and materialized datasets are read; the requested ``rows`` of any other
        dataset are recomputed by replaying its operations on just their
        provenance-related records (``result.attrs["recomputed"]`` is then True).

        Parameters
        ----------
        df : DataFrame (also pandas-on-Spark), str or Dataset
        rows : row indices to return (default: all)
        where : SQL predicate over the dataset's columns, e.g. ``"amount > 50"``
        """
        from tensprov_lab.replay import read_records

        ds_id = self._ds_id(df)
        return read_records(self._tracker, ds_id, _as_rows(rows), where)

    def _select(self, df: Any, rows: Any, where: str | None) -> tuple[int, np.ndarray]:
        ds_id = self._ds_id(df)
        if rows is not None and where is not None:
            raise ValueError("give rows= or where=, not both")
        if where is not None:
            return ds_id, self._tracker.select_rows(ds_id, where)
        n = self.store.datasets[ds_id].n_rows
        picked = np.arange(n or 0, dtype=np.int64) if rows is None else _as_rows(rows)
        if n is not None and len(picked) and (picked.min() < 0 or picked.max() >= n):
            raise IndexError(
                f"row indices must be in 0..{n - 1} for {self.store.datasets[ds_id].label}"
            )
        return ds_id, unique(picked)

    def _targets(self, to: Any, default: list[int]) -> list[int] | None:
        if to is None:
            return default
        if isinstance(to, (list, tuple)):
            return [self._ds_id(t) for t in to]
        return [self._ds_id(to)]

    def _columns(self, ds_id: int, columns: Any) -> list[int]:
        names = self.store.datasets[ds_id].columns
        if isinstance(columns, (str, int, np.integer)):
            columns = [columns]
        out = []
        for c in columns:
            if isinstance(c, str):
                if c not in names:
                    raise KeyError(
                        f"{self.store.datasets[ds_id].label} has no column {c!r}; "
                        f"its columns: {', '.join(names)}"
                    )
                out.append(names.index(c))
            else:
                out.append(int(c))
        return out

    def _lineage(
        self, direction: str, df: Any, rows: Any, where: str | None, to: Any,
        columns: Any, with_how: bool, localized: bool = False,
    ) -> Lineage | CellLineage:  # fmt: skip
        ds_id, picked = self._select(df, rows, where)
        default = self.store.sources() if direction == "backward" else self.store.sinks()
        targets = self._targets(to, default)
        cols = None if columns is None else self._columns(ds_id, columns)
        paths = None
        if with_how:
            paths, truncated = how(self.store, ds_id, picked, direction, to=targets, columns=cols)
            if truncated:
                from tensprov_lab._warn import warn

                warn("how-provenance: too many paths, only the first 10,000 are listed")
        if cols is not None:
            res = cell_lineage(
                self.store, ds_id, picked, cols, direction, to=targets, localized=localized
            )
            self._keep_budget()
            return CellLineage(self, res, paths)
        run = backward if direction == "backward" else forward
        found = run(self.store, ds_id, picked, to=targets, localized=localized)
        self._keep_budget()
        return Lineage(self, found, paths)

    def _keep_budget(self) -> None:
        """After a query: the inverse indexes it built count against the memory budget,
        so past it the largest tensors spill (their indexes go with them)."""
        budget = getattr(self._tracker, "budget", None)
        if budget is not None and budget.limit is not None and budget.spill:
            budget.over(self.store, self._tracker.nodes.values())

    def backward(
        self, df: Any, rows: Any = None, where: str | None = None, to: Any = None,
        columns: Any = None, how: bool = False, localized: bool = False,
    ) -> Any:  # fmt: skip
        """Q2 (Q4 with ``columns``, Q6/Q8 with ``how``): what ``rows`` of ``df`` come from.

        Parameters
        ----------
        df : DataFrame (also pandas-on-Spark), str or Dataset
        rows : row indices (default: every row), or
        where : SQL predicate picking the rows, e.g. ``"customer_id = 17"``
        to : dataset(s) to report (default: every source)
        columns : column name(s) or indices of ``df``: trace cells, not records; the
            result is a :class:`CellLineage` that tells contributing from influencing cells
        how : also list the path of operations behind every reached record or cell
            (``result.how``, a pandas DataFrame: the path as text, the operation ids in
            data-flow order, and ``inputs``, which input of each operation the path
            enters by: 0 the left of a join, 1 its right)
        localized : a window function's output record from its own input record only
            (the paper's localized view; default: also the records of its frame, e.g.
            the row ``lag`` reads or the rows a running sum adds, and the partition
            whose order decides a rank)

        Returns
        -------
        Lineage, or CellLineage when ``columns`` is given
        """
        return self._lineage("backward", df, rows, where, to, columns, how, localized)

    def forward(
        self, df: Any, rows: Any = None, where: str | None = None, to: Any = None,
        columns: Any = None, how: bool = False, localized: bool = False,
    ) -> Any:  # fmt: skip
        """Q1 (Q3 with ``columns``, Q5/Q7 with ``how``): what ``rows`` of ``df`` flow into.

        Same parameters as :meth:`backward`; ``to`` defaults to every sink.
        """
        return self._lineage("forward", df, rows, where, to, columns, how, localized)

    def transformations(self, df: Any, direction: str = "backward") -> pd.DataFrame:
        """Q9: the operations that produced ``df`` (``"backward"``) or consumed it, and
        everything downstream (``"forward"``), in execution order."""
        import pandas as pd

        store = self.store
        found = transformations(store, self._ds_id(df), direction)
        ops = [store.operations[o] for o in found]
        datasets = store.datasets

        def objects(values: list[Any]) -> np.ndarray:
            # built here: pandas infers a column of Python objects value by value, which
            # was most of this query's time on a long pipeline (Census: 119 operations)
            out = np.empty(len(values), dtype=object)
            out[:] = values
            return out

        return pd.DataFrame(
            {
                "operation": np.array([op.id for op in ops], dtype=np.int64),
                "method": objects([op.method for op in ops]),
                "category": objects([op.category for op in ops]),
                "expression": objects([op.expression for op in ops]),
                "inputs": objects([[datasets[i].label for i in op.inputs] for op in ops]),
                "output": objects([datasets[op.output].label for op in ops]),
                "rows_in": objects([[datasets[i].n_rows for i in op.inputs] for op in ops]),
                "rows_out": [datasets[op.output].n_rows for op in ops],
                "contextual": np.array([op.contextual for op in ops], dtype=bool),
                "opaque": np.array([op.opaque for op in ops], dtype=bool),
            },
            copy=False,
        )

    def co_contributors(self, df: Any, rows: Any, other: Any, at: Any = None) -> np.ndarray:
        """Q10: rows of ``other`` combined with ``rows`` of ``df`` into common outputs
        (the records of ``at``; default: where the two datasets first meet, e.g. their
        join)."""
        ds_id, picked = self._select(df, rows, None)
        targets = None if at is None else self._targets(at, [])
        return co_contributors(self.store, ds_id, picked, self._ds_id(other), at=targets)

    def co_dependents(self, df: Any, rows: Any, other: Any) -> np.ndarray:
        """Q11: rows of ``other`` that depend on a source record ``rows`` of ``df``
        depend on."""
        ds_id, picked = self._select(df, rows, None)
        return co_dependents(self.store, ds_id, picked, self._ds_id(other))

    def what_if(
        self, drop: dict[Any, Any] | None = None, edit: dict[Any, Any] | None = None,
        to: Any = None,
    ) -> WhatIf:  # fmt: skip
        """Preview a fix: which downstream records disappear, change or appear.

        Parameters
        ----------
        drop : {source: rows}
            Records of source datasets to drop.
        edit : {source: {row: {column: new value}}}
            Values of source records to change.
        to : dataset(s) to preview (default: this run's datasets downstream of the change)

        Only the records the change reaches (forward lineage) and the records they were
        computed with (backward lineage) are replayed.  A dataset behind an operation
        for which replaying related records cannot give the answer (an anti join, a
        window, a limit, an edit of a join or grouping key, ...) is listed in
        ``not_previewable`` with the reason instead.

        Examples
        --------
        >>> preview = run.what_if(drop={orders: [3]})  # doctest: +SKIP
        >>> preview.summary()  # doctest: +SKIP
        """
        from tensprov_lab.replay import what_if

        if not self._tracker.replays:  # a loaded run
            raise self._tracker.offline("what-if previews")  # type: ignore[attr-defined]
        drops = {self._ds_id(k): _as_rows(v) for k, v in (drop or {}).items()}
        edits = {
            self._ds_id(k): {int(r): dict(vals) for r, vals in v.items()}
            for k, v in (edit or {}).items()
        }
        if not drops and not edits:
            raise ValueError("give drop={source: rows} and/or edit={source: {row: {col: value}}}")
        for d, rows in [*drops.items(), *((d, np.array(list(e))) for d, e in edits.items())]:
            self._select(d, rows, None)  # range check with a clear message
        # by default this run's datasets: later runs may read the same sources
        targets = list(self._log.datasets) if to is None else self._targets(to, [])
        return what_if(self._tracker, drops, edits, to=targets)

    def why_not(
        self, out: Any, source: Any = None, rows: Any = None, where: str | None = None,
        values: bool = True,
    ) -> pd.DataFrame:  # fmt: skip
        """Why-not provenance: why records of a source do not reach ``out``.

        For each candidate source record (``rows`` of ``source``, or the records a
        ``where`` predicate picks, in ``source`` or in every source of ``out`` whose
        columns it names): the rows of ``out`` it reaches, or the operation where its
        lineage stopped, why (a filter's condition, a join without a partner, ...) and
        the values of the columns that decided it (read back, which needs Spark: give
        ``values=False`` for a run loaded from a save).

        Returns one row per candidate and stop: ``source``, ``row``, ``status``
        ("reaches", "dropped", "unknown": an opaque operation is in the way),
        ``operation``, ``expression``, ``input`` (the dataset the operation got the
        record's derived records from) and its ``input_rows``, ``reason``, ``columns``
        (the deciding columns: change them to let the record through) and ``values``.

        Examples
        --------
        >>> run.why_not(totals, source=customers, rows=[42])  # doctest: +SKIP
        >>> run.why_not(totals, where="cust_id = 42")  # doctest: +SKIP
        """
        import pandas as pd

        from tensprov_lab.query import why_not

        out_id = self._ds_id(out)
        if source is None and rows is not None:
            raise ValueError("rows= needs source=: the dataset the row indices belong to")
        if source is None and where is None:
            raise ValueError("give source= and rows=, or where= (a predicate over a source)")
        candidates: list[tuple[int, np.ndarray]] = []
        if source is not None:
            candidates.append(self._select(source, rows, where))
        else:
            assert where is not None
            for s in self._sources_of(out_id):
                try:
                    candidates.append(self._select(s, None, where))
                except ValueError:
                    continue  # the predicate names columns this source does not have
            if not candidates:
                raise ValueError(
                    f"where={where!r} is not a predicate over any source of "
                    f"{self.store.datasets[out_id].label}: give source="
                )
        table = []
        for src, picked in candidates:
            for w in why_not(self.store, out_id, src, picked):
                table += self._why_not_rows(w, values)
        columns = ["source", "row", "status", "operation", "expression", "input",
                   "input_rows", "reason", "columns", "values"]  # fmt: skip
        return pd.DataFrame(table, columns=columns)

    def _sources_of(self, ds_id: int) -> list[int]:
        store = self.store
        seen, todo, found = {ds_id}, [ds_id], []
        while todo:
            op = store.producer(todo.pop())
            if op is None:
                continue
            for d in op.inputs:
                if d not in seen:
                    seen.add(d)
                    todo.append(d)
                    if store.producer(d) is None:
                        found.append(d)
        return sorted(found)

    def _why_not_rows(self, w: Any, values: bool) -> list[dict[str, Any]]:
        store = self.store
        base = {"source": store.datasets[w.source].label, "row": w.row}
        if len(w.reaches):
            reached = f"reaches rows {_short(w.reaches)}"
            return [{**base, "status": "reaches", "reason": reached}]
        if not w.drops:
            ops = ", ".join(store.operations[b].method for b in w.blocked) or "none"
            return [{**base, "status": "unknown",
                     "reason": f"lineage stops at opaque operation(s): {ops}"}]  # fmt: skip
        out = []
        for drop in w.drops:
            op = store.operations[drop.operation]
            k = op.inputs.index(drop.input)
            cols = store.datasets[drop.input].columns
            deciding: list[str] = []
            if op.influencing is not None:
                deciding = [cols[j] for j in np.flatnonzero(op.influencing[k].any(axis=0))]
            label = store.datasets[drop.input].label
            if op.category == "join":
                others = [store.datasets[d].label for d in op.inputs if d != drop.input]
                reason = (f"{op.method}: no record of {', '.join(others)} matches it on "
                          f"{', '.join(deciding) or 'the join condition'}")  # fmt: skip
            elif op.category == "horizontal_reduction":
                reason = f"{op.method}: its condition is false (or null) for it"
            else:
                reason = f"{op.method} kept no record derived from it"
            got: Any = None
            if values and deciding:
                records = self.rows(drop.input, rows=drop.rows)
                got = {c: records[c].tolist() for c in deciding if c in records.columns}
            out.append({**base, "status": "dropped", "operation": op.method,
                        "expression": op.expression, "input": label,
                        "input_rows": drop.rows.tolist(), "reason": reason,
                        "columns": deciding, "values": got})  # fmt: skip
        return out

    @property
    def materialized(self) -> pd.DataFrame:
        """Datasets whose records are kept whole (in Spark's cache), and why; the others
        are recomputed on demand from their provenance-related records."""
        import pandas as pd

        ds = [d for d in self.datasets if d.materialized]
        return pd.DataFrame(
            {
                "dataset": [d.label for d in ds],
                "rows": [d.n_rows for d in ds],
                "reason": [d.materialized for d in ds],
            }
        )

    def mapping(self, src: Any, dst: Any) -> scipy.sparse.csr_array:
        """Whole-dataset mapping, ``dst`` rows x ``src`` rows, composed along every path."""
        return mapping(self.store, self._ds_id(src), self._ds_id(dst))

    def slot_lineage(
        self, df: Any, column: str, slot: int | None = None, row: int | None = None
    ) -> pd.DataFrame:
        """Where a vector slot made by Spark ML stages comes from: the raw input column.

        The slots recorded by each ML ``transform`` are followed back (VectorAssembler slot
        → its input column, one-hot slot → the category value, scaler slot → the same slot
        of its input, StringIndexer index → the string column ...), and plain columns
        through operations that pass them on, down to a column no ML stage made.

        Parameters
        ----------
        df : DataFrame (also pandas-on-Spark), str or Dataset
        column : a column of ``df`` made by an ML stage (or passed on from one)
        slot : the slot of a vector column (``None`` for a scalar column)
        row : a row of ``df``: return the raw input *cells* behind that row's slot

        Returns
        -------
        pandas.DataFrame
            Without ``row``: one line per step (``dataset``, ``column``, ``slot``, the
            ``operation`` that made it from the next line and the ``detail`` of what the
            slot holds), from ``df`` back to the raw input column (the last line).
            With ``row``: the raw input cells (``dataset``, ``row``, ``column``,
            ``detail``, ``value``), found by backward cell lineage of ``row``.

        Examples
        --------
        >>> run.slot_lineage(out, "features", slot=1)  # doctest: +SKIP
        >>> run.slot_lineage(out, "features", slot=1, row=0)  # doctest: +SKIP
              dataset  row column                                   detail value
        0          df    0    cat  ... cat_idx = 1 ('b') ← ... index of the cat value ...     b
        """
        import pandas as pd

        from tensprov_lab.capture.hops._ml import follow_slot

        ds_id = self._ds_id(df)
        self._columns(ds_id, column)  # a clear error for an unknown column
        hops = follow_slot(self.store, ds_id, column, slot)
        label = self.store.datasets
        if row is None:
            return pd.DataFrame(
                {
                    "dataset": [label[h.dataset].label for h in hops],
                    "column": [h.column for h in hops],
                    "slot": pd.array([h.slot for h in hops], dtype="Int64"),
                    "operation": [h.operation for h in hops],
                    "detail": [h.detail for h in hops],
                }
            )
        raw = hops[-1]
        detail = " ← ".join(h.detail for h in hops if h.detail)
        rows: np.ndarray = np.zeros(0, dtype=np.int64)
        if raw.dataset == ds_id:
            rows = self._select(ds_id, [row], None)[1]
        else:
            cells = self.backward(df, rows=[row], columns=[column], to=raw.dataset)
            if raw.dataset in set(cells.result.contributing):
                rows = cells[raw.dataset]["contributing"].get(raw.column, rows)
            if not len(rows):  # not a value flow: the records behind it
                found = self.backward(df, rows=[row], to=raw.dataset).result.rows
                rows = found.get(raw.dataset, rows)
        rows = np.asarray(rows, dtype=np.int64)
        try:
            from tensprov_lab.replay import read_records

            table = read_records(self._tracker, raw.dataset, rows, None)
            values = dict(zip(table[ROW], table[raw.column]))
        except Exception:  # the values are a convenience: lineage stands without them
            values = {}
        return pd.DataFrame(
            {
                "dataset": label[raw.dataset].label,
                "row": rows,
                "column": raw.column,
                "detail": detail,
                "value": [values.get(int(r)) for r in rows],
            }
        )
