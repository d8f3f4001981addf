"""Tests for the Sugiyama layered layout in :mod:`tensprov_lab.layout`."""

from __future__ import annotations

import ast
import doctest
import itertools
import os
import subprocess
import sys
from collections import defaultdict
from collections.abc import Hashable
from pathlib import Path

import networkx as nx
from hypothesis import given, settings
from hypothesis import strategies as st

from tensprov_lab import layout
from tensprov_lab.layout import (
    count_crossings,
    count_order_crossings,
    sugiyama_layout,
    sugiyama_layout_with_edges,
)

Pos = dict[Hashable, tuple[float, float]]
Bends = dict[tuple[Hashable, Hashable], list[tuple[float, float]]]


# ---------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------


def check_layered(G: nx.DiGraph, pos: Pos, bends: Bends, layer_gap: float = 1.0) -> None:
    """Invariants every drawing of a DAG must satisfy."""
    assert set(pos) == set(G.nodes)
    for u, v in G.edges:
        assert pos[u][0] < pos[v][0], (u, v)
    by_x: dict[float, list[float]] = defaultdict(list)
    for x, y in pos.values():
        by_x[x].append(y)
    for x, ys in by_x.items():
        assert len(set(ys)) == len(ys), f"two nodes share a slot in layer x={x}"
        assert (x / layer_gap) == round(x / layer_gap)
    assert set(bends) == set(G.edges)
    for (u, v), pts in bends.items():
        span = round((pos[v][0] - pos[u][0]) / layer_gap)
        assert len(pts) == span - 1, (u, v)
        xs = [pos[u][0], *(p[0] for p in pts), pos[v][0]]
        assert all(b - a == layer_gap for a, b in zip(xs, xs[1:], strict=False))


def layers_of(pos: Pos) -> list[list[Hashable]]:
    by_x: dict[float, list[Hashable]] = defaultdict(list)
    for v, (x, _) in pos.items():
        by_x[x].append(v)
    return [sorted(by_x[x], key=lambda v: pos[v][1]) for x in sorted(by_x)]


def with_dummies(pos: Pos, bends: Bends) -> Pos:
    """Node positions plus one named item per bend point."""
    everything: Pos = dict(pos)
    for (u, v), pts in bends.items():
        everything.update({("dummy", u, v, k): p for k, p in enumerate(pts)})
    return everything


def proper_layering(pos: Pos, bends: Bends) -> tuple[list[list[Hashable]], list[tuple]]:
    """The drawing as ordered layers with dummy nodes, and its unit-length edges."""
    edges: list[tuple] = []
    for (u, v), pts in bends.items():
        names = [u, *(("dummy", u, v, k) for k in range(len(pts))), v]
        edges.extend(zip(names, names[1:], strict=False))
    return layers_of(with_dummies(pos, bends)), edges


def brute_force_min_crossings(layers: list[list[Hashable]], edges: list[tuple]) -> int:
    """Exact optimum over all orders of all layers (tiny graphs only)."""
    best = None
    for combo in itertools.product(*(itertools.permutations(layer) for layer in layers)):
        c = count_order_crossings([list(p) for p in combo], edges)
        best = c if best is None else min(best, c)
    assert best is not None
    return best


def crossings(G: nx.DiGraph) -> int:
    pos, bends = sugiyama_layout_with_edges(G)
    return count_crossings(G, pos, bends)


# ---------------------------------------------------------------------------
# Basic shapes
# ---------------------------------------------------------------------------


def test_empty_graph() -> None:
    G = nx.DiGraph()
    assert sugiyama_layout(G) == {}
    assert sugiyama_layout_with_edges(G) == ({}, {})
    assert count_crossings(G, {}) == 0


def test_single_node() -> None:
    G = nx.DiGraph()
    G.add_node("only")
    assert sugiyama_layout(G) == {"only": (0.0, 0.0)}


def test_isolated_nodes_share_the_first_layer() -> None:
    G = nx.DiGraph()
    G.add_nodes_from("abc")
    pos = sugiyama_layout(G)
    assert {p[0] for p in pos.values()} == {0.0}
    assert len({p[1] for p in pos.values()}) == 3


def test_chain_is_a_straight_line() -> None:
    G = nx.path_graph(5, create_using=nx.DiGraph)
    pos, bends = sugiyama_layout_with_edges(G, layer_gap=2.5)
    assert [pos[v] for v in range(5)] == [(2.5 * i, 0.0) for i in range(5)]
    assert all(pts == [] for pts in bends.values())


