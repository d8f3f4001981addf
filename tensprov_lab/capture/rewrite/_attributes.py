"""Attribute maps (prospective provenance) from the analyzed plan's expression references.

For ``out = f(in_1, ..., in_n)`` we walk the analyzed plan of ``out`` from its root down
to the input subtrees (found exactly as the record-level rewrite finds them) and follow
expression ids: every output attribute gets the set of input columns whose values flow
into it (*contributing*) and the set of input columns that decide whether, where or in
which group its record exists (*influencing*: filter and join conditions, group keys,
sort keys, dedup keys, window partition and order columns).

Each plan node is read in one py4j call: a shallow copy of the node whose children are
replaced by empty ``LocalRelation`` s with the same output is serialised with Catalyst's
own ``toJSON`` (a structured tree with expression ids), so wide projections cost one
round trip instead of one per column.  Column *names* are never parsed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from tensprov_lab.capture.plan._exprs import Cell, Expr, Lin, added
from tensprov_lab.capture.plan._exprs import exprs as read_exprs
from tensprov_lab.capture.rewrite._annotate import find_input, regroup_union
from tensprov_lab.capture.rules import rule_for
from tensprov_lab.capture.rules._classic import PlanNode
from tensprov_lab.capture.spark._jvm import Jvm

__all__ = ["AttributeMaps", "attribute_maps"]

JObject = Any


@dataclass
class AttributeMaps:
    """Per input occurrence: boolean ``(n_out_cols, n_in_cols)`` matrices."""

    occurrences: list[int]
    contributing: list[np.ndarray]
    influencing: list[np.ndarray]
    #: False when a node on the way is not understood and every input column of it is
    #: assumed to contribute (a superset, never a subset)
    exact: bool = True
    #: an aggregate straight over its one input (projections aside): per output column,
    #: ``(kind, input column)`` with kind ``"key"`` (a grouping column), ``"sum"``,
    #: ``"count"`` (input column None: ``count(*)``), ``"avg"``, ``"min"`` or
    #: ``"max"``; None for a column made otherwise.  What-if updates such an
    #: aggregate's records from the changed members alone (:mod:`tensprov_lab.replay`).
    decomposition: list[tuple[str, int | None] | None] | None = None


#: nodes that keep an aggregate's input records and their values as they are
_PASS = {"Project", "SubqueryAlias", "View", "ResolvedHint"}
#: a projection over at least this many columns is read by its new expressions only:
#: Catalyst writes each attribute into JSON at ~0.4 ms, so this pays from a few columns
#: on (German's pipeline: capture 2.3 s -> 1.3 s when lowered from 24)
_WIDE = 4
_SEP = "\u0000\u0001"
#: new expressions of a projection read one by one (beyond, as one JSON document;
#: a few round trips each, against ~0.4 ms a simple expression and 2 ms a UDF in JSON)
_FEW_FRESH = 32
_ATTRIBUTE_ID = re.compile(r"#(\d+)L?(?:-T\d+ms)?$")


class _Walker:
    def __init__(self, jvm: Jvm, inputs: list[JObject], ids: dict[int, list[int]]) -> None:
        self.jvm = jvm
        self.inputs = inputs
        self.idents = [jvm.ident(p) for p in inputs]
        self.occurrences: list[int] = []
        self.widths: list[int] = []
        #: input cells deciding whether or where a record exists: every output column
        self.row: set[Cell] = set()
        self.exact = True
        #: output expression ids of plans already read (by identity), shared across calls
        self.ids = ids
        #: the classes of the nodes walked, and the output ids of each input occurrence
        self.classes: list[str] = []
        self.input_ids: list[list[int]] = []
        #: what an aggregate rule noted of its columns (see AttributeMaps.decomposition)
        self.decomposition: dict[int, tuple[str, int | None] | None] | None = None

    def out_ids(self, node: JObject) -> list[int]:
        ident = self.jvm.ident(node)
        if ident not in self.ids:
            self.ids[ident] = self.jvm.expr_ids(node)
        return self.ids[ident]

    def walk(self, node: JObject, root: bool = False) -> tuple[dict[int, Lin], list[int]]:
        found = find_input(self.jvm, node, self.inputs, self.idents, self.occurrences, root)
        if found is not None:
            pos = len(self.occurrences)
            self.occurrences.append(found[0])
            ids = self.out_ids(node)
            self.widths.append(len(ids))
            self.input_ids.append(ids)
            return {a: Lin(frozenset({(pos, j)})) for j, a in enumerate(ids)}, ids
        kids = self.jvm.children(node)
        n_kids = len(kids)
        cls = self.jvm.cls(node)
        self.classes.append(cls)
        if cls == "Union":
            kids = regroup_union(self.jvm, node, kids, self.inputs)
        walked = [self.walk(k) for k in kids]
        envs = [e for e, _ in walked]
        kid_ids = [i for _, i in walked]
        narrow = None
        if cls == "Project":
            narrow = self._narrow_project(node, kid_ids[0])
        elif cls == "Filter":
            narrow = self._narrow_filter(node, kid_ids)
        if narrow is not None:
            d, out_ids = narrow
        else:
            # the node alone (children emptied): Catalyst writes ~0.4 ms per attribute
            # into JSON, so each attribute is written once
            shallow = node.withNewChildren(self.jvm.seq([self.jvm.no_columns] * n_kids))
            d = json.loads(self.jvm.to_json(shallow))[0]
            out_ids = self._node_ids(node, d, kid_ids)
        env: dict[int, Lin] = {}
        for e in envs:
            env.update(e)
        return self._node(d, env, envs, kid_ids, out_ids), out_ids

    def _narrow_filter(
        self, node: JObject, kid_ids: list[list[int]]
    ) -> tuple[dict[str, Any], list[int]] | None:
        """A filter read as the ids its condition references, without JSON (one round
        trip with the helper); None without it or for a condition with a subquery."""
        helper = self.jvm.helper
        if helper is None:
            return None
        reply = helper.filterRefs(node)
        if reply is None:
            return None
        refs = [int(x) for x in self.jvm._whole(helper, str(reply)).split()]
        d: dict[str, Any] = {"class": "Filter", "condition_refs": refs}
        return d, self._node_ids(node, d, kid_ids)

    def _narrow_project(
        self, node: JObject, child_ids: list[int]
    ) -> tuple[dict[str, Any], list[int]] | None:
        """A wide projection that passes most columns through (``withColumn`` on a wide
        table) read without writing the passed-through columns into JSON: only the new
        expressions are, and the output order comes from the output attributes' ids.
        None when it does not pay or the ids cannot be read back exactly."""
        if len(child_ids) < _WIDE:
            return None
        info = self.jvm.project_info(node)
        if info is not None:
            out_ids, fresh_refs = info
            return self._passed_on(
                node, out_ids, [added(e[0], e[1:]) for e in fresh_refs], child_ids
            )
        output = node.output()
        size = int(output.size())
        parts = str(output.mkString(_SEP)).split(_SEP)
        if len(parts) != size:
            return None
        ids = []
        for part in parts:
            # an attribute prints as name#id, with "L" for a long and a watermark delay
            m = _ATTRIBUTE_ID.search(part)
            if m is None:
                return None
            ids.append(int(m.group(1)))
        fresh = node.projectList().diff(node.child().output())
        n_fresh = int(fresh.size())
        exprs = self._read_fresh(fresh, n_fresh) if n_fresh <= _FEW_FRESH else None
        if exprs is None:
            shallow = self.jvm.logical("Project")(fresh, self.jvm.no_columns)
            exprs = read_exprs(json.loads(self.jvm.to_json(shallow))[0]["projectList"])
        return self._passed_on(node, ids, exprs, child_ids)

    def _passed_on(
        self, node: JObject, ids: list[int], exprs: list[Expr], child_ids: list[int]
    ) -> tuple[dict[str, Any], list[int]] | None:
        """The narrow reading of a projection with output ``ids`` that adds ``exprs``;
        None unless every output is a child's column or an added expression, once."""
        d = {"class": "Project", "parsed": exprs}
        known = set(child_ids) | {i for e in exprs if (i := e.named_id()) is not None}
        if len(set(ids)) != len(ids) or not known.issuperset(ids):
            return None
        self.ids[self.jvm.ident(node)] = ids
        return d, ids

    def _read_fresh(self, fresh: JObject, n: int) -> list[Expr] | None:
        """The new expressions of a projection as their output id and the attributes they
        reference, read without JSON: Catalyst writes a UDF's encoders into it (2 ms
        for a VectorAssembler, 27 ms for some ML transforms).  None when an expression
        holds a subquery (its outer references are read from JSON, as everywhere) or a
        name cannot be split exactly."""
        exprs = []
        for i in range(n):
            e = fresh.apply(i)
            if e.containsPattern(self.jvm.plan_expression):
                return None
            refs = e.references()
            size = int(refs.size())
            parts = str(refs.mkString(_SEP)).split(_SEP) if size else []
            ids = [_ATTRIBUTE_ID.search(p) for p in parts]
            if len(parts) != size or any(m is None for m in ids):
                return None
            refs = [int(m.group(1)) for m in ids]  # type: ignore[union-attr]
            exprs.append(added(int(e.exprId().id()), refs))
        return exprs

    def _node_ids(self, node: JObject, d: dict[str, Any], kid_ids: list[list[int]]) -> list[int]:
        ident = self.jvm.ident(node)
        if ident in self.ids:
            return self.ids[ident]
        rule = rule_for(str(d["class"]).rsplit(".", 1)[-1])
        found = rule.output_ids(d, kid_ids) if rule is not None else None
        if found is None:
            return self.out_ids(node)
        self.ids[ident] = found
        return found

    def input_column(self, ref: int) -> int | None:
        """The column of the operation's one input that attribute ``ref`` *is* (the same
        expression id, so the same value in every record), or None."""
        if len(self.input_ids) != 1:
            return None
        ids = self.input_ids[0]
        return ids.index(ref) if ref in ids else None

    def lin(self, env: dict[int, Lin], refs: set[int]) -> Lin:
        contrib: set[Cell] = set()
        infl: set[Cell] = set()
        for r in refs:
            lin = env.get(r)
            if lin is not None:
                contrib |= lin.contrib
                infl |= lin.infl
        return Lin(frozenset(contrib), frozenset(infl))

    def influence(self, env: dict[int, Lin], value: Any) -> None:
        for e in read_exprs(value):
            self.row |= self.lin(env, e.refs()).all()

    def named(self, env: dict[int, Lin], exprs: list[Expr]) -> dict[int, Lin]:
        out = {}
        for e in exprs:
            ident = e.named_id()
            if ident is not None:
                out[ident] = env[ident] if ident in env else self.lin(env, e.refs())
        return out

    def _node(
        self,
        d: dict[str, Any],
        env: dict[int, Lin],
        envs: list[dict[int, Lin]],
        kid_ids: list[list[int]],
        out_ids: list[int],
    ) -> dict[int, Lin]:
        rule = rule_for(str(d["class"]).rsplit(".", 1)[-1])
        node = PlanNode(d, env, envs, kid_ids, out_ids)
        new = rule.attributes(self, node) if rule is not None else {}
        out: dict[int, Lin] = {}
        unknown = [a for a in out_ids if a not in new and a not in env]
        if unknown:
            # a node we do not model makes new columns: assume every input column of it
            # contributes to them (a superset), and say the map is not exact
            self.exact = False
            everything = self.lin(env, set(env))
            new.update({a: everything for a in unknown})
        for a in out_ids:
            out[a] = new[a] if a in new else env[a]
        return out


