"""What-if through an aggregate from the changed members alone (incremental view
maintenance), instead of replaying every member of each affected group.

A what-if drops or edits source records; the records of an aggregate's input that the
change reaches (its *touched members*) disappear or change value, and nothing else of
the input moves (an edit of a grouping key or a condition is refused before, an outer
join that would add records sends the preview back to replay).  For a ``sum``,
``count``, ``avg``, ``min`` or ``max`` of an input column the new value of a group then
follows from its old value and the touched members' old and new values:

- ``count(*)``: members left; ``count(x)``: minus the non-null ``x`` that went, plus the
  non-null new ones;
- ``sum(x)``: minus the old values, plus the new ones; it is null when no member with a
  non-null ``x`` is left, which a ``count(x)`` of the same column says, or else a few
  untouched members read with the touched ones (*witnesses*) prove;
- ``avg(x)``: the new sum over the new ``count(x)``, both of which the aggregate must
  also compute (else the group is replayed);
- ``min``/``max``: unchanged while no touched member held the extreme; new values can
  only push it further.

Anything else (a value whose old extreme went, NaN or infinite values, decimal
averages, a group whose nullness nothing proves) returns None and the caller replays.
Floating-point sums and averages are the old value updated by the deltas: they equal a
recomputation up to rounding (Spark's own floating-point sum already depends on how its
input is partitioned).

Examples
--------
>>> import numpy as np, pandas as pd
>>> old = pd.DataFrame({"_row": [0], "g": ["a"], "s": [6], "n": [3]})
>>> members = members_of((np.array([0, 0, 0]), np.array([0, 1, 2])), np.array([1]), k=1)
>>> before = pd.DataFrame({"_row": [1], "g": ["a"], "x": [2]})
>>> after = before.iloc[:0]  # member 1 is dropped
>>> seen = pd.DataFrame({"_row": [0, 1], "g": ["a", "a"], "x": [3, 2]})  # 0: a witness
>>> spec = [("key", 0), ("sum", 1), ("count", None)]
>>> new = update_groups(spec, ["g", "s", "n"], ["g", "x"], old, members, before, after, seen)
>>> new.values.tolist()
[[0, 'a', 4, 2]]
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import numpy as np

from tensprov_lab.capture.plan._nodes import ROW

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Members", "members_of", "update_groups"]

#: untouched members per group read along with the touched ones, to prove a sum non-null
WITNESSES = 3


@dataclass
class Members:
    """What a what-if needs of the members of an aggregate's affected groups: how many
    each group has, and the touched members and a few untouched ones (*witnesses*) by
    group."""

    sizes: dict[int, int]
    #: ``(group, member)`` pairs of the touched members and the witnesses
    read: tuple[np.ndarray, np.ndarray]
    witnesses: np.ndarray


def members_of(
    pairs: tuple[np.ndarray, np.ndarray], touched: np.ndarray, k: int = WITNESSES
) -> Members:
    """The :class:`Members` of groups from their ``(group, member)`` pairs, sorted by
    group then member as ``Tensor.backward_pairs`` gives them: the touched members and
    up to ``k`` untouched ones per group.

    >>> m = members_of((np.array([0, 0, 0, 1]), np.array([4, 5, 6, 7])), np.array([5]), k=1)
    >>> m.sizes, m.read, m.witnesses
    ({0: 3, 1: 1}, (array([0, 0, 1]), array([4, 5, 7])), array([4, 7]))
    """
    groups, rows = pairs
    if not len(rows):
        empty = np.zeros(0, np.int64)
        return Members({}, (empty, empty), empty)
    start = np.flatnonzero(np.r_[True, groups[1:] != groups[:-1]])
    size = np.diff(np.r_[start, len(groups)])
    is_touched = np.isin(rows, touched)
    # the first k untouched members of a group are among its first k + touched ones
    span = np.minimum(size, k + len(touched))
    first = (
        np.repeat(start, span)
        + np.arange(int(span.sum()))
        - np.repeat(np.cumsum(span) - span, span)
    )
    first = first[~is_touched[first]]
    owner = groups[first]
    begins = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
    rank = np.arange(len(first)) - np.repeat(begins, np.diff(np.r_[begins, len(first)]))
    chosen = first[rank < k]
    picked = np.union1d(np.flatnonzero(is_touched), chosen)
    sizes = dict(zip(groups[start].tolist(), size.tolist()))
    return Members(sizes, (groups[picked], rows[picked]), np.unique(rows[chosen]))


class _Replay(Exception):
    """This group's new value cannot be derived from the deltas: replay instead."""


