"""What queries derive from a store's graph alone, kept while the graph stays the same.

A lineage query walks the same part of the graph, and reads the same attribute maps,
whichever rows it starts from.  Working them out anew took most of a query's time on
a long pipeline (Census: 119 operations, about a millisecond of a record query and
four of a cell query), so they are kept per store and dropped as soon as the graph
changes (:attr:`~tensprov_lab.store.Store.generation`).

Pure Python: no pyspark, no IPython.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from tensprov_lab.store._graph import Store

__all__ = ["memo"]

T = TypeVar("T")

#: per store: the generation the entries were made at, and the entries
_MEMOS: weakref.WeakKeyDictionary[Store, tuple[int, dict[Hashable, Any]]] = (
    weakref.WeakKeyDictionary()
)
#: entries kept per store before they are all dropped (a bound, not a cache policy:
#: a notebook asks far fewer distinct questions)
LIMIT = 4096


def memo(store: Store, key: Hashable, make: Callable[[], T]) -> T:
    """``make()``, kept under ``key`` for ``store`` while its graph does not change.

    Examples
    --------
    >>> from tensprov_lab.store import Store
    >>> s = Store()
    >>> memo(s, "n", lambda: len(s.datasets))
    0
    >>> _ = s.add_dataset("a", n_rows=1, role="source")
    >>> memo(s, "n", lambda: len(s.datasets))  # the graph changed: made again
    1
    """
    generation, entries = _MEMOS.get(store, (-1, {}))
    if generation != store.generation:
        entries = {}
        _MEMOS[store] = (store.generation, entries)
    try:
        found: T = entries[key]
    except KeyError:
        if len(entries) >= LIMIT:
            entries.clear()
        found = entries[key] = make()
    return found
