"""Edge crossings of :mod:`tensprov_lab.layout` against Graphviz ``dot``.

Run ``python -m tensprov_lab.bench.layout_crossings [--seeds N] [--effort E]``
(needs the ``dot`` binary; Debian package ``graphviz``). A seeded corpus of
pipeline-shaped DAGs (sources fanning into joins, chains of one-input
operations, unions, reused streams, lookup tables read midway, a few sinks)
and random layered DAGs (most edges between adjacent hidden layers, some
skipping layers), 10 to 300 nodes, is laid out by our Sugiyama layout and by
``dot -Tplain`` with ``rankdir=LR`` (same node and edge order for both).

Both drawings are scored by :func:`tensprov_lab.layout.count_crossings`, the
layered crossing number: dot's node centres are its ranks, its edge splines
are sampled into polylines and read where they pass each rank (the positions
of its virtual nodes). On this corpus that reproduces the crossing count dot
itself reports after ``mincross`` (``dot -v``) exactly or within 2. For our
straight segments the metric equals the geometric crossing count; for dot's
curves it is a lower bound, so any bias favours dot.

Prints a plain-text table per family and size bucket (median and sum of
crossings, graphs won/tied/lost, median CPU time per layout; dot's includes
starting the process) and the wall and CPU time of laying out two 200-node
DAGs (median of several runs).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import time
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import networkx as nx

from tensprov_lab.layout import count_crossings, sugiyama_layout_with_edges

Point = tuple[float, float]

BUCKETS: tuple[tuple[int, int], ...] = ((10, 29), (30, 59), (60, 119), (120, 199), (200, 300))


# ---------------------------------------------------------------------------
# Corpus
# ---------------------------------------------------------------------------


def pipeline_dag(n_nodes: int, seed: int) -> nx.DiGraph:
    """A Spark-job-like DAG with exactly ``n_nodes`` nodes.

    Reads feed chains of narrow operations; streams meet in joins and unions,
    some are reused by two consumers (a cached DataFrame), new lookup tables
    are read midway, and the open streams end in a few writes.
    """
    rng = random.Random(seed)
    G = nx.DiGraph()
    n_sinks = rng.randint(1, max(1, min(4, n_nodes // 10)))
    budget = n_nodes - n_sinks
    streams: list[int] = []

    def add(kind: str, inputs: Sequence[int]) -> int:
        v = G.number_of_nodes()
        G.add_node(v, kind=kind)
        for u in inputs:
            G.add_edge(u, v)
        return v

    def pick() -> int:
        # Recent streams are extended more often, which yields long chains.
        i = len(streams) - 1 - min(int(rng.expovariate(0.7)), len(streams) - 1)
        return streams.pop(i)

    for _ in range(max(2, round(budget * rng.uniform(0.05, 0.12)))):
        streams.append(add("source", ()))
    while G.number_of_nodes() < budget:
        room = budget - G.number_of_nodes()
        op = rng.choices(("map", "join", "union", "fork", "source"), (55, 20, 7, 10, 8))[0]
        if op == "source" or not streams:
            streams.append(add("source", ()))
        elif op == "map" or len(streams) < 2:
            streams.append(add("map", (pick(),)))
        elif op == "join":
            a, b = pick(), pick()
            streams.append(add("join", (a, b)))
        elif op == "union":
            k = min(rng.randint(2, 4), len(streams))
            streams.append(add("union", [pick() for _ in range(k)]))
        elif room >= 2:
            s = pick()
            streams.append(add("map", (s,)))
            streams.append(add("map", (s,)))
    n_ops = G.number_of_nodes()
    sinks = [add("sink", ()) for _ in range(n_sinks)]
    for i, s in enumerate(streams):
        G.add_edge(s, sinks[i] if i < n_sinks else rng.choice(sinks))
    for sink in sinks[len(streams) :]:
        # More writes than open streams: the extra ones save an intermediate result.
        G.add_edge(rng.randrange(n_ops), sink)
    return G


def layered_dag(n_nodes: int, seed: int) -> nx.DiGraph:
    """Random DAG on hidden layers; most edges join adjacent layers, some skip."""
    rng = random.Random(seed)
    n_layers = max(2, round(n_nodes**0.5 * rng.uniform(0.8, 1.5)))
    layer_of = sorted(rng.randrange(n_layers) for _ in range(n_nodes))
    layer_of[0] = 0
    by_layer: list[list[int]] = [[] for _ in range(n_layers)]
    for v, lay in enumerate(layer_of):
        by_layer[lay].append(v)
    G = nx.DiGraph()
    G.add_nodes_from(range(n_nodes))
    for v, lay in enumerate(layer_of):
        if lay == 0:
            continue
        earlier = [i for i in range(lay) if by_layer[i]]
        for _ in range(rng.choice((1, 1, 2, 2, 3))):
            i = earlier[-1] if rng.random() < 0.75 else rng.choice(earlier)
            G.add_edge(rng.choice(by_layer[i]), v)
    # No dead ends before the last layer: every node feeds the next layer.
    for v, lay in enumerate(layer_of):
        later = [i for i in range(lay + 1, n_layers) if by_layer[i]]
        if later and G.out_degree(v) == 0:
            G.add_edge(v, rng.choice(by_layer[later[0]]))
    return G


@dataclass(frozen=True)
class Case:
    family: str
    seed: int
    graph: nx.DiGraph


def corpus(seeds: int = 3) -> list[Case]:
    sizes = (10, 15, 20, 30, 40, 50, 70, 90, 110, 130, 160, 190, 220, 260, 300)
    cases = []
    for n in sizes:
        for s in range(seeds):
            cases.append(Case("pipeline", s, pipeline_dag(n, 1000 * n + s)))
            cases.append(Case("layered", s, layered_dag(n, 7000 * n + s)))
    return cases


# ---------------------------------------------------------------------------
# Graphviz dot
# ---------------------------------------------------------------------------


def _dot_source(G: nx.DiGraph) -> str:
    names = {v: f"n{i}" for i, v in enumerate(G.nodes)}
    lines = [
        "digraph G {",
        "rankdir=LR;",
        'node [shape=box, width=0.3, height=0.3, fixedsize=true, label=""];',
    ]
    lines.extend(f"{names[v]};" for v in G.nodes)
    lines.extend(f"{names[u]} -> {names[v]};" for u, v in G.edges)
    lines.append("}")
    return "\n".join(lines)


def _bezier(ctrl: Sequence[Point], samples: int = 12) -> list[Point]:
    """Points along dot's piecewise cubic Bezier spline."""
    out = [ctrl[0]]
    for k in range(0, len(ctrl) - 3, 3):
        (x0, y0), (x1, y1), (x2, y2), (x3, y3) = ctrl[k : k + 4]
        for i in range(1, samples + 1):
            t = i / samples
            s = 1.0 - t
            a, b, c, d = s * s * s, 3 * s * s * t, 3 * s * t * t, t * t * t
            out.append((a * x0 + b * x1 + c * x2 + d * x3, a * y0 + b * y1 + c * y2 + d * y3))
    return out


