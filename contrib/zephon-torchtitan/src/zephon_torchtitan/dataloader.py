"""A torchtitan dataloader backed by a Zephon pipeline, elastic through torchtitan's own DCP checkpoints.

torchtitan's trainer builds its dataloader from ``config.dataloader`` with
``config.dataloader.build(dp_world_size=, dp_rank=, tokenizer=, seq_len=, local_batch_size=,
snapshot_every_n_steps=)``, pulls one ``(input_dict, labels)`` microbatch of ``local_batch_size``
rows per ``next()`` (``gradient_accumulation_steps`` of them per step) and hands the dataloader,
as a ``Stateful``, to its ``CheckpointManager``, which saves it with
``torch.distributed.checkpoint`` (DCP).

torchtitan's own dataloaders store one opaque state per dp rank and refuse another dp degree.
This one stores :class:`~zephon_torch.ZephonLoader`'s layout, one DCP key per *lane*
(``dataloader.lanes.3``): every lane is written once by its owner, and on load each rank of the
new dp degree asks DCP for the lanes it owns now, wherever they were written. A checkpoint taken
on 2 dp ranks therefore resumes on 1, 2 or 4 (any degree dividing the lanes) with the same
global batches.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torchtitan.components.dataloader import BaseDataLoader  # type: ignore[import-untyped]
from zephon_torch import ZephonLoader

from zephon_core import CheckpointError, ConfigError, Pipeline, SampleBatch

PipelineFactory = Callable[..., Pipeline]
"""Builds the pipeline; called as ``factory(seq_len=..., microbatch_size=...)`` with torchtitan's values."""


def resolve_factory(ref: str | PipelineFactory) -> PipelineFactory:
    """The pipeline factory named by ``"package.module:function"`` (or the callable itself).

    Raises:
        ConfigError: the reference is malformed, or the module or function does not exist.
    """
    if callable(ref):
        return ref
    if not isinstance(ref, str) or ref.count(":") != 1:
        raise ConfigError(
            f"dataloader.pipeline must be 'package.module:function' building a zephon Pipeline, got {ref!r}"
        )
    module_name, attr = ref.split(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"dataloader.pipeline={ref!r}: cannot import module {module_name!r} ({exc})") from None
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise ConfigError(f"dataloader.pipeline={ref!r}: module {module_name!r} has no function {attr!r}")
    return factory  # type: ignore[no-any-return]


def data_parallel_group(dp_rank: int, dp_world_size: int) -> Any:
    """The process group of this rank's data-parallel replicas, derived from torchtitan's dp rank.

    torchtitan passes the dataloader only its dp rank and degree. When tensor, pipeline or context
    parallelism share the world, the loader's collectives (end-of-data agreement, start-up checks)
    must run among the ranks that hold *different* data, not the whole world. torchtitan's mesh is
    row-major over ``(pp, dp_replicate, dp_shard, cp, tp)``, so the ranks holding dp rank ``d``,
    sorted by global rank, list the model-parallel coordinates in the same order for every ``d``:
    the k-th rank of each dp rank form one data-parallel group. A collective over the world; every
    rank builds every group, as ``new_group`` requires.

    Returns:
        ``None`` (the default group) when the world is data-parallel only, else this rank's group.

    Raises:
        ConfigError: the dp ranks do not split the world into equal replicas.
    """
    world = dist.get_world_size()
    if world == dp_world_size:
        return None
    if world % dp_world_size:
        raise ConfigError(f"dp degree {dp_world_size} does not divide the world size {world}")
    mine = torch.tensor([dp_rank], dtype=torch.int64)
    everyone = [torch.zeros(1, dtype=torch.int64) for _ in range(world)]
    dist.all_gather(everyone, mine)
    by_dp: dict[int, list[int]] = {}
    for global_rank, t in enumerate(everyone):
        by_dp.setdefault(int(t.item()), []).append(global_rank)
    replicas = world // dp_world_size
    if sorted(by_dp) != list(range(dp_world_size)) or any(len(r) != replicas for r in by_dp.values()):
        counts = {d: len(r) for d, r in sorted(by_dp.items())}
        raise ConfigError(
            f"dp ranks do not split the {world} processes into {dp_world_size} equal groups: processes per dp rank {counts}"
        )
    me = dist.get_rank()
    chosen: Any = None
    for k in range(replicas):
        ranks = [by_dp[d][k] for d in range(dp_world_size)]
        group = dist.new_group(ranks)
        if me in ranks:
            chosen = group
    return chosen


