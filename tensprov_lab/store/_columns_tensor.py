"""A tensor whose output columns come from different input records: a pivot.

``groupBy(g).pivot(p, [v1, v2]).agg(sum(x))`` makes one output record per group ``g``
(from every record of the group: the record-level tensor) and one column per pivot
value, whose cell comes from the group's records with that pivot value only.
:class:`ColumnsTensor` is the record-level tensor plus one tensor per such column family,
so cell lineage stays exact while record lineage is the whole group.

Pure numpy.
"""

from __future__ import annotations

import numpy as np

from tensprov_lab.store._tensors import Tensor

__all__ = ["ColumnsTensor"]


class ColumnsTensor(Tensor):
    """Record lineage from ``whole``; output column ``c`` listed in ``columns`` takes its
    values from ``parts[columns[c]]`` (every other column from ``whole``).

    Examples
    --------
    Two groups of a pivot over records 0..3 (group 0: records 0, 1; group 1: 2, 3); the
    column of pivot value "x" (column 1) comes from records 0 and 2 only:

    >>> from tensprov_lab.store import tensor_from_pairs
    >>> whole = tensor_from_pairs([0, 0, 1, 1], [0, 1, 2, 3], n_out=2, n_in=4)
    >>> x = tensor_from_pairs([0, 1], [0, 2], n_out=2, n_in=4)
    >>> t = ColumnsTensor(whole, [x], {1: 0})
    >>> t.backward([1]), t.for_column(1).backward([1]), t.for_column(0).backward([1])
    (array([2, 3]), array([2]), array([2, 3]))
    """

    kind = "columns"

    def __init__(self, whole: Tensor, parts: list[Tensor], columns: dict[int, int]) -> None:
        super().__init__(whole.n_out, whole.n_in)
        if any(p.shape != whole.shape for p in parts):
            raise ValueError(f"every part must be {whole.n_out} x {whole.n_in}")
        if any(not 0 <= i < len(parts) for i in columns.values()):
            raise ValueError("a column names a part that does not exist")
        self.whole = whole
        self.parts = list(parts)
        self.columns = {int(c): int(i) for c, i in columns.items()}

    def for_column(self, column: int) -> Tensor:
        i = self.columns.get(int(column))
        return self.whole if i is None else self.parts[i]

    def in_memory(self) -> Tensor:
        whole, parts = self.whole.in_memory(), [p.in_memory() for p in self.parts]
        if whole is self.whole and all(a is b for a, b in zip(parts, self.parts)):
            return self
        return ColumnsTensor(whole, parts, self.columns)

    @property
    def nnz(self) -> int:
        return self.whole.nnz

    @property
    def nbytes(self) -> int:
        return self.whole.nbytes + sum(p.nbytes for p in self.parts)

    def components(self) -> list[Tensor]:
        return [self.whole, *self.parts]

    def _backward(self, u: np.ndarray) -> np.ndarray:
        return self.whole._backward(u)

    def _forward(self, u: np.ndarray) -> np.ndarray:
        return self.whole._forward(u)

    def _pairs(self, u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.whole._pairs(u)
