"""The data side of a Megatron-Core run: a data iterator per data-parallel rank, resumable on another dp size.

Megatron's schedules (``get_forward_backward_func()``) take a ``data_iterator`` and call
``next()`` on it once per microbatch, ``get_num_microbatches()`` times per iteration, on every
rank of the model replica. :class:`ZephonMegatronData` is that iterator:

* the data-parallel rank, size and group come from ``megatron.core.parallel_state``, so the
  tensor- and pipeline-parallel ranks of one replica read the same lanes;
* ``micro_batch_size`` is the pipeline's microbatch (rows per ``next()``); ``global_batch_size``
  must be whole rounds (one microbatch from every lane), so each iteration takes
  ``global_batch_size / (dp x micro_batch_size)`` microbatches per rank: the number
  Megatron's microbatch calculator returns, checked against it when it is initialised;
* ``consumed_samples`` advances by ``global_batch_size`` per iteration, as Megatron counts
  ``consumed_train_samples``; :meth:`state_dict` stores it with the (global, merged) Zephon
  position, and :meth:`load_state_dict` refuses a checkpoint whose counter disagrees with the
  trainer's.

The state is the merged position of every lane (a few KB, identical on every rank), so it fits
Megatron's *common* (non-sharded) checkpoint state, written once by rank 0, and restores on any
data-parallel size that divides the lanes.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import timedelta
from typing import Any

from zephon_torch import Field, GlobalStep, ZephonLoader, gather_checkpoint

from zephon_core import CheckpointError, ConfigError, Pipeline, SampleBatch

STATE_VERSION = 1


def megatron_data_parallel() -> tuple[Any, int, int]:
    """``(group, rank, size)`` of this process's data-parallel group from ``megatron.core.parallel_state``.

    Raises:
        ConfigError: ``initialize_model_parallel`` has not been called.
    """
    from megatron.core import parallel_state  # type: ignore[import-untyped]

    if not parallel_state.model_parallel_is_initialized():
        raise ConfigError(
            "megatron.core.parallel_state is not initialised: call torch.distributed.init_process_group and "
            "parallel_state.initialize_model_parallel(...) before building ZephonMegatronData"
        )
    return (
        parallel_state.get_data_parallel_group(),
        parallel_state.get_data_parallel_rank(),
        parallel_state.get_data_parallel_world_size(),
    )


def _calculator_microbatches() -> int | None:
    """Megatron's ``get_num_microbatches()`` if its calculator is initialised, else ``None``."""
    from megatron.core import num_microbatches_calculator as calc

    if getattr(calc, "_GLOBAL_NUM_MICROBATCHES_CALCULATOR", None) is None:
        return None
    return int(calc.get_num_microbatches())


