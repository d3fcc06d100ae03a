"""``LitDataReader``: a LitData dataset (``litdata.optimize`` output) read natively, without torch.

One shard is one chunk file. :meth:`LitDataReader.read` opens (maps) a chunk once per call and
slices every requested item out of it; parsed headers, Arrow tables and inflated zstd frames stay in
small per-process LRUs, so a shuffled fetch that keeps returning to the same chunks pays for each
once. The reader pickles to its configuration and the parsed ``index.json`` only.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

import numpy as np
from zephon_storage import ByteLRU, LayoutReader, MappedFiles, check_sample_indices

from zephon_core import ConfigError, ReaderError, RecordError, ShardInfo
from zephon_litdata import chunks as ck
from zephon_litdata.codecs import decompress_file, zstd_decompress
from zephon_litdata.layout import ChunkEntry, Layout, parse_layout
from zephon_litdata.leaves import Decoder, UnsupportedFormat, decoder_for, flat_dtype
from zephon_litdata.treespec import Unflatten, UnsupportedSpec, compile_spec


class LitDataReader(LayoutReader):
    """Reads a LitData dataset folder (``index.json`` + ``chunk-*.bin``), local or remote.

    Args:
        path: the dataset folder (or its ``index.json``): local path or fsspec URL.
        item_key: key under which a sample that is not a dict is returned (``{"item": value}``).
        block_size: tokens per sample for ``TokensLoader`` datasets (required for them).
        cache_bytes_decoded: budget of decoded state kept per process (inflated zstd frames,
            decompressed Arrow tables).
        max_open_chunks: chunk files kept mapped per process.
        **storage: :class:`zephon_storage.Storage` options (``storage_options``, ``cache_dir``,
            ``cache_bytes``, ``retries``, ...), ``manifest`` (hold the dataset to the manifest of
            ``zephon index``, default True), ``verify`` (LitData chunks carry no checksum:
            ``"checksum"`` checks the SHA-256 from ``zephon index --checksum``), ``on_error`` and
            ``max_bad_fraction`` (an item, frame or Arrow footer that does not decode is skippable;
            see :class:`~zephon_storage.StorageReader`); any other name is a ``ConfigError``.
    """

    format = "litdata"
    # Chunk decoders are compiled from the layout in each process (closures do not pickle).
    _RUNTIME = ("_chunks", "_frames", "_dtype", "_decoders", "_unflatten", "_leaf_sizes", "_leaf_header")

    def __init__(
        self,
        path: str,
        *,
        item_key: str = "item",
        block_size: int | None = None,
        cache_bytes_decoded: int = 256 << 20,
        max_open_chunks: int = 64,
        **storage: Any,
    ) -> None:
        super().__init__(path, storage)
        if not isinstance(item_key, str) or not item_key:
            raise ConfigError(f"litdata reader: item_key must be a non-empty string, got {item_key!r}")
        self.item_key = item_key
        self.block_size = block_size
        self.cache_bytes_decoded = int(cache_bytes_decoded)
        self.max_open_chunks = int(max_open_chunks)
        self.layout: Layout = self._load_layout(parse_layout)
        self._init_runtime()

    # -- construction -------------------------------------------------------------------------------
    def _check_supported(self) -> None:
        lay = self.layout
        where = f"litdata dataset {self.path!r}"
        if lay.loader == "TokensLoader":
            if not isinstance(self.block_size, int) or isinstance(self.block_size, bool) or self.block_size < 1:
                raise ConfigError(
                    f"{where} uses TokensLoader: pass block_size=<tokens per sample> (got {self.block_size!r})"
                )
            if len(lay.data_format) != 1:
                raise ReaderError(f"{where}: a TokensLoader dataset must have one leaf, has {list(lay.data_format)}")
            if lay.level in ("batch", "sample"):
                raise ReaderError(
                    f"{where}: TokensLoader chunks with compression_level={lay.level!r} are not supported"
                )
        elif self.block_size is not None:
            raise ConfigError(f"{where}: block_size applies only to TokensLoader datasets")
        try:
            if lay.loader == "TokensLoader":
                self._dtype = flat_dtype(lay.data_format[0])
            self._decoders: list[Decoder] = [decoder_for(f) for f in lay.data_format]
            self._unflatten: Unflatten = compile_spec(lay.data_spec, len(lay.data_format))
        except (UnsupportedFormat, UnsupportedSpec) as exc:
            raise ReaderError(f"{where}: {exc}") from None
        self._leaf_sizes = f"<{len(lay.data_format)}I"
        self._leaf_header = 4 * len(lay.data_format)

    def _init_runtime(self) -> None:
        self._check_supported()
        self._files = MappedFiles(self.storage, self.max_open_chunks, decompress=decompress_file)
        self._chunks = ByteLRU(self.cache_bytes_decoded, self.max_open_chunks)
        self._frames = ByteLRU(self.cache_bytes_decoded // 4 or 1)

    def _layout_files(self, layout: Layout) -> list[tuple[Sequence[str], int]]:
        """Each chunk's file (or the decompressed copy LitData leaves in its place) and its item count."""
        codec = layout.compression if layout.level == "chunk" else None
        out: list[tuple[Sequence[str], int]] = []
        for c in layout.chunks:
            plain = _plain_name(c.filename, codec)
            out.append(((c.filename, plain) if plain else (c.filename,), c.items))
        return out

    # -- the Reader contract ------------------------------------------------------------------------
    def shards(self) -> list[ShardInfo]:
        return [ShardInfo(c.filename, self._count(c)) for c in self.layout.chunks]

    def _count(self, entry: ChunkEntry) -> int:
        """Samples in a chunk: its items, or its whole token blocks for TokensLoader data."""
        if self.layout.loader == "TokensLoader":
            return int(entry.dim or 0) // int(self.block_size or 1)
        return entry.items

    def read(self, shard: int, indices: np.ndarray) -> list[dict[str, Any]]:
        self._check_shard(shard, len(self.layout.chunks), "chunk")
        entry = self.layout.chunks[shard]
        what = f"litdata chunk {entry.filename!r} (shard {shard})"
        idx = check_sample_indices(indices, self._count(entry), what, "chunk")
        state = self._open(shard)
        if isinstance(state, np.ndarray):
            return self._token_blocks(state, idx)
        try:
            if isinstance(state, ck.ArrowRows):
                return self._arrow_rows(state, idx)
            if isinstance(state, ck.Framed):
                return self._framed_items(shard, state, idx, what)
            return self._classic_items(state, idx, what)
        except RecordError:
            raise
        except Exception as exc:  # an item, frame or value that does not decode: those items only
            if len(idx) > 1:  # name the first bad item (the error path only: read them one by one)
                for i in idx.tolist():
                    self.read(shard, np.array([i], dtype=np.int64))
            if isinstance(exc, ReaderError):  # a frame: the same message for each of its items
                raise RecordError(str(exc)) from None
            item = f" {int(idx[0])}" if len(idx) == 1 else ""
            raise RecordError(f"{what}: corrupt item{item} ({type(exc).__name__}: {exc})") from exc

    def describe(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "index_sha256": self.layout.digest[:16],
            "chunks": len(self.layout.chunks),
            "item_key": self.item_key,
            "block_size": self.block_size,
        }

    def check(self) -> dict[str, int]:
        """Open every chunk (headers, counts, decompression checked); how many of each layout there are.

        Raises:
            ReaderError: naming the first chunk that is missing, truncated, corrupt or disagrees
                with ``index.json``.
        """
        kinds: dict[str, int] = {}
        for shard in range(len(self.layout.chunks)):
            state = self._open(shard)
            name = {ck.ArrowRows: "arrow", ck.Framed: "framed-zstd", ck.Classic: "pytree"}.get(type(state), "tokens")
            kinds[name] = kinds.get(name, 0) + 1
        return kinds

    def close(self) -> None:
        """Drop the mapped chunks and the decoded state."""
        self._files.clear()
        self._chunks.clear()
        self._frames.clear()

    # -- chunks -------------------------------------------------------------------------------------
    def _open(self, shard: int) -> Any:
        state = self._chunks.get(shard)
        if state is not None:
            return state
        entry = self.layout.chunks[shard]
        what = f"litdata chunk {self.storage.url_of(entry.filename)} (shard {shard})"
        lay = self.layout
        codec = lay.compression if lay.level == "chunk" else None
        # LitData's own reader leaves a decompressed ``chunk-N.bin`` in place of ``chunk-N.zstd.bin``.
        buf = self._view(entry.filename, codec, _plain_name(entry.filename, codec), what)
        if lay.loader == "TokensLoader":
            state = ck.tokens_view(buf, entry.items, int(entry.dim or 0), self._dtype, what)
            self._chunks.put(shard, state, 0)
            return state
        if lay.level == "batch":
            state = ck.parse_framed(buf, entry.items, what)
        elif ck.arrow_span(buf) is not None:
            state = ck.open_arrow(buf, entry.items, what)
        else:
            state = ck.parse_classic(buf, entry.items, what)
        self._chunks.put(shard, state, state.nbytes())
        return state

    # -- decoding -----------------------------------------------------------------------------------
    def _sample(self, raw: memoryview) -> dict[str, Any]:
        sizes = struct.unpack_from(self._leaf_sizes, raw, 0)
        pos = self._leaf_header
        leaves = []
        for size, dec in zip(sizes, self._decoders):
            end = pos + size
            if end > len(raw):
                raise ValueError(f"leaf of {size} bytes runs past the item's {len(raw)} bytes")
            leaves.append(dec(raw[pos:end]))
            pos = end
        if pos != len(raw):
            raise ValueError(f"{len(raw) - pos} stray bytes after the item's leaves")
        value = self._unflatten(leaves)
        return value if isinstance(value, dict) else {self.item_key: value}

    def _classic_items(self, state: ck.Classic, idx: np.ndarray, what: str) -> list[dict[str, Any]]:
        buf, sample = state.buf, self._sample
        # Offsets as Python ints, computed for all requested items at once: per-item numpy indexing
        # would cost more than decoding a small item.
        spans = zip(state.offsets[idx].tolist(), state.offsets[idx + 1].tolist())
        if self.layout.level != "sample":
            return [sample(buf[a:b]) for a, b in spans]
        return [
            sample(memoryview(zstd_decompress(buf[a:b], None, what=f"{what}, item {i}")))
            for i, (a, b) in zip(idx.tolist(), spans)
        ]

    def _framed_items(self, shard: int, state: ck.Framed, idx: np.ndarray, what: str) -> list[dict[str, Any]]:
        offsets, frames = state.offsets, idx // state.frame_rows
        base = offsets[state.frames["first"][frames]]
        starts, ends = (offsets[idx] - base).tolist(), (offsets[idx + 1] - base).tolist()
        out = []
        for f, a, b in zip(frames.tolist(), starts, ends):
            out.append(self._sample(self._frame(shard, state, f, what)[a:b]))
        return out

    def _frame(self, shard: int, state: ck.Framed, f: int, what: str) -> memoryview:
        key = (shard, f)
        data = self._frames.get(key)
        if data is None:
            fr = state.frames[f]
            start, zlen, size = int(fr["offset"]), int(fr["zlen"]), int(fr["len"])
            expect = int(state.offsets[fr["first"] + fr["count"]] - state.offsets[fr["first"]])
            if size != expect:
                raise ReaderError(f"{what}: frame {f} inflates to {size} bytes but its items span {expect}")
            data = memoryview(zstd_decompress(state.buf[start : start + zlen], size, what=f"{what}, frame {f}"))
            self._frames.put(key, data, size)
        return data

    def _arrow_rows(self, state: ck.ArrowRows, idx: np.ndarray) -> list[dict[str, Any]]:
        import pyarrow as pa

        rows = state.table.take(pa.array(idx, type=pa.int64())).to_pylist()
        return [r if isinstance(r, dict) else {self.item_key: r} for r in rows]

    def _token_blocks(self, tokens: np.ndarray, idx: np.ndarray) -> list[dict[str, Any]]:
        bs = int(self.block_size or 1)
        return [{self.item_key: tokens[i * bs : (i + 1) * bs].copy()} for i in idx.tolist()]


def _plain_name(filename: str, codec: str | None) -> str | None:
    """``chunk-0-1.zstd.bin`` -> ``chunk-0-1.bin`` (what LitData leaves after decompressing locally)."""
    ext = f".{codec}.bin" if codec else ""
    return filename[: -len(ext)] + ".bin" if ext and filename.endswith(ext) else None
