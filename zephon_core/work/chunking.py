"""How many samples a chunk holds, and how many chunks a window holds, sized in tokens.

Chunks stay small (latency follows the chunk) while windows, where operators restart and a packer
pads, hold ``window_tokens`` tokens (docs/curricula.md). Chunk ``g`` stays a pure function of the
configuration: estimates, window and ``K`` are in the checkpoint. Release 0.1 sized the *default*
chunk in tokens, 8 chunks a window (``"chunk_size": "default"``); a pipeline at both defaults adopts
that when it loads such a checkpoint (:meth:`ChunkSizing.use_release_0_1_default`)."""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from typing import Any, Literal

from zephon_core.errors import ConfigError

MAX_CHUNK_SIZE = 1 << 16
"""Sample ids pack (dataset, chunk number, offset) into one integer, so offsets need 16 bits."""

DEFAULT_CHUNK_SIZE = 256
"""Samples per chunk unless told otherwise: small enough that a lane's first chunk is ready fast."""

DEFAULT_WINDOW_TOKENS = 1 << 22
"""Tokens a sized window (``K`` chunks of a lane) holds at least: 4Mi, so a flush pads about 0.025 pp."""

DEFAULT_FLUSH_EVERY = 8
"""Chunks per window without token estimates (and for ``chunk_size="auto"``, which sizes the chunk)."""

LEGACY_DEFAULT = "default"
"""How release 0.1 described a default ``chunk_size`` in a definition (sized in tokens when it could be)."""

ChunkSize = int | Literal["auto"] | None


def auto_chunk_size(window_tokens: int, flush_every: int, tokens_per_sample: float) -> int:
    """Samples per chunk so that ``flush_every`` chunks hold at least ``window_tokens`` tokens."""
    return max(1, min(MAX_CHUNK_SIZE, math.ceil(window_tokens / (flush_every * max(tokens_per_sample, 1e-9)))))


def auto_flush_every(window_tokens: int, chunk_size: int, tokens_per_sample: float) -> int:
    """Chunks per window so that a window of ``chunk_size``-sample chunks holds at least ``window_tokens`` tokens."""
    return max(1, math.ceil(window_tokens / (chunk_size * max(tokens_per_sample, 1e-9))))


def mean_tokens(sample_weights: Sequence[float], tokens_per_sample: Sequence[float]) -> float:
    """Expected tokens per sample of a mixture with these sample weights."""
    total = sum(sample_weights)
    return sum(w / total * t for w, t in zip(sample_weights, tokens_per_sample))


class ChunkSizing:
    """Mixin for work sources: ``chunk_size`` as an int, ``"auto"`` or None. Subclasses call
    :meth:`_init_chunking`, keep ``tokens_per_sample`` (dict or None), implement :meth:`_fewest_tokens_per_sample`
    (their mixture's smallest mean tokens per sample) and override :meth:`_clone` to reset derived state."""

    tokens_per_sample: dict[str, float] | None

    def _init_chunking(self, chunk_size: Any, window_tokens: Any) -> None:
        bad = not isinstance(chunk_size, int) or isinstance(chunk_size, bool) or not 0 < chunk_size <= MAX_CHUNK_SIZE
        if chunk_size is not None and chunk_size != "auto" and bad:
            raise ConfigError(f"chunk_size must be an int in [1, {MAX_CHUNK_SIZE}], 'auto' or None, got {chunk_size!r}")
        self.chunk_setting: ChunkSize = "auto" if chunk_size == "auto" else chunk_size
        if not isinstance(window_tokens, int) or isinstance(window_tokens, bool) or window_tokens < 1:
            raise ConfigError(f"window_tokens must be an int >= 1, got {window_tokens!r}")
        self.window_tokens = window_tokens
        self.flush_every: int | None = None

    def _fewest_tokens_per_sample(self) -> float:
        raise NotImplementedError

    def _clone(self) -> Any:
        """A copy to reconfigure (``with_window`` and the like); a shallow copy unless a subclass knows better."""
        return copy.copy(self)

    @property
    def token_estimates_use(self) -> Literal["required", "optional"] | None:
        """Whether sizing chunks needs token estimates (the pipeline calibrates when it does)."""
        if self.chunk_setting == "auto":
            return "required"
        return "optional" if self.chunk_setting is None else None

    @property
    def chunk_size(self) -> int:
        """Samples per chunk, resolved (``"auto"`` from the estimates and the window)."""
        if isinstance(self.chunk_setting, int):
            return self.chunk_setting
        if self.chunk_setting is None and (self.tokens_per_sample is None or not self.uses_release_0_1_default):
            return DEFAULT_CHUNK_SIZE
        if self.tokens_per_sample is None:
            raise ConfigError(
                "chunk_size='auto' needs token estimates: add a tokenizer operator to the pipeline or pass "
                "tokens_per_sample= to the source"
            )
        k = self.flush_every or DEFAULT_FLUSH_EVERY
        key = (k, tuple(sorted(self.tokens_per_sample.items())))
        cached = self.__dict__.get("_chunk_cache")
        if cached is None or cached[0] != key:  # copies may change the estimates or the window
            size = auto_chunk_size(self.window_tokens, k, self._fewest_tokens_per_sample())
            cached = self.__dict__["_chunk_cache"] = (key, size)
        return cached[1]

    def with_window(self, flush_every_k_chunks: int) -> Any:
        """A copy that sizes ``"auto"`` chunks for windows of ``flush_every_k_chunks`` chunks."""
        clone = self._clone()
        clone.flush_every = flush_every_k_chunks
        return clone

    def flush_every_for_window(self) -> int:
        """``flush_every_k_chunks="auto"`` resolved: enough chunks that a window holds ``window_tokens``
        tokens (:data:`DEFAULT_FLUSH_EVERY` without token estimates, or when the chunk is sized instead)."""
        if self.tokens_per_sample is None or self.chunk_setting == "auto" or self.uses_release_0_1_default:
            return DEFAULT_FLUSH_EVERY
        return auto_flush_every(self.window_tokens, self.chunk_size, self._fewest_tokens_per_sample())

    @property
    def uses_release_0_1_default(self) -> bool:
        """Whether a default ``chunk_size`` is sized as release 0.1 did (see the module docstring)."""
        return self.chunk_setting is None and bool(self.__dict__.get("_release_0_1_default", False))

    def use_release_0_1_default(self, on: bool = True) -> None:
        """Size a default ``chunk_size`` as release 0.1 did, or stop (when loading a checkpoint of such a run)."""
        self.__dict__["_release_0_1_default"] = on
        self.__dict__.pop("_chunk_cache", None)

    def describe_chunking(self) -> dict[str, Any]:
        """Fingerprint entries: the resolved setting, and the window for chunks sized in tokens."""
        if self.uses_release_0_1_default or self.chunk_setting == "auto":
            return {"chunk_size": self.chunk_setting or LEGACY_DEFAULT, "window_tokens": self.window_tokens}
        return {"chunk_size": self.chunk_setting or DEFAULT_CHUNK_SIZE}
