"""Zephon for PyTorch: elastically deterministic global batches on real ``torch.distributed`` ranks.

``ZephonLoader`` turns a Zephon pipeline into this data-parallel rank's share of every global
batch, as tensors that share memory with the pipeline's numpy arrays; it is a
``torch.distributed.checkpoint`` ``Stateful`` whose state resumes on any data-parallel size that
divides the pipeline's lanes. ``to_torch_dataset`` adapts a pipeline to ``DataLoader`` /
torchdata's ``StatefulDataLoader`` for code built around them.
"""

from __future__ import annotations

from zephon_torch.checkpoint import gather_checkpoint, load_checkpoint, save_checkpoint
from zephon_torch.dataset import (
    ZephonIterableDataset,
    gather_dataset_state,
    merge_dataloader_states,
    to_torch_dataset,
)
from zephon_torch.errors import RankFailureError
from zephon_torch.hashing import gather_global_batch_hash
from zephon_torch.loader import GlobalStep, ZephonLoader
from zephon_torch.tensors import Field, to_tensors
from zephon_torch.topology import DataParallelInfo, resolve_data_parallel

__version__ = "0.1.0"

__all__ = [
    "DataParallelInfo",
    "Field",
    "GlobalStep",
    "RankFailureError",
    "ZephonIterableDataset",
    "ZephonLoader",
    "gather_checkpoint",
    "gather_dataset_state",
    "gather_global_batch_hash",
    "load_checkpoint",
    "merge_dataloader_states",
    "resolve_data_parallel",
    "save_checkpoint",
    "to_tensors",
    "to_torch_dataset",
]