def test_edges_point_right_and_layers_are_columns() -> None:
    G = nx.DiGraph(
        [
            ("read_a", "filter"),
            ("filter", "join"),
            ("read_b", "join"),
            ("join", "agg"),
            ("agg", "write"),
            ("read_a", "union"),
            ("read_b", "union"),
            ("union", "write"),
        ]
    )
    pos, bends = sugiyama_layout_with_edges(G)
    check_layered(G, pos, bends)


def test_gaps_scale_coordinates() -> None:
    G = nx.DiGraph([("a", "b"), ("a", "c"), ("a", "d"), ("b", "e")])
    pos, bends = sugiyama_layout_with_edges(G, layer_gap=3.0, node_gap=2.0)
    check_layered(G, pos, bends, layer_gap=3.0)
    ys = sorted(pos[v][1] for v in "bcd")
    assert min(b - a for a, b in zip(ys, ys[1:], strict=False)) >= 2.0 - 1e-9
    assert min(y for _, y in pos.values()) == 0.0


def test_long_edges_get_one_bend_point_per_skipped_layer() -> None:
    G = nx.DiGraph([("s", "a"), ("a", "b"), ("b", "c"), ("c", "t"), ("s", "t"), ("a", "c")])
    pos, bends = sugiyama_layout_with_edges(G)
    check_layered(G, pos, bends)
    assert [p[0] for p in bends[("s", "t")]] == [1.0, 2.0, 3.0]
    assert [p[0] for p in bends[("a", "c")]] == [2.0]
    assert bends[("s", "a")] == []
    # A bend point never sits on a real node.
    occupied = set(pos.values())
    assert not occupied & {p for pts in bends.values() for p in pts}


def test_long_edge_without_crossings_is_drawn_straight() -> None:
    G = nx.DiGraph([("s", "a"), ("a", "b"), ("b", "c"), ("c", "t"), ("s", "t")])
    pos, bends = sugiyama_layout_with_edges(G)
    assert len({y for _, y in bends[("s", "t")]}) == 1
    assert len({pos[v][1] for v in "abc"}) == 1


def test_network_simplex_shortens_edges_longest_path_does_not() -> None:
    # Longest path puts the source "lookup" in layer 0, two layers before the join.
    G = nx.DiGraph([("read", "m1"), ("m1", "m2"), ("m2", "join"), ("lookup", "join")])
    ns = sugiyama_layout(G)
    lp = sugiyama_layout(G, ranking="longest-path")
    assert ns["join"][0] - ns["lookup"][0] == 1.0
    assert lp["join"][0] - lp["lookup"][0] == 3.0


# ---------------------------------------------------------------------------
# Crossing minimisation
# ---------------------------------------------------------------------------


def test_untangles_a_graph_whose_optimum_is_zero() -> None:
    # Each of the search's starting orders (BFS/DFS from sources or sinks)
    # has 3 crossings on this graph; a crossing-free order exists.
    G = nx.DiGraph()
    G.add_nodes_from([6, 3, 2, 0, 5, 1, 4, 7])
    G.add_edges_from([(2, 5), (2, 6), (2, 7), (0, 2), (1, 2), (1, 3), (1, 5), (4, 6)])
    assert crossings(G) == 0
    # Two components are stacked, never interleaved, so they cannot cross.
    H = nx.DiGraph()
    H.add_nodes_from(["a", "b", "c", "d"])
    H.add_edges_from([("a", "d"), ("b", "c")])
    assert crossings(H) == 0


def test_tree_has_no_crossings() -> None:
    G = nx.DiGraph()
    # Children added in an order that interleaves subtrees.
    G.add_edges_from([(0, 1), (0, 2), (1, 3), (2, 4), (1, 5), (2, 6), (1, 7), (2, 8)])
    G.add_edges_from([(3, 9), (4, 10), (5, 11), (6, 12), (7, 13), (8, 14)])
    assert crossings(G) == 0


def test_k22_has_exactly_one_crossing() -> None:
    G = nx.DiGraph([("a", "c"), ("a", "d"), ("b", "c"), ("b", "d")])
    assert crossings(G) == 1


def test_k33_has_exactly_nine_crossings() -> None:
    G = nx.DiGraph([(u, v) for u in "abc" for v in "xyz"])
    assert crossings(G) == 9