def dot_layout(
    G: nx.DiGraph, dot: str = "dot"
) -> tuple[dict[Hashable, Point], dict[tuple[Hashable, Hashable], list[Point]]]:
    """Node centres and sampled edge splines of ``dot -Tplain`` (rankdir=LR)."""
    res = subprocess.run(
        [dot, "-Tplain"], input=_dot_source(G), capture_output=True, text=True, check=True
    )
    return parse_plain(res.stdout, G)


def parse_plain(
    text: str, G: nx.DiGraph
) -> tuple[dict[Hashable, Point], dict[tuple[Hashable, Hashable], list[Point]]]:
    """Read ``-Tplain`` output of :func:`_dot_source` (nodes are named ``n<index>``)."""
    back = {f"n{i}": v for i, v in enumerate(G.nodes)}
    pos: dict[Hashable, Point] = {}
    splines: dict[tuple[Hashable, Hashable], list[Point]] = {}
    for line in text.splitlines():
        f = line.split()
        if not f:
            continue
        if f[0] == "node":
            pos[back[f[1]]] = (float(f[2]), float(f[3]))
        elif f[0] == "edge":
            n = int(f[3])
            nums = [float(t) for t in f[4 : 4 + 2 * n]]
            ctrl = list(zip(nums[0::2], nums[1::2], strict=True))
            splines[(back[f[1]], back[f[2]])] = _bezier(ctrl)
    return pos, splines


# ---------------------------------------------------------------------------
# Measurement and report
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Result:
    family: str
    nodes: int
    edges: int
    ours: int
    dot: int
    ours_ms: float
    dot_ms: float


