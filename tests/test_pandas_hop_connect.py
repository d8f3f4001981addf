"""The pandas hop tests of ``tests/test_pandas_hop.py`` over Spark Connect (a server of
this module's own, loopback, stopped at the end): records matched back by value, an
explicit opaque step when values changed in pandas.  (RDDs do not exist over Connect.)"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests import test_pandas_hop as hops
from tests._connect_session import connect_session

pytestmark = [pytest.mark.spark, pytest.mark.connect]


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    with connect_session() as session:
        yield session


test_a_pandas_filter_and_assign_keep_exact_lineage = (
    hops.test_a_pandas_filter_and_assign_keep_exact_lineage
)
test_duplicate_records_list_every_equal_upstream_record = (
    hops.test_duplicate_records_list_every_equal_upstream_record
)
test_values_changed_in_pandas_make_an_explicit_opaque_step = (
    hops.test_values_changed_in_pandas_make_an_explicit_opaque_step
)