def test_subdivided_k22_still_has_one_crossing() -> None:
    # K2,2 with every edge split by a middle node: three layers, optimum 1.
    G = nx.DiGraph()
    for u in "ab":
        for v in "cd":
            G.add_edge(u, f"{u}{v}")
            G.add_edge(f"{u}{v}", v)
    assert crossings(G) == 1


def test_crossings_between_dummy_nodes_reach_the_optimum() -> None:
    # K2,2 plus two chains: some of its edges skip layers, so crossings
    # between dummy nodes count too.
    G = nx.DiGraph([("a", "m"), ("m", "c"), ("b", "n"), ("n", "d")])
    G.add_edges_from([("a", "c"), ("a", "d"), ("b", "c"), ("b", "d")])
    pos, bends = sugiyama_layout_with_edges(G)
    assert sum(len(pts) for pts in bends.values()) >= 2
    assert count_crossings(G, pos, bends) == brute_force_min_crossings(*proper_layering(pos, bends))


SMALL_CASES = [
    # Small enough to try every order of every layer (dummy nodes included).
    [(0, 4), (0, 5), (1, 3), (1, 5), (2, 3), (2, 4)],
    [(0, 3), (0, 4), (1, 3), (1, 5), (2, 4), (2, 5), (3, 6), (4, 7), (5, 6), (5, 7)],
    [(0, 2), (0, 3), (1, 2), (2, 4), (2, 5), (3, 5), (3, 6), (1, 6)],
    [(0, 4), (1, 4), (1, 5), (2, 6), (3, 5), (3, 6), (0, 7), (2, 7)],
    [(0, 1), (1, 2), (2, 3), (0, 3), (4, 1), (4, 5), (5, 3), (0, 5)],
]


def test_small_graphs_reach_the_exact_optimum() -> None:
    for edges in SMALL_CASES:
        G = nx.DiGraph(edges)
        pos, bends = sugiyama_layout_with_edges(G)
        layers, unit_edges = proper_layering(pos, bends)
        combos = 1
        for layer in layers:
            combos *= len(list(itertools.permutations(layer)))
        assert combos <= 50_000, "keep the exhaustive search small"
        assert count_crossings(G, pos, bends) == count_order_crossings(layers, unit_edges)
        assert crossings(G) == brute_force_min_crossings(layers, unit_edges), edges


def test_order_crossings_counts_pairs_between_adjacent_layers() -> None:
    layers = [["a", "b", "c"], ["x", "y", "z"]]
    edges = [("a", "z"), ("b", "y"), ("c", "x")]
    assert count_order_crossings(layers, edges) == 3
    assert count_order_crossings(layers, [("a", "x"), ("a", "y"), ("b", "x")]) == 1
    try:
        count_order_crossings([["a"], ["b"], ["c"]], [("a", "c")])
    except ValueError:
        pass
    else:
        raise AssertionError("non-adjacent layers must be rejected")


def test_count_crossings_reads_polylines_at_each_rank() -> None:
    # Two edges over two gaps: straight, they would not cross, but the bend
    # point of one swaps sides at the middle rank, which makes one crossing
    # in each gap.
    G = nx.DiGraph([("a", "c"), ("b", "d")])
    pos = {"a": (0.0, 0.0), "b": (0.0, 1.0), "c": (2.0, 0.0), "d": (2.0, 1.0), "m": (1.0, 0.5)}
    G.add_node("m")
    assert count_crossings(G, pos) == 0
    assert count_crossings(G, pos, {("a", "c"): [(1.0, 2.0)]}) == 2
    # Spline-like interior samples between ranks do not matter, only the ranks.
    wiggle = {("a", "c"): [(0.5, 5.0), (1.0, -1.0), (1.5, 5.0)]}
    assert count_crossings(G, pos, wiggle) == 0
    # Edges sharing an end never cross.
    H = nx.DiGraph([("a", "c"), ("a", "d")])
    assert count_crossings(H, pos) == 0


def test_count_crossings_ignores_flat_edges_and_self_loops() -> None:
    G = nx.DiGraph([("a", "b"), ("a", "a")])
    assert count_crossings(G, {"a": (0.0, 0.0), "b": (0.0, 1.0)}) == 0


# ---------------------------------------------------------------------------
# Cycles
# ---------------------------------------------------------------------------


