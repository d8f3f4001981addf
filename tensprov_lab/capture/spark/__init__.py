"""What capture asks of Spark itself: the py4j bridge (``_jvm``), the Java helpers Janino
compiles in the driver (``*.java``), Arrow batch sizes, job counting, and every
difference between the pyspark releases supported (``_versions``). Imports nothing else
of tensprov_lab but the store.
"""

from __future__ import annotations

__all__: list[str] = []
