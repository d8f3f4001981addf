"""The explorer's answers about a node or record beyond its lineage: where a source
record stopped (why-not), and what a stage (a rolled-up chain) holds.

A mixin of :class:`~._widget.LineageExplorer`: it reads the widget's run, view and
picked record, and sets its traits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from tensprov_lab.notebook._graph_view import node_ref

if TYPE_CHECKING:
    import networkx as nx

    from tensprov_lab.notebook._graph_view import GraphView

__all__ = ["SourcePanel"]


class SourcePanel:
    """Why-not of a picked source record; a stage's details and its expansion."""

    _run: Any
    _view: GraphView | None
    _full: nx.DiGraph
    _picked: dict[str, Any] | None
    _expanded: set[str]
    selected: str

    if TYPE_CHECKING:

        def _label(self, ds_id: int) -> str: ...
        def _ds_summary(self, ds_id: int) -> dict[str, Any]: ...
        def _project_lineage(self) -> None: ...
        def _refresh_graph(self) -> None: ...
        def _visible_id(self, nid: str, G: nx.DiGraph) -> str: ...

    def _where_it_went(self, ds_id: int, row: int, reached: dict[int, np.ndarray]) -> None:
        """Why-not of a source record for every sink on show it does not reach: the
        operation that dropped it, why, and the values that decided it."""
        from tensprov_lab.query import why_not

        store = self._run.store
        sinks = [
            int(a["ref"])
            for _, a in self._full.nodes(data=True)
            if a["kind"] == "sink" and not len(reached.get(int(a["ref"]), ()))
        ]
        values = getattr(self._run._tracker, "spark", None) is not None
        found: list[dict[str, Any]] = []
        try:
            for sink in sinks:
                for w in why_not(store, sink, ds_id, np.asarray([row], dtype=np.int64)):
                    if len(w.reaches):
                        continue
                    entries = self._run._why_not_rows(w, values)
                    ops: list[int | None] = [d.operation for d in w.drops]
                    ops = ops or [None] * len(entries)
                    for entry, op_id in zip(entries, ops):
                        found.append(
                            {
                                "sink": self._label(sink),
                                "status": entry["status"],
                                "node": f"o{op_id}" if op_id is not None else "",
                                "expression": entry.get("expression") or "",
                                "reason": entry["reason"],
                                "values": {
                                    str(k): [_plain(x) for x in v]
                                    for k, v in (entry.get("values") or {}).items()
                                },
                            }
                        )
        except Exception as exc:  # noqa: BLE001 - the lineage on show stays; say why not
            found = [{"sink": "", "status": "unknown", "node": "", "expression": "",
                      "reason": f"why-not failed: {exc}", "values": {}}]  # fmt: skip
        if self._picked is not None and self._picked.get("dataset") == ds_id:
            self._picked["why_not"] = found
            self._project_lineage()

    def _stage_details(self, nid: str) -> dict[str, Any]:
        """A rolled-up chain: its steps (each a link to expand into), its input and output."""
        assert self._view is not None
        attrs = self._view.graph.nodes[nid]
        store = self._run.store
        steps = [store.operations[node_ref(s)[1]] for s in attrs["steps"]]
        ins = [node_ref(i)[1] for i in attrs["inputs"]]
        out = node_ref(attrs["output"])[1]
        return {
            "type": "stage",
            "node": nid,
            "label": attrs["label"],
            "steps": [
                {"node": f"o{op.id}", "method": op.method, "expression": op.expression}
                for op in steps
            ],
            "seconds": float(sum(op.seconds for op in steps)),
            "rows_in": [store.datasets[i].n_rows for i in ins],
            "rows_out": store.datasets[out].n_rows,
            "inputs": [self._ds_summary(i) for i in ins],
            "output": self._ds_summary(out),
            "warnings": [w for op in steps for w in op.warnings],
        }

    def expand_stage(self, nid: str) -> None:
        """Draw a stage's steps one by one (and select its first step)."""
        kind, ref = node_ref(nid)
        if kind != "stage":
            raise ValueError(f"{nid} is not a stage")
        self._expanded.add(nid)
        self._refresh_graph()
        if self._view is not None:
            self.selected = self._visible_id(nid, self._view.graph)


def _plain(x: Any) -> Any:
    """A value as JSON carries it (numpy scalars, dates and decimals as text)."""
    if isinstance(x, np.generic):
        x = x.item()
    if x is None or isinstance(x, (bool, int, float, str)):
        return None if isinstance(x, float) and x != x else x
    return str(x)
