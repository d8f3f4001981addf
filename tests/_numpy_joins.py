"""A tracked block where every equi-join is matched in NumPy (``capture/_equijoin``)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def numpy_joins(spark: Any) -> Iterator[list[bool]]:
    """Broadcast joins off (so Spark would shuffle both sides of every join, the case
    capture matches in NumPy) and the block's reads not fused (a fused capture matches
    the joins it covers from its own reads, see tests/test_fused.py); yields a list
    that gets, per join operation captured, whether it took the NumPy path."""
    from tensprov_lab._api import _tracker as tracker_of
    from tensprov_lab.capture.rules import join as join_rule

    taken: list[bool] = []
    real = join_rule._numpy_join_keys

    def spy(reader, rw, occ):  # noqa: ANN001, ANN202
        out = real(reader, rw, occ)
        if rw.join_node is not None:
            taken.append(out is not None)
        return out

    before = spark.conf.get("spark.sql.autoBroadcastJoinThreshold")
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")
    join_rule._numpy_join_keys = spy
    tracker_of(spark).fuse = False
    try:
        yield taken
    finally:
        tracker_of(spark).fuse = True
        join_rule._numpy_join_keys = real
        spark.conf.set("spark.sql.autoBroadcastJoinThreshold", before)
