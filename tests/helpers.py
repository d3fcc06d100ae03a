"""Module-level functions for tests (the processes runner pickles functions by reference), and small data sets."""

from __future__ import annotations

import os
import time
from typing import Any

from zephon_core import Dataset, MixtureSpec, StaticMixtureWorkSource
from zephon_core.demo import corpus
from zephon_core.testing.workers import die_on_seven, fail_on_seven, hang_on_seven

__all__ = [
    "FailingShardReader",
    "SlowReader",
    "die_on_seven",
    "fail_on_seven",
    "hang_on_seven",
    "jitter",
    "quick",
    "shm_entries",
    "demo_datasets",
    "demo_mixture",
    "numbered",
    "returns_list",
    "sleepy",
    "sleepy_collate",
    "slow_identity",
    "slow_push",
]


def numbered(name: str, n: int, shard: int, **fields: Any) -> Dataset:
    """``n`` records ``{**fields, "i": i}`` (``i`` from 0) in shards of ``shard`` records."""
    return Dataset.from_records(name, [{**fields, "i": i} for i in range(n)], shard_size=shard)


def demo_datasets(sentences: int | None = None, sentence_shard: int = 1000) -> list[Dataset]:
    """The demo corpus: ``paragraphs`` in shards of 500 and the first ``sentences`` (default all) ``sentences``."""
    paragraphs, all_sentences = corpus()
    return [
        Dataset.from_records("paragraphs", paragraphs, 500),
        Dataset.from_records("sentences", all_sentences[:sentences], sentence_shard),
    ]


def demo_mixture(sentences: int, sentence_shard: int, **options: Any) -> StaticMixtureWorkSource:
    """:func:`demo_datasets` mixed 0.6 / 0.4 in chunks of 32 (seed 11), with the source's other ``options``."""
    return StaticMixtureWorkSource(
        demo_datasets(sentences, sentence_shard),
        mixture=MixtureSpec({"paragraphs": 0.6, "sentences": 0.4}),
        chunk_size=32,
        seed=11,
        **options,
    )


def slow_identity(payload: dict[str, Any]) -> dict[str, Any]:
    time.sleep(0.001)
    return payload


def returns_list(payload: dict[str, Any]) -> Any:
    return [payload]


def jitter(payload: dict[str, Any]) -> dict[str, Any]:
    """Sleep a random few hundred microseconds (timing only; the output is the input)."""
    if os.urandom(1)[0] < 24:
        time.sleep(os.urandom(1)[0] / 100_000)
    return payload


class FailingShardReader:
    """Builds a memory reader whose shard 1 cannot be read (module level: picklable for processes)."""

    @staticmethod
    def make() -> Any:
        from zephon_core.work.readers import MemoryReader

        class _Reader(MemoryReader):
            def read(self, shard: int, indices: Any) -> list[dict[str, Any]]:
                if shard == 1:
                    raise OSError("disk says no")
                return super().read(shard, indices)

        return _Reader([{"i": i} for i in range(40)], 10)


def sleepy(payload: dict[str, Any]) -> dict[str, Any]:
    """2 ms per record: a deliberately slow step."""
    time.sleep(0.002)
    return payload


def quick(payload: dict[str, Any]) -> dict[str, Any]:
    return payload


def sleepy_collate(rows: list[dict[str, Any]]) -> dict[str, Any]:
    import numpy as np

    time.sleep(0.002 * len(rows))
    return {"i": np.array([r["i"] for r in rows])}


def slow_push(state: dict[str, Any], payload: dict[str, Any]) -> list[dict[str, Any]]:
    """A stateful step whose accumulator (serial) is slow."""
    time.sleep(0.002)
    return [payload]


class SlowReader:
    """Builds a memory reader that takes 2 ms per sample (module level: picklable)."""

    @staticmethod
    def make(n: int) -> Any:
        from zephon_core.work.readers import MemoryReader

        class _Reader(MemoryReader):
            def read(self, shard: int, indices: Any) -> list[dict[str, Any]]:
                time.sleep(0.002 * len(indices))
                return super().read(shard, indices)

        return _Reader([{"i": i} for i in range(n)], 500)


def shm_entries() -> set[str]:
    """Entries of /dev/shm, less named semaphores (``sem.*``: multiprocessing's, joblib's loky...):
    the processes runner creates none, and other processes of a shared machine create and remove them
    all the time. A leaked segment would be a shared-memory file, never a semaphore."""
    names = os.listdir("/dev/shm") if os.path.isdir("/dev/shm") else []
    return {n for n in names if not n.startswith("sem.")}
