"""What a Spark Connect capture keeps of a block's DataFrames: a node per dataset
(:class:`CNode`) and an operation waiting for the block's end (:class:`CPending`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tensprov_lab.capture.connect._index import Index

__all__ = ["CNode", "CPending"]


@dataclass
class CNode:
    """A DataFrame of a tracked block (a source or an operation's output)."""

    df: Any
    ident: int
    run: int | None
    name: str | None = None
    ds_id: int | None = None
    index: Index | None = None
    cached: Any = None
    #: the relation keyed as a source (a pinned copy when its order is not stable)
    source: Any = None
    #: that keyed source, persisted on the server by the first replay that reads it
    #: (tensprov_lab.replay._connect): later replays read the batches of their keys
    kept: Any = None
    #: a small dataset's records read whole once for replays, and their rows
    records: Any = None
    #: the key columns and Arrow types of its replays' records (asked once)
    arrow_schema: Any = None
    #: a source read from its files by the client: the files and their stamps at capture
    #: (:func:`._direct.read_direct`); replays on the client read records from them
    files: Any = None
    #: the front-end call (the pandas API on Spark's) that made it: ``(id, name)``
    call: tuple[int, str] | None = None


@dataclass
class CPending:
    method: str
    inputs: list[CNode]
    out: CNode
    expression: str
    run: int
    #: a SQL statement: the tracked views by name when it was made (._sql)
    views: dict[str, CNode] | None = None