def _present(v: Any) -> bool:
    if v is None:
        return False
    if isinstance(v, float) and math.isinf(v):
        raise _Replay
    return True


def _nan(v: Any) -> bool:
    return isinstance(v, float) and math.isnan(v)


def _values(by_row: dict[int, Any], rows: np.ndarray, finite: bool) -> list[Any]:
    """The values of the records ``rows`` (``by_row``: one column of a frame by row),
    nulls as None.  pandas shows a null float as NaN: it is read as null where the
    group's old aggregates of the column are finite (``finite``; a NaN member would
    have made them NaN), and otherwise the group is replayed."""
    out = []
    for r in rows.tolist():
        v = by_row[r]
        if _nan(v):
            if not finite:
                raise _Replay
            v = None
        out.append(v)
    return out


class _Columns:
    """The columns of a frame of records by ``_row``, read on first use."""

    def __init__(self, frame: pd.DataFrame) -> None:
        self.frame = frame
        self.rows = frame[ROW].to_numpy(dtype=np.int64)
        self._cols: dict[str, dict[int, Any]] = {}

    def __getitem__(self, col: str) -> dict[int, Any]:
        got = self._cols.get(col)
        if got is None:
            values = self.frame[col].astype(object).tolist()
            got = self._cols[col] = dict(zip(self.rows.tolist(), values))
        return got


def _plain(v: Any) -> Any:
    """A pandas/NumPy scalar as a Python value (NaN stays: it may be null or NaN)."""
    if v is None or type(v).__name__ in ("NAType", "NaTType"):
        return None
    return v.item() if isinstance(v, np.generic) else v


@dataclass
class _Group:
    """One affected group: its touched members' old and new values."""

    hit: np.ndarray  # touched members
    moved: np.ndarray  # touched members that stay (with new values)
    witnesses: np.ndarray  # untouched members whose values were read along
    n_untouched: int
    before: _Columns
    after: _Columns
    seen: _Columns
    #: per input column: whether the group's old aggregates of it prove no NaN member
    finite: dict[str, bool]

    def went(self, x: str) -> list[Any]:
        """The non-null old values of ``x`` of the touched members."""
        return [a for a in _values(self.before[x], self.hit, self.finite[x]) if _present(a)]

    def came(self, x: str) -> list[Any]:
        """The non-null new values of ``x`` of the touched members that stay."""
        return [a for a in _values(self.after[x], self.moved, self.finite[x]) if _present(a)]

    def others(self, x: str) -> list[Any]:
        """The values of ``x`` of the untouched members read along."""
        return _values(self.seen[x], self.witnesses, self.finite[x])