def attribute_maps(
    jvm: Jvm, plan: JObject, inputs: list[JObject], ids: dict[int, list[int]] | None = None
) -> AttributeMaps:
    """Contributing and influencing input columns of every output column of ``plan``.

    ``inputs`` are the plans of the operation's input DataFrames; the result has one
    matrix pair per occurrence of an input in ``plan`` (a self-join has two), in the
    order the record-level rewrite numbers them.  ``ids`` caches the output expression
    ids of plans by identity across calls (a pipeline reads each plan twice: as an output,
    then as an input).
    """
    w = _Walker(jvm, inputs, {} if ids is None else ids)
    env, out_ids = w.walk(plan, root=True)
    row = frozenset(w.row)
    contributing = [np.zeros((len(out_ids), n), dtype=bool) for n in w.widths]
    influencing = [np.zeros((len(out_ids), n), dtype=bool) for n in w.widths]
    for o, a in enumerate(out_ids):
        lin = env.get(a, Lin())
        for pos, col in lin.contrib:
            contributing[pos][o, col] = True
        for pos, col in lin.infl | row:
            influencing[pos][o, col] = True
    decomposition = None
    others = [c for c in w.classes if c != "Aggregate"]
    if w.decomposition is not None and len(w.classes) - len(others) == 1:
        if set(others) <= _PASS and len(w.occurrences) == 1:
            decomposition = [w.decomposition.get(a) for a in out_ids]
    return AttributeMaps(w.occurrences, contributing, influencing, w.exact, decomposition)
