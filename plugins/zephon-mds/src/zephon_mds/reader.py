"""``MDSReader``: a Mosaic Streaming MDS dataset read natively, without torch or ``streaming``.

One Zephon shard is one MDS shard. A shard file is::

    uint32 n | uint32 offsets[n+1] (absolute) | writer config JSON | samples

and a sample is ``uint32 size`` for each variable-size column, then every column's bytes, columns in
index order. :meth:`MDSReader.read` maps a shard once per call (compressed shards are decompressed
once per node into the shared cache) and slices every requested sample out of it; parsed shard
headers stay in a small per-process LRU. The reader pickles to its configuration only.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from zephon_storage import ByteLRU, LayoutReader, MappedFiles, check_sample_indices

from zephon_core import ReaderError, RecordError, ShardInfo
from zephon_mds.codecs import decompress_file
from zephon_mds.encodings import Decoder, UnsupportedEncoding, decoder_for, fixed_size
from zephon_mds.layout import Layout, ShardEntry, parse_layout


@dataclass(frozen=True, slots=True)
class _Columns:
    """How to cut a sample into columns: names, decoders, and which sizes are stored per sample."""

    names: tuple[str, ...]
    decoders: tuple[Decoder, ...]
    fixed: tuple[int | None, ...]
    sizes_fmt: str
    n_var: int


@dataclass(frozen=True, slots=True)
class _Open:
    buf: memoryview
    offsets: np.ndarray


class MDSReader(LayoutReader):
    """Reads an MDS dataset folder (``index.json`` + ``shard.NNNNN.mds[.zstd]``), local or remote.

    Args:
        path: the dataset folder (or its ``index.json``): local path or fsspec URL.
        max_open_shards: shard files kept mapped per process.
        verify_hashes: check each shard against the digests the writer recorded (``hashes=`` of
            MDSWriter; hashlib algorithms, plus xxhash ones if ``xxhash`` is installed) once per
            process when it is first opened. Off by default, as in Streaming: it costs a pass
            over every shard.
        **storage: :class:`zephon_storage.Storage` options (``storage_options``, ``cache_dir``,
            ``cache_bytes``, ``retries``, ...), ``manifest`` (hold the dataset to the manifest of
            ``zephon index``, default True), ``verify`` (``"checksum"``: the SHA-256 of each shard
            file from ``zephon index --checksum``, for datasets written without ``hashes=``),
            ``on_error`` and ``max_bad_fraction`` (a sample that does not decode is skippable; see
            :class:`~zephon_storage.StorageReader`); any other name is a ``ConfigError``.
            Compressed shards are decompressed into that cache.
    """

    format = "mds"
    # Column plans are compiled from the layout in each process (their decoders are closures).
    _RUNTIME = ("_open_shards", "_plans")

    def __init__(self, path: str, *, max_open_shards: int = 64, verify_hashes: bool = False, **storage: Any) -> None:
        super().__init__(path, storage)
        self.max_open_shards = int(max_open_shards)
        self.verify_hashes = bool(verify_hashes)
        self.layout: Layout = self._load_layout(parse_layout)
        self._init_runtime()

    # -- construction -------------------------------------------------------------------------------
    def _compile(self) -> None:
        plans: dict[tuple[tuple[str, ...], tuple[str, ...], tuple[int | None, ...]], _Columns] = {}
        self._plans: list[_Columns] = []
        for s in self.layout.shards:
            key = (s.columns, s.encodings, s.sizes)
            if key not in plans:
                plans[key] = self._columns(s)
            self._plans.append(plans[key])

    def _columns(self, s: ShardEntry) -> _Columns:
        where = f"mds dataset {self.path!r}, shard {s.filename!r}"
        decoders = []
        for name, enc, size in zip(s.columns, s.encodings, s.sizes):
            try:
                decoders.append(decoder_for(enc))
            except UnsupportedEncoding as exc:
                raise ReaderError(f"{where}, column {name!r}: {exc}") from None
            want = fixed_size(enc)
            if want is not None and size != want:
                raise ReaderError(f"{where}, column {name!r}: encoding {enc!r} has {want} bytes, index says {size}")
        n_var = sum(1 for z in s.sizes if z is None)
        return _Columns(s.columns, tuple(decoders), s.sizes, f"<{n_var}I", n_var)

    def _init_runtime(self) -> None:
        self._compile()
        self._files = MappedFiles(self.storage, self.max_open_shards, decompress=decompress_file)
        self._open_shards = ByteLRU(1 << 30, self.max_open_shards)

    def _layout_files(self, layout: Layout) -> list[tuple[Sequence[str], int]]:
        """Each shard's file (the compressed one, or the plain copy Streaming leaves) and its sample count."""
        return [((s.filename, s.raw) if s.zip else (s.raw,), s.samples) for s in layout.shards]

    # -- the Reader contract ------------------------------------------------------------------------
    def shards(self) -> list[ShardInfo]:
        return [ShardInfo(s.filename, s.samples) for s in self.layout.shards]

    def read(self, shard: int, indices: np.ndarray) -> list[dict[str, Any]]:
        self._check_shard(shard, len(self.layout.shards), "shard")
        entry = self.layout.shards[shard]
        what = f"mds shard {entry.filename!r} (shard {shard})"
        idx = check_sample_indices(indices, entry.samples, what, "shard")
        opened = self._open(shard)
        cols = self._plans[shard]
        buf, offsets = opened.buf, opened.offsets
        # Offsets as Python ints for all requested samples at once (numpy scalar indexing per
        # sample costs more than decoding a small sample).
        spans = list(zip(offsets[idx].tolist(), offsets[idx + 1].tolist()))
        try:
            return [_decode(buf[a:b], cols) for a, b in spans]
        except Exception:  # a value that does not decode: corrupt bytes; name the first such sample
            for i, (a, b) in zip(idx.tolist(), spans):
                try:
                    _decode(buf[a:b], cols)
                except Exception as exc:
                    raise RecordError(
                        f"{what}: corrupt sample {i} (byte {a}; {type(exc).__name__}: {exc})"
                    ) from exc
            raise

    def describe(self) -> dict[str, Any]:
        return {"format": self.format, "index_sha256": self.layout.digest[:16], "shards": len(self.layout.shards)}

    def check(self) -> int:
        """Open every shard (sizes, headers, decompression checked); returns the number of shards.

        Raises:
            ReaderError: naming the first shard that is missing, truncated, corrupt or disagrees
                with ``index.json``.
        """
        for shard in range(len(self.layout.shards)):
            self._open(shard)
        return len(self.layout.shards)

    def close(self) -> None:
        """Drop the mapped shards and their parsed headers."""
        self._files.clear()
        self._open_shards.clear()

    # -- shards -------------------------------------------------------------------------------------
    def _open(self, shard: int) -> _Open:
        opened = self._open_shards.get(shard)
        if opened is not None:
            return opened
        entry = self.layout.shards[shard]
        what = f"mds shard {self.storage.url_of(entry.filename)} (shard {shard})"
        # Streaming's own local cache keeps only the decompressed shard: accept that too.
        buf = self._view(entry.filename, entry.codec, entry.raw if entry.zip is not None else None, what)
        if self.verify_hashes:
            _verify(buf, entry, what)
        opened = _parse_shard(buf, entry, what)
        self._open_shards.put(shard, opened, int(opened.offsets.nbytes))
        return opened


