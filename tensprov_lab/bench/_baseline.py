"""Observation-based provenance capture (the idea of Chapman et al.), as a benchmark reference.

Chapman et al. capture a pipeline's provenance by keeping the dataset before and after
every operation and *inferring* which input records each output record comes from by
comparing the two versions.  This module does the same for PySpark pipelines, written
here from that description:

1. every intermediate DataFrame is snapshotted: collected to pandas, with a ``_row``
   column holding the record's index;
2. each step is explained by observation only (the step's code is never inspected):

   - row-preserving steps (select, withColumn, drop, ML ``transform`` ...): position, checked
     against the columns the step did not change, else matched by values;
   - filters (filter, dropna, ...): each output row is matched to an input row with the
     same values (hashing whole rows; the k-th copy of a row goes to the k-th copy);
   - joins: each output row is matched to one row of each side by hashing the side's
     columns (join key and attributes) as they appear in the output;
   - unions: blocks; sorts: matched by values.

3. provenance is kept as one pandas table of ``(out, in)`` row pairs per step and input.

Records are numbered as in our engine (DESIGN.md §3: source scan order, filters keep the
relative order, joins lexicographic by (left, right), unions left block first), so the two
can be compared record by record.  Memory is what the approach keeps: the snapshots and
the pair tables (``DataFrame.memory_usage(deep=True)``).

This is not a product feature: aggregates, dedup, explode and other shapes it cannot
explain raise :class:`Unexplained`.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

from tensprov_lab.store._sets import union, unique

__all__ = ["Observation", "ObservedStep", "Step", "Unexplained", "observe", "observe_function"]

ROW = "_row"
KINDS = ("map", "sort", "filter", "join", "union")

#: DataFrame methods whose result is one step (outer call only, as the engine does)
_METHODS = (
    "select", "selectExpr", "filter", "where", "withColumn", "withColumns",
    "withColumnRenamed", "withColumnsRenamed", "drop", "toDF", "join", "crossJoin",
    "union", "unionAll", "unionByName", "orderBy", "sort", "dropna", "fillna", "replace",
    "alias", "limit", "sample", "distinct", "dropDuplicates",
)  # fmt: skip
_GROUPED_METHODS = ("agg", "count", "sum", "avg", "mean", "max", "min", "pivot")
_KIND_OF_METHOD = {
    "orderBy": "sort", "sort": "sort", "join": "join", "crossJoin": "join",
    # observed here only so that they are refused instead of passing for filters
    "distinct": "dedup", "dropDuplicates": "dedup", "groupBy": "aggregate",
}  # fmt: skip


class Unexplained(ValueError):
    """A step whose provenance cannot be inferred by comparing its input and output."""


@dataclass
class Step:
    """One pipeline step: ``name = fn(*inputs)`` with DataFrames in and out.

    Parameters
    ----------
    name : str
        Name of the step's output dataset.
    fn : callable
        Takes the input DataFrames (in the order of ``inputs``), returns a DataFrame.
    inputs : sequence of str
        Names of sources or earlier steps.
    kind : str, optional
        One of ``map, sort, filter, join, union``; inferred from the shapes when omitted.
    """

    name: str
    fn: Callable[..., Any]
    inputs: Sequence[str]
    kind: str | None = None


@dataclass
class ObservedStep:
    """The inferred provenance of one step: one ``(out, in)`` pair table per input."""

    name: str
    kind: str
    inputs: list[str]
    pairs: list[pd.DataFrame]
    #: seconds to snapshot the output and infer the pairs
    seconds: float = 0.0


@dataclass
class Observation:
    """Snapshots and inferred pair tables of a whole pipeline."""

    snapshots: dict[str, pd.DataFrame] = field(default_factory=dict)
    steps: list[ObservedStep] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def snapshot_nbytes(self) -> int:
        return sum(
            int(s.memory_usage(index=True, deep=True).sum()) for s in self.snapshots.values()
        )

    @property
    def pairs_nbytes(self) -> int:
        return sum(
            int(p.memory_usage(index=True, deep=True).sum()) for s in self.steps for p in s.pairs
        )

    @property
    def nbytes(self) -> int:
        """Bytes kept by the approach: every snapshot plus every pair table."""
        return self.snapshot_nbytes + self.pairs_nbytes

    def n_rows(self, name: str) -> int:
        return len(self.snapshots[name])

    def step(self, name: str) -> ObservedStep:
        for s in self.steps:
            if s.name == name:
                return s
        raise KeyError(f"no step named {name!r}")

    def _matrix(self, step: ObservedStep, k: int) -> sp.csr_array:
        p = step.pairs[k]
        shape = (self.n_rows(step.name), self.n_rows(step.inputs[k]))
        ones = np.ones(len(p), dtype=np.int64)
        m = sp.coo_array((ones, (p["out"].to_numpy(), p["in"].to_numpy())), shape=shape)
        return sp.csr_array(m.tocsr() > 0)

    def mapping(self, src: str, dst: str) -> sp.csr_array:
        """``dst`` rows x ``src`` rows: which source records each record derives from."""
        by_name = {s.name: s for s in self.steps}
        memo: dict[str, sp.csr_array | None] = {}

        def reach(name: str) -> sp.csr_array | None:
            if name == src:
                return sp.csr_array(sp.identity(self.n_rows(src), dtype=bool, format="csr"))
            if name in memo:
                return memo[name]
            step = by_name.get(name)
            total: sp.csr_array | None = None
            for k, parent in enumerate(step.inputs if step is not None else []):
                below = reach(parent)
                if below is None or step is None:
                    continue
                prod = self._matrix(step, k).astype(np.int64) @ below.astype(np.int64)
                part = sp.csr_array(prod > 0)
                total = part if total is None else sp.csr_array((total + part) > 0)
            memo[name] = total
            return total

        got = reach(dst)
        if got is None:
            return sp.csr_array((self.n_rows(dst), self.n_rows(src)), dtype=bool)
        return got

    def backward(self, name: str, rows: Sequence[int]) -> dict[str, np.ndarray]:
        """Source records (per source) that the given records of ``name`` derive from."""
        by_name = {s.name: s for s in self.steps}
        frontier: dict[str, np.ndarray] = {name: unique(np.asarray(rows, dtype=np.int64))}
        found: dict[str, np.ndarray] = {}
        # steps are in topological order, so one reverse sweep visits every path
        for step in reversed(self.steps):
            here = frontier.pop(step.name, None)
            if here is None:
                continue
            for parent, p in zip(step.inputs, by_name[step.name].pairs):
                hit = p["in"].to_numpy()[np.isin(p["out"].to_numpy(), here)]
                hit = hit[hit >= 0]
                prev = frontier.get(parent)
                frontier[parent] = union(prev, hit) if prev is not None else unique(hit)
        for src in self.sources:
            if src in frontier:
                found[src] = frontier[src]
        return found

    def forward(self, name: str, rows: Sequence[int], to: str) -> np.ndarray:
        """Records of ``to`` derived from the given records of ``name``."""
        m = self.mapping(name, to)
        sel = np.zeros(self.n_rows(name), dtype=bool)
        sel[np.asarray(rows, dtype=np.int64)] = True
        return np.flatnonzero(m.astype(np.int64) @ sel.astype(np.int64))


# -------------------------------------------------------------------------------------------
# matching


def _hash(df: pd.DataFrame, cols: list[str]) -> np.ndarray:
    if not cols:
        return np.zeros(len(df), dtype=np.uint64)
    return pd.util.hash_pandas_object(df[cols], index=False).to_numpy()


def _match_rows(out: pd.DataFrame, inp: pd.DataFrame, cols: list[str]) -> np.ndarray:
    """For each output position, the input position with equal values in ``cols``.

    The k-th copy of a value in the output goes to the k-th copy in the input in record
    order, which keeps the relative order of equal rows (what a filter or a stable sort
    does); ``-1`` where no input row has those values.
    """
    ho, hi = _hash(out, cols), _hash(inp, cols)
    left = pd.DataFrame({"h": ho, "k": pd.Series(ho).groupby(ho).cumcount().to_numpy()})
    by_rec = np.argsort(inp[ROW].to_numpy(), kind="stable")
    k_in = np.empty(len(hi), dtype=np.int64)
    k_in[by_rec] = pd.Series(hi[by_rec]).groupby(hi[by_rec]).cumcount().to_numpy()
    right = pd.DataFrame({"h": hi, "k": k_in, "i": np.arange(len(hi))})
    got = left.merge(right, on=["h", "k"], how="left", sort=False)["i"]
    return got.fillna(-1).to_numpy(dtype=np.int64)


def _groups(
    h: np.ndarray, rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Rows grouped by hash: ``(unique hashes, group start, group size, rows by group)``."""
    order = np.lexsort((rows, h))
    hs = h[order]
    uniq, start, count = np.unique(hs, return_index=True, return_counts=True)
    return uniq, start, count, rows[order]


