"""What-if: preview dropping or editing source records by replaying their lineage.

Only the records a change reaches (forward lineage) and the records they were computed
with (backward lineage) are replayed, on a frontier where the dropped records are gone
and the edited ones carry their new values; the old and new records of each downstream
dataset are then compared.  An aggregate whose functions decompose is updated from the
changed members' deltas instead (:mod:`._incremental`).  Dropping records can be
previewed by replay only through operations that distribute over union (SystemL's
self-reflection test); an anti-join, a window, an unordered or top-k limit, or an
operation whose grouping or join condition an edit touches cannot, and is reported as
such instead of guessed.

The replays are the engine's (:class:`Engine`): JVM plans on a classic session
(:class:`~tensprov_lab.replay._replay.Classic`), Connect plans over Spark Connect
(:class:`~tensprov_lab.replay._connect.ConnectReplay`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from tensprov_lab.query import cell_lineage, forward
from tensprov_lab.query._colineage import _down, _up
from tensprov_lab.query._lineage import _topo
from tensprov_lab.replay._frontier import NotPreviewable
from tensprov_lab.replay._incremental import members_of, update_groups
from tensprov_lab.store import Operation
from tensprov_lab.store._sets import difference, union, unique

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Engine", "WhatIf", "what_if"]

#: a Spark plan of the engine's (a JVM logical plan, a Connect relation)
Plan = Any


class Engine(Protocol):
    """What a what-if preview asks of a replay engine."""

    def records(self, ds_id: int, rows: np.ndarray) -> pd.DataFrame:
        """Records ``rows`` of ``ds_id`` as captured, recomputed from lineage."""
        ...

    def replayed(
        self, ds_id: int, rows: np.ndarray, edit: Callable[[int, np.ndarray], Plan]
    ) -> tuple[pd.DataFrame, np.ndarray]:
        """Records of ``ds_id`` replayed from the frontier ``edit(source, rows)`` builds,
        and their canonical rows (-1: a record the capture did not see)."""
        ...

    def changed_source(
        self, src: int, rows: np.ndarray, exclude: np.ndarray, touched: np.ndarray,
        edits: dict[int, dict[str, Any]],
    ) -> Plan:  # fmt: skip
        """Source ``src`` with records ``rows`` as they are and ``touched`` edited."""
        ...


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
    tracker: Any,
    engine: Engine,
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

    def edited(src: int, keep: np.ndarray) -> Plan:
        dropped = np.asarray(drop.get(src, empty), np.int64)
        # a record both dropped and edited stays dropped
        touched = difference(np.array(sorted(edit.get(src, {})), dtype=np.int64), dropped)
        rows = difference(union(keep, changed.get(src, empty)), dropped)
        return engine.changed_source(
            src, difference(rows, touched), union(dropped, touched), touched, edit.get(src, {})
        )

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
        try:
            found = _by_deltas(tracker, engine, t, old_rows, reach, edited, changed, not edit)
            if found is not None:
                old, new = found
                result.incremental.append(label)
            else:
                old = engine.records(t, old_rows)
                new, new_idx = engine.replayed(t, old_rows, edited)
                new.insert(0, ROW, new_idx)
        except NotPreviewable as exc:  # the engine cannot replay this dataset's plan
            result.not_previewable[label] = str(exc)
            continue
        cols = ds.columns
        old_by = {int(r): rec for r, rec in zip(old[ROW], old[cols].itertuples(index=False))}
        # in canonical order, whatever order the replay gave them in
        known = new[new[ROW] >= 0].sort_values(ROW, kind="stable")
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
    tracker: Any,
    engine: Engine,
    t: int,
    groups: np.ndarray,
    reach: dict[int, list[np.ndarray]],
    edited: Callable[[int, np.ndarray], Plan],
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
    seen = engine.records(p, union(touched, members.witnesses))
    before = seen[seen[ROW].isin(touched)]
    if drops_only and all(op.drops_vanish for op in _ops_between(store, set(changed), p)):
        after = before.iloc[:0]  # every touched member goes, nothing else moves
    else:
        after, idx = engine.replayed(p, touched, edited)
        if bool(np.any(idx < 0)) or not bool(np.isin(idx, touched).all()):
            return None  # a record appears (an outer join's padding): replay
        after.insert(0, ROW, idx)
    old = engine.records(t, groups)
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
