"""In-memory provenance store: the dataset/operation graph and its provenance tensors."""

from tensprov_lab.store._graph import Dataset, Operation, Store, StoreError
from tensprov_lab.store._tensors import (
    AllTensor,
    BlockTensor,
    CSRTensor,
    IdentityTensor,
    IndexTensor,
    MaskTensor,
    PackedInts,
    Tensor,
    make_tensor,
    tensor_from_pairs,
)

__all__ = [
    "AllTensor",
    "BlockTensor",
    "CSRTensor",
    "Dataset",
    "IdentityTensor",
    "IndexTensor",
    "MaskTensor",
    "Operation",
    "PackedInts",
    "Store",
    "StoreError",
    "Tensor",
    "make_tensor",
    "tensor_from_pairs",
]
