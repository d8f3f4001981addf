"""Lineage that leaves the kernel: OpenLineage run events and W3C PROV documents.

``Run.to_openlineage`` / ``Run.emit_openlineage`` / ``Run.to_prov`` call these; the
``openlineage-python`` and ``prov`` packages are imported when first used.
"""

from tensprov_lab.export._openlineage import (
    FACET_SCHEMA_URL,
    emit_openlineage,
    events,
    to_openlineage,
)
from tensprov_lab.export._prov import to_prov

__all__ = ["FACET_SCHEMA_URL", "emit_openlineage", "events", "to_openlineage", "to_prov"]
