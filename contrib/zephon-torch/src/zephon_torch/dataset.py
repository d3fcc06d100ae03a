"""A Zephon pipeline as a ``torch.utils.data.IterableDataset``, for code built around ``DataLoader``.

``to_torch_dataset(pipeline)`` yields this rank's microbatches (``batch.to_training()`` as tensors
sharing numpy memory; string and bytes fields as lists, as ``default_collate`` gives them) and is
``Stateful``: torchdata's ``StatefulDataLoader`` puts the pipeline's JSON checkpoint in its own ``state_dict()`` and resumes from it exactly, with no fast-forwarding.

Use it with ``batch_size=None`` (the pipeline already batches) and ``num_workers=0``. DataLoader
worker processes are refused, because the pipeline has its own: every operator runs on its own
threads or processes with its own parallelism. Worker processes would each run a full copy of
the pipeline (memory and threads times the worker count), could not split lanes without
changing the order of microbatches, and ``StatefulDataLoader`` would keep per-worker states that
only resume on the same worker count, which is what Zephon's elastic checkpoints exist to avoid.

Iterating the pipeline directly, or :class:`~zephon_torch.ZephonLoader`, is still the better
choice (see the package README for measured throughput): the DataLoader adds a per-item Python
layer, yields microbatches rather than global steps, and cannot make ranks agree where the data
ends (each rank stops when its own lanes run dry).
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch.utils.data import IterableDataset, get_worker_info

from zephon_core import CheckpointError, ConfigError, LaneLayout, Pipeline, merge_checkpoints
from zephon_torch.collectives import all_gather_bytes
from zephon_torch.loader import microbatch_size_of
from zephon_torch.state import to_kernel_state
from zephon_torch.tensors import Field, check_pin_memory, to_tensors
from zephon_torch.topology import DataParallelInfo, resolve_data_parallel

WORKERS_REFUSED = (
    "to_torch_dataset: DataLoader(num_workers>0) is not supported. The Zephon pipeline already runs its "
    "operators on its own workers (set parallelism=/runner= per operator); DataLoader workers would each run a "
    "full copy of the pipeline and their per-worker state would only resume on the same worker count. Use "
    "DataLoader(dataset, batch_size=None, num_workers=0), or iterate the pipeline / ZephonLoader directly"
)

_DATASET_STATE = "dataset_state"  # where StatefulDataLoader (num_workers=0) keeps a Stateful dataset's state


class ZephonIterableDataset(IterableDataset):
    """This data-parallel rank's microbatches as dicts of tensors; ``Stateful`` for ``StatefulDataLoader``.

    Build it with :func:`to_torch_dataset`, which finds ``info`` and checks ``pin_memory``.

    Attributes:
        pipeline: the pipeline being iterated (rebuilt by ``load_state_dict`` when a factory was given).
        info: this process's data-parallel rank and size.
        lanes_per_rank: microbatches per round on this rank: a state taken after a multiple of this
            many microbatches is at a global-step boundary and resumes on any world size.
    """

    def __init__(
        self,
        pipeline: Pipeline | Callable[[], Pipeline],
        info: DataParallelInfo,
        *,
        pin_memory: bool = False,
        device: torch.device | str | None = None,
    ) -> None:
        super().__init__()
        self._factory = None if isinstance(pipeline, Pipeline) else pipeline
        if self._factory is not None and not callable(self._factory):
            raise ConfigError(
                f"to_torch_dataset needs a zephon_core.Pipeline or a function that builds one, got "
                f"{type(pipeline).__name__}"
            )
        self.info = info
        self.pin_memory = pin_memory
        self.device = device
        self.pipeline = self._configure(pipeline if self._factory is None else self._factory())
        self.lanes_per_rank = self.pipeline.run_options.lanes // self.info.world_size
        self._started = False

    def _configure(self, pipeline: Any) -> Pipeline:
        if not isinstance(pipeline, Pipeline):
            raise ConfigError(f"the pipeline factory must return a zephon_core.Pipeline, got {type(pipeline).__name__}")
        microbatch_size_of(pipeline)
        lanes = pipeline.run_options.lanes
        try:
            LaneLayout(lanes, self.info.world_size, self.info.rank)
        except ConfigError as exc:
            raise ConfigError(f"the pipeline's lanes do not fit data-parallel rank {self.info.rank}: {exc}") from None
        return pipeline.options(dp_rank=self.info.rank, dp_world_size=self.info.world_size)

    def __iter__(self) -> Iterator[dict[str, Field]]:
        if get_worker_info() is not None:
            raise ConfigError(WORKERS_REFUSED)
        # A generator, not ``self``: StatefulDataLoader saves the dataset's state only when the
        # iterator is a separate object. A new iterator continues where the last one stopped.
        return self._generate()

    def _generate(self) -> Iterator[dict[str, Field]]:
        self._started = True
        for batch in self.pipeline:
            yield to_tensors(batch.to_training(), pin_memory=self.pin_memory, device=self.device)

    def __getstate__(self) -> dict[str, Any]:
        # Only DataLoader worker processes started with "spawn"/"forkserver" pickle a dataset.
        raise ConfigError(WORKERS_REFUSED)

    # -- Stateful -------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """This rank's kernel checkpoint (plain JSON) after the last microbatch handed out."""
        return self.pipeline.state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resume from a state of this dataset, a ``ZephonLoader`` state, or a merged checkpoint.

        Before iteration the pipeline is restored in place; afterwards it is rebuilt, which needs
        a factory (``to_torch_dataset(lambda: build_pipeline())``).

        Raises:
            CheckpointError: the state is from another pipeline, lacks a lane this rank owns, was
                taken mid-round on another rank or world size, or iteration started and no
                factory was given.
        """
        kernel = to_kernel_state(state)
        if self._started:
            if self._factory is None:
                raise CheckpointError(
                    "load_state_dict after iteration started needs a pipeline factory to rebuild the pipeline: "
                    "use to_torch_dataset(lambda: build_pipeline()), or load the state into a new dataset"
                )
            self.pipeline.close()
            self.pipeline = self._configure(self._factory())
            self._started = False
        self.pipeline.load_state_dict(kernel)

    def close(self) -> None:
        """Stop the pipeline's threads and worker processes."""
        self.pipeline.close()

    def __enter__(self) -> ZephonIterableDataset:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"ZephonIterableDataset(dp_rank={self.info.rank}, dp_world_size={self.info.world_size}, "
            f"lanes_per_rank={self.lanes_per_rank})"
        )


