"""Queries keep what they derive from the graph (tensprov_lab/query/_memo.py): the answers
must follow the graph as it changes (operations added, runs removed, attribute maps set
after an operation was added)."""

from __future__ import annotations

import numpy as np

from tensprov_lab.query import backward, cell_lineage, forward, transformations
from tensprov_lab.query._memo import memo
from tensprov_lab.store import IdentityTensor, MaskTensor, Store


def chain() -> tuple[Store, dict[str, int]]:
    """a (4 rows, x y) --filter keeps 1, 3--> b --select--> c (run 0)."""
    s = Store()
    a = s.add_dataset("a", columns=["x", "y"], n_rows=4, role="source", run=0).id
    b = s.add_dataset("b", columns=["x", "y"], n_rows=2, run=0).id
    c = s.add_dataset("c", columns=["x", "y"], n_rows=2, run=0).id
    eye = np.eye(2, dtype=bool)
    s.add_operation(
        "filter", "reduction", [a], b, [MaskTensor.from_kept([1, 3], 4)],
        contributing=[eye], influencing=[np.array([[True, False], [True, False]])], run=0,
    )  # fmt: skip
    s.add_operation(
        "select", "projection", [b], c, [IdentityTensor(2)],
        contributing=[eye], influencing=[np.zeros((2, 2), bool)], run=0,
    )  # fmt: skip
    return s, {"a": a, "b": b, "c": c}


def lists(cells: dict[int, np.ndarray]) -> dict[int, list[int]]:
    return {col: rows.tolist() for col, rows in cells.items()}


def test_memo_is_made_again_when_the_graph_changes() -> None:
    s = Store()
    made = []

    def make() -> int:
        made.append(1)
        return len(s.datasets)

    assert memo(s, "n", make) == 0 and memo(s, "n", make) == 0
    assert len(made) == 1  # kept while the graph stays the same
    s.add_dataset("a", n_rows=1, role="source")
    assert memo(s, "n", make) == 1 and len(made) == 2


def test_record_queries_follow_an_added_operation_and_a_removed_run() -> None:
    s, ids = chain()
    a, c = ids["a"], ids["c"]
    assert set(forward(s, a, [3]).rows) == {a, ids["b"], c}
    assert backward(s, c, [1]).rows[a].tolist() == [3]
    assert transformations(s, c) == sorted(s.operations)
    # a later run reads c
    d = s.add_dataset("d", columns=["x"], n_rows=1, run=1).id
    assert d not in forward(s, a, [3]).rows  # (asked between the dataset and its operation)
    op = s.add_operation("filter", "reduction", [c], d, [MaskTensor.from_kept([1], 2)], run=1)
    res = forward(s, a, [3])
    assert res.rows[d].tolist() == [0]
    assert forward(s, a, [1]).rows[d].tolist() == []
    assert backward(s, d, [0], to=a).rows[a].tolist() == [3]
    assert op.id in transformations(s, d) and transformations(s, a, "forward")[-1] == op.id
    # an operation that is opaque blocks what the memo knew before
    e = s.add_dataset("e", n_rows=1, run=2).id
    blocked = s.add_operation("mapPartitions", "opaque", [d], e, None, opaque=True, run=2)
    assert forward(s, a, [3]).blocked == [blocked.id]
    s.remove_run([1, 2])
    res = forward(s, a, [3])
    assert set(res.rows) == {a, ids["b"], c} and res.blocked == []
    assert transformations(s, a, "forward") == sorted(s.operations)


def test_cell_queries_follow_maps_set_after_the_operation() -> None:
    s, ids = chain()
    a, c = ids["a"], ids["c"]
    res = cell_lineage(s, c, [1], [1])  # c.y of row 1: a.y of row 3, decided by a.x
    assert lists(res.contributing[a]) == {1: [3]} and lists(res.influencing[a]) == {0: [3]}
    # the select's maps are set anew (as an ML model's are once fitted): y from x
    select = s.producer(c)
    assert select is not None
    select.contributing = [np.array([[True, False], [True, False]])]
    res = cell_lineage(s, c, [1], [1])
    assert lists(res.contributing[a]) == {0: [3]}
    res = cell_lineage(s, ids["a"], [3], [0], direction="forward")
    assert lists(res.contributing[c]) == {0: [1], 1: [1]}
    # a new operation downstream is reached by the cell query too
    d = s.add_dataset("d", columns=["y"], n_rows=2, run=1).id
    s.add_operation(
        "select", "projection", [c], d, [IdentityTensor(2)],
        contributing=[np.array([[False, True]])], influencing=[np.zeros((1, 2), bool)], run=1,
    )  # fmt: skip
    res = cell_lineage(s, d, [0], [0])
    assert lists(res.contributing[a]) == {0: [1]}
