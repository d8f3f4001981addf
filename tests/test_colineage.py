"""Co-lineage (Q10 co-contributors, Q11 co-dependents) and how-provenance (Q5–Q8) on
joins of three sources with duplicate keys, a diamond and a self-join.

The store-level tests build the graph by hand (no JVM) from explicit join pairs and
compute every expected answer by brute force over explicit records: each record of a
derived dataset carries the source records it comes from, and each path of operations
is followed with plain Python sets.  The Spark test checks the same questions end to end
against a brute-force join of the literal records.
"""

from __future__ import annotations

from itertools import product
from typing import Any

import numpy as np
import pytest

from tensprov_lab.query import backward, cell_lineage, co_contributors, co_dependents, how
from tensprov_lab.query._colineage import meeting_points
from tensprov_lab.store import IndexTensor, MaskTensor, Store

# duplicate keys on purpose: customer 1 twice, order 100 shipped twice
ORDERS = [(100, 1, 5), (101, 2, 7), (102, 1, 9), (103, 4, 1)]  # oid, cid, amount
CUSTOMERS = [(1, "ann"), (2, "bob"), (1, "amy")]  # cid, name
SHIPMENTS = [(100, "x"), (102, "y"), (100, "z"), (105, "w")]  # oid, carrier

Lin = dict[str, frozenset[int]]  # source name -> source rows


def join_pairs(left: list[tuple], right: list[tuple], lk: int, rk: int) -> list[tuple[int, int]]:
    """Inner equi-join by nested loops, in canonical (left, right) order."""
    return [
        (i, j)
        for i, j in product(range(len(left)), range(len(right)))
        if left[i][lk] == right[j][rk]
    ]


def merge(*lins: Lin) -> Lin:
    out: dict[str, frozenset[int]] = {}
    for lin in lins:
        for k, v in lin.items():
            out[k] = out.get(k, frozenset()) | v
    return out


