"""``ZephonTrainer``: the Hugging Face ``Trainer`` fed by a Zephon pipeline, resuming on any process count.

What the stock Trainer would do with an ``IterableDataset``, and why this class does not:

* ``Trainer.get_train_dataloader`` passes the ``DataLoader`` through ``accelerator.prepare``, which
  either **dispatches** batches (process 0 reads, everybody else receives slices:
  ``dispatch_batches``, the default for iterable datasets) or **re-shards** it
  (``IterableDatasetShard`` hands each process every N-th batch). A Zephon dataset already yields
  only this process's lanes, so both would change which data a process sees. Here the
  ``DataLoader`` is built over the dataset as it is and not prepared; the Trainer moves each batch
  to the device itself (``_prepare_inputs``).
* On ``resume_from_checkpoint`` the Trainer fast-forwards the loader by skipping batches
  (``skip_first_batches``), which re-reads data and only works on the same process count. Here
  ``ignore_data_skip`` is switched on and the data position is restored from the checkpoint
  instead: after every save (``on_save``, on every process) the lanes of all processes are
  gathered and written by process 0 into the Trainer's ``checkpoint-<step>`` folder, as
  ``zephon_data_state.json``. Because that state is global (every lane), it resumes on any
  number of processes that divides the lanes.

Gradient accumulation: the Trainer takes ``gradient_accumulation_steps`` microbatches per process
per optimizer step, so a global batch is ``gradient_accumulation_steps x processes``
microbatches. It must be whole rounds over the lanes (a multiple of ``lanes``), and to get the
same global batches after resuming on another process count, keep that product: on half the
processes, double ``gradient_accumulation_steps``. Both are checked, with the value to use.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from torch.utils.data import DataLoader
from transformers import Trainer, TrainerCallback, TrainerControl, TrainerState, TrainingArguments
from transformers.trainer_utils import get_last_checkpoint
from zephon_torch import ZephonIterableDataset, gather_dataset_state

from zephon_core import CheckpointError, ConfigError

DATA_STATE_FILE = "zephon_data_state.json"
"""The file in each ``checkpoint-<step>`` folder that holds the data position of every lane."""

_FORMAT = "zephon-transformers/1"


class KeepColumns:
    """The ``DataLoader``'s ``collate_fn``: keep only the fields the model's ``forward`` takes.

    With ``batch_size=None`` the function gets one microbatch (already collated by the pipeline);
    the Trainer's own column removal only applies to ``datasets.Dataset``. Strings (ids,
    captions) are dropped here unless the model takes them or ``remove_unused_columns=False``.
    """

    def __init__(self, keep: list[str] | None) -> None:
        self.keep = None if keep is None else frozenset(keep)

    def __call__(self, microbatch: Mapping[str, Any]) -> dict[str, Any]:
        if self.keep is None:
            return dict(microbatch)
        out = {k: v for k, v in microbatch.items() if k in self.keep}
        if not out:
            raise ConfigError(
                f"the model's forward takes none of the microbatch's fields {sorted(microbatch)}: rename them in the "
                "pipeline (e.g. input_ids, labels) or pass remove_unused_columns=False and a compute_loss that uses them"
            )
        return out


def data_state_path(checkpoint: str | os.PathLike[str]) -> Path:
    """Where the data position of a Trainer checkpoint folder is kept."""
    return Path(checkpoint) / DATA_STATE_FILE


class _SaveDataState(TrainerCallback):
    """After each Trainer save: gather every process's lanes and write them beside the model."""

    def __init__(self, trainer: ZephonTrainer) -> None:
        self.trainer = trainer

    def on_save(self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any) -> None:
        trainer = self.trainer
        merged = gather_dataset_state(trainer.zephon_dataset)  # a collective: every process is here
        if not args.should_save:
            return
        folder = Path(trainer._get_output_dir(trial=None)) / f"checkpoint-{state.global_step}"
        payload = {
            "format": _FORMAT,
            "global_step": state.global_step,
            "global_microbatches_per_step": trainer.global_microbatches_per_step,
            "dataset": merged,
        }
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".zephon-", suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(payload, f)
        os.replace(tmp, data_state_path(folder))


