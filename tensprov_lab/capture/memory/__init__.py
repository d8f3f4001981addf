"""Memory tiers of capture: the budget and its accounting (``_budget``) and tensors kept as
Spark-resident tables (``_resident``). May import ``plan``, ``spark`` and the store.
"""

from __future__ import annotations

__all__: list[str] = []
