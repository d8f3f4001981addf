"""``groupBy(...).pivot(...).agg(...)``: exact record and cell lineage (rules/aggregate.py).

The expected lineage is computed here from the rows themselves: an output record from
every record of its group, the cell of pivot value v from the group's records with that
pivot value.
"""

from __future__ import annotations

from typing import Any

import pytest

import tensprov_lab

#: (id, g, p, n, v): group g (with a null group), pivot p (with a null and an unlisted
#: value), an int pivot column n
ROWS = [
    (0, "a", "x", 1, 1.0), (1, "a", "y", 2, 2.0), (2, "b", "x", 1, 3.0), (3, "b", "z", 2, 4.0),
    (4, "a", "x", 3, 5.0), (5, "c", "z", 1, 6.0), (6, None, "y", 2, 7.0), (7, "b", None, 3, 8.0),
    (8, "c", "y", 1, None),
]  # fmt: skip
COLS = ["id", "g", "p", "n", "v"]


def _groups() -> list[list[int]]:
    """Members of each group, groups ordered by their smallest member."""
    found: dict[Any, list[int]] = {}
    for r in ROWS:
        found.setdefault(r[1], []).append(r[0])
    return sorted(found.values(), key=min)


@pytest.fixture(scope="module")
def rows_df(spark) -> Any:  # noqa: ANN001
    return spark.createDataFrame(ROWS, "id int, g string, p string, n int, v double")


@pytest.mark.spark
@pytest.mark.parametrize("listed", [True, False])
def test_pivot_records_and_cells(spark, rows_df, listed) -> None:  # noqa: ANN001
    from pyspark.sql import functions as F

    values = ["x", "y"] if listed else sorted({r[2] for r in ROWS if r[2] is not None})
    with tensprov_lab.track(spark, name=f"pivot-{listed}") as run:
        grouped = rows_df.groupBy("g")
        pivoted = grouped.pivot("p", values) if listed else grouped.pivot("p")
        out = pivoted.agg(F.sum("v").alias("s"), F.count("id").alias("c"))
    (op,) = [o for o in run.operations if o.output == run.dataset(out).id]
    assert not op.opaque and op.category == "aggregate"
    groups = _groups()
    got = run.rows(out)
    assert len(got) == len(groups)
    names = out.columns
    for i, members in enumerate(groups):
        key = ROWS[members[0]][1]
        assert got["g"].iloc[i] == key or (key is None and got["g"].isna().iloc[i])
        assert run.backward(out, rows=[i])[rows_df].tolist() == members
        for v in values:
            with_v = [m for m in members if ROWS[m][2] == v]
            col = next(c for c in names if c.startswith(f"{v}_s"))
            cells = run.backward(out, rows=[i], columns=[col])[rows_df]
            assert sorted(cells["contributing"].get("v", [])) == with_v, (i, v)
            assert "p" not in cells["contributing"]
            assert sorted(cells["influencing"].get("p", [])) == with_v
            amounts = [ROWS[m][4] for m in with_v if ROWS[m][4] is not None]
            value = got[col].iloc[i]
            assert (not amounts and value != value) or value == sum(amounts), (i, v, value)
        # the group column: from every member
        g_cells = run.backward(out, rows=[i], columns=["g"])[rows_df]
        assert sorted(g_cells["contributing"]["g"]) == members
    for j in range(len(ROWS)):
        owner = next(i for i, m in enumerate(groups) if j in m)
        assert run.forward(rows_df, rows=[j], to=out)[out].tolist() == [owner]


@pytest.mark.spark
def test_pivot_on_an_int_column_and_its_values(spark, rows_df) -> None:  # noqa: ANN001
    from pyspark.sql import functions as F

    with tensprov_lab.track(spark, name="pivot-int") as run:
        out = rows_df.groupBy("g").pivot("n", [1, 3]).agg(F.max("v"))
    assert not run.operations[-1].opaque
    got = run.rows(out)
    for i, members in enumerate(_groups()):
        for n, col in ((1, "1"), (3, "3")):
            with_n = [m for m in members if ROWS[m][3] == n]
            cells = run.backward(out, rows=[i], columns=[col])[rows_df]
            assert sorted(cells["contributing"].get("v", [])) == with_n
            best = max((ROWS[m][4] for m in with_n if ROWS[m][4] is not None), default=None)
            value = got[col].iloc[i]
            assert (best is None and value != value) or value == best


def _members_with(members: list[int], col: str, value: str) -> list[int]:
    """The members whose ``col`` reads ``value`` as a string (a null as "null")."""
    at = COLS.index(col)
    return [m for m in members if ("null" if ROWS[m][at] is None else str(ROWS[m][at])) == value]


@pytest.mark.spark
def test_a_pivot_over_a_computed_grouping_value(spark, rows_df) -> None:  # noqa: ANN001
    from pyspark.sql import functions as F

    with tensprov_lab.track(spark, name="pivot-computed") as run:
        out = rows_df.groupBy(F.upper("g").alias("G")).pivot("n", [1, 2]).agg(F.sum("v"))
    (op,) = [o for o in run.operations if o.output == run.dataset(out).id]
    assert not op.opaque and op.category == "aggregate"
    for i, members in enumerate(_groups()):
        assert run.backward(out, rows=[i])[rows_df].tolist() == members
        for col in ("1", "2"):
            cells = run.backward(out, rows=[i], columns=[col])[rows_df]
            assert sorted(cells["contributing"].get("v", [])) == _members_with(members, "n", col)


@pytest.mark.spark
def test_crosstab_records_and_cells(spark, rows_df) -> None:  # noqa: ANN001
    import warnings

    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        with tensprov_lab.track(spark, name="crosstab") as run:
            out = rows_df.crosstab("g", "p")
            expected = out.collect()
    assert not [str(w.message) for w in said if "tensprov" in str(w.message).lower()]
    assert [op.opaque for op in run.operations] == [False] * len(run.operations)
    got = run.rows(out)
    groups = _groups()
    assert len(got) == len(expected) == len(groups)
    for i, members in enumerate(groups):
        key = ROWS[members[0]][1]
        assert got["g_p"].iloc[i] == ("null" if key is None else key)  # crosstab's null
        assert run.backward(out, rows=[i])[rows_df].tolist() == members
        for col in out.columns[1:]:
            with_v = _members_with(members, "p", col)
            cells = run.backward(out, rows=[i], columns=[col])[rows_df]
            assert sorted(cells["influencing"].get("p", [])) == with_v, (i, col)
            assert got[col].iloc[i] == len(with_v)
