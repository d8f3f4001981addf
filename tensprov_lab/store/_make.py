"""Building the cheapest exact tensor for what capture read: ``make_tensor`` (one input
row per output row, or none) and ``tensor_from_pairs`` (many-to-many)."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from tensprov_lab.store._codes import _as_rows, _increasing
from tensprov_lab.store._csr_tensor import CSRTensor
from tensprov_lab.store._index_tensor import IndexTensor
from tensprov_lab.store._tensors import (
    AllTensor,
    BlockTensor,
    IdentityTensor,
    MaskTensor,
    Tensor,
    _check_size,
)

__all__ = ["make_tensor", "tensor_from_flags", "tensor_from_groups", "tensor_from_pairs"]


# ---------------------------------------------------------------------------------------------
# factory


def make_tensor(idx: ArrayLike, n_in: int) -> Tensor:
    """The cheapest exact tensor for a functional map ``idx`` (``-1`` = no input row).

    Tried in order: :class:`IdentityTensor` (``idx == arange(n_in)``), :class:`BlockTensor`
    (one contiguous run ``0..n_in-1`` with ``-1`` elsewhere), :class:`MaskTensor` (strictly
    increasing, no ``-1``), else :class:`IndexTensor` in its smallest form (bit-packed
    values, or for a non-decreasing ``idx`` "sorted" group offsets or an "ef" Elias-Fano
    code).

    Parameters
    ----------
    idx : sequence of int
        One entry per output row: ``-1`` or an input row in ``0..n_in-1``.
    n_in : int
        Number of input rows.

    Raises
    ------
    ValueError
        If a value is out of range.

    Examples
    --------
    >>> make_tensor([0, 1, 2], 3).kind
    'identity'
    >>> make_tensor([-1, -1, 0, 1], 2).kind
    'block'
    >>> make_tensor([0, 2], 3).kind
    'mask'
    >>> make_tensor([2, 0, -1], 3).kind
    'index'
    """
    n_in = _check_size(n_in, "n_in")
    a = _as_rows(idx, "idx")
    n_out = len(a)
    if n_out and (int(a.min()) < -1 or int(a.max()) >= n_in):
        raise ValueError(f"idx values must be -1 or lie in 0..{n_in - 1}")
    is_valid = a >= 0
    # a count, not the positions: at 16M join rows those are 128 MB of fresh memory
    n_valid = int(np.count_nonzero(is_valid))
    if n_valid == n_in:
        # every input row appears: identity or block if they appear as one contiguous run,
        # i.e. n_in strictly increasing rows from 0 to n_in - 1 (no arange to compare with)
        offset = int(np.argmax(is_valid)) if n_valid else 0
        seg = a[offset : offset + n_in]
        run = n_valid == 0 or (
            len(seg) == n_in
            and int(seg[0]) == 0
            and int(seg[-1]) == n_in - 1
            and bool(np.all(seg[1:] > seg[:-1]))
        )
        if run:
            if n_out == n_in:
                return IdentityTensor(n_in)
            return BlockTensor(n_out, n_in, offset)
    if n_valid == n_out and _increasing(a):
        return MaskTensor.from_kept(a, n_in)
    return IndexTensor.from_index(a, n_in)


def tensor_from_flags(flags: ArrayLike) -> Tensor:
    """The cheapest exact tensor of a row subset given by one flag per input row (true:
    kept), e.g. a filter's condition: :class:`IdentityTensor` when every row is kept,
    else :meth:`MaskTensor.from_flags` (the same tensor as :func:`make_tensor` of the
    kept rows, with no kept rows in between).

    Examples
    --------
    >>> tensor_from_flags([True, True]).kind
    'identity'
    >>> tensor_from_flags([True, False, True]).backward([1]).tolist()
    [2]
    """
    f = np.asarray(flags)
    if f.ndim == 1 and f.dtype == bool and bool(f.all()):
        return IdentityTensor(len(f))
    return MaskTensor.from_flags(f)


def tensor_from_groups(group: ArrayLike, n_out: int) -> Tensor:
    """The cheapest exact tensor of a grouping in which input row ``i`` is in output row
    ``group[i]`` (every input row in one): :class:`AllTensor` for one group of every
    row, else :meth:`CSRTensor.from_groups`.

    Examples
    --------
    >>> tensor_from_groups([0, 0, 0], n_out=1).kind
    'all'
    >>> tensor_from_groups([1, 0, 1], n_out=2).backward([1]).tolist()
    [0, 2]
    """
    t = CSRTensor.from_groups(group, n_out)
    if t.n_out == 1 and t.n_in:
        return AllTensor(1, t.n_in)
    return t


def tensor_from_pairs(out_rows: ArrayLike, in_rows: ArrayLike, n_out: int, n_in: int) -> Tensor:
    """The cheapest exact tensor for many-to-many ``(out_rows, in_rows)`` pairs.

    :class:`AllTensor` when every output row derives from every input row (no arrays),
    else :class:`CSRTensor` (see :meth:`CSRTensor.from_pairs` for the arguments).

    Examples
    --------
    >>> tensor_from_pairs([0, 0, 0], [2, 0, 1], n_out=1, n_in=3).kind
    'all'
    >>> tensor_from_pairs([0, 1], [0, 0], n_out=2, n_in=3).kind
    'csr'
    """
    t = CSRTensor.from_pairs(out_rows, in_rows, n_out, n_in)
    if t.n_out and t.n_in and t.nnz == t.n_out * t.n_in:
        return AllTensor(t.n_out, t.n_in)
    return t
