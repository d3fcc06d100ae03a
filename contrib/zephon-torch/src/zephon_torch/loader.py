"""ZephonLoader: one data-parallel rank's share of every global batch, as torch tensors.

A Zephon pipeline yields microbatches round-robin over the lanes a rank owns. The loader groups
them into **global steps**: ``rounds`` microbatches from every lane, i.e. exactly the rows of one
global batch that belong to this rank, in gradient-accumulation order. Grouping by global step
is what makes three things simple:

* the global batch is fixed by ``global_batch_size`` alone, whatever the number of ranks
  (fewer ranks just accumulate more microbatches);
* ``state_dict()`` between steps is always at a global-step boundary, the only place where a
  checkpoint means the same thing on every topology;
* one small all-reduce per step settles, for all ranks at once, whether every rank has a full
  step (end of data on one rank's lanes stops all ranks at the same step instead of leaving the
  others blocked in the next gradient all-reduce), whether a rank failed, and how many tokens
  the global batch holds (for loss normalisation).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import torch

from zephon_core import CheckpointError, ConfigError, LaneLayout, Pipeline, SampleBatch
from zephon_torch import state as loader_state
from zephon_torch.collectives import all_gather_bytes, all_reduce_sum
from zephon_torch.errors import RankFailureError
from zephon_torch.tensors import Field, check_pin_memory, to_tensors
from zephon_torch.topology import DataParallelInfo, resolve_data_parallel


@dataclass(frozen=True)
class GlobalStep:
    """This rank's part of one global batch.

    Iterate it for the microbatches (dicts of tensors) in gradient-accumulation order.

    Attributes:
        step: index of this global step since the start of training (continues after resume).
        microbatches: ``batch.to_training()`` of each microbatch, as tensors sharing numpy memory
            (string and bytes fields as lists).
        batches: the kernel's :class:`~zephon_core.SampleBatch` objects (lane, lineage, hashing).
        num_tokens: this rank's sum of the ``token_key`` field (``None`` if the field is absent).
        global_num_tokens: the same summed over all data-parallel ranks: divide the summed
            per-token loss by it to get a mean that does not depend on the number of ranks.
    """

    step: int
    microbatches: list[dict[str, Field]]
    batches: list[SampleBatch] = field(repr=False)
    num_tokens: int | None = None
    global_num_tokens: int | None = None

    def __iter__(self) -> Iterator[dict[str, Field]]:
        return iter(self.microbatches)

    def __len__(self) -> int:
        return len(self.microbatches)

    @property
    def lanes(self) -> list[int]:
        """The lane of each microbatch."""
        return [b.lane for b in self.batches]


def microbatch_size_of(pipeline: Pipeline) -> int:
    """The rows per microbatch of ``pipeline`` (its final ``batch`` operator).

    Raises:
        ConfigError: the pipeline does not end with ``.batch(...)``.
    """
    spec = pipeline.batch_spec
    if spec is None:
        raise ConfigError("the pipeline must end with .batch(microbatch_size=...) before it is given to ZephonLoader")
    return spec.microbatch_size


class ZephonLoader:
    """Iterate a Zephon pipeline as this data-parallel rank's global steps of torch tensors.

    Args:
        pipeline: a pipeline ending in ``.batch(...)``; its ``lanes`` option is kept, its
            ``dp_rank`` / ``dp_world_size`` are set by the loader.
        global_batch_size: rows per global step over all data-parallel ranks; must be a whole
            number of *rounds* (one microbatch from every lane). Default: one round.
        dp_group: the data-parallel process group (or a 1-D ``DeviceMesh``) when tensor or
            pipeline parallelism shares the world; default: the default group.
        dp_rank: override the discovered data-parallel rank (must agree with a group if any).
        dp_world_size: override the discovered data-parallel size.
        pin_memory: copy microbatches into page-locked memory (needs an accelerator).
        device: move microbatches to this device (``non_blocking`` when pinned).
        token_key: the per-row token count summed into ``num_tokens`` (packed text has
            ``num_valid_tokens``); ``None`` disables the count.
        timeout: bound on every collective of the loader; ``None`` uses the process group's.
        check_ranks: at the first step, gather every rank's configuration and fail fast on any
            mismatch (different pipeline, batch size, resume step, or duplicated ranks).

    Attributes:
        info: this process's data-parallel rank, size and group.
        step: the index of the next global step (restored by ``load_state_dict``).
        microbatches_per_step: this rank's microbatches per global step.
        finished: the data ended (on some rank) and every rank stopped at the same step.
        exhausted_locally: the data ended on one of *this* rank's lanes (else another rank's).

    Raises:
        ConfigError: lanes do not split evenly over the data-parallel ranks, or the global batch
            is not a whole number of rounds over each rank's lanes.
    """

    def __init__(
        self,
        pipeline: Pipeline,
        *,
        global_batch_size: int | None = None,
        dp_group: Any = None,
        dp_rank: int | None = None,
        dp_world_size: int | None = None,
        pin_memory: bool = False,
        device: torch.device | str | None = None,
        token_key: str | None = "num_valid_tokens",
        timeout: timedelta | None = None,
        check_ranks: bool = True,
    ) -> None:
        if not isinstance(pipeline, Pipeline):
            raise ConfigError(f"ZephonLoader needs a zephon_core.Pipeline, got {type(pipeline).__name__}")
        check_pin_memory(pin_memory)
        self.info: DataParallelInfo = resolve_data_parallel(dp_group, dp_rank, dp_world_size)
        self.pipeline = pipeline
        self.lanes = pipeline.run_options.lanes
        self.microbatch_size = microbatch_size_of(pipeline)
        self.global_batch_size = self._check_layout(global_batch_size)
        self.rounds_per_step = self.global_batch_size // (self.lanes * self.microbatch_size)
        self.lanes_per_rank = self.lanes // self.info.world_size
        pipeline.options(dp_rank=self.info.rank, dp_world_size=self.info.world_size)
        self.pin_memory = pin_memory
        self.device = device
        self.token_key = token_key
        self.timeout = timeout
        self.check_ranks = check_ranks
        self.step = 0
        self.finished = False
        self.exhausted_locally = False
        self._iterator: Iterator[SampleBatch] | None = None
        self._boundary: dict[str, Any] | None = None

    # -- configuration --------------------------------------------------------------------------
    def _check_layout(self, global_batch_size: int | None) -> int:
        lanes, world, mb = self.lanes, self.info.world_size, self.microbatch_size
        try:
            LaneLayout(lanes, world, self.info.rank)
        except ConfigError as exc:
            raise ConfigError(
                f"the pipeline's lanes do not fit data-parallel rank {self.info.rank} of {world} (lanes are fixed for "
                f"the life of a training run): {exc}"
            ) from None
        round_rows = lanes * mb
        if global_batch_size is None:
            return round_rows
        if not isinstance(global_batch_size, int) or isinstance(global_batch_size, bool) or global_batch_size < 1:
            raise ConfigError(f"global_batch_size must be an int >= 1, got {global_batch_size!r}")
        if global_batch_size % round_rows:
            raise ConfigError(
                f"global_batch_size={global_batch_size} rows is not a whole number of rounds: a round is one "
                f"microbatch of {mb} rows from each of the {lanes} lanes = {round_rows} rows, so each of the "
                f"{world} data-parallel ranks takes whole rounds over its {lanes // world} lanes only when the "
                f"global batch is a multiple of {round_rows} (e.g. {round_rows}, {2 * round_rows}, "
                f"{4 * round_rows}); change global_batch_size or microbatch_size"
            )
        return global_batch_size

    @property
    def microbatches_per_step(self) -> int:
        """Microbatches this rank contributes to each global step (its gradient-accumulation steps)."""
        return self.rounds_per_step * self.lanes_per_rank

    @property
    def distributed(self) -> bool:
        return self.info.distributed and self.info.world_size > 1

    # -- iteration ------------------------------------------------------------------------------
    def __iter__(self) -> ZephonLoader:
        if self._iterator is None:
            self._boundary = self.pipeline.state_dict()
            self.step = loader_state.step_of(self._boundary, self.rounds_per_step)
            if self.check_ranks and self.distributed:
                self._check_peers()
            self._iterator = iter(self.pipeline)
        return self

    def __next__(self) -> GlobalStep:
        if self._iterator is None:
            iter(self)
        assert self._iterator is not None
        if self.finished:
            raise StopIteration
        boundary = self.pipeline.state_dict()
        batches: list[SampleBatch] = []
        failure: BaseException | None = None
        try:
            while len(batches) < self.microbatches_per_step:
                batches.append(next(self._iterator))
        except StopIteration:
            pass
        except Exception as exc:
            failure = exc
        full = failure is None and len(batches) == self.microbatches_per_step
        arrays = [b.to_training() for b in batches] if full else []
        tokens = self._count_tokens(arrays)
        try:
            have, failed, total = all_reduce_sum(
                [int(full), int(failure is not None), tokens or 0],
                self.info,
                self.timeout,
                f"end-of-data agreement before global step {self.step}",
            )
        except RankFailureError:
            self.close()
            raise
        if failure is not None:
            self.close()
            raise failure
        if failed:
            self.close()
            raise RankFailureError(
                f"{failed} data-parallel rank(s) failed while producing global step {self.step} (see their logs); "
                f"rank {self.info.rank} stops too instead of waiting in the next collective"
            )
        if have < (self.info.world_size if self.info.distributed else 1):
            self.finished = True
            self.exhausted_locally = not full
            self._boundary = boundary
            raise StopIteration
        self._boundary = None
        step = GlobalStep(
            step=self.step,
            microbatches=[to_tensors(a, pin_memory=self.pin_memory, device=self.device) for a in arrays],
            batches=batches,
            num_tokens=tokens,
            global_num_tokens=None if tokens is None else total,
        )
        self.step += 1
        return step

    def _count_tokens(self, arrays: list[Mapping[str, Any]]) -> int | None:
        if self.token_key is None or (arrays and self.token_key not in arrays[0]):
            return None
        return int(sum(int(a[self.token_key].sum()) for a in arrays))

    def _check_peers(self) -> None:
        """Gather every rank's view of the run and refuse to start on any disagreement."""
        mine = {
            "fingerprint": self._boundary["fingerprint"] if self._boundary else None,
            "global_batch_size": self.global_batch_size,
            "dp_rank": self.info.rank,
            "dp_world_size": self.info.world_size,
            "step": self.step,
        }
        views = [
            json.loads(b)
            for b in all_gather_bytes(json.dumps(mine).encode(), self.info, self.timeout, "start-up check of all ranks")
        ]
        problems = []
        for key in ("fingerprint", "global_batch_size", "dp_world_size", "step"):
            values = {v[key] for v in views}
            if len(values) > 1:
                per_rank = {i: v[key] for i, v in enumerate(views)}
                problems.append(f"{key} differs between ranks: {per_rank}")
        ranks = sorted(v["dp_rank"] for v in views)
        if ranks != list(range(self.info.world_size)):
            problems.append(f"data-parallel ranks are not 0..{self.info.world_size - 1} exactly once: {ranks}")
        if problems:
            raise ConfigError(
                "data-parallel ranks disagree about the run (different pipeline definition, global batch size "
                "or checkpoint loaded on some ranks, or a wrong dp_group): " + "; ".join(problems)
            )

    # -- checkpointing --------------------------------------------------------------------------
    def kernel_state_dict(self) -> dict[str, Any]:
        """This rank's kernel checkpoint (its lanes) at the last global-step boundary."""
        return self._boundary if self._boundary is not None else self.pipeline.state_dict()

    def state_dict(self) -> dict[str, Any]:
        """This rank's lanes, in the layout ``torch.distributed.checkpoint`` resumes on any world size.

        Not a collective: safe to call on each rank separately. Between steps it is always at a
        global-step boundary; after the data ended it is the state before the incomplete step.
        """
        return loader_state.to_loader_state(self.kernel_state_dict())

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resume from a state taken on any data-parallel size that divides the lanes.

        Accepts this loader's ``state_dict()`` layout (possibly holding only this rank's lanes,
        as DCP loads it), a single rank's kernel state, or a merged global checkpoint from
        :func:`~zephon_torch.gather_checkpoint`.

        Raises:
            CheckpointError: iteration already started, the state is from another pipeline or
                lacks a lane this rank owns, or it was not taken at a global-step boundary.
        """
        if self._iterator is not None:
            raise CheckpointError("load_state_dict must be called before iterating the loader")
        kernel = loader_state.to_kernel_state(state)
        owned = self.pipeline.run_options.layout().owned
        relevant = {k: v for k, v in kernel.get("lanes", {}).items() if int(k) in owned}
        step = loader_state.step_of({"lanes": relevant}, self.rounds_per_step)
        self.pipeline.load_state_dict(kernel)
        self.step = step
        self._boundary = None

    # -- verification ---------------------------------------------------------------------------
    def global_batch_hash(self, step: GlobalStep) -> str:
        """SHA-256 of the whole global batch (collective: gathers every rank's arrays; for checks only)."""
        from zephon_torch.hashing import gather_global_batch_hash

        return gather_global_batch_hash(step.batches, self.info, self.timeout)

    def close(self) -> None:
        """Stop the pipeline's threads and worker processes."""
        self.pipeline.close()

    def __enter__(self) -> ZephonLoader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"ZephonLoader(dp_rank={self.info.rank}, dp_world_size={self.info.world_size}, lanes={self.lanes}, "
            f"global_batch_size={self.global_batch_size}, microbatches_per_step={self.microbatches_per_step})"
        )
