"""The record rules: how an operation's tensors and key index come from what capture read.

Each rule turns the record keys (or, for a fused capture, the record positions) of an
operation's output into its tensors: ``_functional`` for operations whose every output
record comes from one record of each input (projections, filters, joins, unions, sorts,
explode), ``_group_tensors`` for aggregates and dedup, ``_semi_tensors`` for semi joins,
and ``_fused_tensors`` for the operations a fused read covers (see :mod:`._fused`).
:class:`~._tracker.Tracker` inherits them and keeps the orchestration.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from tensprov_lab.capture import _fused
from tensprov_lab.capture._annotate import TRIVIAL, Rewrite, Unsupported, key_name
from tensprov_lab.capture._equijoin import find_equi_join, join_pairs, key_codes, value_codes
from tensprov_lab.capture._jvm import Jvm
from tensprov_lab.capture._keys import (
    ComposedKeyIndex,
    GroupSetKeyIndex,
    KeyError_,
    KeyIndex,
    MappedKeyIndex,
    RangeKeyIndex,
    ScanKeyIndex,
    arrow_keys,
)
from tensprov_lab.capture._nodes import Node, _short_error
from tensprov_lab.store import IdentityTensor, make_tensor, tensor_from_pairs

__all__ = ["RecordRules"]

_IDENTITY_NODES = TRIVIAL | {"Project", "Window", "Sort"}
#: most records of one join side read into this process to match keys in NumPy, and
#: Spark's size estimate of a side above which that is not even tried (sizes beyond
#: these are left to Spark's own join)
_JOIN_MAX_SIDE = 20_000_000
_JOIN_MAX_BYTES = 4 << 30


class RecordRules:
    """The record rules of :class:`~._tracker.Tracker` (a mixin: it reads the tracker's
    JVM, fused reads and record indexes)."""

    jvm: Jvm
    _fusion: _fused.Fusion | None
    _fused_done: set[int]
    _reused: set[int]

    if TYPE_CHECKING:

        def _index_deferred(self, nodes: list[Node]) -> None: ...
        def _set_index(self, node: Node, ki: ScanKeyIndex) -> None: ...
        def _note(self, message: str) -> None: ...
        def _collect_keys(
            self, plan: Any, names: list[str], keep: bool = False, ident: int | None = None
        ) -> np.ndarray: ...

    def _tensors(
        self, rw: Rewrite, in_nodes: list[Node], out_ident: int = 0
    ) -> tuple[int, list[Any], KeyIndex]:
        occ = [in_nodes[i] for i in rw.occurrences]
        nodes = set(rw.nodes)
        genpos = [b for b in rw.blocks if b.kind == "genpos"]
        if (
            nodes <= _IDENTITY_NODES
            and not rw.sort
            and len(occ) == 1
            and rw.group is None
            and not genpos
        ):
            n = occ[0].n
            assert n is not None and occ[0].ki is not None
            return n, [IdentityTensor(n)], occ[0].ki
        fused = self._fused_tensors(rw, occ, out_ident)
        if fused is not None:
            return fused
        joined = self._join_keys(rw, occ)
        if joined is not None:
            return self._functional(rw, occ, joined)
        self._index_deferred(occ)
        if rw.group is not None:
            return self._group_tensors(rw, occ)
        names = [str(a.name()) for a in rw.keys]
        # cached while this capture runs when a later capture reads it again, and kept
        # afterwards when it must stay materialized (a non-deterministic result)
        if rw.sort and not all(n.key_ordered for n in occ):
            raw, runs = self._sorted_keys(rw, names)
            return self._functional(rw, occ, raw, runs)
        keep = rw.nondeterministic or (out_ident in self._reused and self._costly(rw.plan))
        raw = self._collect_keys(rw.plan, names, keep=keep, ident=out_ident)
        return self._functional(rw, occ, raw)

    def _fused_tensors(
        self, rw: Rewrite, occ: list[Node], out_ident: int
    ) -> tuple[int, list[Any], KeyIndex] | None:
        """The operation's tensors from the block's fused reads (see :mod:`._fused`);
        None when no fused rule covers it, or its reads are missing or disagree with
        what capture counted (then it takes a job of its own)."""
        fusion = self._fusion
        rule = fusion.rules.get(out_ident) if fusion is not None else None
        if fusion is None or rule is None or rw.sort or rw.semi is not None or rw.n_branches:
            return None
        try:
            self._index_deferred(occ)
            if rule.kind == "group":
                g = rw.group
                if g is None or g.kind != "aggregate" or g.gid_col is not None or len(occ) != 1:
                    return None
                parent, n_groups = fusion.groups(out_ident)
                members = np.arange(len(parent), dtype=np.int64)
                got = self._groups(occ[0], members, parent, n_groups, ordered=True)
                self._fused_done.add(out_ident)
                return got
            if rw.group is not None or any(b.kind != "input" for b in rw.blocks):
                return None
            if rule.kind == "filter":
                rows = {rule.inputs[0]: fusion.survivors(out_ident)}
            else:
                li, ri = fusion.pairs(out_ident)
                rows = dict(zip(rule.inputs, (li, ri)))
            given = [rows[occ[b.pos].ident] for b in rw.blocks]
            # survivors and join pairs come in canonical order (Fusion.survivors, .pairs)
            got = self._functional(rw, occ, None, given=given, canonical=True)
            self._fused_done.add(out_ident)
            return got
        except KeyError:  # a read that failed (its rule takes a job of its own)
            return None
        except Exception as exc:  # noqa: BLE001 - inconsistent reads: the operation's own job
            self._note(f"fused capture not used ({_short_error(exc)}); captured on its own")
            return None

    def _join_keys(self, rw: Rewrite, occ: list[Node]) -> np.ndarray | None:
        """The raw keys of an equi-join's output, matched in NumPy from one scan of each
        side (see :mod:`._equijoin`); ``None`` when the operation is not such a join or
        Spark's own join is the cheaper way (too big a side, or a side it broadcasts
        while every source it reads already has its record index)."""
        if rw.group is not None or rw.sort or rw.semi is not None or rw.nondeterministic:
            return None
        if any(b.kind != "input" for b in rw.blocks):
            return None
        jvm = self.jvm
        ej = find_equi_join(jvm, rw.plan)
        if ej is None or rw.join_node is None or jvm.ident(ej.node) != jvm.ident(rw.join_node):
            return None
        ids = [int(a.exprId().id()) for a in rw.keys]
        split = rw.join_left_blocks
        side_of = [0 if i < split else 1 for i in range(len(rw.blocks))]
        # a side that is a whole source not yet counted gets its index from its keys
        whole = [
            bool(node.deferred and node.ann is not None)
            and jvm.ident(ej.sides[side]) == jvm.ident(node.ann.plan)  # type: ignore[union-attr]
            for node, side in ((occ[b.pos], s) for b, s in zip(rw.blocks, side_of))
        ]
        # both sides read one source: its keys appear twice in the output, which Spark
        # cannot read back by name, while each side read on its own is unambiguous
        shared = len(set(ids)) < len(ids)
        if not shared and not self._numpy_cheaper(ej.sides, any(whole)):
            return None
        tables = []
        for side, (plan, keys) in enumerate(zip(ej.sides, ej.keys)):
            attrs = [a for b, s in zip(rw.blocks, side_of) if s == side for a in b.attrs]
            names = [key_name("j") for _ in keys]
            exprs = [*attrs, *(jvm.alias(k, n) for k, n in zip(keys, names))]
            table = jvm.to_arrow(jvm.to_df(jvm.project(exprs, plan)))
            if table.num_rows > _JOIN_MAX_SIDE:
                return None
            tables.append((table, names))
        (lt, ln), (rt, rn) = tables
        codes = key_codes([lt.column(n) for n in ln], [rt.column(n) for n in rn])
        pairs = join_pairs(*codes, *ej.keep)
        raw = []
        for b_i, (b, side) in enumerate(zip(rw.blocks, side_of)):
            table = tables[side][0]
            block = arrow_keys(table, [str(a.name()) for a in b.attrs])
            node = occ[b.pos]
            if whole[b_i] and node.deferred:
                # the side is the whole source in scan order: its keys are its index
                ki = ScanKeyIndex.from_keys(block[:, 0])
                if ki is not None:
                    self._set_index(node, ki)
            picked = np.full((len(pairs[side]), block.shape[1]), -1, dtype=np.int64)
            found = pairs[side] >= 0
            picked[found] = block[pairs[side][found]]
            raw.append(picked)
        self._index_deferred(occ)
        return np.column_stack(raw) if raw else np.zeros((0, 0), np.int64)

    def _numpy_cheaper(self, sides: list[Any], counts_a_source: bool) -> bool:
        """Whether to match a join's keys in NumPy rather than read Spark's join output.

        Every side must be small enough to read into this process.  Then NumPy wins
        when Spark would shuffle every side (too big to broadcast: its own join sorts
        both), and also when a side is a source still to be counted: reading its keys
        gives its record index, which otherwise costs a Spark job of its own (two such
        jobs made a first capture of a broadcast join about twice as slow).
        """
        try:
            limit = self.jvm.broadcast_threshold()
            sizes = [self._estimated_bytes(s) for s in sides]
        except Exception:  # noqa: BLE001 - no estimate: leave the join to Spark
            return False
        # Spark's "no estimate" (e.g. an RDD) is Long.MaxValue, and estimates above one
        # scale it down: sizes no real data has
        if not all(size >= 2**60 or size <= _JOIN_MAX_BYTES for size in sizes):
            return False
        return counts_a_source or all(limit < 0 or size > limit for size in sizes)

    def _estimated_bytes(self, plan: Any) -> int:
        """Spark's size estimate of ``plan``'s result (what its broadcast choice reads)."""
        stats = self.jvm.to_df(plan)._jdf.queryExecution().optimizedPlan().stats()
        return int(str(stats.sizeInBytes()))

    def _costly(self, plan: Any) -> bool:
        """Whether recomputing ``plan`` runs Python code (UDFs, pandas or Arrow
        functions).  Anything else is cheaper to recompute from its sources in each
        later capture job than to cache whole: caching every reused result made capture
        two to three times slower on the engine benchmark."""
        try:
            text = self.jvm.to_json(plan)
        except Exception:
            return True  # cannot tell: keep the old, safe behaviour
        return any(m in text for m in _PYTHON_MARKERS)

    def _sorted_keys(self, rw: Rewrite, names: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Keys of a global sort's output in sorted order, and the run of equal sort
        values each record belongs to.

        Spark breaks ties by raw keys, which is the canonical order of the input only
        when the input was not itself sorted; the runs let the caller re-order ties by
        canonical index instead.
        """
        if rw.sort_node is None:
            raise Unsupported(
                "a sort of an already sorted input, inside a call that also does other "
                "steps: its ties cannot be ordered exactly"
            )
        ties = [key_name("t") for _ in rw.sort_exprs]
        exprs = [*rw.keys, *(self.jvm.alias(e, n) for e, n in zip(rw.sort_exprs, ties))]
        table = self.jvm.to_arrow(self.jvm.to_df(self.jvm.project(exprs, rw.sort_node)))
        raw = arrow_keys(table.select(names), names)
        same = np.ones(max(table.num_rows - 1, 0), dtype=bool)
        for n in ties:
            same &= _equal_to_previous(table.column(n))
        runs = np.concatenate([[0], np.cumsum(~same)]) if table.num_rows else np.zeros(0, np.int64)
        return raw, runs.astype(np.int64)

    def _functional(
        self,
        rw: Rewrite,
        occ: list[Node],
        raw: np.ndarray | None,
        runs: np.ndarray | None = None,
        given: list[np.ndarray] | None = None,
        canonical: bool = False,
    ) -> tuple[int, list[Any], KeyIndex]:
        """Tensors and key index of an operation whose every output record comes from
        one record of each input: from the raw keys read back, or (``given``) from the
        input rows of each input block, known already (a fused capture).
        ``canonical``: the given rows are distinct and in canonical order already (a
        fused filter's survivors, a fused join's pairs): no order check, and the key
        index codes its records only when a key is first translated."""
        m = len(raw) if raw is not None else len(given[0]) if given else 0
        parts: list[np.ndarray] = []
        branch = np.zeros(m, dtype=np.int64)
        genpos = None
        blocks_ki: list[tuple[KeyIndex, int]] = []
        branch_col = None
        off = 0
        for b in rw.blocks:
            if b.kind == "branch":
                assert raw is not None
                branch, branch_col = raw[:, off], off
            elif b.kind == "genpos":
                assert raw is not None
                genpos = raw[:, off]
                pos_ki = RangeKeyIndex(int(genpos.max()) + 1 if m else 0)
                blocks_ki.append((pos_ki, off))
            else:
                node = occ[b.pos]
                assert node.ki is not None
                if given is not None:
                    parts.append(given[len(parts)])
                else:
                    assert raw is not None
                    parts.append(node.ki.lookup(raw[:, off : off + b.width]))
                blocks_ki.append((node.ki, off))
            off += b.width
        all_parts = parts + ([genpos] if genpos is not None else [])
        n_br = max(rw.n_branches, 1)
        fits = ComposedKeyIndex.fits(blocks_ki, n_br)
        codes = None
        radix = ComposedKeyIndex.radix(blocks_ki, n_br)
        lazy = canonical and given is not None and branch_col is None and genpos is None
        if fits and not lazy:
            codes = ComposedKeyIndex.encode([branch] + [p + 1 for p in all_parts], radix)
        # order: the canonical order of the records read (None: as they came)
        order: np.ndarray | None = None
        if lazy:
            pass
        elif rw.sort and runs is not None:
            # sorted order, ties in the input's canonical order
            order = np.lexsort([*all_parts[::-1], branch, runs])
        elif rw.sort:
            pass
        elif codes is not None:
            # the code sorts like (branch, input indices..., position): canonical order;
            # Spark often returns it already (scans, filters), so check before sorting
            in_order = m < 2 or bool(np.all(codes[1:] > codes[:-1]))
            order = None if in_order else np.argsort(codes, kind="stable")
        elif m:
            order = np.lexsort(all_parts[::-1] + [branch])

        def ordered(a: np.ndarray) -> np.ndarray:
            # no gather when in order already: at 20M join rows each one is 160 MB
            return a if order is None else a[order]

        input_blocks = [b for b in rw.blocks if b.kind == "input"]
        tensors: list[Any] = [None] * len(occ)
        for b, idx in zip(input_blocks, parts):
            n_in = occ[b.pos].n
            assert n_in is not None
            tensors[b.pos] = make_tensor(ordered(idx), n_in)
        if rw.semi is not None:
            tensors = self._semi_tensors(rw, occ, ordered(parts[0]), tensors)
        if len(all_parts) == 1 and branch_col is None:
            idx = ordered(all_parts[0])
            parent = occ[input_blocks[0].pos]
            assert parent.n is not None and parent.ki is not None
            if m and (bool(np.any(idx < 0)) or int(np.bincount(idx, minlength=parent.n).max()) > 1):
                raise KeyError_("an output record does not map to exactly one input record")
            in_to_out = np.full(parent.n, -1, dtype=np.int64)
            in_to_out[idx] = np.arange(m)
            return m, tensors, MappedKeyIndex(parent.ki, in_to_out, m)
        if lazy and fits:
            blocks_tensors = [tensors[b.pos] for b in input_blocks]

            def codes_of_tensors() -> np.ndarray:
                # the input rows again, from the tensors (the rows read are not kept)
                rows = [_input_rows(t, m) + 1 for t in blocks_tensors]
                return ComposedKeyIndex.encode([np.zeros(m, dtype=np.int64), *rows], radix)

            return (
                m,
                tensors,
                ComposedKeyIndex(blocks_ki, branch_col, n_br, codes_of_tensors, rw.width, n=m),
            )
        if codes is None:
            raise Unsupported("the combined key space of this operation is too large")
        ki = ComposedKeyIndex(blocks_ki, branch_col, n_br, ordered(codes), rw.width)
        if ki.has_duplicates():
            raise KeyError_("two output records carry the same input records")
        return m, tensors, ki

    def _semi_tensors(
        self, rw: Rewrite, occ: list[Node], left_idx: np.ndarray, tensors: list[Any]
    ) -> list[Any]:
        assert rw.semi is not None
        right = [b for b in rw.semi.right if b.kind == "input"]
        n_out = len(left_idx)
        for b in right:
            n_in = occ[b.pos].n
            assert n_in is not None
            if rw.semi.pairs_plan is None:
                tensors[b.pos] = tensor_from_pairs(
                    np.zeros(0, np.int64), np.zeros(0, np.int64), n_out, n_in
                )
                continue
            lnames = [str(a.name()) for lb in rw.semi.left for a in lb.attrs]
            rnames = [str(a.name()) for a in b.attrs]
            raw = self._collect_keys(rw.semi.pairs_plan, lnames + rnames)
            lw = sum(lb.width for lb in rw.semi.left)
            lki = occ[rw.semi.left[0].pos].ki
            rki = occ[b.pos].ki
            assert lki is not None and rki is not None
            li = lki.lookup(raw[:, :lw])
            ri = rki.lookup(raw[:, lw:])
            # a semi join keeps left records in their order: output row = rank among kept
            outs = np.searchsorted(left_idx, li).astype(np.int64)
            tensors[b.pos] = tensor_from_pairs(outs, ri, n_out, n_in)
        return tensors

    def _group_tensors(self, rw: Rewrite, occ: list[Node]) -> tuple[int, list[Any], KeyIndex]:
        import pyarrow as pa
        import pyarrow.compute as pc

        g = rw.group
        assert g is not None
        extra = set(rw.nodes) - _IDENTITY_NODES - {"Aggregate", "Deduplicate", "Distinct", "Expand"}
        if extra:
            raise Unsupported(f"{sorted(extra)} after a grouping step")
        node = occ[g.pos]
        assert node.ki is not None and node.n is not None
        if _takes_every_record(rw):
            # one group of every input record (a global aggregate straight over its
            # input): nothing to read back from Spark
            return _every_record(node)
        if g.flat_plan is not None:
            table = self.jvm.to_arrow(self.jvm.to_df(g.flat_plan))
            raw = arrow_keys(table, g.key_cols)
            if g.group_cols:
                parent, n_groups = _group_ids(table, g.group_cols)
            else:  # a global aggregate: one group, even over no rows
                parent, n_groups = np.zeros(len(raw), dtype=np.int64), 1
        else:
            table = self.jvm.to_arrow(self.jvm.to_df(g.members_plan).select(g.members))
            col = table.column(g.members).combine_chunks()
            n_groups = len(col)
            flat = pc.list_flatten(col)
            parent = np.asarray(
                pc.list_parent_indices(col).to_numpy(zero_copy_only=False), dtype=np.int64
            )
            raw = arrow_keys(pa.table({"k": flat}), ["k"])
        member = node.ki.lookup(raw)
        gid = arrow_keys(table, [g.gid_col])[:, 0] if g.gid_col is not None else None
        return self._groups(node, member, parent, n_groups, gid)

    def _groups(
        self,
        node: Node,
        member: np.ndarray,
        parent: np.ndarray,
        n_groups: int,
        gid: np.ndarray | None = None,
        ordered: bool = False,
    ) -> tuple[int, list[Any], KeyIndex]:
        """The tensor and key index of a grouping of ``node``'s records: ``member[i]``
        is in group ``parent[i]`` (of grouping set ``gid[i]``); ``ordered``: groups are
        numbered by smallest member already."""
        assert node.ki is not None and node.n is not None
        if ordered:
            rank, out_rows = np.arange(n_groups), parent
        else:
            # groups ordered by their smallest member (set semantics, DESIGN.md §3);
            # groups of different grouping sets with the same smallest member by
            # grouping-set id
            first = np.full(n_groups, np.iinfo(np.int64).max, dtype=np.int64)
            np.minimum.at(first, parent, member)
            group_gid = np.zeros(n_groups, dtype=np.int64)
            if gid is not None:
                group_gid[parent] = gid
            order = np.lexsort((group_gid, first))
            rank = np.empty(n_groups, dtype=np.int64)
            rank[order] = np.arange(n_groups)
            out_rows = rank[parent]
        empty = np.flatnonzero(np.bincount(parent, minlength=n_groups) == 0)
        null_row = int(rank[empty[0]]) if len(empty) else None
        tensor = tensor_from_pairs(out_rows, member, n_groups, node.n)
        ki: KeyIndex
        if gid is not None:
            ki = GroupSetKeyIndex(node.ki, member, gid, out_rows, n_groups)
        else:
            in_to_out = np.full(node.n, -1, dtype=np.int64)
            in_to_out[member] = out_rows
            ki = MappedKeyIndex(node.ki, in_to_out, n_groups, null_row)
        return n_groups, [tensor], ki