def to_torch_dataset(
    pipeline: Pipeline | Callable[[], Pipeline],
    *,
    dp_group: Any = None,
    dp_rank: int | None = None,
    dp_world_size: int | None = None,
    pin_memory: bool = False,
    device: torch.device | str | None = None,
) -> ZephonIterableDataset:
    """Wrap a pipeline ending in ``.batch(...)`` for ``DataLoader(ds, batch_size=None)`` / ``StatefulDataLoader``.

    The data-parallel rank is found as :class:`~zephon_torch.ZephonLoader` finds it (``dp_group``,
    the default process group, ``RANK``/``WORLD_SIZE``, or one rank) and the pipeline is set to
    that rank's lanes.

    Args:
        pipeline: the pipeline, or a function building it (needed to ``load_state_dict`` again
            after iteration started, e.g. ``StatefulDataLoader.load_state_dict`` mid-training).
        dp_group: the data-parallel process group when tensor/pipeline parallelism shares the world.
        dp_rank: override the discovered data-parallel rank.
        dp_world_size: override the discovered data-parallel size.
        pin_memory: copy microbatches into page-locked memory (needs an accelerator).
        device: move microbatches to this device.
    """
    check_pin_memory(pin_memory)
    info = resolve_data_parallel(dp_group, dp_rank, dp_world_size)
    return ZephonIterableDataset(pipeline, info, pin_memory=pin_memory, device=device)


