"""StaticMixtureWorkSource: what to train on, as numbered chunks of sample pointers.

The source does no payload I/O. Chunk ``g`` holds the pointers for global positions
``[g * chunk_size, (g + 1) * chunk_size)`` of the mixture schedule, and is a pure function of the
source's configuration and ``g``. That is what makes lanes cheap: a lane owns chunks
``g ≡ lane (mod L)`` and can compute any of them directly, so its state is one counter.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import numpy as np

from zephon_core.defaults.sources.exhaustion import (
    Exhausted,
    Policy,
    check_exhaustion,
    check_passes,
    check_reshuffle,
    describe_exhaustion,
)
from zephon_core.defaults.sources.mixture import MixtureSpec, PiecewiseRoundRobin, RoundRobinSchedule
from zephon_core.defaults.sources.shuffle import (
    ShuffleBlockSize,
    check_block_size,
    describe_block_size,
    locate_draws,
    make_order,
)
from zephon_core.errors import CheckpointError, ConfigError
from zephon_core.work.chunking import DEFAULT_WINDOW_TOKENS, MAX_CHUNK_SIZE, ChunkSize, ChunkSizing, mean_tokens
from zephon_core.work.contract import BaseWorkSource, Chunk, MixingUnit, Pointer, WorkSource
from zephon_core.work.dataset import Dataset
from zephon_core.work.ids import sample_id, split_sample_id

__all__ = [
    "MAX_CHUNK_SIZE",
    "BaseWorkSource",
    "Chunk",
    "Pointer",
    "StaticMixtureWorkSource",
    "WorkSource",
    "sample_id",
    "split_sample_id",
]


class StaticMixtureWorkSource(ChunkSizing, BaseWorkSource):
    """Interleaves datasets in fixed proportions, in shuffled order, as numbered chunks.

    Args:
        datasets: the components, each with a unique name.
        mixture: weight per dataset name; default is proportional to dataset sizes.
        chunk_size: pointers per chunk (the unit of lane routing, replay and checkpointing): an int,
            ``"auto"`` (sized so one window holds ``window_tokens`` tokens, from the token estimates;
            see :mod:`zephon_core.work.chunking`) or None: ``"auto"`` when token estimates exist (a
            tokenizer in the pipeline, token-aware mixing, or ``tokens_per_sample``), else 256.
        seed: seeds every permutation.
        shuffle: shuffle the samples of each dataset (in ``shuffle_block_size`` mode); False keeps file order.
        shuffle_block_size: how far the shuffle reaches, trading quality for read locality (see
            :mod:`zephon_core.defaults.sources.shuffle`): ``"shard"`` (one shard at a time, 0.1's order), an int
            (blocks of that many samples spanning shard boundaries), ``"auto"`` (blocks spanning
            about 8 shards; the default) or ``"global"`` (a full permutation of each dataset).
        exhaustion: ``"stop"`` ends the source when the first component runs out (the mixture stays
            exact to the end); ``"repeat"`` starts a new, freshly shuffled pass of a component
            whenever it runs out; ``"redistribute"`` drops a component that runs out and gives its
            share to the others in proportion to their weights. One policy, or a dict per dataset
            (see :mod:`zephon_core.defaults.sources.exhaustion`; :meth:`exhaustion_report` says who ran out where).
        max_repeats: passes a ``"repeat"`` dataset may start after its first (an int for all, or a
            dict for some); after the last it leaves the mixture like ``"redistribute"``.
        stop_after_passes: the data ends when a dataset would start pass ``n + 1`` (a dict, or an int
            for all); whichever bound comes first ends the run, and the report says which.
        reshuffle_on_repeat: each new pass in a fresh order (True, the default) or in the first
            pass's order (a bool, or a dict per dataset).
        weight_by: ``"samples"``; ``"tokens"``: weights are meant in tokens, turned into sample
            weights with per-dataset tokens-per-sample estimates. The pipeline calibrates those once
            (through an operator that can count tokens, e.g. ``tokenize``) and stores them in its
            checkpoints; pass ``tokens_per_sample`` to fix them yourself.
        tokens_per_sample: frozen estimates for ``weight_by="tokens"`` (and ``chunk_size="auto"``).
        window_tokens: tokens one window holds at least with ``"auto"`` chunks.
    """

    def __init__(
        self,
        datasets: Sequence[Dataset],
        mixture: MixtureSpec | None = None,
        chunk_size: ChunkSize = None,
        seed: int = 0,
        *,
        shuffle: bool = True,
        shuffle_block_size: ShuffleBlockSize = "auto",
        exhaustion: Policy | Mapping[str, Policy] = "stop",
        max_repeats: int | Mapping[str, int] | None = None,
        stop_after_passes: int | Mapping[str, int] | None = None,
        reshuffle_on_repeat: bool | Mapping[str, bool] = True,
        weight_by: Literal["samples", "tokens"] = "samples",
        tokens_per_sample: Mapping[str, float] | None = None,
        window_tokens: int = DEFAULT_WINDOW_TOKENS,
    ) -> None:
        super().__init__(datasets)
        names = [d.name for d in self.datasets]
        if mixture is None:
            mixture = MixtureSpec({d.name: float(d.num_samples) for d in self.datasets}, ratios=True)
        missing = set(names) - set(mixture.weights)
        extra = set(mixture.weights) - set(names)
        if missing or extra:
            raise ConfigError(
                f"mixture and datasets disagree: no weight for {sorted(missing)}, "
                f"weights for unknown datasets {sorted(extra)}"
            )
        self._init_chunking(chunk_size, window_tokens)
        self.policies = check_exhaustion(exhaustion, names)
        self.max_repeats = check_passes(max_repeats, names, "max_repeats")
        self.stop_after_passes = check_passes(stop_after_passes, names, "stop_after_passes")
        self.reshuffle_on_repeat = check_reshuffle(reshuffle_on_repeat, names)
        for name in self.max_repeats:
            if self.policies[name] != "repeat":
                raise ConfigError(
                    f"max_repeats[{name!r}]: dataset {name!r} does not repeat (exhaustion {self.policies[name]!r})"
                )
        if weight_by not in ("samples", "tokens"):
            raise ConfigError(f"weight_by must be 'samples' or 'tokens', got {weight_by!r}")
        if not isinstance(seed, int):
            raise ConfigError(f"seed must be an int, got {seed!r}")
        self.mixture = mixture
        self.seed = seed
        self.shuffle = shuffle
        self.exhaustion = describe_exhaustion(self.policies)
        self.weight_by = weight_by
        self.tokens_per_sample: dict[str, float] | None = None
        if tokens_per_sample is not None:
            self.tokens_per_sample = check_token_estimates(tokens_per_sample, names)
        self.shuffle_block_size = check_block_size(shuffle_block_size)
        self._orders = [make_order(d.sizes, seed, d.name, self.shuffle_block_size, shuffle) for d in self.datasets]
        self._schedule: RoundRobinSchedule | None = None
        self._mixing: PiecewiseRoundRobin | None = None
        self._end: int | None = None

    # -- mixing -----------------------------------------------------------------------------
    @property
    def mixing_unit(self) -> MixingUnit:
        return self.weight_by

    def target_weights(self) -> dict[str, float]:
        """Each dataset's share of the mixture (in :attr:`mixing_unit`), summing to 1."""
        normalized = self.mixture.normalized()
        return {d.name: float(normalized[d.name]) for d in self.datasets}

    def with_token_estimates(self, tokens_per_sample: Mapping[str, float]) -> StaticMixtureWorkSource:
        """A copy whose token weights become sample weights through these frozen estimates."""
        est = check_token_estimates(tokens_per_sample, [d.name for d in self.datasets])
        clone = copy.copy(self)
        clone.__dict__.pop("_ds_cache", None)
        clone.tokens_per_sample = est
        clone._schedule = None
        clone._mixing = None
        clone._end = None
        return clone

    def sample_weights(self) -> list[float]:
        """Weights in samples per dataset (token weights divided by tokens per sample)."""
        w = [float(self.mixture.weights[d.name]) for d in self.datasets]
        if self.weight_by == "tokens":
            if self.tokens_per_sample is None:
                raise ConfigError(
                    "weight_by='tokens' needs token estimates: add a tokenize operator to the "
                    "pipeline or pass tokens_per_sample="
                )
            w = [wi / max(self.tokens_per_sample[d.name], 1e-9) for wi, d in zip(w, self.datasets)]
        return w

    @property
    def schedule(self) -> RoundRobinSchedule:
        if self._schedule is None:
            self._schedule = RoundRobinSchedule(self.sample_weights())
        return self._schedule

    def _fewest_tokens_per_sample(self) -> float:
        est = self.tokens_per_sample or {}
        return mean_tokens(self.sample_weights(), [est[d.name] for d in self.datasets])

    @property
    def mixing(self) -> PiecewiseRoundRobin:
        """The interleaving with the exhaustion policies applied (one round robin per stretch)."""
        if self._mixing is None:
            policies, limits = self._limits()
            sizes = [d.num_samples for d in self.datasets]
            self._mixing = PiecewiseRoundRobin(self.sample_weights(), sizes, policies, limits)
        return self._mixing

    def _limits(self) -> tuple[list[str], list[int | None]]:
        """Per dataset: the draws after which it ends (None: never) and what its end does."""
        policies: list[str] = []
        limits: list[int | None] = []
        for d in self.datasets:
            policy, n = self.policies[d.name], d.num_samples
            limit: int | None = None if policy == "repeat" else n
            if d.name in self.max_repeats:
                policy, limit = "redistribute", n * (1 + self.max_repeats[d.name])
            passes = self.stop_after_passes.get(d.name)
            if passes is not None and (limit is None or n * passes <= limit):
                policy, limit = "stop", n * passes
            policies.append(policy)
            limits.append(limit)
        return policies, limits

    @property
    def end_position(self) -> int | None:
        """First global position that does not exist, or None (no dataset ends the data)."""
        return self.mixing.end

    def exhaustion_report(self, lanes: Iterable[int] | None = None) -> list[Exhausted]:
        """Which dataset ran out at which draw (global positions: the same for every lane)."""
        return [
            Exhausted(
                None,
                self.datasets[d].name,
                draw,
                pos,
                pos // self.chunk_size,
                policy,
                max(1, draw // max(1, self.datasets[d].num_samples)),
            )
            for pos, d, draw, policy in self.mixing.events
        ]

    @property
    def num_chunks(self) -> int | None:
        end = self.end_position
        return None if end is None else (end + self.chunk_size - 1) // self.chunk_size

    # -- chunks -----------------------------------------------------------------------------
    def chunk(self, number: int) -> Chunk | None:
        """Chunk ``number`` of the global sequence, or None past the end of the data."""
        start = number * self.chunk_size
        stop = start + self.chunk_size
        end = self.end_position
        if end is not None:
            stop = min(stop, end)
        if stop <= start:
            return None
        comp, draw = self.mixing.take(start, stop - start)
        reshuffle = [self.reshuffle_on_repeat[d.name] for d in self.datasets]
        shard, index = locate_draws(self._orders, [d.num_samples for d in self.datasets], comp, draw, reshuffle)
        return Chunk(number, comp.astype(np.int32), shard, index)

    # -- identity and state -----------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        """JSON-able definition for the pipeline fingerprint."""
        return {
            "type": "StaticMixtureWorkSource",
            "datasets": [d.describe() for d in self.datasets],
            "mixture": {k: float(v) for k, v in sorted(self.mixture.weights.items())},
            **self.describe_chunking(),
            "seed": self.seed,
            "shuffle": self.shuffle,
            "shuffle_block_size": describe_block_size(self.shuffle_block_size),
            "exhaustion": self.exhaustion,
            **self._describe_passes(),
            "weight_by": self.weight_by,
        }

    def _describe_passes(self) -> dict[str, Any]:
        """Pass bounds in the fingerprint, only when set (so earlier checkpoints keep their fingerprint)."""
        out: dict[str, Any] = {}
        if self.max_repeats:
            out["max_repeats"] = dict(self.max_repeats)
        if self.stop_after_passes:
            out["stop_after_passes"] = dict(self.stop_after_passes)
        fixed = sorted(n for n, v in self.reshuffle_on_repeat.items() if not v)
        if fixed:
            out["same_order_every_pass"] = fixed
        return out

    def state_dict(self) -> dict[str, Any]:
        """Nothing changes during a run: positions live per lane, token estimates in the pipeline."""
        return {}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if not isinstance(state, Mapping):
            raise CheckpointError(f"work source state must be a dict, got {type(state).__name__}")
        # Checkpoints of zephon-core 0.1 kept the token estimates here; the pipeline reads them.
        extra = set(state) - {"tokens_per_sample"}
        if extra:
            raise CheckpointError(f"StaticMixtureWorkSource keeps no state, but the checkpoint has {sorted(extra)}")


def check_token_estimates(est: Any, names: Sequence[str]) -> dict[str, float]:
    """Validate per-dataset tokens-per-sample estimates: one positive, finite number per dataset.

    Raises:
        ConfigError: naming the dataset at fault.
    """
    if not isinstance(est, Mapping):
        raise ConfigError(f"tokens_per_sample must be a dict of dataset name -> number, got {type(est).__name__}")
    if set(est) != set(names):
        raise ConfigError(f"tokens_per_sample must name exactly the datasets {sorted(names)}, got {sorted(est)}")
    out: dict[str, float] = {}
    for n in names:
        v = est[n]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            raise ConfigError(f"tokens_per_sample[{n!r}] must be a positive finite number, got {v!r}")
        out[n] = float(v)
    return out
