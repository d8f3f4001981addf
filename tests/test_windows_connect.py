"""Window functions over Spark Connect: the frame tests of ``tests/test_windows.py``
against a Connect server of this module's own (each record from its frame, as on a
classic session)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests import test_windows as wt
from tests._connect_session import connect_session

pytestmark = [pytest.mark.spark, pytest.mark.connect]


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    """A Spark Connect session (the tests below take it where the classic ones take the
    shared local session)."""
    with connect_session() as session:
        yield session


frame = wt.frame
test_each_record_comes_from_its_frame = wt.test_each_record_comes_from_its_frame
test_top_one_per_group_comes_from_its_whole_group = (
    wt.test_top_one_per_group_comes_from_its_whole_group
)
test_a_column_computed_from_a_window_comes_from_frame_and_record = (
    wt.test_a_column_computed_from_a_window_comes_from_frame_and_record
)
test_frames_do_not_depend_on_partitioning = wt.test_frames_do_not_depend_on_partitioning
# not here: test_lag_skipping_nulls_takes_every_earlier_row writes its lag as a SQL string
# (F.expr), which the client cannot read: over Connect that frame is the whole partition,
# a superset, with a note (docs/connect.md)
