"""Warnings that point at the user's code, never at ours.

Every warning tensprov-lab raises goes through :func:`warn`: it is attributed to the
first frame outside tensprov-lab (and outside pyspark, whose methods capture wraps),
the way pandas finds its stack level, so that the line shown under the message is the
user's own (the ``with track(...)`` block, the DataFrame call, the query).

This module imports nothing from the package: every layer may use it.

>>> import warnings
>>> with warnings.catch_warnings(record=True) as seen:
...     warnings.simplefilter("always")
...     warn("something worth knowing")
>>> seen[0].category.__name__, str(seen[0].message)
('TensProvWarning', 'something worth knowing')
"""

from __future__ import annotations

import os
import sys
import warnings

__all__ = ["TensProvWarning", "user_stacklevel", "warn"]


class TensProvWarning(UserWarning):
    """Capture could not trace something exactly, or found something worth knowing."""


_OURS = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _library_dirs() -> tuple[str, ...]:
    dirs = [_OURS]
    # pyspark's own frames sit between the user's call and a wrapped method
    spark = sys.modules.get("pyspark")
    path = getattr(spark, "__file__", None)
    if path:
        dirs.append(os.path.dirname(os.path.abspath(path)) + os.sep)
    return tuple(dirs)


def user_stacklevel() -> int:
    """The ``stacklevel`` that makes a warning raised by the caller of this function
    point at the user's code: the first frame outside tensprov-lab and pyspark.

    A stack that is ours all the way up (a thread of our own) gives the outermost frame.
    """
    skip = _library_dirs()
    frame = sys._getframe(1)  # the caller, who will call warnings.warn
    level = 1
    while frame.f_back is not None and frame.f_code.co_filename.startswith(skip):
        frame = frame.f_back
        level += 1
    return level


def warn(message: str, category: type[Warning] = TensProvWarning) -> None:
    """Issue ``message`` as a warning at the user's line (see :func:`user_stacklevel`).

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as seen:
    ...     warnings.simplefilter("always")
    ...     warn("tensprov-lab: a note", RuntimeWarning)
    >>> seen[0].category is RuntimeWarning
    True
    """
    # (counted from this function's frame, which is ours: it is skipped like the rest)
    warnings.warn(message, category, stacklevel=user_stacklevel())
