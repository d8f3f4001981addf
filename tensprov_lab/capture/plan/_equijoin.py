"""Record pairs of an equi-join computed in NumPy from each side's key columns.

Capture needs, for every output record of a join, which left and which right record
made it.  Spark can tell by running the join over the record keys, but when neither
side is small that is a shuffle and a sort of both sides, which on a small machine
costs about as much as the user's own join.  Reading each side's join key (and record
key) once and matching them here is a plain scan of each side: for an equi-join whose
condition is nothing but equalities of keys Spark compares exactly, the pairs are the
same.

The plan side (which joins qualify, which key expressions) is read from Catalyst's own
``ExtractEquiJoinKeys``, the pattern Spark's planner uses to pick a hash or sort-merge
join; this module only matches codes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tensprov_lab.capture.plan._keys import row_dtype

__all__ = [
    "EXACT_TYPES",
    "arrow_codes",
    "combine_codes",
    "dense_pairs",
    "EXACT_KEY_TYPES",
    "JOIN_TYPES",
    "SEMI_TYPES",
    "EquiJoin",
    "find_equi_join",
    "groups_through",
    "join_pairs",
    "key_codes",
    "semi_rows",
    "value_codes",
    "with_unmatched",
]

#: Spark key types whose equality is equality of the values Arrow hands us.  Floats
#: are missing on purpose: Spark's join treats NaN = NaN and -0.0 = 0.0; strings with a
#: collation other than binary print as ``string collate ...`` and are missing too.
EXACT_KEY_TYPES = frozenset(
    {"tinyint", "smallint", "int", "bigint", "string", "boolean", "date", "timestamp",
     "timestamp_ntz"}
)  # fmt: skip
#: value types whose equality Arrow's codes reproduce exactly as Spark groups and
#: compares whole records (set operations): the key types but timestamps
EXACT_TYPES = EXACT_KEY_TYPES - {"timestamp", "timestamp_ntz"}
#: Catalyst join type → which unmatched records the output keeps
JOIN_TYPES = {
    "Inner": (False, False),
    "LeftOuter": (True, False),
    "RightOuter": (False, True),
    "FullOuter": (True, True),
}


def key_codes(left: list[Any], right: list[Any]) -> tuple[np.ndarray, np.ndarray]:
    """One int64 code per record of each side: equal codes iff every key is equal and
    none is null; -1 for a record with a null key (it matches nothing).

    ``left[i]`` and ``right[i]`` are Arrow arrays (or chunked arrays) of the i-th key,
    of the same type on both sides.

    Examples
    --------
    >>> import pyarrow as pa
    >>> l, r = key_codes([pa.array([1, 2, None]), pa.array(["a", "b", "a"])],
    ...                  [pa.array([2, 1, 1]), pa.array(["b", "a", "z"])])
    >>> bool(l[0] == r[1]), bool(l[1] == r[0]), int(l[2]), len(set(r.tolist()))
    (True, True, -1, 3)
    """
    import pyarrow as pa

    n_left = len(left[0]) if left else 0
    if len(left) == 1:
        small = _integer_codes(left[0], right[0])
        if small is not None:
            return small[:n_left], small[n_left:]
    columns = []
    for lcol, rcol in zip(left, right):
        chunks = [*_chunks(lcol), *_chunks(rcol)]
        columns.append(pa.chunked_array(chunks, type=chunks[0].type))
    combined, null = value_codes(columns)
    combined[null] = -1
    return combined[:n_left], combined[n_left:]


def value_codes(columns: list[Any]) -> tuple[np.ndarray, np.ndarray]:
    """One int64 code per row of equal-length Arrow columns: equal codes iff the rows'
    values are equal, a null being a value of its own; and which rows hold a null.

    >>> import pyarrow as pa
    >>> codes, null = value_codes([pa.array(["a", None, "a"]), pa.array([1, 1, 1])])
    >>> bool(codes[0] == codes[2]), bool(codes[0] == codes[1]), null.tolist()
    (True, False, [False, True, False])
    """
    n = len(columns[0]) if columns else 0
    parts = [arrow_codes(col) for col in columns]
    null = np.zeros(n, dtype=bool)
    for codes, _ in parts:
        null |= codes == 0
    combined = combine_codes(parts) if parts else np.zeros(n, dtype=np.int64)
    return combined, null


def _integer_codes(left: Any, right: Any) -> np.ndarray | None:
    """One integer key: its values shifted to start at 0 are the codes (no hashing);
    ``None`` for other types or a range too wide for int64 codes."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = left.type
    if not (pa.types.is_integer(kind) or pa.types.is_date32(kind)) or kind != right.type:
        return None
    cast = pa.int64() if pa.types.is_integer(kind) else pa.int32()
    both = pa.chunked_array([*_chunks(left), *_chunks(right)], type=kind).cast(cast)
    lo_hi = pc.min_max(both)
    if lo_hi["min"].as_py() is None:
        return np.full(len(both), -1, dtype=np.int64)
    low, high = lo_hi["min"].as_py(), lo_hi["max"].as_py()
    if high - low >= 2**62:
        return None
    codes = np.asarray(pc.fill_null(both, low).to_numpy(), dtype=np.int64)
    # in place when the values were copied out of Arrow (a read-only view is not):
    # one array of both sides' keys less, 128 MB at 16M keys
    codes = np.subtract(codes, low, out=codes) if codes.flags.writeable else codes - low
    if both.null_count:
        codes[np.asarray(both.is_null().to_numpy(zero_copy_only=False), dtype=bool)] = -1
    return codes