class Model:
    """The hand-built store next to a brute-force model of the same graph: per dataset
    its records' source lineage, per operation its explicit (output, input) pairs."""

    def __init__(self) -> None:
        self.store = Store()
        self.lin: dict[int, list[Lin]] = {}
        self.pairs: dict[int, list[list[tuple[int, int]]]] = {}  # op id -> per input
        self.ids: dict[str, int] = {}

    def source(self, name: str, records: list[tuple], columns: list[str]) -> int:
        ds = self.store.add_dataset(name, columns=columns, n_rows=len(records), role="source")
        self.lin[ds.id] = [{name: frozenset([i])} for i in range(len(records))]
        self.ids[name] = ds.id
        return ds.id

    def op(
        self,
        name: str,
        method: str,
        inputs: list[int],
        pairs: list[list[tuple[int, int]]],
        n_out: int,
        columns: list[str],
        maps: tuple[list[np.ndarray], list[np.ndarray]] | None = None,
    ) -> int:
        """``pairs[k]``: (output row, input row) of input ``k``; every tensor here is
        functional (each output row has at most one input row per input)."""
        ds = self.store.add_dataset(name, columns=columns, n_rows=n_out)
        tensors = []
        for k, d in enumerate(inputs):
            idx = np.full(n_out, -1, dtype=np.int64)
            for o, i in pairs[k]:
                assert idx[o] == -1, "functional tensors only"
                idx[o] = i
            tensors.append(IndexTensor.from_index(idx, self.store.datasets[d].n_rows))
        kw: dict[str, Any] = {}
        if maps is not None:
            kw = {"contributing": maps[0], "influencing": maps[1]}
        op = self.store.add_operation(method, method, inputs, ds.id, tensors, **kw)
        self.pairs[op.id] = pairs
        lin: list[Lin] = [{} for _ in range(n_out)]
        for k, d in enumerate(inputs):
            for o, i in pairs[k]:
                lin[o] = merge(lin[o], self.lin[d][i])
        self.lin[ds.id] = lin
        self.ids[name] = ds.id
        return ds.id

    def filter(self, name: str, src: int, kept: list[int]) -> int:
        ds = self.store.add_dataset(
            name, columns=self.store.datasets[src].columns, n_rows=len(kept)
        )
        op = self.store.add_operation(
            "filter", "horizontal_reduction", [src], ds.id,
            [MaskTensor.from_kept(kept, self.store.datasets[src].n_rows)],
        )  # fmt: skip
        self.pairs[op.id] = [list(enumerate(kept))]
        self.lin[ds.id] = [self.lin[src][i] for i in kept]
        self.ids[name] = ds.id
        return ds.id

    # -- brute force -----------------------------------------------------------------
    def sources_of(self, ds: int, rows: list[int]) -> set[tuple[str, int]]:
        return {(s, r) for i in rows for s, rs in self.lin[ds][i].items() for r in rs}

    def co_contributors(self, ds: int, rows: list[int], other: int, at: int) -> list[int]:
        """Rows of ``other`` in the lineage of the records of ``at`` that ``rows`` of
        ``ds`` reach (both given as sources or as datasets on the way)."""
        return sorted(
            {
                j
                for x in range(len(self.lin[at]))
                if self._reaches(ds, rows, at, x)
                for j in range(len(self.lin[other]))
                if self._reaches(other, [j], at, x)
            }
        )

    def _reaches(self, ds: int, rows: list[int], at: int, x: int) -> bool:
        """Does record ``x`` of ``at`` derive from one of ``rows`` of ``ds``?  Followed
        along explicit pairs, so it also holds for intermediate datasets."""
        if ds == at:
            return x in rows
        op = self.store.producer(at)
        if op is None:
            return False
        return any(
            self._reaches(ds, rows, d, i)
            for k, d in enumerate(op.inputs)
            for o, i in self.pairs[op.id][k]
            if o == x
        )

    def co_dependents(self, ds: int, rows: list[int], other: int) -> list[int]:
        mine = self.sources_of(ds, rows)
        return [y for y in range(len(self.lin[other])) if self.sources_of(other, [y]) & mine]

    def paths(self, ds: int, rows: set[int]) -> list[tuple[int, tuple, list[int]]]:
        """Every backward path from ``ds`` as (dataset reached, edges, rows reached along
        exactly that path), following explicit pairs; paths reaching nothing are left
        out, as are their extensions."""
        out = []
        op = self.store.producer(ds)
        if op is None:
            return out
        for k, d in enumerate(op.inputs):
            got = {i for o, i in self.pairs[op.id][k] if o in rows}
            if not got:
                continue
            edge = ((op.id, k),)
            out.append((d, edge, sorted(got)))
            out += [(d2, edge + e, r) for d2, e, r in self.paths(d, got)]
        return sorted(out, key=lambda p: (len(p[1]), p[1]))


@pytest.fixture
def three() -> Model:
    """orders ⋈ customers (cid) ⋈ shipments (oid), plus a filter on each of the first
    two sources for co-dependents across branches."""
    m = Model()
    o = m.source("orders", ORDERS, ["oid", "cid", "amount"])
    c = m.source("customers", CUSTOMERS, ["cid", "name"])
    s = m.source("shipments", SHIPMENTS, ["oid", "carrier"])
    p1 = join_pairs(ORDERS, CUSTOMERS, 1, 0)
    j1_records = [ORDERS[i] + CUSTOMERS[j] for i, j in p1]
    j1 = m.op(
        "j1", "join", [o, c],
        [[(n, i) for n, (i, _) in enumerate(p1)], [(n, j) for n, (_, j) in enumerate(p1)]],
        len(p1), ["oid", "cid", "amount", "cid_c", "name"],
    )  # fmt: skip
    p2 = join_pairs(j1_records, SHIPMENTS, 0, 0)
    m.op(
        "j2", "join", [j1, s],
        [[(n, i) for n, (i, _) in enumerate(p2)], [(n, j) for n, (_, j) in enumerate(p2)]],
        len(p2), ["oid", "cid", "amount", "cid_c", "name", "oid_s", "carrier"],
    )  # fmt: skip
    m.filter("big", o, [i for i, r in enumerate(ORDERS) if r[2] > 5])
    m.filter("a_names", c, [i for i, r in enumerate(CUSTOMERS) if r[1].startswith("a")])
    return m