def update_groups(
    spec: list[Any],
    out_cols: list[str],
    in_cols: list[str],
    old: pd.DataFrame,
    members: Members,
    before: pd.DataFrame,
    after: pd.DataFrame,
    seen: pd.DataFrame | None = None,
) -> pd.DataFrame | None:
    """The new records of an aggregate's groups ``old`` (with their ``_row``), from the
    old (``before``) and new (``after``) values of the touched members, or None when a
    group must be replayed.

    ``spec``: ``Operation.decomposition``; ``members``: the groups' sizes and the members
    read (:func:`members_of`); a touched member missing from ``after`` was dropped.
    ``seen``: the values of the members read (touched and witnesses), with ``_row``.
    """
    import pandas as pd

    if any(s is None for s in spec):
        return None
    cols = {c: (str(s[0]), None if s[1] is None else in_cols[int(s[1])])
            for c, s in zip(out_cols, spec)}  # fmt: skip
    old_cols, new_cols = _Columns(before), _Columns(after)
    seen_cols = old_cols if seen is None else _Columns(seen)
    sizes = members.sizes
    read_groups, read_rows = members.read
    out: list[dict[str, Any]] = []
    try:
        for rec in old.to_dict("records"):
            g = int(rec[ROW])
            mine = read_rows[read_groups == g]
            hit = np.intersect1d(mine, old_cols.rows)
            moved = np.intersect1d(hit, new_cols.rows)
            left = sizes.get(g, 0) - (len(hit) - len(moved))
            if left == 0:
                continue  # the group is gone with its last member
            old_v = {c: _plain(rec[c]) for c in cols}
            # no NaN member: a finite old aggregate of the column, or no value at all
            finite = {
                x: any(k not in ("count", "key") and old_v[c] is not None
                       and not _nan(old_v[c]) for c, (k, y) in cols.items() if y == x)
                or any(k == "count" and y == x and old_v[c] == 0 for c, (k, y) in cols.items())
                for _, x in cols.values() if x is not None
            }  # fmt: skip
            witnessed = np.intersect1d(np.setdiff1d(mine, hit), seen_cols.rows)
            group = _Group(hit, moved, witnessed, sizes.get(g, 0) - len(hit),
                           old_cols, new_cols, seen_cols, finite)  # fmt: skip
            out.append({ROW: g, **_new_values(cols, old_v, group, left)})
    except _Replay:
        return None
    frame = pd.DataFrame(out, columns=[ROW, *out_cols])
    for c in out_cols:
        if not frame[c].isna().any() and old[c].dtype.kind in "iub":
            frame[c] = frame[c].astype(old[c].dtype)
    return frame


def _new_values(
    cols: dict[str, tuple[str, str | None]], old: dict[str, Any], g: _Group, left: int
) -> dict[str, Any]:
    """A group's new record (see the module text); raises _Replay when it cannot."""
    counts = {x: c for c, (k, x) in cols.items() if k == "count" and x is not None}
    sums = {x: c for c, (k, x) in cols.items() if k == "sum"}
    counted = {x: int(old[c]) - len(g.went(x)) + len(g.came(x)) for x, c in counts.items()}
    new: dict[str, Any] = {}
    for c, (kind, x) in cols.items():
        v = old[c]
        if kind == "key":
            new[c] = v
            continue
        if kind == "count":
            new[c] = left if x is None else counted[x]
            continue
        assert x is not None
        if _nan(v):
            # a null aggregate reads as NaN too: only a count of 0 says which
            if x not in counts or int(old[counts[x]]) != 0:
                raise _Replay
            v = None
        if kind == "sum":
            new[c] = _sum(v, g, x, counted.get(x))
        elif kind == "avg":
            if x not in counts or isinstance(v, Decimal):
                raise _Replay  # how many values are averaged is not known exactly
            total = old[sums[x]] if x in sums else (None if v is None else v * int(old[counts[x]]))
            total = 0 if total is None or _nan(total) else total
            n_new = counted[x]
            new[c] = None if n_new == 0 else float(_shift(total, g.went(x), g.came(x))) / n_new
        else:
            new[c] = _extreme(kind, v, g.went(x), g.came(x))
    return new


def _shift(total: Any, went: list[Any], came: list[Any]) -> Any:
    if not isinstance(total, (int, float, Decimal)):
        raise _Replay
    for a in went:
        total = total - a
    for a in came:
        total = total + a
    return total


def _sum(v: Any, g: _Group, x: str, n_left: int | None) -> Any:
    """A group's new ``sum(x)``: the old one shifted by the deltas, or null when no value
    is left (known from a ``count`` of the column, or from untouched members read along)."""
    came = g.came(x)
    new = _shift(0 if v is None else v, g.went(x), came)
    if v is None:
        # a null sum: no member had a value; the new ones alone make it
        return new if came else None
    if n_left is not None:
        return new if n_left > 0 else None
    if came:
        return new
    values = g.others(x)
    if any(a is not None for a in values):
        return new
    if len(values) == g.n_untouched:
        return None  # every member left is known to be null
    raise _Replay


def _extreme(kind: str, v: Any, went: list[Any], came: list[Any]) -> Any:
    """A group's new ``min``/``max``: ``v`` stays unless a member holding it went."""
    better = min if kind == "min" else max
    if v is not None and any(a == v for a in went):
        raise _Replay  # the extreme may have gone: only a replay knows the next one
    if v is None:
        return better(came) if came else None
    return better([v, *came])