#: records gathered at a time by :func:`dense_pairs` (buffers of 8 MB that stay in use)
_BLOCK = 1 << 20


def _chunks(col: Any) -> list[Any]:
    return list(col.chunks) if hasattr(col, "chunks") else [col]


class TooManyPairs(Exception):
    """A join pairs more records than the caller lets it match in NumPy."""


def _dense(top: int, n_left: int, n_right: int) -> bool:
    """Whether key codes below ``top`` are dense enough for a table of the key range
    (no bigger than the records of both sides) instead of a sort.

    >>> _dense(3000, 1000, 10), _dense(10**9, 1000, 10)
    (True, False)
    """
    return top <= 2 * (n_left + n_right) + 1024


class _Runs:
    """The records of one join side grouped by key code (-1: in no group), made once
    and then paired with any number of left records (:meth:`spans`, :meth:`pairs`).

    >>> runs = _Runs(np.array([4, -1, 2, 4]), top=5)
    >>> lo, counts = runs.spans(np.array([4, 3, -1, 2]))
    >>> counts.tolist(), [r.tolist() for r in runs.pairs(lo, counts)]
    ([2, 0, 0, 1], [[0, 0, 3], [0, 3, 2]])
    """

    def __init__(self, right: np.ndarray, top: int, dense: bool = True) -> None:
        self.dense = dense
        if dense:
            # dense codes: a counting sort of the records by code (a CSR matrix with one
            # row per code lists them grouped, in position order), then each code's run
            # is read off its row pointer instead of two binary searches per left record
            import scipy.sparse as sp

            ok = np.flatnonzero(right >= 0)
            grouped = sp.csr_matrix(
                (np.ones(len(ok), dtype=np.int8), (right[ok], ok)), shape=(top, len(right))
            )
            self.order = grouped.indices
            self.starts = grouped.indptr[:-1].astype(np.int64)
            self.sizes = np.diff(grouped.indptr).astype(np.int64)
        else:
            self.order = np.argsort(right, kind="stable")
            self.ordered = right[self.order]

    def spans(self, left: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Where each left record's run starts in :attr:`order`, and its length."""
        if self.dense:
            valid = (left >= 0) & (left < len(self.starts))
            safe = np.where(valid, left, 0)
            return self.starts[safe], np.where(valid, self.sizes[safe], 0)
        lo = np.searchsorted(self.ordered, left, "left")
        hi = np.searchsorted(self.ordered, left, "right")
        return lo, np.where(left < 0, 0, hi - lo)

    def pairs(self, lo: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The pairs of :meth:`spans`, sorted by left position, then right position."""
        if int(counts.max(initial=0)) <= 1:  # each left record matches at most one
            li = np.flatnonzero(counts)
            return li, self.order[lo[li]]
        ends = np.cumsum(counts)
        # (int32 below 2**31: Q21's 15M pairs of equal order keys take half the passes)
        rows = row_dtype(max(len(lo), len(self.order), int(ends[-1])))
        li = np.repeat(np.arange(len(lo), dtype=rows), counts)
        at = np.repeat((lo - (ends - counts)).astype(rows, copy=False), counts)
        at += np.arange(len(li), dtype=rows)
        return li, self.order[at]


def join_pairs(
    left: np.ndarray,
    right: np.ndarray,
    keep_left: bool = False,
    keep_right: bool = False,
    max_pairs: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Positions ``(li, ri)`` of the records an equi-join pairs, given each side's key
    codes (-1: never matches).  ``keep_left`` / ``keep_right`` add the unmatched records
    of that side with -1 on the other (outer joins).

    Matched pairs come sorted by left position, then right position.  With
    ``max_pairs``, a join that matches more pairs raises :class:`TooManyPairs` before
    any pair is made (counted from the codes).

    Examples
    --------
    >>> li, ri = join_pairs(np.array([5, 7, 5, -1]), np.array([5, 5, 8]), keep_left=True)
    >>> li.tolist(), ri.tolist()
    ([0, 0, 2, 2, 1, 3], [0, 1, 0, 1, -1, -1])
    >>> join_pairs(np.array([5, 5]), np.array([5, 5]), max_pairs=3)
    Traceback (most recent call last):
    ...
    tensprov_lab.capture.plan._equijoin.TooManyPairs: 4 pairs
    """
    left = np.asarray(left, dtype=np.int64)
    right = np.asarray(right, dtype=np.int64)
    top = max(int(left.max(initial=-1)), int(right.max(initial=-1)), 0) + 1
    dense = _dense(top, len(left), len(right))
    if dense and not keep_right:
        # dense codes, each right code at most once (a key the right side is unique on,
        # the usual dimension table): one scatter and one gather, no sort at all
        keyed = right >= 0
        # row numbers in int32 below 2**31 records (at 16M join rows, 64 MB a side saved)
        rows = row_dtype(max(len(left), len(right)))
        at: np.ndarray = np.full(top, -1, dtype=rows)
        at[right[keyed]] = np.flatnonzero(keyed)
        if int(np.count_nonzero(at >= 0)) == int(np.count_nonzero(keyed)):
            # (every pass over the left codes counts: 20M of them in the engine bench)
            hit = (
                at[left]
                if int(left.min(initial=0)) >= 0
                else np.where(left >= 0, at[np.maximum(left, 0)], -1)
            )
            matched = hit >= 0
            if int(np.count_nonzero(matched)) == len(left):
                # every left record matches once (a foreign key): no gather of the pairs
                return np.arange(len(left), dtype=rows), hit
            if not keep_left:
                li = np.flatnonzero(matched)
                return li, hit[li]
            # matched pairs first, then the unmatched left records
            li = np.concatenate([np.flatnonzero(matched), np.flatnonzero(~matched)])
            return li, hit[li]
    runs = _Runs(right, top, dense)
    lo, counts = runs.spans(left)
    if max_pairs is not None and int(counts.sum()) > max_pairs:
        raise TooManyPairs(f"{int(counts.sum())} pairs")
    li, ri = runs.pairs(lo, counts)
    parts_l, parts_r = [li], [ri]
    if keep_left:
        lonely = np.flatnonzero(counts == 0)
        parts_l.append(lonely)
        parts_r.append(np.full(len(lonely), -1, dtype=np.int64))
    if keep_right:
        matched = np.zeros(len(right), dtype=bool)
        matched[ri] = True
        lonely = np.flatnonzero(~matched)
        parts_l.append(np.full(len(lonely), -1, dtype=np.int64))
        parts_r.append(lonely)
    return np.concatenate(parts_l), np.concatenate(parts_r)


def dense_pairs(
    left: Any,
    left_rows: np.ndarray | None,
    right: Any,
    right_rows: np.ndarray | None,
    keep_left: bool = False,
) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`join_pairs` of a foreign-key join on one integer key, straight from the
    key columns: ``left`` and ``right`` are Arrow columns over some records, of which
    ``left_rows`` / ``right_rows`` (ascending, ``None``: all) are the join's sides.

    Where the keys are non-negative, not null, in a range about as small as the records
    and unique on the right (a dimension table's key), each right record is written at
    its key and each left record reads it there, chunk by chunk: no copy of the left
    keys is made, only the pairs.  ``None`` when the keys are not like that (then
    :func:`key_codes` and :func:`join_pairs` take them).

    Examples
    --------
    >>> import pyarrow as pa
    >>> left = pa.chunked_array([[3, 1, 7], [3, 0]])
    >>> li, ri = dense_pairs(left, np.array([0, 1, 2, 3]), pa.array([0, 3, 1]), None)
    >>> li.tolist(), ri.tolist()
    ([0, 1, 3], [1, 2, 1])
    >>> dense_pairs(left, None, pa.array([3, 3]), None) is None  # not unique on the right
    True
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = left.type
    if not pa.types.is_integer(kind) or kind != right.type:
        return None
    if left.null_count or right.null_count:
        return None
    n_left = len(left) if left_rows is None else len(left_rows)
    n_right = len(right) if right_rows is None else len(right_rows)
    if n_right == 0 or len(left) == 0:
        return None
    bounds = [pc.min_max(left), pc.min_max(right)]
    low = min(b["min"].as_py() for b in bounds)
    high = max(b["max"].as_py() for b in bounds)
    # (the same "dense" bound as join_pairs: a table of the key range is no bigger
    # than the records)
    if low < 0 or not _dense(high + 1, n_left, n_right):
        return None
    rows = row_dtype(max(n_left, n_right))
    keys = np.concatenate([np.asarray(c.to_numpy(), dtype=np.int64) for c in _chunks(right)])
    if right_rows is not None:
        keys = keys[right_rows]
    at: np.ndarray = np.full(high + 1, -1, dtype=rows)
    at[keys] = np.arange(n_right, dtype=rows)
    if int(np.count_nonzero(at >= 0)) != n_right:
        return None  # a key twice on the right: not a foreign key
    hit = np.empty(n_left, dtype=rows)
    # block by block through two small buffers, not whole-side temporaries: at 16M
    # records those were 128 MB each of memory the process had not touched yet, which
    # cost more than the gathers themselves ("clip": every index is in range already)
    block = min(_BLOCK, max(n_left, 1))
    where = np.empty(block, dtype=np.int64)
    picked: np.ndarray | None = None
    done, offset = 0, 0
    for chunk in _chunks(left):
        values = chunk.to_numpy()  # (no nulls: a view of Arrow's buffer)
        if picked is None or picked.dtype != values.dtype:
            picked = np.empty(block, dtype=values.dtype)  # (take's out= is of their type)
        if left_rows is None:
            np.take(at, values, out=hit[done : done + len(values)], mode="clip")
            done += len(values)
        else:
            a, b = np.searchsorted(left_rows, [offset, offset + len(values)])
            for s in range(int(a), int(b), block):
                k = min(block, int(b) - s)
                np.subtract(left_rows[s : s + k], offset, out=where[:k])
                np.take(values, where[:k], out=picked[:k], mode="clip")
                np.take(at, picked[:k], out=hit[done : done + k], mode="clip")
                done += k
        offset += len(values)
    matched = hit >= 0
    if int(np.count_nonzero(matched)) == n_left:
        return np.arange(n_left, dtype=rows), hit
    li = np.flatnonzero(matched)
    if keep_left:  # matched pairs first, then the unmatched left records
        li = np.concatenate([li, np.flatnonzero(~matched)])
    return li.astype(rows, copy=False), hit[li]


def with_unmatched(
    li: np.ndarray, ri: np.ndarray, sizes: tuple[int, int], keep: tuple[bool, bool]
) -> tuple[np.ndarray, np.ndarray]:
    """An outer join's pairs: the matched ``(li, ri)``, and with ``keep`` of a side each of
    its ``sizes[side]`` records in no pair, paired with -1 (in no order yet).

    >>> with_unmatched(np.array([0, 0]), np.array([1, 2]), (2, 4), (True, True))
    (array([ 0,  0,  1, -1, -1]), array([ 1,  2, -1,  0,  3]))
    """
    lefts, rights = [li], [ri]
    for side, (rows, size) in enumerate(zip((li, ri), sizes)):
        if not keep[side]:
            continue
        seen = np.zeros(size, dtype=bool)
        seen[rows] = True
        alone = np.flatnonzero(~seen).astype(rows.dtype, copy=False)
        none = np.full(len(alone), -1, dtype=rows.dtype)
        lefts.append(alone if side == 0 else none)
        rights.append(none if side == 0 else alone)
    return np.concatenate(lefts), np.concatenate(rights)


def semi_rows(
    left: np.ndarray,
    right: np.ndarray,
    anti: bool = False,
    max_pairs: int | None = None,
    holds: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
    null_aware: bool = False,
) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray] | None]:
    """The left records a semi join keeps (those with a match; an anti join: those
    without, a null key among them), ascending, given each side's key codes (-1: never
    matches, as :func:`key_codes` gives them); and for a semi join the matches that
    keep them, ``(output row, right position)`` in canonical order (an anti join's
    output has none: None).  ``holds``: the join's condition beyond its keys, true or
    not for each pair ``(left positions, right positions)`` of equal keys; a pair for
    which it does not hold is no match.  ``null_aware``: an anti join of ``NOT IN``, whose
    comparison with a null is no answer (one key, ``holds`` None): with any right
    record, a null key on either side keeps no left record of it (a right one: none).

    Examples
    --------
    >>> kept, (outs, ri) = semi_rows(np.array([5, 7, 5, -1]), np.array([5, 8, 5]))
    >>> kept.tolist(), outs.tolist(), ri.tolist()
    ([0, 2], [0, 0, 1, 1], [0, 2, 0, 2])
    >>> semi_rows(np.array([5, 7, 5, -1]), np.array([5, 8, 5]), anti=True)[0].tolist()
    [1, 3]
    >>> semi_rows(np.array([5, 7, -1]), np.array([5, 8]), True, null_aware=True)[0].tolist()
    [1]
    >>> semi_rows(np.array([5, 7, -1]), np.array([8, -1]), True, null_aware=True)[0].tolist()
    []
    >>> other = lambda li, ri: ri != 0  # (a condition beyond the keys: not right record 0)
    >>> semi_rows(np.array([5, 7, 5, -1]), np.array([5, 8, 5]), holds=other)[1][1].tolist()
    [2, 2]
    """
    left = np.asarray(left, dtype=np.int64)
    right = np.asarray(right, dtype=np.int64)
    if anti and null_aware:
        if holds is not None:
            raise ValueError("a null-aware anti join has one key and nothing beyond it")
        if not len(right):
            return np.arange(len(left)), None  # (NOT IN of nothing is true)
        if bool(np.any(right < 0)):
            return np.zeros(0, dtype=np.int64), None  # (x NOT IN (..., NULL): never true)
        hit = np.isin(left, right)
        return np.flatnonzero(~hit & (left >= 0)), None
    if anti and holds is None:
        # (a null key compares null: no match, so NOT EXISTS keeps its record)
        hit = np.isin(left, right[right >= 0]) & (left >= 0)
        return np.flatnonzero(~hit), None
    if holds is not None:
        # the pairs of equal keys made a range of left records at a time, each range's
        # kept where the condition holds: a semi join with a condition beyond its keys
        # (TPC-H Q21's EXISTS over lineitem again at SF 1: 15M pairs of equal order
        # keys) needs only its matches whole, an anti join not even those
        got_l, got_r = [], []
        total = 0
        # (the right side grouped once, not once for each range)
        top = max(int(left.max(initial=-1)), int(right.max(initial=-1)), 0) + 1
        runs = _Runs(right, top, _dense(top, len(left), len(right)))
        starts, counts = runs.spans(left)
        for lo, hi in _left_ranges(counts, max_pairs):
            li, ri = runs.pairs(starts[lo:hi], counts[lo:hi])
            ok = holds(li + lo, ri)
            li, ri = li[ok] + lo, ri[ok]
            total += len(li)
            if max_pairs is not None and not anti and total > MATCHES_PER_PAIR * max_pairs:
                raise TooManyPairs(f"over {total} matches")
            # (kept in the narrowest row type: Q21's 11M matches at SF 1)
            got_l.append(li.astype(row_dtype(len(left)), copy=False))
            got_r.append(ri.astype(row_dtype(len(right)), copy=False) if not anti else ri[:0])
        li = np.concatenate(got_l) if got_l else np.zeros(0, dtype=np.int64)
        ri = np.concatenate(got_r) if got_r else np.zeros(0, dtype=np.int64)
    else:
        # (matched pairs come sorted by left, then right position: see join_pairs)
        li, ri = join_pairs(left, right, max_pairs=max_pairs)
    if anti:
        lonely = np.ones(len(left), dtype=bool)
        lonely[li] = False
        return np.flatnonzero(lonely), None
    first = np.ones(len(li), dtype=bool)
    first[1:] = li[1:] != li[:-1]
    kept = li[first]
    outs = (np.cumsum(first) - 1).astype(row_dtype(len(kept)), copy=False)
    return kept, (outs, ri)


#: a semi join with a condition keeps at most this many times ``max_pairs`` matches
#: (its right tensor, 8 bytes a match; the pairs of equal keys, 16 bytes each, are made
#: ``max_pairs`` at a time, see semi_rows)
MATCHES_PER_PAIR = 3


def _left_ranges(per: np.ndarray, max_pairs: int | None) -> list[tuple[int, int]]:
    """Consecutive ranges of left records, each pairing at most ``max_pairs`` records
    of the other side, given how many each record pairs (``per``; all of them in one
    range without a bound); :class:`TooManyPairs` when one record pairs more by itself.

    >>> _left_ranges(np.array([2, 1, 0, 2]), 3)
    [(0, 3), (3, 4)]
    """
    if max_pairs is None or not len(per):
        return [(0, len(per))]
    if int(per.max(initial=0)) > max_pairs:
        raise TooManyPairs(f"{int(per.max())} pairs of one record")
    ranges, lo, done = [], 0, 0
    ends = np.cumsum(per)
    while lo < len(per):
        # the furthest end whose pairs since lo fit
        hi = int(np.searchsorted(ends, done + max_pairs, "right"))
        hi = max(hi, lo + 1)
        ranges.append((lo, hi))
        done = int(ends[hi - 1])
        lo = hi
    return ranges


class EquiJoin:
    """A join whose condition is only key equalities (Catalyst's ``ExtractEquiJoinKeys``),
    found under projections at the top of a plan.

    Attributes
    ----------
    node : the Join plan node; ``sides`` its two children
    keep : which side's unmatched records the output keeps
    keys : the key expressions of each side (same count and types on both)
    how : Catalyst's join type (``Inner``, ``LeftOuter``, ..., ``LeftSemi``, ``LeftAnti``)
    residual : the condition beyond the key equalities (None: there is none)
    """

    residual: Any = None
    #: an anti join of ``NOT IN``: its condition ``a = b OR isnull(a = b)`` (one key)
    null_aware: bool = False

    def __init__(
        self, node: Any, sides: list[Any], keep: tuple[bool, bool], keys: Any, how: str = "Inner"
    ) -> None:
        self.node, self.sides, self.keep, self.keys, self.how = node, sides, keep, keys, how


def _null_aware_anti(jvm: Any, node: Any) -> EquiJoin | None:
    """A ``NOT IN`` subquery's anti join, ``a = b OR isnull(a = b)`` with ``a`` over the
    left side and ``b`` over the right (TPC-H Q16's), as an equi-join of key ``a = b``
    that :func:`semi_rows` matches null-aware; None for anything else."""
    try:
        if str(node.joinType().toString()) != "LeftAnti" or node.condition().isEmpty():
            return None
        cond = node.condition().get()
        if jvm.cls(cond) != "Or" or jvm.cls(cond.left()) != "EqualTo":
            return None
        equal, null = cond.left(), cond.right()
        if jvm.cls(null) != "IsNull" or not bool(null.child().semanticEquals(equal)):
            return None
        sides = jvm.children(node)
        ids = [set(jvm.expr_ids(side)) for side in sides]
        a, b = equal.left(), equal.right()
        refs = [{int(x.exprId().id()) for x in jvm.lst(k.references().toSeq())} for k in (a, b)]
        if not (refs[0] and refs[1]) or not (refs[0] <= ids[0] and refs[1] <= ids[1]):
            return None
        for k in (a, b):
            if str(k.dataType().simpleString()) not in EXACT_KEY_TYPES or not k.deterministic():
                return None
        if str(a.dataType().simpleString()) != str(b.dataType().simpleString()):
            return None
    except Exception:  # noqa: BLE001 - another Spark build's plan: not this shape
        return None
    found = EquiJoin(node, sides, (False, False), ([a], [b]), "LeftAnti")
    found.null_aware = True
    return found


#: the join types whose output is left records only (``EXISTS`` / ``IN`` and their NOT)
SEMI_TYPES = ("LeftSemi", "LeftAnti")


def find_equi_join(
    jvm: Any, plan: Any, semi: bool = False, residual: bool = False
) -> EquiJoin | None:
    """The equi-join at the top of ``plan`` (below projections only), or ``None`` when
    there is none or its keys are not all of :data:`EXACT_KEY_TYPES` and deterministic.
    With ``semi``, a semi or anti join (:data:`SEMI_TYPES`) is one too; with
    ``residual``, a join whose condition has more than its key equalities (that rest is
    :attr:`EquiJoin.residual`)."""
    node = plan
    while jvm.cls(node) == "Project":
        node = jvm.children(node)[0]
    if jvm.cls(node) != "Join":
        return None
    found = jvm.equi_join_keys.unapply(node)
    if found.isEmpty():
        return _null_aware_anti(jvm, node) if semi else None
    parts = found.get()
    how = str(parts._1().toString())
    known = how in JOIN_TYPES or (semi and how in SEMI_TYPES)
    rest = None if parts._4().isEmpty() else parts._4().get()
    if not known or (rest is not None and not residual):
        return None  # a cross join, a semi join, or a condition beyond key equalities
    keys = (jvm.lst(parts._2()), jvm.lst(parts._3()))
    if not keys[0]:
        return None
    for k in keys[0] + keys[1]:
        if str(k.dataType().simpleString()) not in EXACT_KEY_TYPES or not k.deterministic():
            return None
    found_join = EquiJoin(node, jvm.children(node), JOIN_TYPES.get(how, (False, False)), keys, how)
    found_join.residual = rest
    return found_join


def arrow_codes(column: Any) -> tuple[np.ndarray, int]:
    """An Arrow column's values as int64 codes, equal values equal codes (0: null), and
    the number of codes (for :func:`combine_codes`)."""
    # one chunk first, so that a single dictionary numbers every value
    if hasattr(column, "chunks"):
        column = column.combine_chunks()
    if hasattr(column, "dictionary"):
        # (Arrow keeps an encoded column as it is, and its dictionary may repeat a value)
        inner = column.dictionary.dictionary_encode()
        remap = np.append(inner.indices.fill_null(-1).to_numpy(zero_copy_only=False), -1)
        at = np.asarray(column.indices.fill_null(-1).to_numpy(zero_copy_only=False))
        return remap[at].astype(np.int64) + 1, len(inner.dictionary) + 1
    encoded = column.dictionary_encode()
    codes = np.asarray(encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False))
    return codes.astype(np.int64) + 1, len(encoded.dictionary) + 1