def test_cycle_reverses_one_edge() -> None:
    G = nx.DiGraph([("a", "b"), ("b", "c"), ("c", "a")])
    pos, bends = sugiyama_layout_with_edges(G)
    backward = [(u, v) for u, v in G.edges if pos[u][0] > pos[v][0]]
    assert len(backward) == 1
    assert all(pos[u][0] != pos[v][0] for u, v in G.edges)
    (u, v) = backward[0]
    # Bend points run from u to v, so they go right to left here.
    xs = [pos[u][0], *(p[0] for p in bends[(u, v)]), pos[v][0]]
    assert xs == sorted(xs, reverse=True)
    assert len(bends[(u, v)]) == round(pos[u][0] - pos[v][0]) - 1


def test_two_cycle_and_self_loop() -> None:
    G = nx.DiGraph([("a", "b"), ("b", "a"), ("b", "b")])
    pos, bends = sugiyama_layout_with_edges(G)
    assert pos["a"][0] != pos["b"][0]
    assert bends[("b", "b")] == []
    assert bends[("a", "b")] == [] and bends[("b", "a")] == []


def test_feedback_edges_stay_inside_strongly_connected_components() -> None:
    # A DAG of two cycles: the edge between them must keep its direction.
    G = nx.DiGraph([(1, 2), (2, 3), (3, 1), (3, 4), (4, 5), (5, 6), (6, 4)])
    pos = sugiyama_layout(G)
    assert pos[3][0] < pos[4][0]
    backward = [(u, v) for u, v in G.edges if pos[u][0] > pos[v][0]]
    assert len(backward) == 2


def test_effort_and_options_keep_the_invariants() -> None:
    G = nx.gnp_random_graph(40, 0.1, seed=11, directed=True)
    G = nx.DiGraph([(u, v) for u, v in G.edges if u < v])
    for kwargs in (
        {"effort": 0.0},
        {"effort": 3.0},
        {"transpose": False},
        {"max_iterations": 1, "min_quit": 1},
        {"ranking": "longest-path", "dummy_gap": 0.1},
    ):
        pos, bends = sugiyama_layout_with_edges(G, **kwargs)  # type: ignore[arg-type]
        check_layered(G, pos, bends)
    try:
        sugiyama_layout(G, ranking="bogus")  # type: ignore[arg-type]
    except ValueError:
        pass
    else:
        raise AssertionError("unknown ranking must be rejected")


def test_benchmark_corpus_and_plain_parser() -> None:
    from tensprov_lab.bench.layout_crossings import layered_dag, parse_plain, pipeline_dag

    for n in (10, 57, 300):
        for make in (pipeline_dag, layered_dag):
            G = make(n, 1)
            assert G.number_of_nodes() == n
            assert nx.is_directed_acyclic_graph(G)
            assert make(n, 1).edges == G.edges  # seeded
    # Canned ``dot -Tplain`` output for a -> b, b -> c, a -> c (rankdir=LR).
    G = nx.DiGraph([("a", "b"), ("b", "c"), ("a", "c")])
    plain = """graph 1 2.1 0.9
node n0 0.15 0.45 0.3 0.3 "" solid box black lightgrey
node n1 0.95 0.75 0.3 0.3 "" solid box black lightgrey
node n2 1.75 0.45 0.3 0.3 "" solid box black lightgrey
edge n0 n1 4 0.3 0.5 0.5 0.6 0.7 0.7 0.8 0.75 solid black
edge n1 n2 4 1.1 0.7 1.3 0.6 1.5 0.5 1.6 0.45 solid black
edge n0 n2 4 0.3 0.4 0.7 0.2 1.2 0.2 1.6 0.4 solid black
stop
"""
    pos, splines = parse_plain(plain, G)
    assert pos == {"a": (0.15, 0.45), "b": (0.95, 0.75), "c": (1.75, 0.45)}
    assert set(splines) == set(G.edges)
    assert splines[("a", "c")][0] == (0.3, 0.4) and splines[("a", "c")][-1] == (1.6, 0.4)
    assert count_crossings(G, pos, splines, tol=1e-3) == 0


# ---------------------------------------------------------------------------
# Determinism and module hygiene
# ---------------------------------------------------------------------------


def test_same_input_gives_same_output() -> None:
    G = nx.gnp_random_graph(60, 0.08, seed=3, directed=True)
    G = nx.DiGraph([(u, v) for u, v in G.edges if u < v])
    first = sugiyama_layout_with_edges(G)
    again = sugiyama_layout_with_edges(G)
    copy = nx.DiGraph()
    copy.add_nodes_from(G.nodes)
    copy.add_edges_from(G.edges)
    assert first == again == sugiyama_layout_with_edges(copy)


