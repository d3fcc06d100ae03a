"""Run options: what ``Pipeline.options(...)`` sets, and the checks every value passes when it is set. They are
frozen: ``Pipeline.options`` replaces them, so options never change under a running engine."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Any, Literal

from zephon_core.errors import ConfigError
from zephon_core.ops.contract import check_timeout
from zephon_core.runtime.metrics import MIN_INTERVAL_S
from zephon_core.runtime.observers import GROUP_STEPS, check_observer
from zephon_core.work.lanes import LaneLayout

VALIDATION_MODES = ("off", "warn", "strict")


def check_validation_mode(mode: Any) -> str:
    """``options(validate=...)``: probe user-defined steps at start-up (see :mod:`zephon_observe.validation`)."""
    if mode not in VALIDATION_MODES:
        raise ConfigError(f"option validate must be one of {list(VALIDATION_MODES)}, got {mode!r}")
    return str(mode)


@dataclasses.dataclass(frozen=True)
class Options:
    """Run options. Only ``lanes``, ``flush_every_k_chunks`` and ``lane_assignment``/``lane_seed`` change the data (they
    are in the fingerprint); the rest may change between runs. ``lane_assignment="permute"`` deals each round of chunks
    to the lanes by a permutation seeded with ``lane_seed``, not chunk ``g`` to lane ``g mod lanes``.

    ``timeout_s`` limits one task of every step that sets none (None: no limit; fetch defaults to ``FETCH_TIMEOUT_S``).
    ``autotune=True`` raises the parallelism of the step that limits throughput, within ``cpu_budget`` workers in all
    (default: one per step plus one per CPU), without changing the data; it and ``validate`` need zephon-observe.
    ``fuse`` runs consecutive per-record steps on the processes runner as one task, so records cross processes once.
    ``max_inflight_bytes`` bounds the bytes waiting between stages (records are read in groups of at most 1/32 of it),
    so large records do not multiply memory by queue depths.

    Observability (it never changes the data): ``trace`` records worker task spans for ``trace()``; ``metrics_callback``
    and ``zephon_metrics`` hooks get a snapshot every ``metrics_every_s`` seconds; zephon-observe records each delivered
    microbatch's samples in the folder (or URL) ``manifest`` every ``manifest_every_steps`` rounds."""

    lanes: int = 1
    dp_rank: int = 0
    dp_world_size: int = 1
    runner: str = "threads"
    flush_every_k_chunks: int | Literal["auto"] = "auto"
    queue_depth: int = 4
    timeout_s: float | None = None
    max_inflight_bytes: int | None = 128 * 2**20
    trace: bool = False
    autotune: bool = False
    cpu_budget: int | None = None
    metrics_callback: Callable[[dict[str, Any]], Any] | None = None
    metrics_every_s: float = 10.0
    manifest: str | os.PathLike[str] | None = None
    manifest_every_steps: int = GROUP_STEPS
    lane_assignment: str = "modulo"
    lane_seed: int = 0
    validate: str = "off"
    fuse: bool = True

    def __post_init__(self) -> None:
        check_validation_mode(self.validate)

    def check(self) -> None:
        """Validate every option (called by ``Pipeline.options``)."""
        check_timeout(self.timeout_s, "option")
        if not isinstance(self.fuse, bool):
            raise ConfigError(f"option fuse must be True or False, got {self.fuse!r}")
        cb = self.metrics_callback
        if cb is not None and not callable(cb):
            raise ConfigError(f"option metrics_callback must be callable (snapshot dict -> None), got {cb!r}")
        every = self.metrics_every_s
        if isinstance(every, bool) or not isinstance(every, (int, float)) or not every >= MIN_INTERVAL_S:
            raise ConfigError(f"option metrics_every_s must be a number of seconds >= {MIN_INTERVAL_S}, got {every!r}")
        if self.manifest is not None:
            if not isinstance(self.manifest, (str, os.PathLike)):
                raise ConfigError(f"option manifest must be a folder path or URL, got {self.manifest!r}")
            check_observer("manifest", self.manifest)  # fail now, not when running: needs zephon-observe and pyarrow
        if self.validate != "off":  # the probe and the tuner are zephon-observe's: fail now if it is missing
            check_observer("validate", self.validate)
        if self.autotune:
            check_observer("autotune", self.autotune)
        n = self.manifest_every_steps
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ConfigError(f"option manifest_every_steps must be an int >= 1, got {n!r}")
        c = self.cpu_budget
        if c is not None and (not isinstance(c, int) or isinstance(c, bool) or c < 1):
            raise ConfigError(f"option cpu_budget must be an int >= 1 (workers the autotuner may use), got {c!r}")
        b = self.max_inflight_bytes
        if b is not None and (not isinstance(b, int) or isinstance(b, bool) or b < 2**20):
            raise ConfigError(f"option max_inflight_bytes must be an int >= 1 MiB (or None: no byte bound), got {b!r}")
        if not isinstance(self.queue_depth, int) or isinstance(self.queue_depth, bool) or self.queue_depth < 1:
            raise ConfigError(f"option queue_depth must be an int >= 1, got {self.queue_depth!r}")
        k = self.flush_every_k_chunks
        if k != "auto" and (not isinstance(k, int) or isinstance(k, bool) or k < 1):
            raise ConfigError(
                f"option flush_every_k_chunks must be an int >= 1 or 'auto', got {k!r}: a checkpoint replays the current "
                "window, so without flushes one window would span the whole run and a resume would replay all of it"
            )
        self.layout()

    def layout(self) -> LaneLayout:
        """The lanes and this rank's share of them (validated)."""
        return LaneLayout(self.lanes, self.dp_world_size, self.dp_rank, self.lane_assignment, self.lane_seed)
