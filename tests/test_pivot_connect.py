"""The pivot tests of ``tests/test_pivot.py`` over Spark Connect (a server of this
module's own, loopback, stopped at the end): the same record and cell lineage."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests import test_pivot as pivots
from tests._connect_session import connect_session

pytestmark = [pytest.mark.spark, pytest.mark.connect]


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    with connect_session() as session:
        yield session


rows_df = pivots.rows_df
test_pivot_records_and_cells = pivots.test_pivot_records_and_cells
test_pivot_on_an_int_column_and_its_values = pivots.test_pivot_on_an_int_column_and_its_values