class ZephonTrainer(Trainer):
    """``transformers.Trainer`` over a Zephon dataset: this process's lanes, elastic resume.

    Use it exactly like ``Trainer`` with ``train_dataset=to_torch_dataset(build_pipeline)``
    (pass the function, so the pipeline can be rebuilt) and ``max_steps`` set. Everything else
    (model, optimizer, scheduler, DDP/FSDP through accelerate, logging, ``save_steps``) is the
    Trainer's own.

    Raises:
        ConfigError: ``train_dataset`` is not a Zephon dataset, DataLoader workers are asked for,
            the dataset's rank or size differs from the Trainer's processes, or the global batch
            is not whole rounds over the lanes.
    """

    def __init__(self, model: Any = None, args: TrainingArguments | None = None, train_dataset: Any = None, **kwargs: Any) -> None:
        if not isinstance(train_dataset, ZephonIterableDataset):
            raise ConfigError(
                "ZephonTrainer needs train_dataset=zephon_torch.to_torch_dataset(build_pipeline), got "
                f"{type(train_dataset).__name__}"
            )
        super().__init__(model=model, args=args, train_dataset=train_dataset, **kwargs)
        self.zephon_dataset = train_dataset
        if self.args.dataloader_num_workers:
            raise ConfigError(
                f"dataloader_num_workers={self.args.dataloader_num_workers}: use 0 with a Zephon dataset (the pipeline "
                "runs its operators on its own workers; set parallelism= on them instead)"
            )
        info = train_dataset.info
        if (info.rank, info.world_size) != (self.args.process_index, self.args.world_size):
            raise ConfigError(
                f"the dataset was built for data-parallel rank {info.rank} of {info.world_size}, but this Trainer process "
                f"is {self.args.process_index} of {self.args.world_size}: build it with to_torch_dataset() in every "
                "process (under torchrun/accelerate launch it finds RANK and WORLD_SIZE itself)"
            )
        lanes = train_dataset.pipeline.run_options.lanes
        self.global_microbatches_per_step = self.args.gradient_accumulation_steps * self.args.world_size
        if self.global_microbatches_per_step % lanes:
            raise ConfigError(
                f"gradient_accumulation_steps={self.args.gradient_accumulation_steps} on {self.args.world_size} "
                f"process(es) is {self.global_microbatches_per_step} microbatches per optimizer step, not whole rounds "
                f"over the pipeline's {lanes} lanes: use a multiple of {train_dataset.lanes_per_rank}"
            )
        # The data position comes from the checkpoint, never from skipping batches.
        self.args.ignore_data_skip = True
        self.add_callback(_SaveDataState(self))

    def get_train_dataloader(self) -> DataLoader[Any]:
        """The dataset in a plain ``DataLoader``, not passed through ``accelerator.prepare``.

        Preparing it would dispatch or re-shard batches across processes; this process's
        lanes are already all it should see.
        """
        keep: list[str] | None = None
        if self.args.remove_unused_columns:
            self._set_signature_columns_if_needed()
            keep = list(self._signature_columns or [])
        return DataLoader(self.zephon_dataset, batch_size=None, collate_fn=KeepColumns(keep), num_workers=0)  # type: ignore[arg-type]

    def train(  # type: ignore[override]
        self, resume_from_checkpoint: str | bool | None = None, **kwargs: Any
    ) -> Any:
        """``Trainer.train``; with ``resume_from_checkpoint`` the data resumes from that checkpoint too.

        ``True`` means the newest ``checkpoint-<step>`` under ``output_dir``, as for ``Trainer``.

        Raises:
            CheckpointError: the folder has no data state (not written by a ``ZephonTrainer``),
                or it is from another pipeline.
            ConfigError: the global batch (``gradient_accumulation_steps x processes``) differs
                from the checkpoint's; the message gives the value to use.
        """
        if resume_from_checkpoint is True or resume_from_checkpoint == "True":
            resume_from_checkpoint = get_last_checkpoint(self.args.output_dir)  # type: ignore[no-untyped-call]
            if resume_from_checkpoint is None:
                raise CheckpointError(f"resume_from_checkpoint=True: no checkpoint-<step> folder in {self.args.output_dir}")
        if isinstance(resume_from_checkpoint, str) and resume_from_checkpoint:
            self.load_data_state(resume_from_checkpoint)
        return super().train(resume_from_checkpoint=resume_from_checkpoint or None, **kwargs)

    def load_data_state(self, checkpoint: str | os.PathLike[str]) -> None:
        """Restore the dataset's lanes owned by this process from a Trainer checkpoint folder."""
        path = data_state_path(checkpoint)
        if not path.is_file():
            raise CheckpointError(
                f"{path} is missing: the checkpoint was not written by a ZephonTrainer (or its save was cut short), so "
                "it holds no data position; resume from another checkpoint-<step> folder"
            )
        try:
            payload = json.loads(path.read_text())
            saved = int(payload["global_microbatches_per_step"])
            dataset_state = payload["dataset"]
        except (ValueError, KeyError, TypeError) as exc:
            raise CheckpointError(f"{path}: not a zephon data state ({exc})") from None
        if saved != self.global_microbatches_per_step:
            world = self.args.world_size
            hint = (
                f"use gradient_accumulation_steps={saved // world}"
                if saved % world == 0
                else f"that many microbatches cannot be split over {world} processes"
            )
            raise ConfigError(
                f"{path}: the checkpoint's global batch is {saved} microbatches per optimizer step, this run's is "
                f"{self.global_microbatches_per_step} (gradient_accumulation_steps={self.args.gradient_accumulation_steps} "
                f"x {world} processes): {hint} to continue with the same global batches"
            )
        self.zephon_dataset.load_state_dict(dataset_state)



class AccelerateDataState:
    """The dataset's position for ``accelerator.register_for_checkpointing`` (loops written with accelerate).

    ``Accelerator.save_state`` calls ``state_dict()`` on every process and writes process 0's
    result; here that result already holds every lane (a collective gather), so
    ``Accelerator.load_state`` restores it on any number of processes. Do not pass the
    ``DataLoader`` through ``accelerator.prepare`` (it would dispatch or re-shard the lanes):
    iterate ``DataLoader(dataset, batch_size=None)`` and move batches with ``.to(accelerator.device)``.
    """

    def __init__(self, dataset: ZephonIterableDataset) -> None:
        self.dataset = dataset

    def state_dict(self) -> dict[str, Any]:
        """Every process's lanes merged (call on every process, between optimizer steps)."""
        return {"format": _FORMAT, "dataset": gather_dataset_state(self.dataset)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Take this process's lanes from a merged state."""
        self.dataset.load_state_dict(state["dataset"])
