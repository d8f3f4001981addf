"""Rolling the operator DAG up for reading: the operations one call of a front end made
(a pandas-on-Spark ``merge``, ``groupby.sum``) as one node named after the call, and
chains of row-preserving steps as one *stage*; each expands on demand.

Both kinds are stage nodes (id ``"s<operation id>"``, category ``"stage"``) with the
same attributes, so the explorer's details, expansion and lineage highlight treat them
alike; ``R.graph["stage_of"]`` maps every rolled-up node to the stage that stands for it.
"""

from __future__ import annotations

from collections.abc import Iterable

import networkx as nx

from tensprov_lab.notebook._graph_view import set_kinds

__all__ = [
    "ROW_PRESERVING", "STAGE_CHUNK", "STAGE_STEPS", "rollup", "rollup_calls", "rollup_chains",
]  # fmt: skip

#: operation categories that keep their input's records (one record in, one out): a
#: chain of them is rolled up into one stage node
ROW_PRESERVING = {"transformation", "vertical_reduction", "vertical_augmentation", "trivial"}
#: shortest chain of row-preserving steps shown as one stage
STAGE_STEPS = 3
#: steps per stage when a longer stage is expanded
STAGE_CHUNK = 10


def rollup(G: nx.DiGraph, expanded: Iterable[str] = ()) -> nx.DiGraph:
    """The explorer's and the SVG's default picture of ``G``: front-end calls rolled up
    (:func:`rollup_calls`), then chains of row-preserving steps (:func:`rollup_chains`);
    stages in ``expanded`` drawn step by step."""
    expanded = set(expanded)
    calls = rollup_calls(G, expanded)
    R = rollup_chains(calls, expanded)
    R.graph["stage_of"] = {**calls.graph["stage_of"], **R.graph["stage_of"]}
    return R


def rollup_calls(G: nx.DiGraph, expanded: Iterable[str] = ()) -> nx.DiGraph:
    """Roll the operations each front-end call made (operations sharing a ``call_id``:
    the pandas API on Spark's ``psdf[...]`` or ``groupby("k").sum()`` is 2 to 9 DataFrame
    operations) into one stage node named after the call.

    The stage reads the datasets its operations read from outside it and makes the ones
    read outside it or bound to a variable (``named``).  The frames the pandas API makes
    for itself and never uses again are rolled up with the call that made them, and a
    call whose frames nothing reads and no variable holds (the series of ``psdf.v > 5``
    inside a filter, the ``repr`` of a result) is not drawn.  A stage in ``expanded``
    is drawn step by step.

    Examples
    --------
    >>> import networkx as nx
    >>> G = nx.DiGraph()
    >>> for d in ("d0", "d1", "d3", "d5", "d7"):
    ...     G.add_node(d, kind="dataset", label=d, named=d == "d5")
    >>> steps = [("o2", "d0", "d1", 0), ("o4", "d1", "d3", 0), ("o6", "d1", "d7", 1),
    ...          ("o8", "d3", "d5", 2)]
    >>> for o, i, out, call in steps:
    ...     G.add_node(o, kind="operation", label="select", category="transformation",
    ...                call=["pandas_api", ">", "[]"][call], call_id=call, inputs=[i], output=out)
    ...     G.add_edge(i, o)
    ...     G.add_edge(o, out)
    >>> R = rollup_calls(G)
    >>> sorted(R.nodes), R.nodes["s4"]["label"], R.nodes["s4"]["steps"]
    (['d0', 'd3', 'd5', 's4', 's8'], 'pandas_api', ['o2', 'o4'])
    >>> sorted(rollup_calls(G, expanded=["s4", "s6", "s8"]).nodes) == sorted(G.nodes)
    True
    """
    keep_open = set(expanded)
    calls: dict[int, list[str]] = {}
    for nid in nx.topological_sort(G):
        a = G.nodes[nid]
        if a["kind"] == "operation" and a.get("call_id") is not None:
            calls.setdefault(int(a["call_id"]), []).append(nid)
    R = G.copy()
    stage_of: dict[str, str] = {}
    # the last call first: whether a frame is read outside its call is asked of the
    # picture with the later calls rolled up (and those nothing reads gone)
    for steps in reversed(list(calls.values())):
        sid = "s" + steps[-1][1:]
        if sid in keep_open:
            continue
        made = [d for st in steps for d in G.successors(st)]
        mine = set(steps) | set(made)
        inputs = list(dict.fromkeys(d for st in steps for d in G.predecessors(st) if d not in mine))
        outputs = [
            d
            for d in made
            if G.nodes[d].get("named") or any(c not in mine for c in R.successors(d))
        ]
        R.remove_nodes_from(mine - set(outputs))
        if not outputs:
            continue  # the call's own frames, used by nothing (drawn with rollup=False)
        label = str(G.nodes[steps[0]].get("call") or "call")
        for d in outputs:
            if not G.nodes[d].get("named"):  # named after the call, not its last step
                R.nodes[d]["label"] = f"{label}(…)"
        _add_stage(R, G, sid, label, steps, inputs, outputs, members=[*steps, *made])
        for n in mine - set(outputs):
            stage_of[n] = sid
    set_kinds(R)
    R.graph["stage_of"] = stage_of
    return R


