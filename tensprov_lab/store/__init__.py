"""In-memory provenance store: the dataset/operation graph and its provenance tensors."""

from tensprov_lab.store._graph import Dataset, Operation, Store, StoreError
from tensprov_lab.store._tensors import (
    BlockTensor,
    CSRTensor,
    IdentityTensor,
    IndexTensor,
    MaskTensor,
    PackedInts,
    Tensor,
    make_tensor,
)

__all__ = [
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
]