def combine_codes(parts: list[tuple[np.ndarray, int]]) -> np.ndarray:
    """One int64 per row for several columns' codes (``(codes, width)`` each): equal
    rows, equal values (renumbered on the way when the product would overflow).

    >>> combine_codes([(np.array([1, 1, 2]), 3), (np.array([0, 1, 0]), 2)]).tolist()
    [2, 3, 4]
    """
    import pandas as pd

    combined = parts[0][0]
    for codes, width in parts[1:]:
        if (int(combined.max(initial=0)) + 1) * width >= 2**62:
            combined = pd.factorize(combined)[0].astype(np.int64)
        combined = combined * width + codes
    return combined


def groups_through(columns: list[tuple[np.ndarray, int]], at: np.ndarray) -> tuple[np.ndarray, int]:
    """The groups of the records ``at`` picks from one side of a join, by the grouping
    columns' codes over that side's records (``(codes, width)`` each, as
    :func:`arrow_codes` gives them); ``at`` is -1 where the join has no record on that
    side, which groups as every value null.  Groups are numbered by smallest member.

    The values are combined and numbered over the side's records (a dimension table's
    few), and only a small code follows each of the join's records: one gather, where
    numbering the join's records themselves hashes each of them.

    Examples
    --------
    >>> region = (np.array([1, 2, 1, 0]), 3)  # records 0..3 of the side; 0: null
    >>> parent, n = groups_through([region], np.array([1, 3, 0, -1, 2, 1]))
    >>> parent.tolist(), n
    ([0, 1, 2, 1, 2, 0], 3)
    """
    import pandas as pd

    # one more record, every value null: the one a -1 picks
    combined = combine_codes([(np.append(codes, 0), width) for codes, width in columns])
    local, uniq = pd.factorize(combined)
    n_local = len(uniq)
    small = local.astype(np.int16 if n_local < 2**15 else row_dtype(n_local))
    # numbered by first appearance over the join's records with no code per record in
    # between; the codes that can appear are the side's records' (the appended one's
    # only when a -1 picks it), and usually every one of them is in the first records
    possible = int(np.count_nonzero(np.bincount(small[:-1], minlength=n_local)))
    if len(at) and int(at.min()) < 0 and not bool(np.any(small[:-1] == small[-1])):
        possible += 1
    rank, n_groups = _first_rank(lambda a, b: small[at[a:b]], len(at), n_local, possible)
    # block by block through one small buffer, each gather from a table in the cache
    # ("wrap": at = -1 picks the appended record)
    parent = np.empty(len(at), dtype=rank.dtype)
    codes = np.empty(min(_BLOCK, len(at)), dtype=small.dtype)
    for a in range(0, len(at), _BLOCK):
        b = min(a + _BLOCK, len(at))
        np.take(small, at[a:b], out=codes[: b - a], mode="wrap")
        np.take(rank, codes[: b - a], out=parent[a:b], mode="clip")
    return parent, n_groups


