"""Notebook front end of tensprov-lab: the ``%%provtrack`` and ``%provtrace`` magics.

Load it in IPython or Jupyter with::

    %load_ext tensprov_lab

then track a cell and ask where a record came from::

    %%provtrack --name retail
    big = orders.filter("amount > 50")
    out = big.groupBy("region").count()

    %provtrace out 0

IPython is imported only when something from this package is used, so that
``import tensprov_lab.notebook`` stays as cheap as ``import tensprov_lab``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tensprov_lab.notebook._magics import ProvenanceMagics, load_ipython_extension

__all__ = ["ProvenanceMagics", "load_ipython_extension"]


def __getattr__(name: str) -> Any:
    # lazy: importing the magics module imports IPython
    if name in __all__:
        from tensprov_lab.notebook import _magics

        return getattr(_magics, name)
    raise AttributeError(f"module 'tensprov_lab.notebook' has no attribute {name!r}")
