"""Provenance queries over the in-memory store."""

from tensprov_lab.query._lineage import LineageResult, backward, forward, mapping

__all__ = ["LineageResult", "backward", "forward", "mapping"]
