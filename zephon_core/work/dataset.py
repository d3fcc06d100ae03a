"""Datasets: a name, a reader and the shard sizes, so pointers can be made without reading data."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from zephon_core.errors import ConfigError, ReaderError
from zephon_core.work.readers import MemoryReader, Reader, ShardInfo

if TYPE_CHECKING:
    from zephon_core.plugins import ZephonPluginManager


class Dataset:
    """A named collection of same-format shards with known sample counts. Build one with
    :meth:`from_records` (in memory) or :meth:`from_path` (any installed format)."""

    def __init__(self, name: str, reader: Reader, *, format: str | None = None) -> None:
        if not name or not isinstance(name, str):
            raise ConfigError(f"dataset name must be a non-empty string, got {name!r}")
        self.name, self.reader = name, reader
        self.format = format or reader.format
        try:
            self.shards: list[ShardInfo] = list(reader.shards())
        except ReaderError:
            raise
        except Exception as exc:  # a library error while listing: say which dataset
            raise ReaderError(f"dataset {name!r}: cannot list shards: {exc}") from exc
        if not self.shards:
            raise ReaderError(f"dataset {name!r}: no shards found")
        self.sizes = np.array([s.num_samples for s in self.shards], dtype=np.int64)
        if (self.sizes < 0).any():
            raise ReaderError(f"dataset {name!r}: negative sample count in shard list")
        self.num_samples = int(self.sizes.sum())
        if self.num_samples == 0:
            raise ReaderError(f"dataset {name!r}: all shards are empty")
        self._ends: np.ndarray | None = None  # cumulative shard ends, built on the first lookup

    @classmethod
    def from_records(cls, name: str, records: Sequence[dict[str, Any]], shard_size: int = 1000) -> Dataset:
        """An in-memory dataset, cut into shards of ``shard_size`` records (empty ``records``: a :class:`ConfigError`
        that says so, rather than the generic "no shards found")."""
        if not isinstance(records, Sequence):
            records = list(records)
        if len(records) == 0:
            raise ConfigError(
                f"dataset {name!r}: Dataset.from_records got an empty list of records; give at least one record"
            )
        return cls(name, MemoryReader(records, shard_size))

    @classmethod
    def from_path(
        cls,
        name: str,
        path: str,
        format: str | None = None,
        *,
        plugins: ZephonPluginManager | None = None,
        **options: Any,
    ) -> Dataset:
        """A dataset stored at a local path or fsspec URL; the format is detected by reader plugins.

        Args:
            name: the dataset's name in mixtures and checkpoints.
            path: a folder, a file or an fsspec URL (``s3://…``, ``memory://…``, ``file://…``).
            format: skip detection and use this registered format.
            plugins: whose readers detect and read the format (default: a fresh manager; pass the pipeline's).
            options: passed to the reader's constructor."""
        from zephon_core.plugins import default_plugin_manager

        registry = (plugins if plugins is not None else default_plugin_manager()).registry
        fmt = format or registry.detect_format(path, options.get("storage_options"))
        return cls(name, registry.make_reader(fmt, path, **options), format=fmt)

    def locate(self, index: int) -> tuple[int, int]:
        """``(shard, index in shard)`` of global sample ``index`` (negative counts from the end; out of range:
        an :class:`IndexError` naming the dataset and its length). Global order is shard order then
        in-shard order, so ``ds[i]`` is what a user sees when reading the files front to back."""
        if isinstance(index, (bool, np.bool_)) or not isinstance(index, (int, np.integer)):
            raise TypeError(f"dataset {self.name!r}: indices must be integers, got {type(index).__name__}")
        i = int(index)
        if i < 0:
            i += self.num_samples
        if not 0 <= i < self.num_samples:
            raise IndexError(f"dataset {self.name!r}: index {int(index)} out of range (length {self.num_samples})")
        ends = getattr(self, "_ends", None)  # absent on a Dataset unpickled from before it existed
        if ends is None:
            ends = self._ends = np.cumsum(self.sizes)
        shard = int(np.searchsorted(ends, i, side="right"))
        return shard, i - int(ends[shard] - self.sizes[shard])

    def take(self, indices: Sequence[int]) -> list[dict[str, Any]]:
        """The samples at global ``indices`` (any order, repeats and negatives allowed), in that order.
        Indices are grouped by shard so each shard is read once, as the fetch stage does."""
        located = [self.locate(i) for i in indices]
        by_shard: dict[int, list[int]] = {}
        for pos, (shard, _) in enumerate(located):
            by_shard.setdefault(shard, []).append(pos)
        out: list[dict[str, Any]] = [{} for _ in located]
        for shard, positions in sorted(by_shard.items()):
            local = np.array([located[p][1] for p in positions], dtype=np.int64)
            for p, rec in zip(positions, self.reader.read(shard, local)):
                out[p] = rec
        return out

    def head(self, n: int = 5) -> list[dict[str, Any]]:
        """The first ``n`` samples (fewer if the dataset is shorter): a quick look at the data."""
        return self.take(range(min(max(0, n), self.num_samples)))

    def __getitem__(self, index: int) -> dict[str, Any]:
        return self.take([index])[0]

    def __len__(self) -> int:
        return self.num_samples

    def describe(self) -> dict[str, Any]:
        """JSON-able identity of this dataset for the pipeline fingerprint."""
        return dict(name=self.name, reader=self.reader.describe(), shards=len(self.shards), samples=self.num_samples)

    def __repr__(self) -> str:
        return f"Dataset({self.name!r}, format={self.format!r}, shards={len(self.shards)}, samples={self.num_samples})"
