"""Sugiyama-style layered layout for directed graphs, drawn left to right.

The lineage views draw operator DAGs; this module places them without Graphviz so
the front end needs no native dependency. The pipeline is the classic one:

1. **Cycle removal** (only if the graph has cycles): inside every strongly
   connected component an Eades--Lin--Smyth greedy ordering is computed and the
   edges pointing backwards in it are reversed for the layout. Self-loops are
   ignored by the layout (they get no bend points).
2. **Layer assignment**: longest path, then network simplex (Gansner et al.,
   1993), which minimises the total edge span exactly, as Graphviz ``dot``
   does, so long edges (and dummy nodes) are few; then nodes with as many
   in- as out-edges move to the least crowded layer they fit (span unchanged).
3. **Dummy nodes** split every edge spanning ``k > 1`` layers into ``k`` unit
   edges. Connected components are ordered separately and stacked.
4. **Crossing minimisation**, per component, keeping the best order seen:
   four deterministic initial orders (BFS from the sources along out-edges and
   from the sinks along in-edges, as ``dot`` does, then DFS and BFS from the
   sources along both directions) each get a few alternating down/up
   barycenter sweeps; the two best are swept further. Every sweep is followed
   by adjacent exchange ("transpose"), which revisits only the pairs a swap
   can affect and, on every other sweep, also makes a bounded number of
   cost-neutral swaps of crossing pairs: walking across such plateaus is what
   lets ``dot``'s transpose beat plain sweeps, and is the cheapest gain we
   measured. The best order is finally improved by sifting (Matuszewski et
   al., 1999) on per-layer crossing matrices. Crossings are counted with the
   Barth--Jünger--Mutzel reduction to inversions (or, for moderate widths, a
   vectorised comparison of all segment pairs of a gap). The search stops at
   a cap on elementary steps (``effort``), never at a time limit, and ties are
   broken by position: the result depends only on the node and edge order of
   the input graph, never on randomness, hashing or the machine's speed.
5. **Coordinate assignment**: Brandes--Köpf (four alignments, balanced),
   which keeps long edges straight where that is cheap.

The drawing direction is left to right: ``x = layer * layer_gap`` and ``y`` is
the position inside the layer (distinct for every node of a layer).

Crossing metric
---------------
:func:`count_crossings` measures any layered left-to-right drawing by the
objective the Sugiyama framework optimises: the *layered crossing number*.
The layers (ranks) are the distinct ``x`` coordinates of the nodes. Every edge
is read as a polyline from its tail's centre through its bend points to its
head's centre; where it passes an intermediate rank its ``y`` there is
interpolated (that is the position of the dummy node it implies). For each pair
of adjacent ranks, two edge segments spanning that gap cross iff their ``y``
orders at the two ranks are strictly opposite; segments that share an end
(equal ``y`` at a rank) never count. The count is the sum over all gaps.

This applies equally to our layout (whose bend points lie exactly on the ranks)
and to Graphviz ``dot`` (node centres from ``-Tplain``, and edge splines sampled
into polylines). For straight segments between adjacent ranks, as we draw, the
metric equals the number of geometric crossings. For curves it is a lower bound
on geometric crossings (two curves with opposite orders on both sides cross an
odd number of times, two with equal orders an even number, possibly two), so
it never favours us over a spline router. Edges whose ends share a rank
("flat" edges, never produced here for a DAG) are not counted.

Examples
--------
>>> import networkx as nx
>>> G = nx.DiGraph([("src", "filter"), ("filter", "join"), ("src", "join")])
>>> pos, bends = sugiyama_layout_with_edges(G)
>>> [pos[n][0] for n in ("src", "filter", "join")]
[0.0, 1.0, 2.0]
>>> len(bends[("src", "join")])  # one dummy on the layer of "filter"
1
>>> count_crossings(G, pos, bends)
0
"""

from __future__ import annotations

from tensprov_lab.layout._crossings import count_crossings, count_order_crossings
from tensprov_lab.layout._sugiyama import sugiyama_layout, sugiyama_layout_with_edges

__all__ = [
    "count_crossings",
    "count_order_crossings",
    "sugiyama_layout",
    "sugiyama_layout_with_edges",
]
