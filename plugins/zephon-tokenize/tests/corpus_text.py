"""Real English text without a download: the Python documentation topics shipped in the standard
library (``pydoc_data.topics``), cut into paragraphs and sentences."""

from __future__ import annotations

import functools
import re

from zephon_core import Dataset, MixtureSpec, StaticMixtureWorkSource


@functools.lru_cache(maxsize=1)
def paragraphs() -> tuple[str, ...]:
    from pydoc_data.topics import topics

    return tuple(p.strip() for key in sorted(topics) for p in topics[key].split("\n\n") if len(p.strip()) > 40)


@functools.lru_cache(maxsize=1)
def sentences() -> tuple[str, ...]:
    return tuple(s.strip() for p in paragraphs() for s in re.split(r"(?<=[.!?])\s+", p) if len(s.strip()) > 20)


def grouped(texts: tuple[str, ...], k: int) -> list[str]:
    """Consecutive runs of ``k`` texts joined: documents about ``k`` times longer on average."""
    return [" ".join(texts[i : i + k]) for i in range(0, len(texts) - k + 1, k)]


def records(texts: list[str] | tuple[str, ...]) -> list[dict[str, object]]:
    return [{"text": t, "doc": i} for i, t in enumerate(texts)]


def two_sources(
    weight_by: str = "tokens", chunk_size: int = 64, exhaustion: str = "repeat", seed: int = 3
) -> StaticMixtureWorkSource:
    """Paragraphs and sentences, 60:40, as in-memory datasets."""
    a = Dataset.from_records("paragraphs", records(paragraphs()), shard_size=400)
    b = Dataset.from_records("sentences", records(sentences()), shard_size=700)
    return StaticMixtureWorkSource(
        [a, b],
        mixture=MixtureSpec({"paragraphs": 0.6, "sentences": 0.4}),
        chunk_size=chunk_size,
        seed=seed,
        exhaustion=exhaustion,  # type: ignore[arg-type]
        weight_by=weight_by,  # type: ignore[arg-type]
    )
