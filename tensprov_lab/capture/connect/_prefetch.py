"""Round trips a Connect capture will make, asked together when a block ends.

A capture asks the server for the schema of most datasets of the block (an analysis of
each plan: ~20-50 ms on loopback, a network round trip more to a remote server) and, for
sources it reads itself, for the session's file-layout settings.  Asked one after the
other they add up (0.2 s of a 1.1 s capture at 5M orders with the server reading the
sources); :class:`Prefetch` asks them at once, in a few threads, while the capture goes
on with what it has, and waits only for an answer it needs and does not have yet.

An answer is what the plain call gives: the same schema, or the same exception raised
where the capture asks for it.

Examples
--------
>>> class Frame:
...     def __init__(self, name):
...         self.name = name
...     @property
...     def schema(self):
...         return f"schema of {self.name}"
>>> a, b = Frame("a"), Frame("b")
>>> with Prefetch([a]) as ahead:
...     ahead.schema(a), ahead.schema(b)
('schema of a', 'schema of b')
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

__all__ = ["Prefetch"]

#: concurrent round trips: a block has a few datasets; the server analyses each plan on
#: its driver, so more threads would only queue there
_THREADS = 4


def _schema_of(df: Any) -> Any:
    return df.schema


class Prefetch:
    """Schemas of ``frames`` (DataFrames) and any ``calls`` asked at once; answers taken
    with :meth:`schema` and :meth:`result`, each waited for only when needed."""

    def __init__(
        self, frames: Iterable[Any] = (), calls: dict[str, Callable[[], Any]] | None = None
    ) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._schemas: dict[int, Future[Any]] = {}
        self._calls: dict[str, Future[Any]] = {}
        for df in frames:
            if id(df) not in self._schemas:
                self._schemas[id(df)] = self._submit(functools.partial(_schema_of, df))
        for name, call in (calls or {}).items():
            self.ask(name, call)

    def ask(self, name: str, call: Callable[[], Any]) -> None:
        """Ask ``call`` now, its answer taken with :meth:`result` under ``name``."""
        self._calls[name] = self._submit(call)

    def _submit(self, call: Callable[[], Any]) -> Future[Any]:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(_THREADS, thread_name_prefix="tensprov-prefetch")
        return self._pool.submit(call)

    def schema(self, df: Any) -> Any:
        """``df.schema``: the answer asked ahead when there is one (its exception, if it
        failed, raised here), else asked now."""
        ahead = self._schemas.get(id(df))
        return df.schema if ahead is None else ahead.result()

    def result(self, name: str, call: Callable[[], Any]) -> Any:
        """What ``call`` returns: the answer asked ahead under ``name`` (taken once),
        else asked now."""
        ahead = self._calls.pop(name, None)
        return call() if ahead is None else ahead.result()

    def settle(self) -> None:
        """Wait until every call asked ahead has ended (their answers kept)."""
        wait(list(self._calls.values()))

    def close(self) -> None:
        """Stop asking: round trips not started are dropped, those under way end on
        their own (the capture does not wait for answers it no longer needs)."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def __enter__(self) -> Prefetch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
