"""Zephon for the Hugging Face ``Trainer`` and ``accelerate``: each process its own lanes, elastic resume.

``ZephonTrainer`` is ``transformers.Trainer`` over ``zephon_torch.to_torch_dataset(...)``: the data
loader is not dispatched or re-sharded by accelerate, and the data position of every lane is saved
in the Trainer's own ``checkpoint-<step>`` folders, so ``resume_from_checkpoint`` continues with the
same global batches on any number of processes that divides the lanes. ``AccelerateDataState``
does the same for loops written directly with ``accelerate`` (``register_for_checkpointing``).
"""

from __future__ import annotations

from zephon_transformers.trainer import (
    DATA_STATE_FILE,
    AccelerateDataState,
    KeepColumns,
    ZephonTrainer,
    data_state_path,
)

__version__ = "0.1.0"

__all__ = ["DATA_STATE_FILE", "AccelerateDataState", "KeepColumns", "ZephonTrainer", "data_state_path"]
