"""Recomputation and what-if: replaying operations on provenance-related records only.

Every captured dataset has an *annotated plan*: the user's plan, rewritten so that hidden
key columns travel with each record, built on the annotated plans of its inputs (the
very same JVM objects).  To recompute some records of an intermediate dataset we take
that plan and swap the annotated plans at its *frontier* -- sources, opaque outputs and
materialized datasets -- for small ones:

- a source (or an opaque output, which is keyed like a source) becomes ``Filter(key IN
  (...))`` over itself, keeping just the records the backward lineage names;
- a materialized dataset (the input of a contextual operation such as a window, or the
  output of a non-deterministic one) is left whole: Spark serves it from its cache, and
  the replay stops there, so a window still sees its whole partition.

Only the records the query needs are read and pushed through the user's own
expressions; the key columns then name each replayed record's canonical row.  A replay of
a few records from cached sources through projections, filters, joins, sorts and unions runs in
the driver without a Spark job (:func:`_local`, ``TensProvReplay.java``); any other runs
as a Spark job.

What-if (drop or edit input records) replays the same way on the edited frontier and
compares the old and new records of each downstream dataset.  Dropping records can be
previewed by replay only through operations that distribute over union (SystemL's
self-reflection test); an anti-join, a window, an unordered or top-k limit, or an
operation whose grouping or join condition an edit touches cannot, and is reported as
such instead of guessed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from tensprov_lab.capture.plan._keys import IN_LIST, KeyError_, arrow_keys, keys_sql
from tensprov_lab.capture.plan._nodes import persisted
from tensprov_lab.capture.spark._versions import arrow_schema, from_arrow, from_pandas, to_arrow
from tensprov_lab.query import backward, cell_lineage, forward
from tensprov_lab.query._colineage import _down, _up
from tensprov_lab.query._lineage import _topo
from tensprov_lab.replay._incremental import members_of, update_groups
from tensprov_lab.store import Operation
from tensprov_lab.store._sets import difference, union, unique

if TYPE_CHECKING:
    import pandas as pd

    from tensprov_lab.capture.plan._nodes import Capturing as Tracker
    from tensprov_lab.capture.plan._nodes import Node

__all__ = ["WhatIf", "replay_records", "what_if", "frontier", "NotPreviewable"]

JObject = Any


class NotPreviewable(ValueError):
    """The change cannot be previewed by replaying lineage-related records."""


def _substitute(
    tracker: Tracker, plan: JObject, repl: dict[int, JObject], few: bool = False
) -> JObject:
    """``plan`` with the subtrees whose identity is in ``repl`` swapped (no descent
    below a swapped subtree).

    ``few``: the swapped subtrees hold a few records.  Each is then read as one
    partition and the inner joins above them pair their sides in place, so the whole
    replay is one Spark stage of one task: a shuffle's stages cost more than the join
    of a few records.
    """
    jvm = tracker.jvm
    if few:
        repl = {k: jvm.single_partition(v) for k, v in repl.items()}
    memo: dict[int, JObject] = {}

    def go(node: JObject) -> JObject:
        ident = jvm.ident(node)
        if ident in repl:
            return repl[ident]
        if ident in memo:
            return memo[ident]
        kids = jvm.children(node)
        new = [go(k) for k in kids]
        inner = jvm.inner_join(node) if few else None
        if all(a is b for a, b in zip(kids, new)):
            out = node
        elif inner is not None:
            out = jvm.replicated(inner, *new)
        else:
            out = node.withNewChildren(jvm.seq(new))
        memo[ident] = out
        return out

    return go(plan)


def _cached(tracker: Tracker, ds_id: int) -> bool:
    """A materialized derived dataset (a replay reads it whole from Spark's cache);
    sources and opaque outputs cached for recomputation are still read by key."""
    node = tracker.by_ds.get(ds_id)
    op = tracker.store.producer(ds_id)
    if node is None or node.cached is None or op is None or op.opaque:
        return False
    persisted(node.cached)  # a persist still running: the replay is to read its cache
    return True


def frontier(tracker: Tracker, ds_id: int, stop_at_cached: bool = True) -> list[int]:
    """Datasets where a replay of ``ds_id`` starts: sources, opaque outputs and (with
    ``stop_at_cached``) materialized datasets upstream of it."""

    def starts(d: int) -> bool:
        op = tracker.store.producer(d)
        return op is None or op.opaque or (stop_at_cached and d != ds_id and _cached(tracker, d))

    return [d for d in tracker.store.upstream(ds_id, stop=starts) if starts(d)]


def _whole(tracker: Tracker, ds_id: int) -> set[int]:
    """Datasets upstream of the input of a contextual operation on the way to ``ds_id``:
    a replay must not cut them down."""
    store = tracker.store
    seen: set[tuple[int, bool]] = set()
    whole: set[int] = set()
    stack = [(ds_id, False)]
    while stack:
        d, under = stack.pop()
        if (d, under) in seen:
            continue
        seen.add((d, under))
        if under:
            whole.add(d)
        op = store.producer(d)
        if op is not None:
            stack.extend((i, under or op.contextual) for i in op.inputs)
    return whole


def _node(tracker: Tracker, ds_id: int) -> Node:
    node = tracker.by_ds.get(ds_id)
    if node is None or node.ann is None or node.ki is None:
        raise ValueError(f"{tracker.store.datasets[ds_id].label} has no readable records")
    return node


def _keyed_filter(
    tracker: Tracker, ds_id: int, rows: np.ndarray, exclude: np.ndarray | None = None
) -> JObject:
    """The annotated plan of a keyed source restricted to ``rows``, or, when ``rows`` are
    a large part of it, the whole source without ``exclude``: callers pick their records
    by key, and a filter listing millions of keys costs more than reading the rest."""
    node = _node(tracker, ds_id)
    assert node.ann is not None and node.ki is not None and node.n is not None
    source = tracker.source_plan(node)
    key = node.ann.key_names()[0]
    if len(rows) >= max(IN_LIST, node.n * _WHOLE):
        if exclude is None or not len(exclude):
            return source
        rows, keep = np.asarray(exclude, dtype=np.int64), False
    else:
        keep = True
    values = node.ki.values(np.asarray(rows, dtype=np.int64))  # type: ignore[attr-defined]
    if len(values) <= IN_LIST:
        # built directly: no DataFrame of its own
        attr = node.ann.keys[0]
        if keep and len(values) and tracker.jvm.is_long(attr):
            return tracker.jvm.keys_filter(attr, values.tolist(), source)
        text = keys_sql(key, values)
        return tracker.jvm.filter_sql(text if keep else f"NOT ({text})", source)
    # a long IN list makes a huge plan: join with the keys instead (a small local table,
    # sent as Arrow)
    import pyarrow as pa
    from pyspark.sql import functions as F

    df = tracker.jvm.to_df(source)
    want = from_arrow(tracker.spark, pa.table({"__tp_want": values}))
    how = "left_semi" if keep else "left_anti"
    kept = df.join(F.broadcast(want), df[key] == want["__tp_want"], how)
    return kept._jdf.queryExecution().analyzed()


#: share of a source's records above which a replay reads it whole (see _keyed_filter)
_WHOLE = 0.1


def _keyed_df(tracker: Tracker, ds_id: int, rows: np.ndarray) -> tuple[Any, str, Any]:
    """(annotated DataFrame of a keyed source restricted to ``rows``, key column, key
    index)."""
    node = _node(tracker, ds_id)
    assert node.ann is not None
    df = tracker.jvm.to_df(_keyed_filter(tracker, ds_id, rows))
    return df, node.ann.key_names()[0], node.ki


#: most frontier records a replay reads in the replay session (see _REPLAY_CONF)
_SMALL_REPLAY = 10_000
#: most frontier records a replay reads as one task, its inner joins pairing every
#: record of one side with every record of the other (see _substitute)
_FEW = 1000


def _analyzed(df: Any) -> JObject:
    return df._jdf.queryExecution().analyzed()


def _read(
    tracker: Tracker, ds_id: int, plan: JObject, small: bool = False
) -> tuple[pd.DataFrame, np.ndarray]:
    """Records of a (replayed) annotated plan of ``ds_id`` and their canonical rows;
    ``-1`` for a record the capture did not see (it appears only after a what-if).
    ``small``: the plan reads only a few records (run it in the replay session)."""
    table = to_arrow(tracker.jvm.to_df(plan, tracker.replay_spark if small else None))
    return _records(_node(tracker, ds_id), table)


def _records(node: Node, table: Any) -> tuple[pd.DataFrame, np.ndarray]:
    """The user's columns of an Arrow table of annotated records, and their canonical
    rows (see _read)."""
    assert node.ann is not None and node.ki is not None
    names = node.ann.key_names()
    raw = arrow_keys(table, names)
    try:
        idx = node.ki.lookup(raw)
    except KeyError_:
        idx = np.array([_lookup_one(node, r) for r in raw], dtype=np.int64)
    n_user = table.num_columns - len(names)
    return table.select(list(range(n_user))).to_pandas(), idx


def _lookup_one(node: Node, raw: np.ndarray) -> int:
    assert node.ki is not None
    try:
        return int(node.ki.lookup(raw.reshape(1, -1))[0])
    except KeyError_:
        return -1


def _restricted(
    tracker: Tracker,
    ds_id: int,
    rows: np.ndarray,
    edit: Callable[[int, np.ndarray], JObject] | None = None,
    inputs: Inputs | None = None,
) -> tuple[JObject, bool]:
    """Annotated plan of ``ds_id`` whose frontier holds only what ``rows`` need, and
    whether it reads only those records (nothing whole); ``edit(source, rows)`` builds a
    source's plan instead of the plain key filter.  ``inputs``: :func:`_inputs` of the
    same arguments, when the caller has them already."""
    node = _node(tracker, ds_id)
    assert node.ann is not None
    if inputs is None:
        inputs = _inputs(tracker, ds_id, rows, stop_at_cached=edit is None)
    front, back, whole = inputs
    if front == [ds_id]:
        return node.ann.plan, False
    repl: dict[int, JObject] = {}
    # the replay session interprets rows one by one: right for a few records, slower
    # than compiled code for many (a what-if reaching big groups replays their members)
    total = sum(len(back.get(d, ())) for d in front)
    small = total <= _SMALL_REPLAY
    for d in front:
        fnode = _node(tracker, d)
        assert fnode.ann is not None
        ident = tracker.jvm.ident(fnode.ann.plan)
        keep = back.get(d, np.zeros(0, dtype=np.int64))
        if edit is not None:
            repl[ident] = edit(d, keep)
        elif _cached(tracker, d) or d in whole:
            # a contextual operation needs every record of its input (served from
            # Spark's cache when the input is materialized)
            repl[ident] = fnode.ann.plan
            small = False
        else:
            repl[ident] = _keyed_filter(tracker, d, keep)
    # an in-place join compares every pair of its sides' records: for a few only.  Not
    # for a what-if: its frontier also holds the edited records, which can be many
    few = small and total <= _FEW and edit is None
    return _substitute(tracker, node.ann.plan, repl, few=few), small


#: records of a materialized dataset a replay keeps in the driver once read (at most)
_KEEP_WHOLE = 100_000

#: where a replay starts, the rows it needs there, the datasets it reads whole
Inputs = tuple[list[int], dict[int, np.ndarray], set[int]]


def _inputs(tracker: Tracker, ds_id: int, rows: np.ndarray, stop_at_cached: bool = True) -> Inputs:
    """Where a replay of ``rows`` of ``ds_id`` starts (see :func:`frontier`), the rows it
    needs of each of those datasets, and the datasets it must read whole."""
    front = frontier(tracker, ds_id, stop_at_cached=stop_at_cached)
    if front == [ds_id]:
        return front, {}, set()
    back = backward(tracker.store, ds_id, rows, to=front).rows
    return front, back, _whole(tracker, ds_id)


#: most record pairs a join of a replay run in the driver compares (see _local)
_PAIRS = 250_000


def _local(
    tracker: Tracker, ds_id: int, rows: np.ndarray, inputs: Inputs | None = None
) -> tuple[pd.DataFrame, np.ndarray] | None:
    """Records of ``rows`` of ``ds_id`` replayed in the driver without a Spark job, or
    None when this replay needs Spark (see TensProvReplay.java).

    It applies when every dataset the replay starts from is a keyed source (or opaque
    output) that an earlier recomputation cached and whose cache this JVM holds, when
    those hold at most ``_FEW`` of the wanted records, and when the operations in
    between are projections, filters, joins, sorts and unions.  A Spark job costs ~40 ms of
    scheduling on two cores, more than the rest of such a replay.
    """
    import base64

    import pyarrow as pa

    replayer = tracker.jvm.replayer
    if replayer is None:
        return None
    front, back, whole = _inputs(tracker, ds_id, rows) if inputs is None else inputs
    if front == [ds_id]:
        return None
    node = _node(tracker, ds_id)
    assert node.ann is not None
    session = tracker.replay_spark._jsparkSession
    repl: dict[int, JObject] = {}
    total = 0
    for d in front:
        fnode = _node(tracker, d)
        assert fnode.ann is not None and fnode.ki is not None
        if _cached(tracker, d) or d in whole or persisted(fnode.cached) is None:
            return None
        if len(fnode.ann.keys) != 1:
            return None
        keep = back.get(d, np.zeros(0, dtype=np.int64))
        values = np.sort(fnode.ki.values(np.asarray(keep, dtype=np.int64)))  # type: ignore[attr-defined]
        total += len(values)
        if total > _FEW or values.dtype.kind not in "iu":
            return None
        relation = replayer.cachedRecords(
            session, fnode.ann.plan, fnode.ann.keys[0], values.astype(">i8").tobytes()
        )
        if relation is None:
            return None
        repl[tracker.jvm.ident(fnode.ann.plan)] = relation
    helper = tracker.jvm.helper
    if node.arrow_schema is None:
        import json

        from pyspark.sql.types import StructType

        conf = tracker.replay_spark.conf
        large = conf.get("spark.sql.execution.arrow.useLargeVarTypes", "false") == "true"
        text = tracker.jvm._whole(helper, str(replayer.schemaJson(session, node.ann.plan, helper)))
        node.arrow_large = large
        node.arrow_schema = arrow_schema(StructType.fromJson(json.loads(text)), large)
    plan = _substitute(tracker, node.ann.plan, repl)
    reply = replayer.run(session, plan, _PAIRS, node.arrow_large, helper)
    if reply is None:
        return None
    data = base64.b64decode(tracker.jvm._whole(helper, str(reply)))
    table = pa.ipc.open_stream(data).read_all().cast(node.arrow_schema)
    return _records(node, table)


def replay_records(tracker: Tracker, ds_id: int, rows: np.ndarray) -> pd.DataFrame:
    """Recompute ``rows`` of ``ds_id`` from their provenance-related records only (a
    small materialized dataset is read instead)."""
    rows = unique(np.asarray(rows, dtype=np.int64))
    node = _node(tracker, ds_id)
    if _cached(tracker, ds_id) and (node.n or 0) <= _KEEP_WHOLE:
        # a small materialized dataset (a pipeline's aggregated output): read in full
        # once and kept, as a Spark job over its cache costs a task per partition
        if node.records is None:
            assert node.ann is not None
            node.records = _read(tracker, ds_id, node.ann.plan)
        pdf, idx = node.records
        return _rows_of(pdf.copy(), idx, rows, recomputed=False)
    inputs = _inputs(tracker, ds_id, rows)
    found = _local(tracker, ds_id, rows, inputs)
    if found is None:
        plan, small = _restricted(tracker, ds_id, rows, inputs=inputs)
        found = _read(tracker, ds_id, plan, small)
    return _rows_of(*found, rows)


def _rows_of(
    pdf: pd.DataFrame, idx: np.ndarray, rows: np.ndarray, recomputed: bool = True
) -> pd.DataFrame:
    """The records ``rows`` of a replay's answer, in canonical order, with ``_row``."""
    from tensprov_lab.capture.plan._nodes import ROW

    pdf.insert(0, ROW, idx)
    pdf = pdf[np.isin(idx, rows)]
    pdf = pdf.sort_values(ROW, kind="stable").reset_index(drop=True)
    pdf.attrs["recomputed"] = recomputed
    return pdf


# ---------------------------------------------------------------------------------------
# what-if


@dataclass
class WhatIf:
    """Preview of a change: per downstream dataset label, the records that disappear,
    change or appear (pandas tables with the canonical row ``_row``; ``-1`` for a
    record that did not exist)."""

    removed: dict[str, pd.DataFrame] = field(default_factory=dict)
    changed: dict[str, pd.DataFrame] = field(default_factory=dict)
    added: dict[str, pd.DataFrame] = field(default_factory=dict)
    #: datasets that cannot be previewed, with the reason
    not_previewable: dict[str, str] = field(default_factory=dict)
    #: datasets whose new records were derived from the changed records' deltas alone
    #: (an aggregate's sums, counts, ...), not replayed
    incremental: list[str] = field(default_factory=list)

    def summary(self) -> pd.DataFrame:
        import pandas as pd

        names = list(
            dict.fromkeys([*self.removed, *self.changed, *self.added, *self.not_previewable])
        )
        return pd.DataFrame(
            {
                "dataset": names,
                "removed": [len(self.removed.get(n, ())) for n in names],
                "changed": [len(self.changed.get(n, ())) for n in names],
                "added": [len(self.added.get(n, ())) for n in names],
                "note": [self.not_previewable.get(n, "") for n in names],
                # how the new records were found: the changed records' deltas alone, or
                # a replay of every record they were computed with
                "how": [
                    ""
                    if n in self.not_previewable
                    else "deltas"
                    if n in self.incremental
                    else "replay"
                    for n in names
                ],  # fmt: skip
            }
        )

    def __repr__(self) -> str:
        return f"<WhatIf\n{self.summary().to_string(index=False)}>"

    def _repr_html_(self) -> str:
        return f"<div><p>what-if preview</p>{self.summary().to_html(index=False)}</div>"


def _blocker(op: Operation) -> str | None:
    """Why dropping records cannot be previewed through ``op`` by replay, or None."""
    if op.opaque:
        return f"{op.expression} is opaque"
    if op.nondeterministic:
        return f"{op.expression} is not deterministic"
    if op.contextual:
        return f"{op.expression} is contextual: a change reaches records outside its lineage"
    if op.replay_blocker:  # the replay rule of a node on its way (capture.rules)
        return f"{op.expression}: {op.replay_blocker}"
    return None


def _touched_keys(store: Any, edit: dict[int, dict[int, dict[str, Any]]]) -> set[int]:
    """Operations where an edited value reaches an influencing column (a condition or
    key): the edit may move records in or out, or between groups."""
    touched: set[int] = set()
    for d, rows in edit.items():
        names = store.datasets[d].columns
        wanted = {c for r in rows.values() for c in r}
        unknown = sorted(wanted - set(names))
        if unknown:
            raise KeyError(
                f"{store.datasets[d].label} has no column(s) {unknown}; its columns: "
                f"{', '.join(names)}"
            )
        cols = sorted(names.index(c) for c in wanted)
        cells = cell_lineage(store, d, list(rows), cols, "forward")
        for t, by_col in cells.contributing.items():
            for op in store.consumers(t):
                for k, i in enumerate(op.inputs):
                    if i != t:
                        continue
                    if op.influencing is None or op.influencing[k][:, sorted(by_col)].any():
                        touched.add(op.id)
    return touched


def what_if(
    tracker: Tracker,
    drop: dict[int, np.ndarray],
    edit: dict[int, dict[int, dict[str, Any]]],
    to: list[int] | None = None,
) -> WhatIf:
    """Preview dropping and editing records of source datasets (see the module text)."""
    import pandas as pd

    from tensprov_lab.capture.plan._nodes import ROW

    store = tracker.store
    changed: dict[int, np.ndarray] = {d: unique(np.asarray(r, np.int64)) for d, r in drop.items()}
    for d, by_row in edit.items():
        changed[d] = union(changed.get(d, np.zeros(0, np.int64)), np.array(sorted(by_row)))
    for d in changed:
        if store.producer(d) is not None:
            raise ValueError(
                f"what-if changes records of sources; {store.datasets[d].label} is derived: "
                "change the source records it comes from (see run.backward)"
            )
    reach: dict[int, list[np.ndarray]] = {}
    for d, picked in changed.items():
        for t, r in forward(store, d, picked, to=_downstream(store, d)).rows.items():
            if t != d:
                reach.setdefault(t, []).append(r)
    touched = _touched_keys(store, edit)
    empty = np.zeros(0, np.int64)

    def edited(src: int, keep: np.ndarray) -> JObject:
        dropped = np.asarray(drop.get(src, empty), np.int64)
        # a record both dropped and edited stays dropped
        touched = difference(np.array(sorted(edit.get(src, {})), dtype=np.int64), dropped)
        rows = difference(union(keep, changed.get(src, empty)), dropped)
        # the edited records come from a small local relation, the others from Spark
        base = _keyed_filter(tracker, src, difference(rows, touched), union(dropped, touched))
        if not len(touched):
            return base
        df, key, ki = _keyed_df(tracker, src, touched)
        plan = _analyzed(df)
        pdf = df.toPandas()
        for row, new in edit[src].items():
            kv = int(ki.values(np.array([row], np.int64))[0])
            for col, val in new.items():
                pdf.loc[pdf[key] == kv, col] = val
        local = from_pandas(tracker.spark, pdf, df.schema)
        jvm = tracker.jvm
        lplan = _analyzed(local)
        # its columns take the source's expression ids, so the plans above read it
        # unchanged
        out = [
            jvm.alias(a, str(o.name()), like=o) for a, o in zip(jvm.output(lplan), jvm.output(plan))
        ]
        return jvm.union([base, jvm.project(out, lplan)])

    result = WhatIf()
    chosen = sorted(reach) if to is None else [t for t in to if t in reach]
    labels = [store.datasets[t].label for t in chosen]
    for t in chosen:
        ds = store.datasets[t]
        if ds.hidden:
            continue
        # results are keyed by name; a name used twice (re-run cells) gets its id
        label = ds.label if labels.count(ds.label) == 1 else f"{ds.label}#{ds.id}"
        ops = _ops_between(store, set(changed), t)
        why = next((w for op in ops if (w := _blocker(op)) is not None), None)
        keyed = [op for op in ops if op.id in touched]
        if why is None and keyed and any(op.category in _GROUPING for op in ops):
            why = (
                f"the edit changes a condition or key of {keyed[0].expression}, so records "
                "outside the lineage may join or group with it"
            )
        if why is not None:
            result.not_previewable[label] = why
            continue
        old_rows = unique(np.concatenate(reach[t]))
        found = _by_deltas(tracker, t, old_rows, reach, edited, changed, not edit)
        if found is not None:
            old, new = found
            result.incremental.append(label)
        else:
            old = replay_records(tracker, t, old_rows)
            new, new_idx = _read(tracker, t, *_restricted(tracker, t, old_rows, edit=edited))
            new.insert(0, ROW, new_idx)
        cols = ds.columns
        old_by = {int(r): rec for r, rec in zip(old[ROW], old[cols].itertuples(index=False))}
        known = new[new[ROW] >= 0]
        changes = []
        for r, rec in zip(known[ROW], known[cols].itertuples(index=False)):
            prev = old_by.get(int(r))
            if prev is None or all(_same(a, b) for a, b in zip(prev, rec)):
                continue
            entry: dict[str, Any] = {ROW: int(r)}
            for c, a, b in zip(cols, prev, rec):
                entry[c] = b
                if not _same(a, b):
                    entry[f"{c} (before)"] = a
            changes.append(entry)
        result.removed[label] = old[~old[ROW].isin(known[ROW])].reset_index(drop=True)
        result.changed[label] = pd.DataFrame(changes, columns=None if changes else [ROW])
        result.added[label] = new[new[ROW] < 0].reset_index(drop=True)
    return result


_GROUPING = {"join", "aggregate", "dedup"}


def _by_deltas(
    tracker: Tracker,
    t: int,
    groups: np.ndarray,
    reach: dict[int, list[np.ndarray]],
    edited: Callable[[int, np.ndarray], JObject],
    changed: dict[int, np.ndarray],
    drops_only: bool,
) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """The old and new records ``groups`` of an aggregate ``t``, the new ones derived
    from the deltas of its touched members (:mod:`._incremental`): two small replays of
    its input and a read of ``t`` instead of a replay of every member of the groups
    (one replay when the change only drops records of the sources ``changed`` and every
    operation on the way just loses the records made from them).  None when ``t`` is not such an
    aggregate or a group needs a replay."""
    from tensprov_lab.capture.plan._nodes import ROW

    store = tracker.store
    op = store.producer(t)
    spec = op.decomposition if op is not None else None
    if op is None or not spec or any(s is None for s in spec) or len(op.inputs) != 1:
        return None
    (p,) = op.inputs
    if op.tensors is None or (p not in reach and (p not in changed or not drops_only)):
        return None  # (an edited source's new values are not replayed: left to replay)
    # the aggregate's input is reached by the change, or is a changed source itself
    touched = unique(np.concatenate(reach[p])) if p in reach else changed[p]
    members = members_of(op.tensors[0].backward_pairs(groups), touched)
    seen = replay_records(tracker, p, union(touched, members.witnesses))
    before = seen[seen[ROW].isin(touched)]
    if drops_only and all(op.drops_vanish for op in _ops_between(store, set(changed), p)):
        after = before.iloc[:0]  # every touched member goes, nothing else moves
    else:
        after, idx = _read(tracker, p, *_restricted(tracker, p, touched, edit=edited))
        if bool(np.any(idx < 0)) or not bool(np.isin(idx, touched).all()):
            return None  # a record appears (an outer join's padding): replay
        after.insert(0, ROW, idx)
    old = replay_records(tracker, t, groups)
    cols, in_cols = store.datasets[t].columns, store.datasets[p].columns
    new = update_groups(spec, cols, in_cols, old, members, before, after, seen)
    return None if new is None else (old, new)


def _same(a: Any, b: Any) -> bool:
    try:
        if a is None or b is None:
            return a is None and b is None
        if isinstance(a, float) and isinstance(b, float) and np.isnan(a) and np.isnan(b):
            return True
        return bool(a == b)
    except (TypeError, ValueError):
        return repr(a) == repr(b)


def _downstream(store: Any, d: int) -> list[int]:
    return sorted(set(_topo(d, lambda x: _down(store, x))) - {d})


def _ops_between(store: Any, sources: set[int], target: int) -> list[Operation]:
    """Operations on some path from ``sources`` to ``target``."""
    up = set(_topo(target, lambda x: _up(store, x)))
    down: set[int] = set(sources)
    for s in sources:
        down |= set(_downstream(store, s))
    on = up & down
    ops = [store.producer(x) for x in on if store.producer(x) is not None]
    return sorted((op for op in ops if any(i in on for i in op.inputs)), key=lambda o: o.id)