def _side(
    h_out: np.ndarray, h_in: np.ndarray, rows_in: np.ndarray, null_out: np.ndarray, side: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per output row on one side of a join: found, group start, group size, rows by group."""
    uniq, start, count, by_group = _groups(h_in, rows_in)
    if len(uniq) == 0:
        found = np.zeros(len(h_out), dtype=bool)
        zero = np.zeros(len(h_out), dtype=np.int64)
        start, count, pos = zero, zero + 1, zero
    else:
        pos = np.minimum(np.searchsorted(uniq, h_out), len(uniq) - 1)
        found = uniq[pos] == h_out
    missing = ~found & ~null_out
    if missing.any():
        raise Unexplained(
            f"{int(missing.sum())} join output row(s) match no {side} input row by value"
        )
    g_start = np.where(found, start[pos], 0)
    g_size = np.where(found, count[pos], 1)
    return found, g_start, g_size, by_group


def _explain_join(out: pd.DataFrame, left: pd.DataFrame, right: pd.DataFrame) -> np.ndarray:
    """``(n_out, 2)`` left/right record index of every output row (``-1``: outer side)."""
    lc = [c for c in left.columns if c != ROW and c in out.columns]
    rc = [c for c in right.columns if c != ROW and c in out.columns]
    ho_l, ho_r = _hash(out, lc), _hash(out, rc)
    # an outer join's missing side shows as nulls in the side's own (non-shared) columns
    own_l = [c for c in lc if c not in rc] or lc
    own_r = [c for c in rc if c not in lc] or rc
    null_l = out[own_l].isna().all(axis=1).to_numpy()
    null_r = out[own_r].isna().all(axis=1).to_numpy()
    fl, ls, lsize, lrows = _side(ho_l, _hash(left, lc), left[ROW].to_numpy(), null_l, "left")
    fr, rs, rsize, rrows = _side(ho_r, _hash(right, rc), right[ROW].to_numpy(), null_r, "right")
    # output rows with the same (left values, right values) are the cross product of the
    # equal-valued left rows and right rows: the k-th copy takes pair (k // |R|, k % |R|)
    k = pd.Series(ho_l).groupby([ho_l, ho_r]).cumcount().to_numpy()
    kl, kr = k // rsize, k % rsize
    if (kl >= lsize).any():
        raise Unexplained("a join output row appears more often than its inputs explain")
    li = np.full(len(out), -1, dtype=np.int64)
    ri = np.full(len(out), -1, dtype=np.int64)
    li[fl] = lrows[(ls + kl)[fl]]
    ri[fr] = rrows[(rs + kr)[fr]]
    return np.stack([li, ri], axis=1)


def _positional_ok(out: pd.DataFrame, inp: pd.DataFrame) -> bool:
    """Whether some column the step kept is unchanged position by position."""
    common = [c for c in out.columns if c != ROW and c in inp.columns]
    if not common or len(out) == 0:
        return True
    for c in common:
        a, b = out[c].reset_index(drop=True), inp[c].reset_index(drop=True)
        try:
            if a.equals(b):
                return True
        except (TypeError, ValueError):
            continue
    return False


def _explain(
    kind: str | None, out: pd.DataFrame, ins: list[pd.DataFrame], name: str
) -> tuple[str, list[pd.DataFrame], np.ndarray]:
    """Infer a step's kind, its pair tables and the record index of each output position."""
    if kind is not None and kind not in KINDS:
        raise Unexplained(f"{name}: {kind} steps are not handled by observation")
    n = len(out)
    cols = [c for c in out.columns if c != ROW]
    if len(ins) == 1:
        inp = ins[0]
        in_rows = inp[ROW].to_numpy()
        common = [c for c in cols if c in inp.columns]
        if kind is None:
            kind = "map" if n == len(inp) else "filter" if n < len(inp) else None
        if kind in ("map", "sort"):
            if n != len(inp):
                raise Unexplained(f"{name}: a row-preserving step changed {len(inp)} rows to {n}")
            src = np.arange(n)
            # a row-preserving step keeps its input's order unless Spark reshuffled the
            # input between the two snapshots: then the unchanged columns disagree by
            # position, and values tell the rows apart (with one column, a changed value
            # could pass for another row, so position stays)
            if kind == "sort" or (len(common) >= 2 and not _positional_ok(out, inp)):
                matched = _match_rows(out, inp, common)
                if (matched >= 0).all():
                    src = matched
                elif kind == "sort":
                    raise Unexplained(f"{name}: sorted rows do not match the input rows")
            recs = in_rows[src] if kind == "map" else np.arange(n)
            pairs = pd.DataFrame({"out": recs, "in": in_rows[src]})
            return kind, [pairs.sort_values("out", ignore_index=True)], recs
        if kind == "filter":
            src = _match_rows(out, inp, common)
            if (src < 0).any() or set(cols) - set(common):
                raise Unexplained(
                    f"{name}: {int((src < 0).sum())} output row(s) match no input row "
                    "(not a filter: aggregate, dedup or explode are not handled)"
                )
            got = in_rows[src]
            # a filter keeps the relative order of the surviving records
            recs = np.argsort(np.argsort(got, kind="stable"), kind="stable")
            pairs = pd.DataFrame({"out": recs, "in": got}).sort_values("out", ignore_index=True)
            return kind, [pairs], recs
        raise Unexplained(f"{name}: {len(inp)} rows became {n}; this shape is not handled")
    if len(ins) != 2:
        raise Unexplained(f"{name}: {len(ins)} inputs; only one or two are handled")
    a, b = ins
    if kind is None:
        # unionByName may order the right side's columns differently
        same = set(a.columns) == set(b.columns) == {*cols, ROW}
        kind = "union" if same and n == len(a) + len(b) else "join"
    if kind == "union":
        # Spark returns the left block, then the right one, each in its input's order;
        # the record numbering is the same blocks in each input's record order
        ra, rb = a[ROW].to_numpy(), b[ROW].to_numpy()
        recs = np.concatenate([ra, len(a) + rb])
        pa_ = pd.DataFrame({"out": np.sort(ra), "in": np.sort(ra)})
        pb_ = pd.DataFrame({"out": len(a) + np.sort(rb), "in": np.sort(rb)})
        return kind, [pa_, pb_], recs
    lr = _explain_join(out, a, b)
    # canonical join order: lexicographic by (left record, right record)
    order = np.lexsort((lr[:, 1], lr[:, 0]))
    recs = np.empty(n, dtype=np.int64)
    recs[order] = np.arange(n)
    srt = lr[order]
    keep_l, keep_r = srt[:, 0] >= 0, srt[:, 1] >= 0
    out_ids = np.arange(n)
    pl = pd.DataFrame({"out": out_ids[keep_l], "in": srt[keep_l, 0]})
    pr = pd.DataFrame({"out": out_ids[keep_r], "in": srt[keep_r, 1]})
    return "join", [pl, pr], recs


def _snapshot(df: Any) -> pd.DataFrame:
    snap = df.toPandas()
    if len(set(snap.columns)) != len(snap.columns):
        dup = [c for c in snap.columns if list(snap.columns).count(c) > 1]
        raise Unexplained(f"duplicate column names {sorted(set(dup))}: cannot tell sides apart")
    return snap


# -------------------------------------------------------------------------------------------
# capture


def _observe_frames(
    sources: dict[str, Any], steps: list[tuple[str, Any, list[str], str | None]]
) -> Observation:
    t_all = time.perf_counter()
    obs = Observation(sources=list(sources))
    for name, df in sources.items():
        snap = _snapshot(df)
        snap[ROW] = np.arange(len(snap), dtype=np.int64)
        obs.snapshots[name] = snap
    for name, df, inputs, kind in steps:
        t0 = time.perf_counter()
        snap = _snapshot(df)
        kind_, pairs, recs = _explain(kind, snap, [obs.snapshots[i] for i in inputs], name)
        # the snapshot stays in Spark's order; _row says which record each row is
        snap[ROW] = recs
        obs.snapshots[name] = snap
        obs.steps.append(ObservedStep(name, kind_, list(inputs), pairs, time.perf_counter() - t0))
    obs.seconds = time.perf_counter() - t_all
    return obs


def observe(sources: dict[str, Any], steps: Sequence[Step]) -> Observation:
    """Run a pipeline step by step, snapshot every dataset and infer its provenance.

    Parameters
    ----------
    sources : dict
        Name -> source DataFrame (records numbered in scan order).
    steps : sequence of Step
        In execution order; each names its inputs among the sources and earlier steps.

    Returns
    -------
    Observation

    Raises
    ------
    Unexplained
        If a step's output cannot be explained by comparing it with its inputs.
    """
    frames: dict[str, Any] = dict(sources)
    plan: list[tuple[str, Any, list[str], str | None]] = []
    for s in steps:
        if s.kind is not None and s.kind not in KINDS:
            raise ValueError(f"unknown step kind {s.kind!r}; use one of {KINDS}")
        missing = [i for i in s.inputs if i not in frames]
        if missing:
            raise KeyError(f"step {s.name!r} reads unknown dataset(s) {missing}")
        frames[s.name] = s.fn(*[frames[i] for i in s.inputs])
        plan.append((s.name, frames[s.name], list(s.inputs), s.kind))
    return _observe_frames(dict(sources), plan)


def observe_function(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[Observation, Any]:
    """Snapshot every DataFrame a pipeline function makes, as Chapman et al. wrap pandas.

    While ``fn(*args, **kwargs)`` runs, DataFrame methods and ML ``Transformer.transform``
    are wrapped so that each DataFrame they return becomes a step (outer calls only); then
    the steps the result depends on are snapshotted and explained.  DataFrames among
    ``args`` are the sources (named ``source0, source1, ...``).

    Returns
    -------
    tuple
        ``(Observation, result of fn)``.  The observation's last step is the result.
    """
    from pyspark.ml.base import Transformer
    from pyspark.sql.group import GroupedData

    from tensprov_lab.capture.spark._versions import classic_dataframe

    DataFrame = classic_dataframe()

    calls: list[tuple[Any, list[Any], str]] = []
    depth = [0]

    def wrap(orig: Callable[..., Any], method: str) -> Callable[..., Any]:
        @functools.wraps(orig)
        def wrapper(obj: Any, *a: Any, **kw: Any) -> Any:
            depth[0] += 1
            try:
                out = orig(obj, *a, **kw)
            finally:
                depth[0] -= 1
            if depth[0] == 0 and isinstance(out, DataFrame):
                base = obj if isinstance(obj, DataFrame) else getattr(obj, "_df", None)
                ins = [x for x in (base, *a, *kw.values()) if isinstance(x, DataFrame)]
                calls.append((out, ins, method))
            return out

        return wrapper

    targets: list[tuple[type, str, str]] = [(DataFrame, m, m) for m in _METHODS]
    targets += [(GroupedData, m, "groupBy") for m in _GROUPED_METHODS]
    targets += [(Transformer, "transform", "transform")]
    patched: list[tuple[type, str, Any]] = []
    try:
        for cls, m, label in targets:
            orig = cls.__dict__.get(m)
            if orig is not None:
                patched.append((cls, m, orig))
                setattr(cls, m, wrap(orig, label))
        result = fn(*args, **kwargs)
    finally:
        for cls, m, orig in reversed(patched):
            setattr(cls, m, orig)
    if not isinstance(result, DataFrame):
        raise TypeError(f"the pipeline function returned {type(result).__name__}, not a DataFrame")

    frames = [a for a in args if isinstance(a, DataFrame)]
    sources = {f"source{k}": a for k, a in enumerate(frames)}
    name_of = {id(df): name for name, df in sources.items()}
    producer = {id(out): (out, ins, method) for out, ins, method in calls}
    # keep only the steps the result depends on (a pipeline may collect side results)
    needed: set[int] = set()
    stack = [result]
    while stack:
        d = stack.pop()
        if id(d) in needed or id(d) in name_of:
            continue
        if id(d) not in producer:
            name_of[id(d)] = f"source{len(sources)}"
            sources[name_of[id(d)]] = d
            continue
        needed.add(id(d))
        stack.extend(producer[id(d)][1])
    plan: list[tuple[str, Any, list[str], str | None]] = []
    for out, ins, method in calls:
        if id(out) not in needed or id(out) in name_of:
            continue
        name = f"step{len(plan)}_{method}"
        name_of[id(out)] = name
        seen: list[str] = []
        for d in ins:
            if name_of[id(d)] not in seen:
                seen.append(name_of[id(d)])
        if len(seen) == 1 and len(ins) == 2:  # a self-join reads one dataset twice
            raise Unexplained(f"{name}: self-joins are not handled")
        plan.append((name, out, seen, _KIND_OF_METHOD.get(method)))
    if not plan:
        raise Unexplained("the pipeline function made no DataFrame steps")
    return _observe_frames(sources, plan), result
