"""``ZephonDataModule``: a ``LightningDataModule`` whose data position rides in Lightning's checkpoints.

Lightning calls ``datamodule.state_dict()`` on every process when it saves a checkpoint and stores
the result of process 0. Each process's dataset covers only its own lanes, so ``state_dict`` gathers
every lane (a collective) and returns the merged, global state. ``load_state_dict`` keeps it until
the train loader is built, where each process takes the lanes it owns now, on any device count
that divides the lanes.

Lightning's fetcher reads one batch ahead of the training step (to know which batch is the last).
The state to save is the one after the batches *trained on*, not after the ones read. So the
module records the dataset's state after each microbatch it hands out and advances its saved
position only when Lightning hands a batch to the step (``on_before_batch_transfer``), and only
at optimizer-step boundaries: a checkpoint taken while gradients accumulate holds the model of
the last step, so it must hold the data position of that step too.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import lightning.pytorch as pl
from torch.utils.data import DataLoader, IterableDataset
from zephon_torch import ZephonIterableDataset, gather_dataset_state, to_torch_dataset

from zephon_core import ConfigError, Pipeline

_FORMAT = "zephon-lightning/1"


class _Tracked(IterableDataset):  # type: ignore[type-arg]
    """The dataset, recording its state after each microbatch until the step takes that microbatch."""

    def __init__(self, dataset: ZephonIterableDataset) -> None:
        super().__init__()
        self.dataset = dataset
        self.pending: collections.deque[dict[str, Any]] = collections.deque()

    def __iter__(self) -> Iterator[Any]:
        for mb in self.dataset:
            self.pending.append(self.dataset.state_dict())
            yield mb


class ZephonDataModule(pl.LightningDataModule):
    """Train batches from a Zephon pipeline: this process's lanes, elastic resume from Lightning checkpoints.

    Args:
        build_pipeline: a function building the pipeline (called once per process, after
            Lightning has started the process group).
        global_microbatches_per_step: microbatches in one global batch (``accumulate_grad_batches
            x devices x nodes``); checked against the trainer's settings so every optimizer step is
            whole rounds over the lanes, and stored so a resume on another device count is refused
            unless it keeps the same global batch.
    """

    def __init__(self, build_pipeline: Callable[[], Pipeline], global_microbatches_per_step: int) -> None:
        super().__init__()
        if not callable(build_pipeline) or isinstance(build_pipeline, Pipeline):
            raise ConfigError("ZephonDataModule needs a function that builds the pipeline (so each process builds its own)")
        self.build_pipeline = build_pipeline
        self.global_microbatches_per_step = int(global_microbatches_per_step)
        self.dataset: ZephonIterableDataset | None = None
        self._tracked: _Tracked | None = None
        self._consumed: dict[str, Any] | None = None  # dataset state at the last optimizer-step boundary
        self._pending_load: dict[str, Any] | None = None
        self._taken = 0  # microbatches handed to the step since the loader was built (a step boundary)

    def _check_trainer(self, dataset: ZephonIterableDataset) -> None:
        trainer = self.trainer
        if trainer is None:
            return
        per_process = int(trainer.accumulate_grad_batches)
        world = int(trainer.world_size)
        lanes = dataset.pipeline.run_options.lanes
        if per_process * world != self.global_microbatches_per_step:
            raise ConfigError(
                f"accumulate_grad_batches={per_process} on {world} process(es) is {per_process * world} microbatches per "
                f"optimizer step, but global_microbatches_per_step={self.global_microbatches_per_step}: use "
                f"accumulate_grad_batches={self.global_microbatches_per_step // world}"
                if self.global_microbatches_per_step % world == 0
                else f"global_microbatches_per_step={self.global_microbatches_per_step} cannot be split over {world} processes"
            )
        if self.global_microbatches_per_step % lanes:
            raise ConfigError(
                f"global_microbatches_per_step={self.global_microbatches_per_step} is not whole rounds over the "
                f"pipeline's {lanes} lanes: use a multiple of {lanes}"
            )

    def train_dataloader(self) -> DataLoader[Any]:
        """This process's lanes in a plain ``DataLoader`` (no sampler: the dataset is iterable)."""
        if self.dataset is None:
            self.dataset = to_torch_dataset(self.build_pipeline)
            self._check_trainer(self.dataset)
            if self._pending_load is not None:
                self.dataset.load_state_dict(self._pending_load["dataset"])
                self._pending_load = None
            self._tracked = _Tracked(self.dataset)
            self._consumed = self.dataset.state_dict()  # the start (or the resumed step) is a step boundary
        assert self._tracked is not None
        return DataLoader(self._tracked, batch_size=None, num_workers=0)

    def on_before_batch_transfer(self, batch: Any, dataloader_idx: int) -> Any:
        """The step takes this batch (Lightning calls this hook right before the training step)."""
        if self.trainer is not None and self.trainer.training:
            self.taken(int(self.trainer.accumulate_grad_batches))
        return batch

    def taken(self, accumulate: int) -> None:
        """Count one microbatch handed to the step; at each optimizer-step boundary its state is the one to save.

        Lightning may save while gradients are still being accumulated (``ModelCheckpoint``
        right after a resume, for example); the model then is that of the last optimizer step,
        so the data position saved is that of the last step boundary too, and the partly
        accumulated microbatches are trained on again after a resume.
        """
        if self._tracked is None or not self._tracked.pending:
            return
        state = self._tracked.pending.popleft()
        self._taken += 1
        if self._taken % accumulate == 0:
            self._consumed = state

    def state_dict(self) -> dict[str, Any]:
        """Every process's lanes after the batches trained on (a collective: Lightning calls it on every process)."""
        if self.dataset is None:
            return {}
        return {
            "format": _FORMAT,
            "global_microbatches_per_step": self.global_microbatches_per_step,
            "dataset": gather_dataset_state(self.dataset, state=self._consumed),
        }

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Keep the checkpoint's data position until the train loader is built (each process takes its lanes)."""
        if not state_dict:
            return
        saved = int(state_dict["global_microbatches_per_step"])
        if saved != self.global_microbatches_per_step:
            raise ConfigError(
                f"the checkpoint's global batch is {saved} microbatches per optimizer step, this run's is "
                f"{self.global_microbatches_per_step}: pass global_microbatches_per_step={saved} and set "
                "accumulate_grad_batches to it divided by the number of processes"
            )
        self._pending_load = dict(state_dict)

    def teardown(self, stage: str) -> None:
        """Stop the pipeline's threads and workers."""
        if self.dataset is not None:
            self.dataset.close()

