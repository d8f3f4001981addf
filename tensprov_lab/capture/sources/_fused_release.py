"""Releasing a fused capture's reads (see :mod:`._fused`): once an operation's capture
is over, the tables, positions and join pairs that no operation still to capture
needs are dropped (at 20M records each is 100 to 300 MB that would otherwise stay
held until the block's capture ends)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tensprov_lab.capture.sources._fused_computed import MEMBER_KINDS

__all__ = ["Releasing"]


class Releasing:
    """What :class:`._fused.Fusion` keeps, and the release of what no rule needs."""

    rules: dict[int, Any]
    scans: dict[int, Any]
    composite: dict[int, int]
    residuals: dict[int, Any]
    record_sorts: dict[int, Any]
    tables: dict[int, Any]
    _positions: dict[int, np.ndarray | None]
    _pairs: dict[int, tuple[np.ndarray, np.ndarray]]
    _kept: dict[int, np.ndarray]
    _matches: dict[int, tuple[np.ndarray, np.ndarray]]
    _done: set[int]
    _specs: dict[int, dict[str, tuple[Any, ...]]]

    def release(self, done: int) -> None:
        """Note that the capture of rule ``done`` is over and drop the tables, positions
        and join pairs no rule still to capture needs: at 20M records each is 100 to
        300 MB that would otherwise stay held until the block's capture ends."""
        self._done.add(done)
        self._matches.pop(done, None)
        self._prune()

    def _prune(self) -> None:
        keep: set[tuple[str, int]] = set()
        for out in self.rules:
            if out not in self._done:
                self._needs(out, keep)
        held: list[tuple[str, dict[int, Any]]] = [
            ("table", self.tables), ("pos", self._positions), ("pairs", self._pairs),
            ("kept", self._kept),
        ]  # fmt: skip
        for kind, found in held:
            for ident in [i for i in found if (kind, i) not in keep]:
                del found[ident]

    def _needs(self, out: int, got: set[tuple[str, int]]) -> None:
        """Add to ``got`` what rule ``out`` still reads: tables, and the positions and
        join pairs already derived that spare it reading more."""
        rule = self.rules[out]
        if out in self.record_sorts:  # (a sort of records whose sort values are read)
            (src,) = rule.inputs
            if src in self.composite:
                self._needs(self.composite[src], got)
            for value in self.record_sorts[out][1]:
                for _, leaf, read, _ in value.reads:
                    self._column_needs(leaf, read, got)
            return
        if rule.kind in ("sort", "limit"):
            return  # (a sort's groups' values are kept apart; a limit reads nothing)
        if rule.kind == "filter":
            scan = self.scans[out]
            assert scan.parent is not None and scan.flag is not None
            self._column_needs(scan.parent, scan.flag, got)
            late = self._specs.get(scan.flag[0], {}).get(scan.flag[1])
            for read in late[1] if late is not None and late[0] == "late" else ():
                self._column_needs(scan.parent, read, got)  # (see _subquery_read)
        elif rule.kind == "join-filter":
            (src,) = rule.inputs
            self._needs(self.composite[src], got)  # (the pairs of the join below it)
            if out in self._kept:
                got.add(("kept", out))
                return
            for _, leaf, read, _ in self.residuals[out].reads:
                self._column_needs(leaf, read, got)
        elif rule.kind in ("join", "semi", "anti"):
            # (the pairs of the joins below it: each record's records of the datasets
            # joined there, see rows_of)
            for ident in rule.inputs:
                if ident in self.composite:
                    self._needs(self.composite[ident], got)
            if out in self._pairs:
                got.add(("pairs", out))
                return
            for cols, leaves in zip(rule.columns, rule.over):
                for read, leaf in zip(cols, leaves):
                    self._column_needs(leaf, read, got)
            residual = self.residuals.get(out)
            for _, leaf, read, _ in residual.reads if residual is not None else ():
                self._column_needs(leaf, read, got)
        else:
            (src,) = rule.inputs
            join = self.composite.get(src)
            if join is not None:
                self._needs(join, got)
            for read, leaf in zip(rule.columns[0], rule.over[0]):
                self._column_needs(leaf, read, got)
            for spec in self._specs.get(out, {}).values():
                if spec[0] in MEMBER_KINDS:  # (what they read, see _computed_read)
                    for read, leaf in zip(spec[1], spec[2]):
                        self._column_needs(leaf, read, got)

    def _column_needs(self, ds: int, read: tuple[int, str], got: set[tuple[str, int]]) -> None:
        got.add(("table", read[0]))
        if read[0] == ds:
            return
        # the positions of ``ds`` among its source's records (see positions)
        while ds not in self._positions:
            scan = self.scans[ds]
            if scan.parent is None:
                return
            if scan.flag is not None:
                self._column_needs(scan.parent, scan.flag, got)
            ds = scan.parent
        got.add(("pos", ds))
