"""``ArrowReader``: a ``save_to_disk`` folder (or a ``datasets`` cache) read with pyarrow directly.

``datasets`` stores a saved dataset as Arrow IPC *stream* files and reads them memory-mapped, so
a row costs a slice of the mapping and no decoding. This reader does the same without importing
``datasets``: each file is one shard, mapped once per process (``pa.memory_map``, zero copy), its
record batches located by row offsets. A stream has no footer, so rows are counted by walking the batch headers of the mapped file (no data is
touched), or taken from the ``zephon index`` manifest, which also records the batch sizes.
``read`` slices the requested rows out of their batches (zero copy) and converts them in one call.

What a stream does not protect, this reader checks:

* a stream cut at a message boundary parses as a shorter, valid stream, so the file must end with
  the end-of-stream marker that every writer since Arrow 0.15 appends, exactly at the end;
* corrupt offsets or UTF-8 in a batch could crash or garble the conversion to Python, so each
  record batch is fully validated (``RecordBatch.validate(full=True)``) the first time a process
  reads from it; a batch that fails is a :class:`~zephon_core.RecordError` for its rows only;
* flipped bytes inside numbers cannot be seen in Arrow data at all: ``zephon index --checksum`` and
  ``verify="checksum"`` compare each file with its SHA-256.

A mapped file truncated *in place* while mapped would raise SIGBUS on access (as it would in
``datasets``); files replaced by renaming, as writers and the shard cache do, are safe. Each file's
size is compared with the listing when it is mapped, so a file changed between listing and use is
an error, not other rows.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
from zephon_storage import DataFiles, describe_error, in_request_order

from zephon_core import ReaderError, RecordError, ShardInfo
from zephon_hf.base import HFFiles, name_option

EOS = b"\xff\xff\xff\xff\x00\x00\x00\x00"
"""The end-of-stream marker: a continuation token and a zero metadata length."""

FILE_MAGIC = b"ARROW1"
"""The first bytes of an Arrow IPC *file* (random-access format), also accepted."""


class MappedStream:
    """One mapped Arrow file of a process: its record batches, row offsets and validation state."""

    def __init__(self, schema: pa.Schema, batches: list[pa.RecordBatch], name: str) -> None:
        self.schema = schema
        self.batches = batches
        self.name = name
        self.offsets = np.concatenate([[0], np.cumsum([b.num_rows for b in batches], dtype=np.int64)]).astype(np.int64)
        self._valid: set[int] = set()  # threads racing on a new batch both validate it: harmless
        self._invalid: dict[int, str] = {}

    def batch(self, g: int) -> pa.RecordBatch:
        """Record batch ``g``, fully validated on first use (a RecordError for its rows if it is corrupt)."""
        if g in self._valid:
            return self.batches[g]
        failed = self._invalid.get(g)
        if failed is None:
            batch = self.batches[g]
            try:
                batch.validate(full=True)
            except Exception as exc:
                rows = f"rows {int(self.offsets[g])}-{int(self.offsets[g + 1]) - 1}"
                failed = self._invalid[g] = f"{self.name}: record batch {g} ({rows}) is corrupt ({describe_error(exc)})"
            else:
                self._valid.add(g)
                return batch
        raise RecordError(failed)


def read_batches(source: pa.MemoryMappedFile, name: str) -> tuple[pa.Schema, list[pa.RecordBatch]]:
    """The schema and every record batch of a mapped Arrow stream (or file), zero copy.

    Raises:
        ReaderError: naming ``name``, when the file is not Arrow IPC data or is truncated.
    """
    size = source.size()
    head = source.read_at(min(size, len(FILE_MAGIC)), 0)
    try:
        if head == FILE_MAGIC:
            reader = pa.ipc.open_file(source)
            return reader.schema, [reader.get_batch(k) for k in range(reader.num_record_batches)]
        if size < len(EOS) or source.read_at(len(EOS), size - len(EOS)) != EOS:
            raise ReaderError(
                f"{name}: not a readable Arrow stream file: it does not end with the end-of-stream marker "
                f"(truncated, or not Arrow data; {size} bytes)"
            )
        stream = pa.ipc.open_stream(source)
        batches = []
        while True:
            try:
                batches.append(stream.read_next_batch())
            except StopIteration:
                break
        if source.tell() != size:
            raise ReaderError(
                f"{name}: not a readable Arrow stream file: the stream ends at byte {source.tell()} of {size}"
            )
        return stream.schema, batches
    except ReaderError:
        raise
    except Exception as exc:
        raise ReaderError(f"{name}: not a readable Arrow stream file ({describe_error(exc)})") from None


class ArrowReader(HFFiles):
    """Reads one split of a ``save_to_disk`` folder, a ``DatasetDict`` folder or a ``datasets`` cache.

    Rows come back as the Arrow data stores them (``Table.to_pylist``): features that ``datasets``
    decodes on access (``Image``, ``Audio``, ``ClassLabel`` names) stay in their stored form (a
    ``{"bytes", "path"}`` dict, an int), like ``Dataset.with_format("arrow")``.

    Args:
        path: the folder (local path or fsspec URL), or one ``.arrow`` file.
        config: must be None (Arrow folders have no configs; it exists so that both HF layouts
            take the same options).
        split: the split of a ``DatasetDict`` or cache folder; None when there is one.
        columns: read only these columns; each must exist in every file.
        prefetch: after opening shard ``s`` of a remote dataset, warm the cache with the next
            ``prefetch`` shards.
        open_files: most files kept mapped at once per reader and process.
        manifest: hold the listing to ``_zephon_manifest.json`` when ``zephon index`` wrote one.
        **storage: :class:`~zephon_storage.Storage` options, ``verify``, ``on_error`` and
            ``max_bad_fraction``; any other name is a ``ConfigError`` listing the valid options.
    """

    data_files = DataFiles((".arrow",), "Arrow files (.arrow)")

    def __init__(
        self,
        path: str,
        *,
        config: str | None = None,
        split: str | None = None,
        columns: Sequence[str] | None = None,
        prefetch: int = 0,
        open_files: int = 16,
        manifest: bool = True,
        **storage: Any,
    ) -> None:
        super().__init__(path, prefetch=prefetch, open_files=open_files, manifest=manifest, storage=storage)
        self.config = name_option(config, "config")
        self.split = name_option(split, "split")
        self.columns = self._names(columns, "columns")
        self.selection = None
        self._offsets: list[np.ndarray] | None = None
        self._init_runtime()
        self.files()  # resolve config and split now: a bad choice is a ConfigError from the constructor

    # -- listing ------------------------------------------------------------------------------------
    def batch_offsets(self, i: int) -> np.ndarray:
        """Row offsets of shard ``i``'s record batches: ``[0, n0, n0+n1, ..., rows]``."""
        if self._offsets is None:
            offsets = []
            for k, info in enumerate(self.files()):
                entry = self._manifest.get(info.rel) if self._manifest else None
                if entry is not None and "batches" in entry.extra:
                    rows = [int(n) for n in entry.extra["batches"]]  # no file read at listing time
                else:
                    stream, release = self._map(k)
                    rows = np.diff(stream.offsets).tolist()
                    release()
                offsets.append(np.concatenate([[0], np.cumsum(rows, dtype=np.int64)]).astype(np.int64))
            self._check_rows([int(o[-1]) for o in offsets])
            self._offsets = offsets
        return self._offsets[i]

    def shards(self) -> list[ShardInfo]:
        """One shard per Arrow file, in the order the folder lists them (its row order)."""
        return self._held_to_manifest(
            [ShardInfo(f.rel, int(self.batch_offsets(i)[-1])) for i, f in enumerate(self.files())]
        )

    def _manifest_extra(self, i: int) -> dict[str, Any]:
        """Record-batch sizes, so listing with a manifest reads no file (remote data: downloads none)."""
        return {"batches": np.diff(self.batch_offsets(i)).tolist()}

    # -- files --------------------------------------------------------------------------------------
    def _map(self, i: int) -> tuple[MappedStream, Callable[[], None]]:
        """Map shard ``i`` and parse its batch headers; checks its size and columns."""
        info, name = self.files()[i], self._name(i)
        local = self._local(i)
        try:
            size = os.path.getsize(local.path)
            if size != info.size:
                raise ReaderError(
                    f"{name}: has {size} bytes, {info.size} when listed: the file changed after the dataset was opened"
                )
            source = pa.memory_map(local.path)
            schema, batches = read_batches(source, name)
        except ReaderError:
            local.release()
            raise
        except Exception as exc:
            local.release()
            raise ReaderError(f"{name}: cannot be mapped ({describe_error(exc)})") from None
        if self.columns is not None:
            names = schema.names
            missing = [c for c in self.columns if c not in names]
            if missing:
                source.close()
                local.release()
                raise ReaderError(f"{name}: has no column(s) {missing} (columns: {names})")
            batches = [b.select(self.columns) for b in batches]
            schema = pa.schema([schema.field(c) for c in self.columns], metadata=schema.metadata)

        def release() -> None:
            source.close()  # buffers still in use keep their part of the mapping alive
            local.release()

        return MappedStream(schema, batches, name), release

    def _open_file(self, i: int) -> tuple[MappedStream, Callable[[], None]]:
        """Shard ``i`` mapped, its record batches checked against the listing."""
        stream, release = self._map(i)
        expected = self.batch_offsets(i)
        if not np.array_equal(stream.offsets, expected):
            release()
            raise ReaderError(
                f"{stream.name}: record batches {np.diff(stream.offsets)[:8].tolist()} disagree with the listing "
                f"{np.diff(expected)[:8].tolist()}: the file changed after the dataset was opened"
            )
        return stream, release

    # -- reading ------------------------------------------------------------------------------------
    def read(self, shard: int, indices: np.ndarray) -> list[dict[str, Any]]:
        """Rows ``indices`` of file ``shard``: zero-copy slices of the mapped batches, converted once.

        ``datasets`` writes record batches of a few dozen to a thousand rows, so a file holds
        thousands of them, and ``Table.take`` over that many chunks concatenates the whole column
        first (tens of ms). Instead each run of consecutive requested rows becomes one slice of
        its batch (free), the slices one table, and that table one ``to_pylist`` call: a shuffled
        read costs a slice per row, a sequential one a slice per batch.
        """
        self._check_shard(shard)
        indices = np.asarray(indices, dtype=np.int64)
        if len(indices) == 0:
            return []
        offsets = self.batch_offsets(shard)
        if indices.min() < 0 or indices.max() >= offsets[-1]:
            bad = int(indices[(indices < 0) | (indices >= offsets[-1])][0])
            raise ReaderError(f"{self._name(shard)}: row {bad} out of range ({offsets[-1]} rows)")
        stream: MappedStream = self._opened(shard)
        if len(indices) == 1:  # a single row (a random sample, or on_error="skip" narrowing down): no numpy
            i = int(indices[0])
            g = int(np.searchsorted(offsets, i, side="right")) - 1
            return self._convert(stream, [stream.batch(g).slice(i - int(offsets[g]), 1)], [i])
        rows, inverse = np.unique(indices, return_inverse=True)
        group = np.searchsorted(offsets, rows, side="right") - 1
        local = rows - offsets[group]
        breaks = (np.flatnonzero((np.diff(group) != 0) | (np.diff(local) != 1)) + 1).tolist()
        groups, locals_ = group.tolist(), local.tolist()
        pieces = [stream.batch(groups[a]).slice(locals_[a], b - a) for a, b in zip([0, *breaks], [*breaks, len(rows)])]
        return in_request_order(self._convert(stream, pieces, rows[:4].tolist()), inverse, len(indices))

    @staticmethod
    def _convert(stream: MappedStream, pieces: list[pa.RecordBatch], first: list[int]) -> list[dict[str, Any]]:
        """The rows of ``pieces`` as dicts, in one conversion."""
        try:
            return pa.Table.from_batches(pieces, schema=stream.schema).to_pylist()
        except Exception as exc:  # validated batches convert; kept so a surprise names the file
            raise RecordError(f"{stream.name}: rows {first}... cannot be converted ({describe_error(exc)})") from None