def merge_dataloader_states(states: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Join every rank's ``StatefulDataLoader.state_dict()`` into one that resumes on any world size.

    The datasets' kernel checkpoints are merged with :func:`~zephon_core.merge_checkpoints` (a
    union keyed by lane); the DataLoader's own counters are taken from the first rank (with a
    ``Stateful`` dataset they are bookkeeping only: nothing is fast-forwarded). Load the result
    with ``StatefulDataLoader.load_state_dict`` on every rank of the new world size.

    Raises:
        CheckpointError: a state is not from a ``num_workers=0`` StatefulDataLoader over
            :func:`to_torch_dataset`, or the ranks' states were not taken at the same global-step
            boundary (after the same whole number of rounds over each rank's lanes).
    """
    if not states:
        raise CheckpointError("merge_dataloader_states needs at least one state")
    kernels = []
    for i, s in enumerate(states):
        if not isinstance(s, Mapping) or not isinstance(s.get(_DATASET_STATE), Mapping):
            raise CheckpointError(
                f"state {i} is not a StatefulDataLoader(num_workers=0) state over to_torch_dataset: it has no "
                f"{_DATASET_STATE!r} (keys {sorted(s)[:8] if isinstance(s, Mapping) else type(s).__name__})"
            )
        kernels.append(to_kernel_state(s[_DATASET_STATE]))
    merged = copy.deepcopy(dict(states[0]))
    merged[_DATASET_STATE] = merge_checkpoints(kernels)
    merged["_iterator_finished"] = all(bool(s.get("_iterator_finished")) for s in states)
    fetcher = merged.get("fetcher_state")
    if isinstance(fetcher, dict) and "fetcher_ended" in fetcher:
        fetcher["fetcher_ended"] = all(bool((s.get("fetcher_state") or {}).get("fetcher_ended")) for s in states)
    return merged


def gather_dataset_state(
    dataset: ZephonIterableDataset, timeout: timedelta | None = None, state: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Every data-parallel rank's dataset state merged into one kernel checkpoint, on every rank.

    For trainers whose checkpoint is written by one process (Hugging Face ``Trainer``, Lightning,
    ``accelerate``): each rank's dataset covers only its own lanes, so the lanes are all-gathered
    and joined with :func:`~zephon_core.merge_checkpoints`; the result resumes on any
    data-parallel size dividing the lanes, through ``dataset.load_state_dict``. A collective: call
    it on every rank at the same global-step boundary (after a whole number of rounds).

    ``state`` replaces this rank's current ``dataset.state_dict()``: a state recorded earlier, for
    trainers that read batches ahead of the step (the saved position must be that of the batches
    trained on).

    If the dataset was built before the process group existed (e.g. before ``TrainingArguments``
    initialised it), the default group found now is used.

    Raises:
        ConfigError: several data-parallel ranks but no process group to gather over.
        CheckpointError: the ranks' states are not at the same global-step boundary, or lanes
            are missing.
    """
    info = dataset.info
    if info.world_size > 1 and not info.distributed:
        if not (dist.is_available() and dist.is_initialized()):
            raise ConfigError(
                f"gather_dataset_state needs torch.distributed to reach the other {info.world_size - 1} rank(s): "
                "initialise a process group first"
            )
        info = dataclasses.replace(info, distributed=True, global_rank=dist.get_rank())
    mine = json.dumps(to_kernel_state(dataset.state_dict() if state is None else state), sort_keys=True).encode()
    blobs = all_gather_bytes(mine, info, timeout, "dataset state gather")
    merged = merge_checkpoints([json.loads(b) for b in blobs])
    lanes = dataset.pipeline.run_options.lanes
    if len(merged["lanes"]) != lanes:
        missing = sorted(set(range(lanes)) - {int(k) for k in merged["lanes"]})
        raise CheckpointError(f"gathered dataset state lacks lanes {missing}: call it on every data-parallel rank")
    return merged