def test_the_model_is_what_the_hand_checks_say(three: Model) -> None:
    # guards the brute force itself with a few answers worked out by hand:
    # j1 = (o0,c0) (o0,c2) (o1,c1) (o2,c0) (o2,c2); j2 adds s0/s2 to the first two and
    # s1 to the last two; o1 ships nothing
    m = three
    assert [sorted(x["orders"]) for x in m.lin[m.ids["j2"]]] == [[0], [0], [0], [0], [2], [2]]
    assert [sorted(x["shipments"]) for x in m.lin[m.ids["j2"]]] == [[0], [2], [0], [2], [1], [1]]
    assert m.co_contributors(m.ids["orders"], [0], m.ids["customers"], m.ids["j1"]) == [0, 2]
    assert m.co_contributors(m.ids["orders"], [1], m.ids["customers"], m.ids["j2"]) == []
    assert m.co_dependents(m.ids["j2"], [0], m.ids["j1"]) == [0, 1, 3]


def test_meeting_points(three: Model) -> None:
    m, ids = three, three.ids
    assert meeting_points(m.store, ids["orders"], ids["customers"]) == [ids["j1"]]
    assert meeting_points(m.store, ids["orders"], ids["shipments"]) == [ids["j2"]]
    assert meeting_points(m.store, ids["big"], ids["customers"]) == []


def test_co_contributors_against_brute_force(three: Model) -> None:
    m, ids = three, three.ids
    checked = 0
    names = ["orders", "customers", "shipments", "j1"]
    for a, b in product(names, names):
        if a == b:
            continue
        default = meeting_points(m.store, ids[a], ids[b])
        for at in [None, "j1", "j2"]:
            target = default if at is None else [ids[at]]
            if not target:  # the two never meet: nothing to compare
                continue
            for i in range(len(m.lin[ids[a]])):
                got = co_contributors(
                    m.store, ids[a], [i], ids[b], at=None if at is None else ids[at]
                ).tolist()
                want = sorted(
                    {j for t in target for j in m.co_contributors(ids[a], [i], ids[b], t)}
                )
                assert got == want, (a, i, b, at, got, want)
                checked += 1
    assert checked > 50
    # the meeting point matters: order 1 meets customer 1 in j1, but never ships
    assert co_contributors(m.store, ids["orders"], [1], ids["customers"]).tolist() == [1]
    assert co_contributors(m.store, ids["orders"], [1], ids["customers"], at=ids["j2"]).size == 0
    # a duplicate key fans out: customers 0 and 2 share cid 1 with orders 0 and 2
    assert co_contributors(m.store, ids["customers"], [0], ids["orders"]).tolist() == [0, 2]
    assert co_contributors(m.store, ids["customers"], [0], ids["shipments"]).tolist() == [0, 1, 2]


def test_co_dependents_against_brute_force(three: Model) -> None:
    m, ids = three, three.ids
    names = list(ids)
    checked = 0
    for a, b in product(names, names):
        for i in range(len(m.lin[ids[a]])):
            got = co_dependents(m.store, ids[a], [i], ids[b]).tolist()
            assert got == m.co_dependents(ids[a], [i], ids[b]), (a, i, b, got)
            checked += 1
    assert checked > 100
    # across branches: the shipped records of j2 row 0 (o0, c0, s0) and the filters
    assert co_dependents(m.store, ids["j2"], [0], ids["a_names"]).tolist() == [0]
    assert co_dependents(m.store, ids["j2"], [4], ids["big"]).tolist() == [1]  # order 2
    assert co_dependents(m.store, ids["big"], [0], ids["j2"]).size == 0  # order 1: none


def _paths(store: Store, ds: int, rows: list[int]) -> list[tuple[int, tuple, list[int]]]:
    paths, truncated = how(store, ds, rows)
    assert not truncated
    return [(p.dataset, p.edges, p.rows.tolist()) for p in paths]