def test_output_does_not_depend_on_string_hashing() -> None:
    code = (
        "import networkx as nx; from tensprov_lab.layout import sugiyama_layout_with_edges; "
        "G = nx.gnp_random_graph(40, 0.08, seed=7, directed=True); "
        "G = nx.relabel_nodes(G, {v: f'op{v}' for v in G}); "
        "print(sorted(sugiyama_layout_with_edges(G)[0].items()))"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("1", "2")
    }
    assert len(outputs) == 1


def test_doctests() -> None:
    result = doctest.testmod(layout)
    assert result.attempted > 0 and result.failed == 0


def test_module_imports_only_networkx_and_numpy() -> None:
    # every module of the layout package (its own modules aside)
    roots: set[str] = set()
    for path in sorted(Path(layout.__file__).parent.glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                roots.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                if not node.module.startswith("tensprov_lab.layout"):
                    roots.add(node.module.split(".")[0])
        assert "from __future__ import annotations" in path.read_text(), path
    assert roots - set(sys.stdlib_module_names) <= {"networkx", "numpy"}
    assert "__future__" in roots
    # And at run time: importing it pulls in nothing else (whatever the
    # package itself imports is already loaded before we look).
    code = (
        "import sys, tensprov_lab; before = set(sys.modules); import tensprov_lab.layout; "
        "new = {m.split('.')[0] for m in set(sys.modules) - before}; "
        "print(' '.join(sorted(new - set(sys.stdlib_module_names))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert set(out.stdout.split()) <= {"tensprov_lab", "networkx", "numpy"}


# ---------------------------------------------------------------------------
# Properties on random graphs
# ---------------------------------------------------------------------------


@st.composite
def random_dags(draw: st.DrawFn) -> nx.DiGraph:
    n = draw(st.integers(min_value=0, max_value=24))
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    keep = draw(st.lists(st.booleans(), min_size=len(pairs), max_size=len(pairs)))
    G = nx.DiGraph()
    # Nodes in a shuffled insertion order so that the layout cannot rely on it.
    G.add_nodes_from(draw(st.permutations(list(range(n)))))
    G.add_edges_from(p for p, k in zip(pairs, keep, strict=True) if k and draw(st.booleans()))
    return G


@settings(max_examples=60, deadline=None)
@given(random_dags())
def test_random_dags_satisfy_layout_invariants(G: nx.DiGraph) -> None:
    pos, bends = sugiyama_layout_with_edges(G)
    check_layered(G, pos, bends)
    c = count_crossings(G, pos, bends)
    assert c >= 0
    # Bend points make an exact layered drawing (no two items of a layer
    # share a y), and the metric sees the crossings of that ordering.
    layers, unit_edges = proper_layering(pos, bends)
    everything = with_dummies(pos, bends)
    for layer in layers:
        ys = [everything[v][1] for v in layer]
        assert len(set(ys)) == len(ys)
    assert count_order_crossings(layers, unit_edges) == c


@st.composite
def random_digraphs(draw: st.DrawFn) -> nx.DiGraph:
    n = draw(st.integers(min_value=1, max_value=12))
    edges = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=30))
    G = nx.DiGraph()
    G.add_nodes_from(range(n))
    G.add_edges_from(edges)
    return G


@settings(max_examples=60, deadline=None)
@given(random_digraphs())
def test_any_digraph_gets_a_layered_drawing(G: nx.DiGraph) -> None:
    pos, bends = sugiyama_layout_with_edges(G)
    assert set(pos) == set(G.nodes) and set(bends) == set(G.edges)
    H = nx.DiGraph()
    H.add_nodes_from(G.nodes)
    for u, v in G.edges:
        if u == v:
            assert bends[(u, v)] == []
            continue
        assert pos[u][0] != pos[v][0]
        H.add_edge(*((u, v) if pos[u][0] < pos[v][0] else (v, u)))
        span = round(abs(pos[v][0] - pos[u][0]))
        assert len(bends[(u, v)]) == span - 1
    assert nx.is_directed_acyclic_graph(H)
    if nx.is_directed_acyclic_graph(G):
        assert all(pos[u][0] < pos[v][0] for u, v in G.edges)
