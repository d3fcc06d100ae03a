"""Zephon for torchtitan: a dataloader the trainer builds from its config, elastic through its DCP checkpoints.

``ZephonDataLoader.Config(pipeline="my_pkg.data:build")`` goes where torchtitan's config takes a
dataloader; the trainer builds it with its dp rank and degree, ``local_batch_size`` and
``seq_len``, and its ``CheckpointManager`` saves it with the rest of the training state. Unlike
torchtitan's own dataloaders, the checkpoint resumes on another data-parallel degree.
"""

from __future__ import annotations

from zephon_torchtitan.dataloader import ZephonDataLoader, data_parallel_group, resolve_factory

__version__ = "0.1.0"

__all__ = ["ZephonDataLoader", "data_parallel_group", "resolve_factory"]
