"""Capture: watch PySpark DataFrame calls and turn them into provenance tensors.

How it works
------------
Inside a tracked block every DataFrame method returning a DataFrame is wrapped: the
original runs unchanged and ``output = method(inputs)`` is recorded.  When the block ends
each recorded operation is captured in order.  Its analyzed plan is *annotated*: the
plans of its inputs are replaced by annotated plans that carry hidden record-key columns
(the user's own expressions and expression ids are kept, so the annotated plan computes
exactly the user's records), the keys pass through every node up to the output, and one
Spark job reads them back.  Keys become canonical row indices and then tensors.

Canonical record numbering (identical whatever the partitioning)
----------------------------------------------------------------
- sources: scan order (``monotonically_increasing_id`` ranks); sources whose order is not
  stable (a shuffle or a non-deterministic expression in their plan) are pinned once;
- row-preserving operations: the input's order (identity tensor);
- filter, sample, limit: surviving input rows in their order (mask);
- joins: by (left row, right row), -1 for the missing side of outer joins;
- unions: left block, then right block;
- distinct, dropDuplicates, groupBy/rollup/cube: one row per group, ordered by its
  smallest member (then grouping set); the tensor keeps every member;
- orderBy/sort: sorted order, ties broken by input row;
- explode/posexplode: by (input row, position).

What cannot be traced exactly becomes an opaque operation with a warning.
"""

from __future__ import annotations

__all__: list[str] = []
