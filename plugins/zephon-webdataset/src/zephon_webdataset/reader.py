"""``WebDatasetReader``: WebDataset tar shards read at random, one ranged read per sample.

Each tar gets a :mod:`~zephon_webdataset.tarindex` index (built once from its headers, no payload
read) kept beside it (``<shard>.tar.zidx``) when that folder is writable, else in
``<cache_dir>/index/``; for remote data an index uploaded beside the objects is downloaded instead
of rebuilt. A sample's members are contiguous in the tar, so reading it is one range request (or
one ``pread``) from its first member's header to its last member's payload; nearby samples of one
request are merged into one range. Each member's 512-byte header is checked on the way (tar
checksum and size), so an index that disagrees with the bytes, or a corrupt header, is caught.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from zephon_storage import (
    MANIFEST,
    FileInfo,
    IndexedFileReader,
    ManifestEntry,
    SourceIdentity,
    check_listing,
    identity_of,
    in_request_order,
    read_manifest,
)

from zephon_core import ConfigError, ReaderError, RecordError, ShardInfo
from zephon_webdataset import tarindex
from zephon_webdataset.decode import DEFAULT_DECODE, decoder_for, decoders
from zephon_webdataset.detect import FILES
from zephon_webdataset.shards import expand, split_pattern

BLOCK = tarindex.BLOCK
DEFAULT_GAP = 256 * 1024
"""Requested samples closer than this are read with one range (the bytes between are discarded)."""
_MAX_RANGE = 64 * 1024 * 1024


class WebDatasetReader(IndexedFileReader[tarindex.TarIndex]):
    """Reads WebDataset tar shards (one shard per ``.tar``); each sample is a dict of its fields.

    A sample is ``{"__key__": key, "<ext>": value, …}``: ``dir/abc.jpg`` and ``dir/abc.txt`` are
    fields ``jpg`` and ``txt`` of sample ``dir/abc``. Fields named in ``decode_text`` are decoded
    (text, JSON, class integers); everything else (images, audio, ``.npy``) stays bytes.

    Args:
        path: a folder of tars, one ``.tar``, or a brace pattern (``s3://b/train-{0000..0099}.tar``,
            with ``format="webdataset"``: a pattern cannot be listed for detection). Local path or
            fsspec URL.
        shard_names: tar names relative to ``path`` (a folder), as a list or a brace pattern, in
            the order they become shards; default every ``.tar`` under ``path``, sorted.
        decode_text: extensions decoded by their last dot part: ``txt``/``text`` to str,
            ``json``/``jsn`` to objects, ``cls``/``id``/``index`` … to int. ``()`` keeps all bytes.
        fields: keep only these fields (and ``__key__``); a sample without one is a bad record.
        rebuild_stale: rebuild the index of a tar that changed instead of raising an error.
        index_dir: keep indexes here instead of beside the data / in the cache directory.
        download: read remote tars from a whole-file copy in the node cache instead of by range
            requests (worth it when most of every shard is read, e.g. several epochs on one node).
        gap: requested samples closer than this many bytes are fetched with one read.
        prefetch: with ``download``, warm the cache with the next ``prefetch`` shards.
        open_files: most local tars kept open at once per reader.
        manifest: hold the listing to ``_zephon_manifest.json`` when ``zephon index`` wrote one.
        **storage: :class:`zephon_storage.Storage` options (``storage_options``, ``cache_dir``,
            ``retries``, …), ``verify="checksum"`` (SHA-256 from ``zephon index --checksum``; reads
            whole files through the cache), ``on_error`` and ``max_bad_fraction`` (a field that
            does not decode, or a corrupt member header, is a skippable record).
    """

    format = "webdataset"
    data_files = FILES
    index_suffix = tarindex.SUFFIX
    index_noun = "tar"

    def __init__(
        self,
        path: str,
        *,
        shard_names: Sequence[str] | str | None = None,
        decode_text: Sequence[str] | None = DEFAULT_DECODE,
        fields: Sequence[str] | None = None,
        rebuild_stale: bool = False,
        index_dir: str | None = None,
        download: bool = False,
        gap: int = DEFAULT_GAP,
        prefetch: int = 0,
        open_files: int = 64,
        manifest: bool = True,
        **storage: Any,
    ) -> None:
        if not isinstance(path, str):
            raise ConfigError(f"webdataset reader: path must be a string, got {path!r} (pass a list as shard_names=)")
        root, selection = split_pattern(path)
        if shard_names is not None:
            if selection is not None:
                raise ConfigError("webdataset reader: give a brace pattern in the path or shard_names=, not both")
            if isinstance(shard_names, str):
                selection = expand(shard_names)
            elif all(isinstance(s, str) for s in shard_names):
                selection = [s.strip("/") for s in shard_names]
            else:
                raise ConfigError(
                    f"webdataset reader: shard_names must be names or a brace pattern, got {shard_names!r}"
                )
        if selection is not None:
            if not selection:
                raise ConfigError(f"webdataset reader: {path!r} names no shard")
            dup = sorted({s for s in selection if selection.count(s) > 1})
            if dup:
                raise ConfigError(f"webdataset reader: shard {dup[0]!r} is named twice")
        super().__init__(root, prefetch=prefetch, open_files=open_files, manifest=manifest, storage=storage)
        self._init_indexes(rebuild_stale=rebuild_stale, index_dir=index_dir)
        self.path = path
        self.selection = selection
        self._decoders = decoders(decode_text)
        self.decode_text = sorted(self._decoders)
        names = self._names(fields, "fields")
        self.fields = tuple(names) if names is not None else None
        self.download = bool(download)
        self.gap = max(0, int(gap))
        self._init_runtime()

    # -- listing ------------------------------------------------------------------------------------
    def _list_files(self) -> tuple[list[FileInfo], dict[str, ManifestEntry] | None]:
        """The tars (all, or the selection in its order); ``.zidx`` files beside them are remembered."""
        sel = self.selection
        if sel is None:
            accept: Callable[[str], bool] = lambda rel: FILES.accepts(rel) or rel.endswith(".tar" + tarindex.SUFFIX)  # noqa: E731
        else:
            wanted = {*sel, *(s + tarindex.SUFFIX for s in sel)}
            accept = wanted.__contains__
        listed = self.storage.list_files(accept)
        self._remote_indexes = {f.rel for f in listed if f.rel.endswith(tarindex.SUFFIX)}
        tars = {f.rel: f for f in listed if not f.rel.endswith(tarindex.SUFFIX)}
        if sel is None:
            files = [tars[r] for r in sorted(tars)]
            if not files:
                raise ReaderError(f"{self.storage.url_of('')}: no {FILES.what} found")
            self._check_orphan_indexes(tars.keys())
        else:
            missing = [s for s in sel if s not in tars]
            if missing:
                more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
                raise ReaderError(f"{self.storage.url_of(missing[0])}: not found{more} (named by {self.path!r})")
            files = [tars[s] for s in sel]
        manifest = read_manifest(self.storage, self.format) if self.use_manifest else None
        if manifest is not None:
            if sel is None:
                check_listing(self.storage, files, manifest)
            else:  # a selection is held to its own entries only
                check_listing(self.storage, files, {f.rel: manifest[f.rel] for f in files if f.rel in manifest})
                extra = [f.rel for f in files if f.rel not in manifest]
                if extra:
                    raise ReaderError(f"{self.storage.url_of(extra[0])}: not listed in {MANIFEST}")
        return files, manifest

    def shards(self) -> list[ShardInfo]:
        """One shard per tar, with its sample count from the index (built here if missing)."""
        return self._held_to_manifest([ShardInfo(f.rel, len(self._index(i))) for i, f in enumerate(self.files())])

    def describe(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "decode_text": self.decode_text,
            "fields": list(self.fields) if self.fields else None,
            "shard_names": self.selection,
        }

    # -- indexes (found, checked, adopted and saved by IndexedFileReader) ---------------------------
    def _read_index(self, path: str, name: str) -> tarindex.TarIndex:
        return tarindex.read(path, name)

    def _write_index(self, path: str, idx: tarindex.TarIndex, info: FileInfo) -> None:
        tarindex.write(path, idx, like=self._data_path(info))

    def _with_source(self, idx: tarindex.TarIndex, source: SourceIdentity) -> tarindex.TarIndex:
        return dataclasses.replace(idx, source=source)

    def _build_index(self, i: int, paths: list[str]) -> tarindex.TarIndex:
        """Scan the tar's headers (a verified local copy with ``verify="checksum"``) and save the index."""
        info, name = self.files()[i], self._name(i)
        if self.storage.is_local or self.content_checksums:
            local = self._local(i)
            try:
                with open(local.path, "rb") as f:
                    size = os.fstat(f.fileno()).st_size
                    if size != info.size:
                        raise ReaderError(f"{name}: has {size} bytes, listed with {info.size}: the tar changed")
                    ident = identity_of(_reader_of(f), size, info.version)
                    idx = tarindex.build(f, ident, name)
            except OSError as exc:
                raise ReaderError(f"{name}: cannot scan: {exc}") from None
            finally:
                local.release()
        else:
            ident = self._current_identity(info)  # range reads of its first and last 64 KiB
            with self.storage.open_remote(info.rel, info) as f:
                idx = tarindex.build(f, ident, name)
        return self._save_index(paths, idx, info, name)

    # -- data ---------------------------------------------------------------------------------------
    def _ranged(self) -> bool:
        """Remote tars are read by range requests unless a whole, checked copy is wanted."""
        return not (self.storage.is_local or self.download or self.content_checksums)

    def _open_file(self, i: int) -> tuple[int, Callable[[], None]]:
        """A descriptor of the local tar (or its cached copy), checked against the size indexed."""
        idx = self._index(i)
        return self._open_indexed(i, self._local(i), idx.source.size)

    def _prefetchable(self, rel: str) -> bool:
        """Whole-file downloads ahead help only when tars are read from whole copies."""
        return not self._ranged()

    def _read_span(self, shard: int, start: int, end: int) -> bytes:
        if self._ranged():
            info = self.files()[shard]
            if end > info.size:
                raise ReaderError(f"{self._name(shard)}: has {info.size} bytes, the index needs {end}: truncated")
            return self.storage.read_range(info.rel, start, end, info)
        with self._lock:
            fd = self._opened(shard)
            data = os.pread(fd, end - start, start)
        if len(data) != end - start:
            raise ReaderError(
                f"{self._name(shard)}: ends early ({len(data)} of {end - start} bytes at byte {start}): truncated"
            )
        return data

    def _check_unchanged(self, shard: int) -> None:
        """A ReaderError (never skipped) when a remote tar is not the object that was listed and indexed.

        Range requests carry no version, so a replaced object shows up as headers that disagree
        with the index; that is a changed shard, not one bad record.
        """
        if not self._ranged():
            return
        listed = self.files()[shard]
        now = self.storage.info(listed.rel)
        if (now.size, now.version) != (listed.size, listed.version):
            raise ReaderError(
                f"{self._name(shard)}: the object changed since the dataset was listed "
                f"(size {listed.size} -> {now.size}, version {listed.version} -> {now.version})"
            )

    def read(self, shard: int, indices: np.ndarray) -> list[dict[str, Any]]:
        """Samples ``indices`` of tar ``shard``: nearby ones share one read; headers checked, text decoded."""
        self._check_shard(shard)
        idx = self._index(shard)
        indices = np.asarray(indices, dtype=np.int64).reshape(-1)
        if len(indices) == 0:
            return []
        if indices.min() < 0 or indices.max() >= len(idx):
            bad = int(indices[(indices < 0) | (indices >= len(idx))][0])
            raise ReaderError(f"{self._name(shard)}: sample index {bad} out of range (tar has {len(idx)} samples)")
        uniq, inv = np.unique(indices, return_inverse=True)
        firsts = idx.sample_first[uniq].tolist()
        lasts = idx.sample_first[uniq + 1].tolist()
        data, sizes = idx.member_data, idx.member_size
        starts = (data[idx.sample_first[uniq]] - BLOCK).tolist()
        ends = (data[idx.sample_first[uniq + 1] - 1] + sizes[idx.sample_first[uniq + 1] - 1]).tolist()
        rows: list[dict[str, Any]] = []
        k, n = 0, len(uniq)
        while k < n:  # one read per run of nearby samples
            j = k + 1
            while j < n and starts[j] - ends[j - 1] <= self.gap and ends[j] - starts[k] <= _MAX_RANGE:
                j += 1
            base = starts[k]
            buf = memoryview(self._read_span(shard, base, ends[j - 1]))
            for s in range(k, j):
                rows.append(self._sample(shard, idx, int(uniq[s]), firsts[s], lasts[s], buf, base))
            k = j
        return in_request_order(rows, inv, len(indices))

    def _sample(
        self, shard: int, idx: tarindex.TarIndex, i: int, first: int, last: int, buf: memoryview, base: int
    ) -> dict[str, Any]:
        key = idx.key(i)
        row: dict[str, Any] = {"__key__": key}
        offs = idx.member_data[first:last].tolist()
        sizes = idx.member_size[first:last].tolist()
        fids = idx.member_field[first:last].tolist()
        for off, size, fid in zip(offs, sizes, fids):
            field = idx.fields[fid]
            header = buf[off - BLOCK - base : off - base]
            if not _header_ok(header, size):
                self._check_unchanged(shard)
                raise RecordError(
                    f"{self._name(shard)}: sample {i} ({key!r}): the tar header of field {field!r} (byte {off - BLOCK}) "
                    "is corrupt or disagrees with the index: the tar is damaged or changed"
                )
            if self.fields is not None and field not in self.fields:
                continue
            raw = bytes(buf[off - base : off - base + size])
            dec = decoder_for(field, self._decoders)
            if dec is None:
                row[field] = raw
                continue
            try:
                row[field] = dec(raw)
            except (ValueError, UnicodeDecodeError) as exc:
                raise RecordError(
                    f"{self._name(shard)}: sample {i} ({key!r}): field {field!r} does not decode "
                    f"({type(exc).__name__}: {exc})"
                ) from None
        if self.fields is not None:
            missing = [f for f in self.fields if f not in row]
            if missing:
                have = sorted(k for k in row if k != "__key__")
                raise RecordError(
                    f"{self._name(shard)}: sample {i} ({key!r}) has no field {missing[0]!r} (fields: {have})"
                )
        return row

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


def _reader_of(f: Any) -> Callable[[int, int], bytes]:
    def read(start: int, end: int) -> bytes:
        f.seek(start)
        return f.read(end - start)

    return read


def _header_ok(block: memoryview, size: int) -> bool:
    """The ustar header before a member: valid checksum and the indexed size (unless a PAX header carries it)."""
    if len(block) != BLOCK:
        return False
    raw = bytes(block)
    if not tarindex.checksum_ok(raw):
        return False
    try:
        return tarindex.number(raw[124:136]) == size or size >= 8**11  # larger sizes may live in a PAX record only
    except ValueError:
        return False
