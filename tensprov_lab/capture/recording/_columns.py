"""An operation's column lineage (attribute maps, DESIGN.md §5) as the tracker records it:
aligned with the call's inputs, or empty with one note saying why.

Column lineage is extra: a failure to read it never loses the operation.  An operation
that is opaque already says so in its one warning (``said``), not in a second one.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tensprov_lab.capture.plan._nodes import Pending, _short_error
from tensprov_lab.capture.rewrite._attributes import attribute_maps

__all__ = ["column_maps"]


def column_maps(
    tracker: Any,
    p: Pending,
    positions: list[int],
    n_out: int,
    in_cols: list[list[str]],
    said: list[str] | None = None,
) -> dict[str, Any]:
    """Attribute maps of the operation ``p`` aligned with its inputs (``positions``: the
    input of the call behind each operation input); empty when the plan cannot be read,
    with the reason noted by ``tracker`` (or, given ``said``, appended to it)."""

    def fail(why: str) -> dict[str, Any]:
        if said is not None:
            said.append(why)
        elif f"column lineage: {why}" not in tracker._said:  # said once per block
            tracker._said.add(f"column lineage: {why}")
            tracker._note(f"{p.expression}: column lineage not captured ({why})")
        return {}

    try:
        m = attribute_maps(tracker.jvm, p.out.plan, [n.plan for n in p.inputs], tracker._ids)
    except Exception as exc:  # noqa: BLE001 - column lineage is extra
        return fail(_short_error(exc))
    contributing, influencing = [], []
    for k, i in enumerate(positions):
        if m.occurrences == positions:
            c, f = m.contributing[k], m.influencing[k]
        else:  # occurrences counted differently: OR over every occurrence of input i
            if i not in m.occurrences:
                # an all-False map would claim "nothing flows": say "unknown" instead
                return fail("input not found")
            c = np.zeros((n_out, len(in_cols[k])), dtype=bool)
            f = c.copy()
            for pos, j in enumerate(m.occurrences):
                if j == i and m.contributing[pos].shape == c.shape:
                    c |= m.contributing[pos]
                    f |= m.influencing[pos]
        if c.shape != (n_out, len(in_cols[k])):
            return fail("schema mismatch")
        contributing.append(c)
        influencing.append(f)
    return {
        "contributing": contributing,
        "influencing": influencing,
        "attributes_exact": m.exact,
        "decomposition": m.decomposition if len(positions) == 1 else None,
    }