def _add_stage(
    R: nx.DiGraph,
    G: nx.DiGraph,
    sid: str,
    label: str,
    steps: list[str],
    inputs: list[str],
    outputs: list[str],
    members: list[str],
) -> None:
    """Add to ``R`` stage node ``sid`` standing for operations ``steps`` of ``G`` (and
    the datasets between them, ``members`` with them), reading ``inputs`` and making
    ``outputs``."""
    first, last = G.nodes[steps[0]], G.nodes[steps[-1]]
    made = G.nodes[outputs[-1]]
    R.add_node(
        sid,
        kind="operation",
        ref=first.get("ref", int(steps[0][1:])),
        label=label,
        category="stage",
        contextual=False,
        opaque=False,
        nondeterministic=any(G.nodes[st].get("nondeterministic") for st in steps),
        schema=made.get("schema", last.get("schema", [])),
        in_columns=first.get("in_columns", []),
        rows=made.get("rows", last.get("rows")),
        rows_in=[G.nodes[i].get("rows") for i in inputs],
        expression="\n".join(str(G.nodes[st].get("expression", "")) for st in steps),
        seconds=float(sum(G.nodes[st].get("seconds", 0.0) for st in steps)),
        inputs=list(inputs),
        output=outputs[-1],
        outputs=list(outputs),
        warnings=[w for st in steps for w in G.nodes[st].get("warnings", [])],
        members=members,
        steps=steps,
        call=label if first.get("call_id") is not None else "",
    )
    for k, i in enumerate(inputs):
        R.add_edge(i, sid, count=1, position=k)
    for out in outputs:
        R.add_edge(sid, out, count=1, position=0)


def rollup_chains(
    G: nx.DiGraph, expanded: Iterable[str] = (), min_steps: int = STAGE_STEPS
) -> nx.DiGraph:
    """Roll each chain of at least ``min_steps`` row-preserving steps (``withColumn``,
    ``select``, renames, casts: one input, one record out per record in, each dataset
    between two of them read by the next step only) into one *stage* node.

    A wide feature-engineering pipeline (Census: 113 operations, mostly ``withColumn``)
    then reads as a handful of stages; a stage expands on demand (``expanded``: stage
    ids drawn step by step, or, past ``STAGE_CHUNK`` steps, as stages of that many).
    A whole chain's stage is ``"s<its last operation>"``, a part's ``"s<its first>"``.
    Stage nodes are operations of category ``"stage"`` with
    ``members`` (their operation and dataset node ids, in order), ``steps`` and the
    ``inputs`` / ``output`` of the chain; ``G.graph["stage_of"]`` maps every rolled-up
    node to its stage.

    Examples
    --------
    >>> import networkx as nx
    >>> G = nx.DiGraph()
    >>> for i in range(5):
    ...     G.add_node(f"d{i}", kind="dataset", label=f"d{i}")
    >>> for i in range(4):
    ...     G.add_node(f"o{i}", kind="operation", label="withColumn", category="transformation",
    ...                expression=f"withColumn {i}", inputs=[f"d{i}"], output=f"d{i + 1}")
    ...     G.add_edge(f"d{i}", f"o{i}")
    ...     G.add_edge(f"o{i}", f"d{i + 1}")
    >>> R = rollup_chains(G)
    >>> sorted(R.nodes), R.nodes["s3"]["label"]
    (['d0', 'd4', 's3'], '4 steps: withColumn ×4')
    >>> sorted(rollup_chains(G, expanded=["s3"]).nodes) == sorted(G.nodes)
    True
    """
    keep_open = set(expanded)

    def unary(nid: str) -> bool:
        a = G.nodes[nid]
        return (
            a["kind"] == "operation"
            and a.get("category") in ROW_PRESERVING
            and not a.get("opaque")
            and G.in_degree(nid) == 1
            and G.out_degree(nid) == 1
        )

    def inner(ds: str) -> bool:
        # a dataset inside a chain: made by one step, read by the next step only
        return G.nodes[ds]["kind"] == "dataset" and G.in_degree(ds) == 1 and G.out_degree(ds) == 1

    chains: list[list[str]] = []
    seen: set[str] = set()
    for nid in nx.topological_sort(G):
        if nid in seen or not unary(nid):
            continue
        # start only where the step before is not part of the same chain
        (src,) = G.predecessors(nid)
        before = next(iter(G.predecessors(src)), None) if inner(src) else None
        if before is not None and unary(before):
            continue
        chain = [nid]
        while True:
            (out,) = G.successors(chain[-1])
            nxt = next(iter(G.successors(out)), None) if inner(out) else None
            if nxt is None or not unary(nxt):
                break
            chain += [out, nxt]
        seen.update(chain)
        steps = chain[0::2]
        if len(steps) >= min_steps:
            chains.append(chain)
    R = G.copy()
    stage_of: dict[str, str] = {}

    def roll(chain: list[str], sid: str) -> None:
        steps = chain[0::2]
        if sid in keep_open:
            # expanded: a long chain opens into stages of STAGE_CHUNK steps, each of
            # which expands in turn (a 100-step chain stays readable one level down)
            if len(steps) > STAGE_CHUNK:
                for k in range(0, len(steps), STAGE_CHUNK):
                    part = chain[2 * k : 2 * (k + STAGE_CHUNK) - 1]
                    if len(part[0::2]) >= min_steps:
                        roll(part, "s" + part[0][1:])
            return
        (src,) = R.predecessors(steps[0])
        (out,) = R.successors(steps[-1])
        methods: dict[str, int] = {}
        for st in steps:
            methods[str(G.nodes[st]["label"])] = methods.get(str(G.nodes[st]["label"]), 0) + 1
        label = f"{len(steps)} steps: " + ", ".join(
            f"{m} ×{n}" if n > 1 else m for m, n in methods.items()
        )
        R.remove_nodes_from(chain)
        _add_stage(R, G, sid, label, steps, [src], [out], members=list(chain))
        for n in chain:
            stage_of[n] = sid

    for chain in chains:
        # a whole chain is named after its last step, a part of an expanded one after
        # its first: the two never share an id
        roll(chain, "s" + chain[-1][1:])
    R.graph["stage_of"] = stage_of
    return R