def test_how_paths_of_the_three_way_join(three: Model) -> None:
    m, ids = three, three.ids
    for r in range(len(m.lin[ids["j2"]])):
        assert _paths(m.store, ids["j2"], [r]) == m.paths(ids["j2"], {r}), r
    op1 = m.store.producer(ids["j1"]).id
    op2 = m.store.producer(ids["j2"]).id
    # j2 row 3 = (j1 row 1 = (o0, c2), s2): one path to each source, plus the
    # intermediate join
    assert _paths(m.store, ids["j2"], [3]) == [
        (ids["j1"], ((op2, 0),), [1]),
        (ids["shipments"], ((op2, 1),), [2]),
        (ids["orders"], ((op2, 0), (op1, 0)), [0]),
        (ids["customers"], ((op2, 0), (op1, 1)), [2]),
    ]


def test_how_lists_both_paths_of_a_diamond() -> None:
    # orders feeds a union twice: once filtered, once whole; an order that passes the
    # filter is reached along both paths
    m = Model()
    o = m.source("orders", ORDERS, ["oid", "cid", "amount"])
    f = m.filter("f", o, [1, 2])
    n_o = len(ORDERS)
    u = m.op(
        "u", "union", [f, o],
        [[(0, 0), (1, 1)], [(2 + i, i) for i in range(n_o)]], 2 + n_o, ["oid", "cid", "amount"],
    )  # fmt: skip
    op_u = m.store.producer(u).id
    op_f = m.store.producer(f).id
    for r in range(2 + n_o):
        assert _paths(m.store, u, [r]) == m.paths(u, {r}), r
    # union rows 1 (f row 1 = order 2) and 4 (order 2 itself): order 2 along both paths
    assert _paths(m.store, u, [1, 4]) == [
        (f, ((op_u, 0),), [1]),
        (o, ((op_u, 1),), [2]),
        (o, ((op_u, 0), (op_f, 0)), [2]),
    ]
    # record lineage merges the paths: one row set per dataset
    assert backward(m.store, u, [1, 4]).rows[o].tolist() == [2]


def test_how_and_cells_keep_the_two_sides_of_a_self_join_apart() -> None:
    m = Model()
    c = m.source("customers", CUSTOMERS, ["cid", "name"])
    pairs = join_pairs(CUSTOMERS, CUSTOMERS, 0, 0)
    # out: cid (left), name (left), name (right); the key of both sides decides
    cm_l = np.array([[1, 0], [0, 1], [0, 0]], dtype=bool)
    cm_r = np.array([[0, 0], [0, 0], [0, 1]], dtype=bool)
    im = np.array([[1, 0]] * 3, dtype=bool)
    sj = m.op(
        "sj", "join", [c, c],
        [[(n, i) for n, (i, _) in enumerate(pairs)], [(n, j) for n, (_, j) in enumerate(pairs)]],
        len(pairs), ["cid", "name", "name_r"], maps=([cm_l, cm_r], [im, im]),
    )  # fmt: skip
    op = m.store.producer(sj).id
    assert pairs == [(0, 0), (0, 2), (1, 1), (2, 0), (2, 2)]
    for r in range(len(pairs)):
        assert _paths(m.store, sj, [r]) == m.paths(sj, {r}), r
    # row 1 = (c0, c2): customer 0 on the left path, customer 2 on the right one
    assert _paths(m.store, sj, [1]) == [(c, ((op, 0),), [0]), (c, ((op, 1),), [2])]
    # the right name of row 1 comes from customer 2 only; customer 0 only decides (cid)
    paths, _ = how(m.store, sj, [1], columns=[2])
    by_side = {
        p.edges: (
            {k: v.tolist() for k, v in p.contributing.items()},
            {k: v.tolist() for k, v in p.influencing.items()},
        )
        for p in paths
    }
    assert by_side == {((op, 0),): ({}, {0: [0]}), ((op, 1),): ({1: [2]}, {0: [2]})}
    cells = cell_lineage(m.store, sj, [1], [2])
    assert {k: v.tolist() for k, v in cells.contributing[c].items()} == {1: [2]}
    assert {k: v.tolist() for k, v in cells.influencing[c].items()} == {0: [0, 2]}


