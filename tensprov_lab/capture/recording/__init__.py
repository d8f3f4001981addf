"""The tracking context of a classic session: the wrapped methods and what a call records
(``_recording``, ``_patching``, ``_record_rules``), the capture at the block's end
(``_tracker``) and capture in the background (``_background``). May import every room
below it (not ``connect``).
"""

from __future__ import annotations

__all__: list[str] = []
