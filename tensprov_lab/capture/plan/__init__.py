"""Facts about plans and records: the nodes capture keeps per DataFrame (``_nodes``),
record keys and their columns (``_keys``, ``_keyed``), reading keys back into tensors
(``_records``), expressions and joins matched in numpy (``_exprs``, ``_equijoin``), and
Spark Connect plans as the client holds them (``_proto``) with the record keys carried
through them (``_connect``). May import ``spark`` and the store.
"""

from __future__ import annotations

__all__: list[str] = []
