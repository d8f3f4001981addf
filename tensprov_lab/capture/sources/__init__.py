"""Sources: reading a source's records or keys from its files without Spark (``_direct*``)
and the fused reads that take every source of a block in one job (``_fused``). May
import ``rewrite``, ``rules``, ``plan``, ``spark`` and the store.
"""

from __future__ import annotations

__all__: list[str] = []
