"""``tensprov_lab.save`` / ``tensprov_lab.load``: runs that outlive the kernel.

A loaded run answers every lineage query (Q1–Q11, attribute level, how-provenance,
mappings, the explorer's graph) from its tensors alone, without Spark.  Reading or
recomputing records needs Spark and the sources, which a save does not hold: those
calls say so and how to get them back (run the tracked block again).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tensprov_lab._run import Run
    from tensprov_lab.capture.plan._nodes import RunLog
    from tensprov_lab.store import Store

__all__ = ["save", "load", "SaveInfo"]


@dataclass
class SaveInfo:
    """What :func:`save` wrote (or :func:`load` read)."""

    path: str
    runs: list[str]
    nbytes: int
    seconds: float

    def __repr__(self) -> str:
        return (
            f"tensprov-lab save {self.path}: {len(self.runs)} run(s) "
            f"({', '.join(self.runs)}), {self.nbytes / 2**20:.2f} MiB, {self.seconds:.2f} s"
        )


class Loaded:
    """Stands in for the tracker of runs loaded from a save: the store, no Spark."""

    spark = None
    replays = False

    def __init__(self, store: Store, path: str) -> None:
        self.store = store
        self.path = path
        self.runs: dict[int, RunLog] = {}
        self.nodes: dict[int, Any] = {}
        self._active = None

    def offline(self, what: str) -> LookupError:
        return LookupError(
            f"{what}: this run was loaded from {self.path}, which holds its lineage but "
            "not its records (reading or recomputing them needs Spark and the sources); "
            "lineage queries work as they are, and to read records, run the tracked "
            "block again"
        )

    def node_of(self, df: Any) -> Any:
        raise KeyError(
            f"the runs loaded from {self.path} know no DataFrame of this kernel: refer to "
            "their datasets by name (the variable names of the tracked block) or id"
        )

    def records(self, ds_id: int, rows: Any, where: Any = None) -> Any:
        raise self.offline(f"the records of {self.store.datasets[ds_id].label}")

    def select_rows(self, ds_id: int, where: str) -> Any:
        raise self.offline("where= (a predicate over the records)")

    def forget(self, run_ids: list[int], keep: list[Any] | None = None) -> list[str]:
        self.store.remove_run(set(run_ids))
        for r in run_ids:
            log = self.runs.pop(r, None)
            if log is not None:
                log.forgotten = True
        return []


def _label(run: Run) -> str:
    return str(run.name) if run.name else f"#{run.id}"


def _closure(runs: list[Run]) -> list[Run]:
    """``runs`` and every run whose datasets they read (a later block may start from
    an earlier block's DataFrames), so the save holds their lineage whole."""
    from tensprov_lab._registry import runs as all_runs

    store = runs[0]._tracker.store
    by_id = {r.id: r for r in all_runs() if r._tracker.store is store and not r.forgotten}
    by_id.update({r.id: r for r in runs})
    chosen = {r.id for r in runs}
    todo = list(chosen)
    while todo:
        run = by_id[todo.pop()]
        for op in run.operations:
            for d in op.inputs:
                producer = store.producer(d)
                owner = producer.run if producer is not None else store.datasets[d].run
                if owner is not None and owner not in chosen and owner in by_id:
                    chosen.add(owner)
                    todo.append(owner)
    return sorted((by_id[i] for i in chosen), key=lambda r: r.id)


def save(path: str | os.PathLike[str], runs: Any = None) -> SaveInfo:
    """Save runs to the directory ``path``: every tensor, attribute map and the
    operation graph, in an open, versioned format (``docs/saving.md``).

    Parameters
    ----------
    path : directory to write; an earlier save there is replaced whole, and only once
        the new one is complete
    runs : Run or list of Run, optional
        Default: every run kept in this process.  Runs whose datasets they read are
        saved with them.

    Raises
    ------
    ValueError
        No run to save; runs of several stores (runs loaded from a save are saved
        apart from the runs tracked in this kernel); ``path`` exists and is not a save.

    Examples
    --------
    >>> tensprov_lab.save("retail.tpl")  # doctest: +SKIP
    tensprov-lab save /home/me/retail.tpl: 1 run(s) (retail), 58.60 MiB, 0.41 s
    >>> run = tensprov_lab.load("retail.tpl")[-1]  # after a restart  # doctest: +SKIP
    >>> run.backward("out", rows=[0])  # doctest: +SKIP
    """
    from tensprov_lab._registry import runs as all_runs
    from tensprov_lab._run import Run
    from tensprov_lab.store._persist import write_store

    t0 = time.perf_counter()
    chosen = [r for r in all_runs() if not r.forgotten] if runs is None else runs
    if isinstance(chosen, Run):
        chosen = [chosen]
    chosen = list(chosen)
    if not chosen:
        raise ValueError("no run to save: track a block first (or load a save)")
    for r in chosen:
        if not isinstance(r, Run):
            raise TypeError(f"runs= takes Run objects, got {type(r).__name__}")
        r._check()
    stores = {id(r._tracker.store) for r in chosen}
    if len(stores) > 1:
        raise ValueError(
            "these runs live in different stores (runs loaded from a save are kept apart "
            "from the runs tracked in this kernel): save them separately, e.g. "
            "save(path, runs=[run])"
        )
    chosen = _closure(chosen)
    store = chosen[0]._tracker.store
    ops = [o for r in chosen for o in r._log.operations]
    datasets = {d for r in chosen for d in r._log.datasets}
    for o in ops:
        datasets.update(store.operations[o].inputs)
        datasets.add(store.operations[o].output)
    records = [
        {"id": r.id, "name": r.name, "datasets": list(r._log.datasets),
         "operations": list(r._log.operations), "warnings": list(r._log.warnings),
         "seconds": r._log.seconds, "jobs": r._log.jobs, "failed": list(r._log.failed),
         "started": r._log.started, "ended": r._log.ended, "uuid": r._log.uuid}
        for r in chosen
    ]  # fmt: skip
    nbytes = write_store(store, path, records, datasets, ops)
    return SaveInfo(
        os.path.abspath(os.fspath(path)),
        [_label(r) for r in chosen],
        nbytes,
        time.perf_counter() - t0,
    )


def load(path: str | os.PathLike[str], verify: bool = True) -> list[Run]:
    """Load the runs of a save: queryable without Spark, listed by
    :func:`tensprov_lab.runs` (the last one is :func:`tensprov_lab.last_run`).

    Parameters
    ----------
    path : a directory written by :func:`save`
    verify : check every file's checksum (reads the save once)

    Raises
    ------
    FileNotFoundError
        ``path`` or one of its files is missing.
    ValueError
        Not a save, a truncated or corrupted file (checksum mismatch), or a save of a
        newer format version.

    Examples
    --------
    >>> run = tensprov_lab.load("retail.tpl")[-1]  # doctest: +SKIP
    >>> run.backward("out", rows=[0], columns=["total"])  # doctest: +SKIP
    """
    from tensprov_lab import _registry
    from tensprov_lab._run import Run
    from tensprov_lab.capture.plan._nodes import RunLog
    from tensprov_lab.store._persist import read_store

    saved = read_store(path, verify=verify)
    holder = Loaded(saved.store, saved.path)
    loaded = []
    for rec in saved.runs:
        log = RunLog(rec["id"], rec["name"])
        log.datasets, log.operations = list(rec["datasets"]), list(rec["operations"])
        log.warnings, log.failed = list(rec["warnings"]), list(rec["failed"])
        log.seconds, log.jobs = float(rec["seconds"]), int(rec["jobs"])
        log.started, log.ended = rec.get("started"), rec.get("ended")
        log.uuid = rec.get("uuid") or log.uuid
        holder.runs[log.id] = log
        saved.store.claim_run(log.id)
        loaded.append(Run(holder, log))  # type: ignore[arg-type]
    _registry._RUNS.extend(loaded)
    return loaded