def first_appearance(codes: np.ndarray, n_codes: int) -> tuple[np.ndarray, int]:
    """``codes`` (in ``0..n_codes-1``) renumbered by first appearance, as
    ``pd.factorize`` numbers values, and the number of codes that appear.

    >>> parent, n = first_appearance(np.array([4, 2, 4, 0, 2]), 5)
    >>> parent.tolist(), n
    ([0, 1, 0, 2, 1], 3)
    """
    rank, n = _first_rank(lambda a, b: codes[a:b], len(codes), n_codes)
    return rank[codes], n


#: records :func:`_first_rank` looks through first, and before it counts the codes
#: that appear
_FIRST_BLOCK = 1 << 16
_COUNT_AFTER = 1 << 20


def _first_rank(
    codes_of: Any, n: int, n_codes: int, possible: int | None = None
) -> tuple[np.ndarray, int]:
    """The rank of each of ``n_codes`` codes by its first appearance among ``n``
    records (-1: it does not appear), and how many appear; ``codes_of(a, b)`` gives the
    codes of records ``a..b-1``, of which at most ``possible`` distinct (default: all).

    The first appearances are looked for in blocks that double in size, until every
    possible code has been seen: the few groups of an aggregate are usually all there
    in its first block.  Codes that never appear would send the blocks to the end, so
    past a million records the codes that appear are counted (one pass) to stop at them.
    """
    first = np.full(n_codes, n, dtype=np.int64)
    present = n_codes if possible is None else possible
    start, step, seen = 0, _FIRST_BLOCK, 0
    counted = False
    while start < n and seen < present:
        if not counted and start >= _COUNT_AFTER:
            counts = np.bincount(codes_of(0, n), minlength=n_codes)
            present, counted = int(np.count_nonzero(counts)), True
            continue
        stop = min(n, start + step)
        np.minimum.at(first, codes_of(start, stop), np.arange(start, stop, dtype=np.int64))
        seen = int(np.count_nonzero(first < n))
        start, step = stop, step * 2
    found = np.flatnonzero(first < n)
    order = found[np.argsort(first[found], kind="stable")]
    rank = np.full(n_codes, -1, dtype=row_dtype(len(order)))
    rank[order] = np.arange(len(order), dtype=rank.dtype)
    return rank, len(order)
