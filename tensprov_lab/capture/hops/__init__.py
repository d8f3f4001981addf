"""Operations that are not DataFrame methods: pandas and RDD round trips matched back by
value (``_pandas``), Spark ML stages (``_ml``) and ``spark.sql`` (``_sql``). May import
``sources``, ``memory``, ``rewrite``, ``rules``, ``plan``, ``spark`` and the store.
"""

from __future__ import annotations

__all__: list[str] = []
