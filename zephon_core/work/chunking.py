"""Chunks sized in tokens: ``chunk_size="auto"`` makes one window hold at least ``window_tokens`` tokens.

Operators restart at every window (``flush_every_k_chunks`` chunks of a lane), so a packer pads the
last row of each window. A window of 8 chunks of 256 short documents holds too few tokens: on a
corpus of 49-token documents that flush costs about 1 percentage point of padding. Sized from the
frozen tokens-per-sample estimates (the same ones token-aware mixing uses, stored in every
checkpoint), a chunk holds ``ceil(window_tokens / (K · tokens per sample))`` samples, so the padding
a flush adds is at most one row per ``window_tokens`` tokens, whatever the documents' length.

``chunk_size`` is an int, ``"auto"`` (needs estimates: a tokenizer in the pipeline, or
``tokens_per_sample=``) or None, the default: ``"auto"`` when estimates are available, else
:data:`DEFAULT_CHUNK_SIZE`. Chunk ``g`` stays a pure function of the configuration: the estimates
and ``K`` are part of it (the checkpoint holds both).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from typing import Any, Literal

from zephon_core.errors import ConfigError

MAX_CHUNK_SIZE = 1 << 16
"""Sample ids pack (dataset, chunk number, offset) into one integer, so offsets need 16 bits."""

DEFAULT_CHUNK_SIZE = 256
"""Chunk size without token estimates."""

DEFAULT_WINDOW_TOKENS = 1 << 22
"""``"auto"``: tokens one window (``K`` chunks of a lane) holds at least (4Mi). A flush pads about half a
row (1,024 tokens of a 2,048-token row): 0.1 percentage points per 1Mi-token window, 0.025 per 4Mi.
Larger windows cost replay on resume (a resumed lane re-reads up to one window)."""

DEFAULT_FLUSH_EVERY = 8
"""Chunks per window assumed outside a pipeline (the pipeline's default ``flush_every_k_chunks``)."""

ChunkSize = int | Literal["auto"] | None


def check_chunk_size(value: Any) -> ChunkSize:
    """Validate a ``chunk_size`` argument."""
    if value is None or value == "auto":
        return None if value is None else "auto"
    if not isinstance(value, int) or isinstance(value, bool) or not 0 < value <= MAX_CHUNK_SIZE:
        raise ConfigError(f"chunk_size must be an int in [1, {MAX_CHUNK_SIZE}], 'auto' or None, got {value!r}")
    return value


def auto_chunk_size(window_tokens: int, flush_every: int, tokens_per_sample: float) -> int:
    """Samples per chunk so that ``flush_every`` chunks hold at least ``window_tokens`` tokens."""
    return max(1, min(MAX_CHUNK_SIZE, math.ceil(window_tokens / (flush_every * max(tokens_per_sample, 1e-9)))))


def mean_tokens(sample_weights: Sequence[float], tokens_per_sample: Sequence[float]) -> float:
    """Expected tokens per sample of a mixture with these sample weights."""
    total = sum(sample_weights)
    return sum(w / total * t for w, t in zip(sample_weights, tokens_per_sample))


class ChunkSizing:
    """Mixin for work sources: ``chunk_size`` as an int, ``"auto"`` or None (see the module docstring).

    Subclasses call :meth:`_init_chunking`, keep ``tokens_per_sample`` (dict or None) and implement
    :meth:`_fewest_tokens_per_sample` (the smallest mean tokens per sample their mixture reaches).
    """

    tokens_per_sample: dict[str, float] | None

    def _init_chunking(self, chunk_size: Any, window_tokens: Any) -> None:
        self.chunk_setting: ChunkSize = check_chunk_size(chunk_size)
        if not isinstance(window_tokens, int) or isinstance(window_tokens, bool) or window_tokens < 1:
            raise ConfigError(f"window_tokens must be an int >= 1, got {window_tokens!r}")
        self.window_tokens = window_tokens
        self.flush_every: int | None = None

    def _fewest_tokens_per_sample(self) -> float:
        raise NotImplementedError

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
        if self.tokens_per_sample is None:
            if self.chunk_setting is None:
                return DEFAULT_CHUNK_SIZE
            raise ConfigError(
                "chunk_size='auto' needs token estimates: add a tokenizer operator to the pipeline or pass "
                "tokens_per_sample= to the source"
            )
        k = self.flush_every or DEFAULT_FLUSH_EVERY
        key = (k, tuple(sorted(self.tokens_per_sample.items())))
        cached = self.__dict__.get("_chunk_cache")
        if cached is None or cached[0] != key:  # copies may change the estimates or the window
            cached = self.__dict__["_chunk_cache"] = (
                key,
                auto_chunk_size(self.window_tokens, k, self._fewest_tokens_per_sample()),
            )
        return cached[1]

    def with_window(self, flush_every_k_chunks: int) -> Any:
        """A copy that sizes ``"auto"`` chunks for windows of ``flush_every_k_chunks`` chunks."""
        copier = getattr(self, "_clone", None)
        clone = copier() if callable(copier) else copy.copy(self)
        clone.flush_every = flush_every_k_chunks
        return clone

    def describe_chunking(self) -> dict[str, Any]:
        """Fingerprint entries: the setting (None as ``"default"``), and the window for sized chunks."""
        setting = "default" if self.chunk_setting is None else self.chunk_setting
        out: dict[str, Any] = {"chunk_size": setting}
        if not isinstance(setting, int):
            out["window_tokens"] = self.window_tokens
        return out
