"""Wrapping pyspark's methods while a block is tracked, and restoring them after: one
place for the classic tracker (:mod:`._recording`) and the Spark Connect one
(:mod:`.connect._tracker`).

A wrapped method runs the original unchanged; the outermost wrapped call of a thread
(a method's own calls to other wrapped methods are its business) is then handed to
``tracker._record``.  Recording never breaks the user's code: its errors become notes.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.abc
import importlib.machinery
import itertools
import sys
from collections.abc import Callable
from typing import Any

from tensprov_lab.capture.plan._nodes import _short_error

__all__ = [
    "AfterImport", "CallTargets", "Depth", "patch_calls", "patch_methods", "patch_pandas_api",
    "restore", "stamp_call", "wrap", "wrap_call",
]  # fmt: skip

#: (class, method names, transparent(name, obj) or None: calls recorded by their inner calls)
Targets = list[tuple[Any, list[str], Callable[[str, Any], bool] | None]]


class Depth:
    """How deep in wrapped calls the current thread is (capture's own threads build
    DataFrames while the user's thread records)."""

    _local: Any
    #: ids of front-end calls (one process-wide sequence: unique across trackers)
    _call_ids = itertools.count()

    @property
    def _depth(self) -> int:
        return getattr(self._local, "depth", 0)

    @_depth.setter
    def _depth(self, value: int) -> None:
        self._local.depth = value

    @property
    def _call(self) -> tuple[int, str] | None:
        """The front-end call the current thread is in: ``(call id, name)``."""
        return getattr(self._local, "call", None)

    @_call.setter
    def _call(self, value: tuple[int, str] | None) -> None:
        self._local.call = value


def wrap(
    tracker: Any,
    name: str,
    orig: Callable[..., Any],
    transparent: Callable[[str, Any], bool] | None = None,
) -> Callable[..., Any]:
    """``orig`` wrapped to record its calls made while ``tracker`` has a block."""

    @functools.wraps(orig)
    def wrapper(obj: Any, *args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True  # noqa: F841 - errors show as without tracking
        if (
            tracker._depth
            or tracker._active is None
            or (transparent is not None and transparent(name, obj))
        ):
            return orig(obj, *args, **kwargs)
        tracker._depth += 1
        try:
            out = orig(obj, *args, **kwargs)
        finally:
            tracker._depth -= 1
        try:
            tracker._record(name, obj, args, kwargs, out)
        except Exception as exc:  # recording must never break the user's code
            tracker._note(f"could not record {name}(): {_short_error(exc)}")
        return out

    return wrapper


def wrap_call(
    tracker: Any,
    orig: Callable[..., Any],
    label: Callable[[tuple], str],
    settle: Callable[[Any], None] | None = None,
) -> Callable[..., Any]:
    """``orig``, a call of a front end over DataFrames (the pandas API on Spark), wrapped
    so that the DataFrame operations it makes while ``tracker`` has a block are
    recorded as made by it: named ``label(args)``, one id a call (the outermost call of
    a thread; the calls it makes itself are its business); ``settle(result)`` runs
    inside the call, its failures ignored."""

    @functools.wraps(orig)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True  # noqa: F841 - errors show as without tracking
        if tracker._active is None or tracker._depth or tracker._call is not None:
            return orig(*args, **kwargs)
        try:
            name = label(args)
        except Exception:  # noqa: BLE001 - naming must never break the user's call
            name = getattr(orig, "__name__", "call")
        tracker._call = (next(tracker._call_ids), name)
        try:
            out = orig(*args, **kwargs)
            if settle is not None:
                with contextlib.suppress(Exception):  # (only the user's call may raise)
                    settle(out)
            return out
        finally:
            tracker._call = None

    return wrapper


#: (owner: a class or module, attribute name, label of a call from its arguments)
CallTargets = list[tuple[Any, str, Callable[[tuple], str]]]


def patch_calls(
    tracker: Any,
    targets: CallTargets,
    patched: list[tuple[type, str, Any]],
    settle: Callable[[Any], None] | None = None,
) -> None:
    """Wrap the front-end calls ``targets`` name (:func:`wrap_call`, with ``settle``),
    noting in ``patched`` what each owner had."""
    for owner, name, label in targets:
        orig = getattr(owner, name, None)
        if orig is None or not callable(orig):
            continue
        patched.append((owner, name, owner.__dict__.get(name)))
        setattr(owner, name, wrap_call(tracker, orig, label, settle))


def patch_pandas_api(
    tracker: Any,
    dataframe: type,
    patched: list[tuple[type, str, Any]],
    also: Callable[[], Targets] = list,
) -> AfterImport | None:
    """Wrap the pandas API on Spark's calls for ``tracker`` (:func:`wrap_call`):
    ``dataframe.pandas_api`` and, once the pandas API is imported, the rest (with the
    methods ``also`` names then); the import hook installed when the block may import
    it itself, or None."""
    from tensprov_lab.capture.hops import _pandas_api

    patch_calls(tracker, _pandas_api.calls(dataframe), patched, _pandas_api.settle)
    if _pandas_api.PACKAGE in sys.modules:
        return None

    def then() -> None:
        try:
            patch_methods(tracker, also(), patched)
            patch_calls(tracker, _pandas_api.calls(), patched, _pandas_api.settle)
        except Exception as exc:  # an import in the user's code must not fail for us
            tracker._note(f"the pandas API on Spark is not traced: {_short_error(exc)}")

    hook = AfterImport(_pandas_api.PACKAGE, then)
    hook.install()
    return hook


def stamp_call(op: Any, call: tuple[int, str] | None) -> None:
    """Note on store operation ``op`` the front-end call (``(id, name)``) that made it."""
    if call is not None:
        op.call_id, op.call = call


def patch_methods(tracker: Any, targets: Targets, patched: list[tuple[type, str, Any]]) -> None:
    """Wrap the methods ``targets`` name, noting in ``patched`` what each class had."""
    for cls, names, transparent in targets:
        for name in names:
            orig = getattr(cls, name, None)
            if orig is None or not callable(orig):
                continue
            patched.append((cls, name, cls.__dict__.get(name)))
            setattr(cls, name, wrap(tracker, name, orig, transparent))


def restore(patched: list[tuple[type, str, Any]]) -> None:
    """Put back what ``patched`` notes, last patched first."""
    while patched:
        cls, name, had = patched.pop()
        if had is None:
            delattr(cls, name)
        else:
            setattr(cls, name, had)


class AfterImport(importlib.abc.MetaPathFinder):
    """Call ``then()`` once module ``name`` has been imported for the first time, while
    this finder is installed (:meth:`install` / :meth:`remove`).

    A class to wrap can live in a module a block imports itself (``pandas_api()``
    imports the pandas API on Spark on first use), too late for :func:`patch_methods`
    at the block's start; importing it beforehand would cost every block that never
    uses it.

    Examples
    --------
    >>> seen = []
    >>> hook = AfterImport("colorsys", lambda: seen.append(1))
    >>> _ = sys.modules.pop("colorsys", None)
    >>> hook.install()
    >>> import colorsys
    >>> hook.remove()
    >>> seen
    [1]
    """

    def __init__(self, name: str, then: Callable[[], None]) -> None:
        self.name = name
        self.then = then

    def install(self) -> None:
        if self not in sys.meta_path:
            sys.meta_path.insert(0, self)

    def remove(self) -> None:
        while self in sys.meta_path:
            sys.meta_path.remove(self)

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != self.name:
            return None
        spec = None
        for finder in sys.meta_path:
            if finder is not self and hasattr(finder, "find_spec"):
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _ThenLoader(spec.loader, self)
        return spec


class _ThenLoader(importlib.abc.Loader):
    """A module's own loader, then the hook's ``then`` (once, the module complete)."""

    def __init__(self, loader: Any, hook: AfterImport) -> None:
        self.loader = loader
        self.hook = hook

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> Any:
        return self.loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        module.__spec__.loader = self.loader  # the module as if imported plainly
        module.__loader__ = self.loader
        self.loader.exec_module(module)
        self.hook.remove()
        self.hook.then()

    def __getattr__(self, name: str) -> Any:  # get_source, get_code, ... of the real one
        if name == "loader":
            raise AttributeError(name)
        return getattr(self.loader, name)