def measure(case: Case, dot: str = "dot", effort: float = 1.0) -> Result:
    """Crossings of both layouts, and the CPU time each took.

    CPU time rather than wall time: the benchmark machine is shared, and CPU
    time does not count the time other processes hold the cores. For dot it
    is the child process's user and system time, so it includes start-up.
    """
    G = case.graph
    c0 = time.process_time()
    pos, bends = sugiyama_layout_with_edges(G, effort=effort)
    ours_ms = (time.process_time() - c0) * 1000.0
    before = _children_cpu()
    dpos, dsplines = dot_layout(G, dot)
    dot_ms = (_children_cpu() - before) * 1000.0
    return Result(
        case.family,
        G.number_of_nodes(),
        G.number_of_edges(),
        count_crossings(G, pos, bends),
        count_crossings(G, dpos, dsplines, tol=1e-3),
        ours_ms,
        dot_ms,
    )


def _children_cpu() -> float:
    """User plus system CPU seconds of finished child processes."""
    try:
        import resource
    except ImportError:  # not on Unix: coarser, but still CPU time
        t = os.times()
        return t.children_user + t.children_system
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def time_layout(G: nx.DiGraph, runs: int = 9, effort: float = 1.0) -> tuple[float, float]:
    """Median wall and CPU time of our layout, in milliseconds."""
    sugiyama_layout_with_edges(G, effort=effort)  # warm-up
    wall, cpu = [], []
    for _ in range(runs):
        t0, c0 = time.perf_counter(), time.process_time()
        sugiyama_layout_with_edges(G, effort=effort)
        wall.append((time.perf_counter() - t0) * 1000.0)
        cpu.append((time.process_time() - c0) * 1000.0)
    return statistics.median(wall), statistics.median(cpu)


def _row(label: str, rs: Sequence[Result]) -> str:
    ours = statistics.median(r.ours for r in rs)
    theirs = statistics.median(r.dot for r in rs)
    wins = sum(r.ours < r.dot for r in rs)
    ties = sum(r.ours == r.dot for r in rs)
    losses = sum(r.ours > r.dot for r in rs)
    return (
        f"{label:<18}{len(rs):>6}{ours:>12g}{theirs:>12g}"
        f"{sum(r.ours for r in rs):>11}{sum(r.dot for r in rs):>11}"
        f"{f'{wins}/{ties}/{losses}':>12}"
        f"{statistics.median(r.ours_ms for r in rs):>12.1f}"
        f"{statistics.median(r.dot_ms for r in rs):>11.1f}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seeds", type=int, default=3, help="graphs per size and family")
    parser.add_argument("--runs", type=int, default=9, help="timing runs for 200-node DAGs")
    parser.add_argument("--dot", default="dot", help="path of the Graphviz dot binary")
    parser.add_argument("--effort", type=float, default=1.0, help="effort of our layout")
    args = parser.parse_args(argv)
    if shutil.which(args.dot) is None:
        parser.error(f"{args.dot!r} not found; install Graphviz (Debian: apt-get install graphviz)")

    results = [measure(c, args.dot, args.effort) for c in corpus(args.seeds)]
    header = (
        f"{'bucket (nodes)':<18}{'graphs':>6}{'med ours':>12}{'med dot':>12}"
        f"{'sum ours':>11}{'sum dot':>11}{'W/T/L':>12}{'ours ms':>12}{'dot ms':>11}"
    )
    print(
        f"Layered edge crossings, ours (effort {args.effort:g}) vs Graphviz "
        f"{_dot_version(args.dot)} (same metric; lower is better)"
    )
    print("W/T/L: graphs where ours has fewer / equal / more crossings than dot.")
    print("ours ms / dot ms: median CPU time of a layout (dot's includes process start).")
    print()
    for family in ("pipeline", "layered", "all"):
        sel = [r for r in results if family in ("all", r.family)]
        print(f"[{family}]")
        print(header)
        for lo, hi in BUCKETS:
            rs = [r for r in sel if lo <= r.nodes <= hi]
            if rs:
                print(_row(f"{lo}-{hi}", rs))
        print(_row("overall", sel))
        print()

    print(f"Layout time of 200-node DAGs (median of {args.runs} runs):")
    for name, G in (
        ("pipeline", pipeline_dag(200, 42)),
        ("layered", layered_dag(200, 42)),
    ):
        wall, cpu = time_layout(G, args.runs, args.effort)
        print(
            f"  {name:<9} {G.number_of_nodes()} nodes, {G.number_of_edges()} edges: "
            f"{wall:.1f} ms wall, {cpu:.1f} ms CPU"
        )
    return 0


def _dot_version(dot: str) -> str:
    res = subprocess.run([dot, "-V"], capture_output=True, text=True, check=False)
    words = (res.stderr or res.stdout).split()
    return " ".join(words[2:5]) if len(words) >= 5 else "dot"


if __name__ == "__main__":
    raise SystemExit(main())
