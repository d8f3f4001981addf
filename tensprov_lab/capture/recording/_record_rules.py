"""The generic record rule, and where each operation's tensors come from.

:meth:`RecordRules._tensors` is the orchestration: an operation of row-keeping nodes
only is the identity; one a fused read covers takes its tensors from it
(``_fused_tensors``, see :mod:`._fused`); else the rule (:mod:`.rules`) of a node that
decides the tensors' shape builds them (a grouping, a join matched in NumPy, a sort of
sorted records); else the keys are read back and ``_functional`` (every output record
comes from one record of each input: projections, filters, joins, unions, sorts,
explode) turns them into tensors.  :class:`~._tracker.Tracker` inherits them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from tensprov_lab.capture.plan._equijoin import TooManyPairs
from tensprov_lab.capture.plan._keyed import Rewrite, Unsupported
from tensprov_lab.capture.plan._keys import (
    ComposedKeyIndex,
    KeyError_,
    KeyIndex,
    MappedKeyIndex,
    RangeKeyIndex,
    ScanKeyIndex,
    SubsetKeyIndex,
    row_dtype,
)
from tensprov_lab.capture.plan._nodes import Node, _short_error
from tensprov_lab.capture.rules.aggregate import partition_groups
from tensprov_lab.capture.rules.join import semi_tensors
from tensprov_lab.capture.sources import _fused
from tensprov_lab.capture.spark._jvm import Jvm
from tensprov_lab.store import IdentityTensor, make_tensor, tensor_from_flags, tensor_from_pairs

__all__ = ["RecordRules"]


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
        genpos = [b for b in rw.blocks if b.kind == "genpos"]
        if (
            all(r.keeps_records for r in rw.rules)
            and not rw.sort
            and len(occ) == 1
            and rw.group is None
            and not genpos
            and not rw.windows  # a window's frames: its rule reads them
        ):
            n = occ[0].n
            assert n is not None and occ[0].ki is not None
            return n, [IdentityTensor(n)], occ[0].ki
        fused = self._fused_tensors(rw, occ, out_ident)
        if fused is not None:
            return fused
        # the rule of a node that decides the tensors' shape (a grouping, a join matched
        # in NumPy, a sort of sorted records), root first
        asked: list[Any] = []
        for rule in reversed(rw.rules):
            if not any(rule is r for r in asked):
                asked.append(rule)
                got = rule.tensors(self, rw, occ)
                if got is not None:
                    return got  # type: ignore[no-any-return]
        self._index_deferred(occ)
        names = [str(a.name()) for a in rw.keys]
        # cached while this capture runs when a later capture reads it again, and kept
        # afterwards when it must stay materialized (a non-deterministic result)
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
        if fusion is None or rule is None:
            return None
        try:
            return self._fused_rule(rw, occ, out_ident, fusion, rule)
        finally:
            # what no later rule reads goes now, not when the block's capture ends
            fusion.release(out_ident)

    def _fused_rule(
        self, rw: Rewrite, occ: list[Node], out_ident: int, fusion: _fused.Fusion, rule: Any
    ) -> tuple[int, list[Any], KeyIndex] | None:
        if rule.kind == "global":
            # its tensor needs no read; the values a later step compares are computed
            # now, before its records' reads are released
            try:
                fusion.compute_global(out_ident)
            except (KeyError, KeyError_, TooManyPairs):
                pass  # (the step that compares them takes a job of its own)
            except Exception as exc:  # noqa: BLE001 - inconsistent reads: the same
                self._note(f"fused capture not used ({_short_error(exc)}); captured on its own")
            return None
        if rule.kind == "sort":
            return self._fused_sort(rw, occ, out_ident, fusion)
        if rule.kind in ("semi", "anti"):
            return self._fused_semi(rw, occ, out_ident, fusion)
        if rw.sort or rw.semi is not None or rw.n_branches:
            return None
        try:
            self._index_deferred(occ)
            if rule.kind == "group":
                g = rw.group
                if g is None or g.kind != "aggregate" or g.gid_col is not None or len(occ) != 1:
                    return None
                parent, n_groups = fusion.groups(out_ident)
                got = partition_groups(occ[0], parent, n_groups)
                self._fused_done.add(out_ident)
                return got
            if rw.group is not None or any(b.kind != "input" for b in rw.blocks):
                return None
            if rule.kind == "limit":
                if len(occ) != 1 or len(rw.blocks) != 1 or occ[0].n is None:
                    return None
                # the first records of sorted records, in their (canonical) order
                flags = np.zeros(occ[0].n, dtype=bool)
                flags[: fusion.limits[out_ident]] = True
                mask = tensor_from_flags(flags)
                self._fused_done.add(out_ident)
                return mask.n_out, [mask], _mapped_index(occ[0], mask)
            if rule.kind in ("filter", "join-filter"):
                if len(occ) != 1 or len(rw.blocks) != 1:
                    return None
                # the mask straight from the condition's flags: the input's surviving
                # records, in order (no rows to look up, order or check)
                mask = fusion.mask(out_ident)
                if mask.n_in != occ[0].n:
                    raise KeyError_(f"a fused filter read {mask.n_in} of {occ[0].n} records")
                self._fused_done.add(out_ident)
                return mask.n_out, [mask], _mapped_index(occ[0], mask)
            li, ri = fusion.pairs(out_ident)
            rows = dict(zip(rule.inputs, (li, ri)))
            given = [rows[occ[b.pos].ident] for b in rw.blocks]
            # a fused join's pairs come in canonical order (Fusion.pairs)
            got = self._functional(rw, occ, None, given=given, canonical=True)
            self._fused_done.add(out_ident)
            return got
        except (KeyError, TooManyPairs):  # a read that failed, a join past what NumPy
            return None  # matches here: the rule takes a job of its own
        except Exception as exc:  # noqa: BLE001 - inconsistent reads: the operation's own job
            self._note(f"fused capture not used ({_short_error(exc)}); captured on its own")
            return None

    def _fused_semi(
        self, rw: Rewrite, occ: list[Node], out_ident: int, fusion: _fused.Fusion
    ) -> tuple[int, list[Any], KeyIndex] | None:
        """A semi or anti join of fused inputs: its left input's records that have a
        match (none), and for a semi join the right records each one matched."""
        semi = rw.semi
        if semi is None or rw.sort or rw.group is not None or rw.n_branches:
            return None
        if len(rw.blocks) != 1 or len(semi.left) != 1 or len(semi.right) != 1:
            return None
        (lb,), (rb,) = semi.left, semi.right
        if lb.kind != "input" or rb.kind != "input" or rw.blocks[0].pos != lb.pos:
            return None
        rule = fusion.rules[out_ident]
        left, right = occ[lb.pos], occ[rb.pos]
        if [left.ident, right.ident] != rule.inputs:
            return None
        try:
            self._index_deferred(occ)
            kept, _ = fusion.pairs(out_ident)
            matches = fusion.matches(out_ident)
        except (KeyError, TooManyPairs):
            return None  # (a read that failed, too many matches: the join's own job)
        except Exception as exc:  # noqa: BLE001 - inconsistent reads: the join's own job
            self._note(f"fused capture not used ({_short_error(exc)}); captured on its own")
            return None
        n_left, n_right, m = left.n, right.n, len(kept)
        assert n_left is not None and n_right is not None and left.ki is not None
        tensors: list[Any] = [None] * len(occ)
        tensors[lb.pos] = make_tensor(kept, n_left)
        outs, ri = matches if matches is not None else (np.zeros(0, np.int64),) * 2
        tensors[rb.pos] = tensor_from_pairs(outs, ri, m, n_right)
        self._fused_done.add(out_ident)
        return m, tensors, MappedKeyIndex(left.ki, _in_to_out(kept, n_left), m)

    def _fused_sort(
        self, rw: Rewrite, occ: list[Node], out_ident: int, fusion: _fused.Fusion
    ) -> tuple[int, list[Any], KeyIndex] | None:
        """A sort of a fused aggregate's groups: the permutation from their values."""
        if not rw.sort or rw.group is not None or len(occ) != 1 or len(rw.blocks) != 1:
            return None
        if any(b.kind != "input" for b in rw.blocks) or rw.n_branches:
            return None
        (parent,) = occ
        try:
            perm = fusion.sorted_groups(out_ident)
        except KeyError_:
            return None  # (values that do not name their groups: the sort's own job)
        except Exception as exc:  # noqa: BLE001 - the sort's own job
            self._note(f"fused capture not used ({_short_error(exc)}); captured on its own")
            return None
        n = parent.n
        assert n is not None and parent.ki is not None
        if len(perm) != n:
            return None
        self._fused_done.add(out_ident)
        return n, [make_tensor(perm, n)], MappedKeyIndex(parent.ki, _in_to_out(perm, n), n)

    def _costly(self, plan: Any) -> bool:
        """Whether recomputing ``plan`` runs Python code (UDFs, pandas or Arrow
        functions).  Anything else is cheaper to recompute from its sources in each
        later capture job than to cache whole: caching every reused result made capture
        two to three times slower on the engine benchmark."""
        try:
            text = self.jvm.to_json(plan)
        except Exception:
            return True  # cannot tell: keep the old, safe behaviour
        if any(m in text for m in _PYTHON_MARKERS):
            return True
        # joins below joins (a SQL statement's chain): each later capture would run them
        # all again, their broadcasts included
        return text.count(_JOIN_CLASS) >= 2

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
        fused join's pairs): no order check, and the key index codes its records only
        when a key is first translated."""
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
            tensors = semi_tensors(self, rw, occ, ordered(parts[0]), tensors)
        if len(all_parts) == 1 and branch_col is None:
            idx = ordered(all_parts[0])
            parent = occ[input_blocks[0].pos]
            n_in = parent.n
            assert n_in is not None and parent.ki is not None
            if m and (bool(np.any(idx < 0)) or not _distinct(idx, n_in)):
                raise KeyError_("an output record does not map to exactly one input record")
            if n_in > _SPARSE_PAST * max(m, 1):
                # few records of many (a filter over a cross product): a row per output
                return m, tensors, SubsetKeyIndex(parent.ki, idx)
            return m, tensors, MappedKeyIndex(parent.ki, _in_to_out(idx, n_in), m)
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


_JOIN_CLASS = '"class":"org.apache.spark.sql.catalyst.plans.logical.Join"'

#: class names in a plan's JSON that mean Python code runs when it is computed
_PYTHON_MARKERS = (
    "expressions.PythonUDF",
    "expressions.PythonUDAF",
    "InPandas",
    "InArrow",
    "PythonUDTF",
    "python.",
)


#: an operation keeping fewer than one in this many of its input's records keys them
#: by a row per output record (:class:`SubsetKeyIndex`), not a row per input record
_SPARSE_PAST = 8


def _distinct(idx: np.ndarray, n_in: int) -> bool:
    """Whether no input row appears twice in ``idx`` (a count per input row, or a sort
    when the input has many more rows than ``idx``)."""
    if n_in <= _SPARSE_PAST * max(len(idx), 1):
        return int(np.bincount(idx, minlength=n_in).max()) <= 1
    if bool(np.all(idx[1:] > idx[:-1])):
        return True
    s = np.sort(idx)
    return not bool(np.any(s[1:] == s[:-1]))


def _mapped_index(parent: Node, tensor: Any) -> MappedKeyIndex:
    """The key index of the records a functional ``tensor`` picks, distinct and in order,
    from ``parent``'s: made from the tensor when a key is first translated (the index
    keeps the tensor, at most a bit per input row, alive)."""
    n_in, m = tensor.n_in, tensor.n_out
    assert parent.ki is not None
    return MappedKeyIndex(parent.ki, lambda: _in_to_out(_input_rows(tensor, m), n_in), m)


def _in_to_out(idx: np.ndarray, n_in: int) -> np.ndarray:
    """The output row of each of ``n_in`` input rows (-1: none), given the input row
    ``idx`` of each output row."""
    in_to_out = np.full(n_in, -1, dtype=row_dtype(len(idx)))
    in_to_out[idx] = np.arange(len(idx))
    return in_to_out


def _input_rows(t: Any, m: int) -> np.ndarray:
    """The input row of each of the ``m`` output rows of a functional tensor (-1: none,
    an outer join's missing side)."""
    to_index = getattr(t, "to_index", None)
    if to_index is not None and t.n_out == m:
        # decoded whole: a random access of each of its m rows decodes them one by one
        # (a 6M-record join of a fused chain: 4 GB of temporaries and 40 s)
        return np.asarray(to_index(), dtype=np.int64)
    out, rows = t.backward_pairs(np.arange(m, dtype=np.int64))
    idx = np.full(m, -1, dtype=np.int64)
    idx[out] = rows
    return idx
