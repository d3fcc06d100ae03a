"""Zephon for Lightning: a ``LightningDataModule`` whose data position rides in Lightning's checkpoints.

``ZephonDataModule(build_pipeline, global_microbatches_per_step)`` gives each process its own lanes
and saves every lane's position in the checkpoint (gathered from all processes), so
``trainer.fit(..., ckpt_path=...)`` continues with the same global batches on another device count.
"""

from __future__ import annotations

from zephon_lightning.datamodule import ZephonDataModule

__version__ = "0.1.0"

__all__ = ["ZephonDataModule"]