class ZephonDataLoader(BaseDataLoader):  # type: ignore[misc]
    """torchtitan's ``BaseDataLoader`` over a Zephon pipeline: this dp rank's lanes, one microbatch per ``next()``.

    Put ``ZephonDataLoader.Config(pipeline="my_pkg.data:build")`` in the trainer's config as
    ``dataloader``; torchtitan builds it with its dp rank and degree, ``local_batch_size`` and
    ``seq_len``. Each item is ``({"input": input_ids, ...extra}, labels)`` on CPU, as torchtitan's
    trainer expects.

    A checkpoint is only meaningful at a round boundary (every lane has delivered the same number
    of microbatches), so a step must take whole rounds: ``global_batch_size`` a multiple of
    ``lanes x local_batch_size``. ``state_dict()`` refuses anything else with that advice.

    Attributes:
        loader: the underlying :class:`~zephon_torch.ZephonLoader` (one round per loader step).
        last_batch: the kernel's :class:`~zephon_core.SampleBatch` of the latest microbatch (lane,
            lineage, ``explain()``), e.g. to log or hash what a step trained on.
    """

    @dataclass(kw_only=True, slots=True)
    class Config(BaseDataLoader.Config):  # type: ignore[misc]
        pipeline: str | PipelineFactory = ""
        """'package.module:function' (or the function) returning the Zephon pipeline; called with
        ``seq_len=`` and ``microbatch_size=`` (torchtitan's ``local_batch_size``)."""

        input_key: str = "input_ids"
        """Field of the microbatch given to the model as ``input_dict["input"]``."""

        label_key: str = "labels"
        """Field of the microbatch returned as the labels."""

        extra_keys: dict[str, str] = field(default_factory=lambda: {"position_ids": "positions"})
        """Further fields passed as model keyword arguments, ``{field: kwarg}``; absent fields are skipped."""

        timeout_seconds: float = 600.0
        """Bound on each of the loader's collectives, so a dead rank raises instead of hanging."""

    def __init__(
        self,
        config: Config,
        *,
        dp_world_size: int,
        dp_rank: int,
        seq_len: int,
        local_batch_size: int,
        tokenizer: Any = None,
        snapshot_every_n_steps: int | None = None,
        **kwargs: Any,
    ) -> None:
        self.config = config
        factory = resolve_factory(config.pipeline)
        pipeline = factory(seq_len=seq_len, microbatch_size=local_batch_size)
        if not isinstance(pipeline, Pipeline):
            raise ConfigError(
                f"dataloader.pipeline={config.pipeline!r} returned {type(pipeline).__name__}, not a zephon Pipeline"
            )
        spec = pipeline.batch_spec
        if spec is not None and spec.microbatch_size != local_batch_size:
            raise ConfigError(
                f"dataloader.pipeline={config.pipeline!r} batches {spec.microbatch_size} rows per microbatch but "
                f"training.local_batch_size is {local_batch_size}: build it with .batch(microbatch_size=microbatch_size)"
            )
        group = data_parallel_group(dp_rank, dp_world_size) if dist.is_available() and dist.is_initialized() else None
        self.loader = ZephonLoader(
            pipeline,
            dp_group=group,
            dp_rank=None if group is not None else dp_rank,
            dp_world_size=None if group is not None else dp_world_size,
            token_key=None,
            timeout=timedelta(seconds=config.timeout_seconds),
        )
        self.dp_rank = dp_rank
        self.dp_world_size = dp_world_size
        self.seq_len = seq_len
        self.local_batch_size = local_batch_size
        self.last_batch: SampleBatch | None = None
        self._pending = 0  # microbatches of the current round not yet handed to the trainer

    def __iter__(self) -> Iterator[tuple[dict[str, torch.Tensor], torch.Tensor]]:
        return self._generate()

    def _generate(self) -> Iterator[tuple[dict[str, torch.Tensor], torch.Tensor]]:
        for step in self.loader:
            self._pending = len(step)
            for mb, batch in zip(step.microbatches, step.batches):
                self._pending -= 1
                self.last_batch = batch
                yield self._convert(mb, batch)
        self._pending = 0

    def _convert(self, mb: dict[str, Any], batch: SampleBatch) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
        cfg = self.config
        for key in (cfg.input_key, cfg.label_key):
            if key not in mb:
                raise ConfigError(
                    f"microbatch {batch.lane}/{batch.lane_index} of dataloader.pipeline={cfg.pipeline!r} has no field "
                    f"{key!r} (fields: {sorted(mb)}); set dataloader.input_key / label_key"
                )
        inputs, labels = _as_tensor(mb[cfg.input_key], cfg.input_key), _as_tensor(mb[cfg.label_key], cfg.label_key)
        if tuple(inputs.shape) != (self.local_batch_size, self.seq_len):
            raise ConfigError(
                f"field {cfg.input_key!r} has shape {tuple(inputs.shape)}, expected (local_batch_size, seq_len) = "
                f"({self.local_batch_size}, {self.seq_len}): pack the pipeline to training.seq_len"
            )
        input_dict = {"input": inputs}
        for key, kwarg in cfg.extra_keys.items():
            if key in mb:
                input_dict[kwarg] = _as_tensor(mb[key], key)
        return input_dict, labels

    def state_dict(self) -> dict[str, Any]:
        """The pipeline position, one DCP key per lane (resumes on any dp degree dividing the lanes).

        Raises:
            CheckpointError: called inside a round (the step did not take whole rounds).
        """
        if self._pending:
            raise CheckpointError(
                f"torchtitan checkpoints a step that ends inside a round of the Zephon pipeline ({self._pending} of "
                f"this rank's {self.loader.lanes_per_rank} lanes still owe a microbatch): set training.global_batch_size "
                f"to a multiple of lanes x local_batch_size = {self.loader.lanes * self.local_batch_size}"
            )
        return self.loader.state_dict()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Resume from a state written on any dp degree dividing the lanes (an empty state is a fresh start)."""
        if not state_dict:
            return
        self.loader.load_state_dict(state_dict)

    def close(self) -> None:
        """Stop the pipeline's workers."""
        self.loader.close()


def _as_tensor(value: Any, key: str) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        raise ConfigError(f"field {key!r} is a {type(value).__name__}, not a numeric array: torchtitan needs tensors")
    if value.dtype in (torch.int32, torch.int16, torch.uint16, torch.uint32, torch.uint8):
        return value.to(torch.int64)  # token ids: embeddings and cross_entropy index with int64
    return value