def _group_ids(table: Any, columns: list[str]) -> tuple[np.ndarray, int]:
    """Group number of every row, grouping equal values (and nulls) like Spark does for
    integral, string, boolean and date columns."""
    import pandas as pd

    code, _ = value_codes([table.column(name) for name in columns])
    # hash-based: no sort of every member
    parent, uniq = pd.factorize(code)
    return parent.astype(np.int64), len(uniq)


def _every_record(node: Node) -> tuple[int, list[Any], KeyIndex]:
    """One output record made from every record of ``node``: its size, tensor and keys."""
    assert node.ki is not None and node.n is not None
    member = np.arange(node.n, dtype=np.int64)
    everything = np.zeros(node.n, dtype=np.int64)
    tensor = tensor_from_pairs(everything, member, 1, node.n)
    return 1, [tensor], MappedKeyIndex(node.ki, everything, 1, 0 if not node.n else None)


def _takes_every_record(rw: Rewrite) -> bool:
    """Whether the operation is one global aggregate over every record of its one input:
    no grouping keys or grouping sets, and only row-preserving steps around it."""
    g = rw.group
    if g is None or g.kind != "aggregate" or g.group_cols or g.gid_col is not None:
        return False
    # flat_plan is None when grouping values cannot be compared exactly: then there are some
    if g.flat_plan is None or len(rw.occurrences) != 1:
        return False
    steps = [n for n in rw.nodes if n not in _IDENTITY_NODES]
    return steps == ["Aggregate"]


