"""Capture: watch PySpark DataFrame calls and turn them into provenance tensors."""

from __future__ import annotations

__all__: list[str] = []