def _verify(buf: memoryview, entry: ShardEntry, what: str) -> None:
    import hashlib

    checked = 0
    for algo, want in entry.hashes:
        if algo in hashlib.algorithms_available:
            got = hashlib.new(algo, buf).hexdigest()
        else:
            try:
                import xxhash

                got = getattr(xxhash, f"{algo}_hexdigest")(buf)
            except (ImportError, AttributeError):
                continue
        checked += 1
        if got != want:
            raise ReaderError(f"{what}: {algo} digest {got} does not match index.json ({want}): corrupt shard")
    if entry.hashes and not checked:
        names = ", ".join(a for a, _ in entry.hashes)
        raise ReaderError(f"{what}: verify_hashes=True but no digest algorithm of the index ({names}) is available")


def _parse_shard(buf: memoryview, entry: ShardEntry, what: str) -> _Open:
    n = entry.samples
    if entry.raw_bytes is not None and len(buf) != entry.raw_bytes:
        state = "truncated" if len(buf) < entry.raw_bytes else "longer than expected"
        raise ReaderError(f"{what}: shard is {state} ({len(buf)} bytes, index.json says {entry.raw_bytes})")
    if len(buf) < 4:
        raise ReaderError(f"{what}: truncated shard ({len(buf)} bytes)")
    (found,) = struct.unpack_from("<I", buf, 0)
    if found != n:
        raise ReaderError(f"{what}: shard header holds {found} samples but index.json says {n}")
    header = 4 + 4 * (n + 1)
    if len(buf) < header:
        raise ReaderError(f"{what}: truncated shard ({len(buf)} bytes, header needs {header})")
    offsets = np.frombuffer(buf, dtype="<u4", count=n + 1, offset=4).astype(np.int64)
    if offsets[0] < header or (np.diff(offsets) < 0).any():
        raise ReaderError(f"{what}: corrupt shard header (sample offsets are not increasing from {header})")
    if offsets[-1] > len(buf):
        raise ReaderError(f"{what}: truncated shard (samples end at byte {offsets[-1]}, file has {len(buf)})")
    return _Open(buf, offsets)


def _decode(raw: memoryview, cols: _Columns) -> dict[str, Any]:
    pos = 4 * cols.n_var
    var = iter(struct.unpack_from(cols.sizes_fmt, raw, 0)) if cols.n_var else iter(())
    sample: dict[str, Any] = {}
    for name, dec, size in zip(cols.names, cols.decoders, cols.fixed):
        n = size if size is not None else next(var)
        end = pos + n
        if end > len(raw):
            raise ValueError(f"column {name!r} ({n} bytes) runs past the sample's {len(raw)} bytes")
        sample[name] = dec(raw[pos:end])
        pos = end
    if pos != len(raw):
        raise ValueError(f"{len(raw) - pos} stray bytes after the sample's columns")
    return sample