def _equal_to_previous(col: Any) -> np.ndarray:
    """For rows ``1..m-1`` of an Arrow column: equal to the row before under Spark's
    sort semantics (nulls equal each other, NaN equals NaN)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if len(col) < 2:
        return np.zeros(0, dtype=bool)
    t = col.type
    if pa.types.is_nested(t) or pa.types.is_dictionary(t):
        raise Unsupported(f"ties of a sort on a {t} value cannot be compared exactly")
    a, b = col.slice(1), col.slice(0, len(col) - 1)
    eq = pc.fill_null(pc.equal(a, b), False)
    both_null = pc.and_(pc.is_null(a), pc.is_null(b))
    out = pc.or_(eq, both_null)
    if pa.types.is_floating(t):
        both_nan = pc.fill_null(pc.and_(pc.is_nan(a), pc.is_nan(b)), False)
        out = pc.or_(out, both_nan)
    return np.asarray(out.to_numpy(zero_copy_only=False), dtype=bool)


#: class names in a plan's JSON that mean Python code runs when it is computed
_PYTHON_MARKERS = (
    "expressions.PythonUDF",
    "expressions.PythonUDAF",
    "InPandas",
    "InArrow",
    "PythonUDTF",
    "python.",
)


def _input_rows(t: Any, m: int) -> np.ndarray:
    """The input row of each of the ``m`` output rows of a functional tensor (-1: none,
    an outer join's missing side)."""
    out, rows = t.backward_pairs(np.arange(m, dtype=np.int64))
    idx = np.full(m, -1, dtype=np.int64)
    idx[out] = rows
    return idx