class ZephonMegatronData:
    """This data-parallel rank's microbatches for Megatron's schedules, with its checkpoint state.

    Args:
        pipeline: a Zephon pipeline ending in ``.batch(microbatch_size=micro_batch_size)``.
        micro_batch_size: Megatron's ``--micro-batch-size``.
        global_batch_size: Megatron's ``--global-batch-size``; a multiple of
            ``lanes x micro_batch_size``.
        timeout: bound on the loader's collectives (a dead rank raises instead of hanging).

    Attributes:
        loader: the underlying :class:`~zephon_torch.ZephonLoader` (one global batch per step).
        consumed_samples: rows of global batches delivered (Megatron's ``consumed_train_samples``).
        last_step: the latest :class:`~zephon_torch.GlobalStep` (this rank's kernel batches,
            for logging or hashing).

    Raises:
        ConfigError: sizes disagree with the pipeline or with Megatron's microbatch calculator,
            or the lanes do not split over the data-parallel ranks.
    """

    def __init__(
        self,
        pipeline: Pipeline,
        *,
        micro_batch_size: int,
        global_batch_size: int,
        timeout: timedelta | None = timedelta(minutes=10),
    ) -> None:
        group, rank, size = megatron_data_parallel()
        spec = pipeline.batch_spec
        if spec is None or spec.microbatch_size != micro_batch_size:
            got = None if spec is None else spec.microbatch_size
            raise ConfigError(
                f"the pipeline batches {got} rows per microbatch but micro_batch_size is {micro_batch_size}: "
                "end it with .batch(microbatch_size=micro_batch_size)"
            )
        self.loader = ZephonLoader(pipeline, global_batch_size=global_batch_size, dp_group=group, timeout=timeout)
        if (self.loader.info.rank, self.loader.info.world_size) != (rank, size):
            raise ConfigError(f"data-parallel group disagrees with parallel_state: rank {rank} of {size}")
        self.micro_batch_size = micro_batch_size
        self.global_batch_size = global_batch_size
        expected = _calculator_microbatches()
        if expected is not None and expected != self.num_microbatches:
            raise ConfigError(
                f"Megatron's microbatch calculator runs {expected} microbatches per iteration but "
                f"global_batch_size={global_batch_size} / (dp {size} x micro_batch_size {micro_batch_size}) = "
                f"{self.num_microbatches}: pass the same sizes to init_num_microbatches_calculator and ZephonMegatronData"
            )
        self.consumed_samples = 0
        self.last_step: GlobalStep | None = None
        self._steps: Iterator[GlobalStep] | None = None
        self._pending: list[dict[str, Field]] = []

    @property
    def num_microbatches(self) -> int:
        """Microbatches per iteration on this rank (``num_microbatches=`` of the forward-backward function)."""
        return self.loader.microbatches_per_step

    @property
    def last_batches(self) -> list[SampleBatch]:
        """The kernel batches of the latest iteration on this rank (empty before the first)."""
        return [] if self.last_step is None else list(self.last_step.batches)

    def __iter__(self) -> ZephonMegatronData:
        return self

    def __next__(self) -> dict[str, Field]:
        """The next microbatch; a new iteration (global batch) starts after ``num_microbatches`` of them."""
        if not self._pending:
            if self._steps is None:
                self._steps = iter(self.loader)
            step = next(self._steps)  # StopIteration on every rank at the same iteration
            self.last_step = step
            self._pending = list(step.microbatches)
            self.consumed_samples += self.global_batch_size
        return self._pending.pop(0)

    def state_dict(self) -> dict[str, Any]:
        """The global data position and ``consumed_samples``; a collective over the data-parallel group.

        Call it on every rank between iterations; identical on all ranks, so store it in
        Megatron's common checkpoint state (rank 0 writes it).

        Raises:
            CheckpointError: called inside an iteration.
        """
        if self._pending:
            raise CheckpointError(
                f"ZephonMegatronData.state_dict() inside an iteration ({len(self._pending)} of {self.num_microbatches} "
                "microbatches not yet consumed): checkpoint after forward_backward_func returns"
            )
        return {
            "version": STATE_VERSION,
            "consumed_samples": self.consumed_samples,
            "global_batch_size": self.global_batch_size,
            "zephon": gather_checkpoint(self.loader),
        }

    def load_state_dict(self, state: Mapping[str, Any], *, consumed_samples: int | None = None) -> None:
        """Resume on this run's data-parallel size from a state saved on any size dividing the lanes.

        Args:
            state: what :meth:`state_dict` returned (e.g. from Megatron's common checkpoint state).
            consumed_samples: the trainer's own counter from the same checkpoint
                (``args.consumed_train_samples``); must equal the stored one.

        Raises:
            CheckpointError: not a state of this class, another global batch size, counters that
                disagree, or a position from another pipeline.
        """
        if not isinstance(state, Mapping) or "zephon" not in state or "consumed_samples" not in state:
            raise CheckpointError(
                f"not a ZephonMegatronData state (expected keys 'zephon', 'consumed_samples'), got "
                f"{sorted(state)[:8] if isinstance(state, Mapping) else type(state).__name__}"
            )
        saved = int(state["consumed_samples"])
        if int(state.get("global_batch_size", self.global_batch_size)) != self.global_batch_size:
            raise CheckpointError(
                f"checkpoint was taken with global_batch_size={state['global_batch_size']}, this run uses "
                f"{self.global_batch_size}: the data position counts whole global batches of one size"
            )
        if consumed_samples is not None and int(consumed_samples) != saved:
            raise CheckpointError(
                f"Megatron's consumed_samples={consumed_samples} but the data checkpoint says {saved}: the model and "
                "data checkpoints come from different iterations"
            )
        self.loader.load_state_dict(state["zephon"])
        if self.loader.step * self.global_batch_size != saved:
            raise CheckpointError(
                f"data checkpoint is at global batch {self.loader.step} ({self.loader.step * self.global_batch_size} "
                f"samples) but records consumed_samples={saved}"
            )
        self.consumed_samples = saved

    def close(self) -> None:
        """Stop the pipeline's workers."""
        self.loader.close()
