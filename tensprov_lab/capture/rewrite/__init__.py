"""The plan rewriter: an analyzed plan annotated with record keys by the rule of each node
(``_annotate``) and the attribute maps read from it (``_attributes``). May import
``rules``, ``plan``, ``spark`` and the store.
"""

from __future__ import annotations

__all__: list[str] = []
