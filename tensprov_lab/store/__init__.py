"""In-memory provenance store: the dataset/operation graph and its provenance tensors."""

from tensprov_lab.store._columns_tensor import ColumnsTensor
from tensprov_lab.store._csr_tensor import CSRTensor
from tensprov_lab.store._graph import Dataset, Operation, Store, StoreError
from tensprov_lab.store._index_tensor import IndexTensor
from tensprov_lab.store._make import (
    make_tensor,
    tensor_from_flags,
    tensor_from_groups,
    tensor_from_pairs,
)
from tensprov_lab.store._tensors import (
    AllTensor,
    BlockTensor,
    CrossTensor,
    IdentityTensor,
    MaskTensor,
    PackedInts,
    Tensor,
)
from tensprov_lab.store._window_tensor import FrameTensor, WindowTensor

__all__ = [
    "AllTensor",
    "BlockTensor",
    "CSRTensor",
    "ColumnsTensor",
    "CrossTensor",
    "Dataset",
    "FrameTensor",
    "IdentityTensor",
    "IndexTensor",
    "MaskTensor",
    "Operation",
    "PackedInts",
    "Store",
    "StoreError",
    "Tensor",
    "WindowTensor",
    "make_tensor",
    "tensor_from_flags",
    "tensor_from_groups",
    "tensor_from_pairs",
]
