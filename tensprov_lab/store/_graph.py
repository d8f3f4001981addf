"""The provenance graph: datasets (nodes) and operations (hyper-edges with tensors).

Pure Python/numpy: no pyspark, no IPython.  Capture adds nodes; queries read them.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from tensprov_lab.store._tensors import Tensor

__all__ = ["Dataset", "Operation", "Store", "StoreError"]


class StoreError(ValueError):
    """Raised when a dataset or operation would make the store inconsistent."""


@dataclass
class Dataset:
    """A dataset node: records numbered ``0..n_rows-1`` in canonical order."""

    id: int
    name: str | None
    columns: list[str] = field(default_factory=list)
    dtypes: list[str] = field(default_factory=list)
    n_rows: int | None = None
    #: "source" (read from outside the tracked code) or "derived"
    role: str = "derived"
    run: int | None = None
    #: produced by a trivial operation (repartition, cache, hint ...) and hidden by default
    hidden: bool = False
    #: short description of where a source comes from (file, createDataFrame, ...)
    origin: str = ""
    #: why its records are kept whole (in Spark's cache), or "" when recomputed on demand
    materialized: str = ""

    @property
    def label(self) -> str:
        return self.name if self.name else f"dataset#{self.id}"


@dataclass
class Operation:
    """One operation: ``output = method(*inputs)`` with one tensor per input."""

    id: int
    method: str
    category: str
    inputs: list[int]
    output: int
    #: one tensor per input (n_out x n_in); ``None`` when the operation is opaque
    tensors: list[Tensor] | None
    expression: str = ""
    opaque: bool = False
    nondeterministic: bool = False
    contextual: bool = False
    trivial: bool = False
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0
    run: int | None = None
    #: per input: boolean (output columns x input columns) attribute maps; values of
    #: the input column flow into the output column (contributing), or decide whether,
    #: where or in which group the output record exists (influencing: conditions and
    #: keys).  ``None`` when the plan could not be read.
    contributing: list[np.ndarray] | None = None
    influencing: list[np.ndarray] | None = None
    #: False when a step of the plan was not understood and every input column of it is
    #: assumed to contribute (a superset)
    attributes_exact: bool = True
    #: vector slots of output columns made by ML stages: column -> per slot the
    #: (input position, input column, what the slot holds)
    slots: dict[str, list[tuple[int, str, str]]] = field(default_factory=dict)
    #: Spark ML: the fitted model of a ``fit`` (its context: statistics of every input
    #: record) or the stage of a ``transform``, kept so the operation can be replayed
    model: Any = None
    #: Spark jobs its capture ran (a read shared by several operations of a fused
    #: capture counts at the first that needs it), and whether its tensors came from
    #: the block's fused reads
    jobs: int = 0
    fused: bool = False
    #: why dropping input records cannot be previewed by replaying lineage-related
    #: records through it (the replay rule of a plan node on its way, e.g. an anti
    #: join or a limit: not distributive); None when nothing on its way says so
    replay_blocker: str | None = None
    #: an aggregate straight over its input: per output column ``(kind, input column)``,
    #: kind one of ``"key"``, ``"sum"``, ``"count"`` (column None: ``count(*)``),
    #: ``"avg"``, ``"min"``, ``"max"``, or None for a column made otherwise; what-if
    #: updates its records from the changed members alone.  None: not such an aggregate.
    decomposition: list[tuple[str, int | None] | None] | None = None
    #: dropping input records removes exactly the output records made from them and
    #: changes no other (inner joins, filters, projections, ...): a what-if that only
    #: drops need not replay what is left
    drops_vanish: bool = False
    #: the files its tensors are memory-mapped from once spilled past the memory
    #: budget (:mod:`._spill`); None while they are in memory
    spilled: list[str] | None = None
    #: the front-end call of the user's that made it, named as the user wrote it (the
    #: pandas API on Spark's ``merge``, ``groupby.sum``, ``[]``), and which call: the
    #: operations one call made share ``call_id``; ``""`` / None for a DataFrame call
    call: str = ""
    call_id: int | None = None

    @property
    def localized(self) -> bool:
        """Every output record depends only on the input records of its tensors."""
        return not self.contextual

    @property
    def nbytes(self) -> int:
        return sum(t.nbytes for t in self.tensors) if self.tensors else 0

    @property
    def index_nbytes(self) -> int:
        return sum(t.index_nbytes for t in self.tensors) if self.tensors else 0

    @property
    def entries(self) -> int:
        return sum(t.nnz for t in self.tensors) if self.tensors else 0


class Store:
    """All datasets and operations recorded in this process.

    Examples
    --------
    A source and a projection of it:

    >>> from tensprov_lab.store import IdentityTensor, Store
    >>> s = Store()
    >>> a, b = s.add_dataset("a", n_rows=3, role="source"), s.add_dataset("b", n_rows=3)
    >>> op = s.add_operation("select", "projection", [a.id], b.id, [IdentityTensor(3)])
    >>> s.producer(b.id).method
    'select'
    """

    def __init__(self) -> None:
        self.datasets: dict[int, Dataset] = {}
        self.operations: dict[int, Operation] = {}
        self._producer: dict[int, int] = {}
        self._consumers: dict[int, list[int]] = {}
        self._next_id = 0
        self._run_ids = itertools.count()
        #: counts the changes of the graph: whatever is derived from its shape (the
        #: walks of lineage queries) is valid while it stays the same
        self.generation = 0

    def new_id(self) -> int:
        self._next_id += 1
        return self._next_id - 1

    def _claim(self, ident: int | None) -> int:
        """A new id, or ``ident`` (a loaded save keeps its ids) when it is free."""
        if ident is None:
            return self.new_id()
        ident = int(ident)
        if ident in self.datasets or ident in self.operations:
            raise StoreError(f"id {ident} is taken")
        self._next_id = max(self._next_id, ident + 1)
        return ident

    def new_run_id(self) -> int:
        """The id of a new run: unique in this store, never given again (also after
        :meth:`remove_run`), whichever SparkSession the run tracks."""
        return next(self._run_ids)

    def claim_run(self, run_id: int) -> None:
        """Never give ``run_id`` (a run loaded from a save) to a new run."""
        nxt = next(self._run_ids)
        self._run_ids = itertools.count(max(nxt, int(run_id) + 1))

    def add_dataset(self, name: str | None, id: int | None = None, **kwargs: object) -> Dataset:  # noqa: A002
        ds = Dataset(id=self._claim(id), name=name, **kwargs)  # type: ignore[arg-type]
        self.datasets[ds.id] = ds
        self._consumers.setdefault(ds.id, [])
        # after the change (here and below): what is derived meanwhile is dropped
        self.generation += 1
        return ds

    def add_operation(
        self,
        method: str,
        category: str,
        inputs: list[int],
        output: int,
        tensors: list[Tensor] | None,
        id: int | None = None,  # noqa: A002 - the field's name, as in add_dataset
        **kwargs: object,
    ) -> Operation:
        """Add an operation after checking every tensor against the dataset sizes.

        Nothing is changed when a check fails, so the store never holds half an operation.
        """
        for d in [*inputs, output]:
            if d not in self.datasets:
                raise StoreError(f"unknown dataset id {d}")
        if output in self._producer:
            raise StoreError(f"dataset {output} already has a producing operation")
        if tensors is not None:
            if len(tensors) != len(inputs):
                raise StoreError(f"{len(tensors)} tensors for {len(inputs)} inputs")
            n_out = self.datasets[output].n_rows
            for t, d in zip(tensors, inputs):
                n_in = self.datasets[d].n_rows
                if t.shape != (n_out, n_in):
                    raise StoreError(
                        f"tensor shape {t.shape} does not match datasets ({n_out}, {n_in})"
                    )
        op = Operation(
            id=self._claim(id),
            method=method,
            category=category,
            inputs=list(inputs),
            output=output,
            tensors=tensors,
            **kwargs,  # type: ignore[arg-type]
        )
        self.operations[op.id] = op
        self._producer[output] = op.id
        for d in dict.fromkeys(inputs):
            self._consumers[d].append(op.id)
        self.generation += 1
        return op

    def remove_dataset(self, ds_id: int) -> None:
        """Drop a dataset that no operation references (used to undo a failed capture)."""
        if self._consumers.get(ds_id) or ds_id in self._producer:
            raise StoreError(f"dataset {ds_id} is still referenced")
        self.datasets.pop(ds_id, None)
        self._consumers.pop(ds_id, None)
        self.generation += 1

    def dependent_runs(self, run_ids: Iterable[int]) -> list[int | None]:
        """The other runs with an operation that reads a dataset of ``run_ids`` (a later
        run may start from the datasets of an earlier one), sorted; ``None`` stands for
        operations recorded outside any run.

        Examples
        --------
        >>> from tensprov_lab.store import Store, IdentityTensor
        >>> s = Store()
        >>> a = s.add_dataset("a", n_rows=2, role="source", run=0)
        >>> b = s.add_dataset("b", n_rows=2, run=1)
        >>> _ = s.add_operation("select", "projection", [a.id], b.id, [IdentityTensor(2)], run=1)
        >>> s.dependent_runs([0]), s.dependent_runs([1])
        ([1], [])
        """
        removed, _ = self._run_members(set(run_ids))
        return self._readers(removed, set(run_ids))

    def remove_run(self, run_id: int | Iterable[int]) -> list[int]:
        """Remove every dataset and operation of a run (or of several runs at once).

        Returns the ids of the removed datasets.  Nothing is changed, and
        :class:`StoreError` is raised, when an operation of another run reads one of
        those datasets: its lineage would silently lose its inputs (remove that run
        first, or remove both together).

        Examples
        --------
        >>> from tensprov_lab.store import Store, IdentityTensor
        >>> s = Store()
        >>> a = s.add_dataset("a", n_rows=2, role="source", run=0)
        >>> b = s.add_dataset("b", n_rows=2, run=0)
        >>> _ = s.add_operation("select", "projection", [a.id], b.id, [IdentityTensor(2)], run=0)
        >>> s.remove_run(0)
        [0, 1]
        >>> s.datasets, s.operations
        ({}, {})
        """
        ids = {int(run_id)} if isinstance(run_id, (int, np.integer)) else set(run_id)
        removed, ops = self._run_members(ids)
        readers = self._readers(removed, ids)
        if readers:
            raise StoreError(
                f"datasets of run(s) {sorted(ids)} are inputs of operations of run(s) "
                f"{readers}: remove those runs first, or together"
            )
        for o in ops:
            op = self.operations.pop(o)
            self._producer.pop(op.output, None)
            for d in dict.fromkeys(op.inputs):
                if d not in removed and d in self._consumers:
                    self._consumers[d] = [c for c in self._consumers[d] if c != o]
        for d in removed:
            self.datasets.pop(d, None)
            self._consumers.pop(d, None)
            self._producer.pop(d, None)
        self.generation += 1
        return sorted(removed)

    def _run_members(self, run_ids: set[int]) -> tuple[set[int], list[int]]:
        """The datasets and operations of ``run_ids`` (with the outputs of their
        operations, and the operations producing their datasets)."""
        datasets = {d.id for d in self.datasets.values() if d.run in run_ids}
        ops = [o.id for o in self.operations.values() if o.run in run_ids or o.output in datasets]
        datasets.update(self.operations[o].output for o in ops)
        return datasets, ops

    def _readers(self, datasets: set[int], run_ids: set[int]) -> list[int | None]:
        """Runs other than ``run_ids`` whose operations read one of ``datasets`` (None
        for an operation of no run)."""
        runs: set[int | None] = set()
        for d in datasets:
            for o in self._consumers.get(d, []):
                op = self.operations[o]
                if op.run not in run_ids and op.output not in datasets:
                    runs.add(op.run)
        return sorted(runs, key=lambda r: (r is None, r or 0))

    def producer(self, ds_id: int) -> Operation | None:
        op = self._producer.get(ds_id)
        return None if op is None else self.operations[op]

    def consumers(self, ds_id: int) -> list[Operation]:
        return [self.operations[o] for o in self._consumers.get(ds_id, [])]

    def upstream(self, ds_id: int, stop: Callable[[int], bool] | None = None) -> list[int]:
        """``ds_id`` and the datasets it comes from, walking back through their
        producers (sorted); a dataset for which ``stop`` is true is listed but not walked
        past.

        >>> from tensprov_lab.store import IdentityTensor
        >>> s = Store()
        >>> a = s.add_dataset("a", n_rows=2, role="source")
        >>> b = s.add_dataset("b", n_rows=2)
        >>> _ = s.add_operation("select", "projection", [a.id], b.id, [IdentityTensor(2)])
        >>> s.upstream(b.id), s.upstream(b.id, stop=lambda d: d == b.id)
        ([0, 1], [1])
        """
        seen: set[int] = set()
        todo = [ds_id]
        while todo:
            d = todo.pop()
            if d in seen:
                continue
            seen.add(d)
            op = self.producer(d)
            if op is not None and not (stop is not None and stop(d)):
                todo.extend(op.inputs)
        return sorted(seen)

    def downstream(self, ds_id: int) -> list[int]:
        """``ds_id`` and every dataset made from it (sorted)."""
        seen: set[int] = set()
        todo = [ds_id]
        while todo:
            d = todo.pop()
            if d not in seen:
                seen.add(d)
                todo.extend(op.output for op in self.consumers(d))
        return sorted(seen)

    def sources(self) -> list[int]:
        return [d for d in self.datasets if d not in self._producer]

    def sinks(self) -> list[int]:
        return [d for d in self.datasets if not self._consumers.get(d)]

    @property
    def nbytes(self) -> int:
        return sum(op.nbytes + op.index_nbytes for op in self.operations.values())