# ---------------------------------------------------------------------------------------------
# end to end


@pytest.mark.spark
def test_colineage_and_how_end_to_end(spark) -> None:  # noqa: ANN001
    import tensprov_lab

    orders = spark.createDataFrame(ORDERS, "oid int, cid int, amount int")
    customers = spark.createDataFrame(CUSTOMERS, "cid int, name string")
    shipments = spark.createDataFrame(SHIPMENTS, "oid int, carrier string")
    with tensprov_lab.track(spark, name="colineage") as run:
        j1 = orders.join(customers, "cid")
        j2 = j1.join(shipments, "oid")
        big = orders.filter("amount > 5")
        # a diamond: orders reaches u through the filter and directly
        u = big.unionByName(orders)
        # a self-join on a duplicate key
        sj = customers.join(customers, "cid")
    # brute force over the literal records, in canonical (left, right) order
    p1 = join_pairs(ORDERS, CUSTOMERS, 1, 0)
    p2 = join_pairs([ORDERS[i] + CUSTOMERS[j] for i, j in p1], SHIPMENTS, 0, 0)
    lin2 = [(p1[a][0], p1[a][1], s) for a, s in p2]  # j2 row -> (order, customer, shipment)
    assert run.dataset(j2).n_rows == len(lin2)
    for r, (o, c, s) in enumerate(lin2):
        got = run.backward(j2, rows=[r])
        assert (got[orders].tolist(), got[customers].tolist(), got[shipments].tolist()) == (
            [o],
            [c],
            [s],
        )
    # Q10: orders <-> customers meet in j1; orders <-> shipments in j2
    for i in range(len(ORDERS)):
        want_c = sorted({c for o, c in p1 if o == i})
        assert run.co_contributors(orders, [i], customers).tolist() == want_c, i
        want_s = sorted({s for o, _, s in lin2 if o == i})
        assert run.co_contributors(orders, [i], shipments).tolist() == want_s, i
        want_c2 = sorted({c for o, c, _ in lin2 if o == i})
        assert run.co_contributors(orders, [i], customers, at=j2).tolist() == want_c2, i
    # Q11: j1 records sharing a source record with a j2 record
    j1_lin = list(p1)
    for r, (o, c, _) in enumerate(lin2):
        want = [x for x, (o1, c1) in enumerate(j1_lin) if o1 == o or c1 == c]
        assert run.co_dependents(j2, [r], j1).tolist() == want, r
        # and across branches: the filtered orders that are this record's order
        big_rows = [i for i, rec in enumerate(ORDERS) if rec[2] > 5]
        assert run.co_dependents(j2, [r], big).tolist() == [
            n for n, i in enumerate(big_rows) if i == o
        ]
    # how: both paths of the diamond for an order that passed the filter
    big_rows = [i for i, rec in enumerate(ORDERS) if rec[2] > 5]
    n_big = len(big_rows)
    table = run.backward(u, rows=[1, n_big + big_rows[1]], to=orders, how=True).how
    assert sorted(table["row"].tolist()) == [big_rows[1], big_rows[1]]
    assert sorted(len(ops) for ops in table["operations"]) == [1, 2]
    # how: the self-join reaches customers along its left and its right input
    sj_pairs = join_pairs(CUSTOMERS, CUSTOMERS, 0, 0)
    r = sj_pairs.index((0, 2))
    paths = run.backward(sj, rows=[r], how=True).paths
    op = run.store.producer(run.dataset(sj).id).id
    cid = run.dataset(customers).id
    assert [(p.dataset, p.edges, p.rows.tolist()) for p in paths] == [
        (cid, ((op, 0),), [0]),
        (cid, ((op, 1),), [2]),
    ]
    how = run.backward(sj, rows=[r], how=True).how
    # the table tells the two sides apart: customer 0 through the left input, 2 the right
    assert sorted(zip(how["row"], how["inputs"])) == [(0, (0,)), (2, (1,))]
    assert all(ops == (op,) for ops in how["operations"])
