"""The sample index of one WebDataset tar shard: built from tar headers alone, kept beside the tar.

A WebDataset shard is a plain tar whose members are grouped into samples by name: ``dir/abc.jpg``
and ``dir/abc.txt`` are the fields ``jpg`` and ``txt`` of sample ``dir/abc`` (the key is the path
up to the first dot of the base name; ``abc.seg.png`` is field ``seg.png``). Scanning walks the
512-byte headers and seeks over every payload, so indexing a remote shard reads its headers only.

File layout (little endian)::

    b"ZWDS" u8 version  3 pad bytes  u64 header_len  header (JSON, padded to 8 bytes)
    int64  sample_first[samples + 1]   first member of each sample (members are contiguous)
    int64  key_offset[samples + 1]     where each key starts in the key blob
    int64  member_data[members]        byte offset of each member's payload in the tar
    int64  member_size[members]        payload size
    int32  member_field[members]       index into the header's ``fields`` list (+ pad to 8 bytes)
    bytes  keys                        the UTF-8 keys, concatenated

The header records the tar's size, version (mtime / ETag) and CRCs of its first and last 64 KiB,
so a changed tar is a stale index, not wrong samples (a copy with a new mtime stays valid).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import struct
import tarfile
import tempfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any

import numpy as np

from zephon_core import ReaderError

MAGIC = b"ZWDS"
VERSION = 1
SUFFIX = ".zidx"
PROBE = 64 * 1024
BLOCK = 512

_META = re.compile(r"__[^/]*__($|/)")
"""Names WebDataset skips entirely (``__key__``-style metadata members)."""


def split_name(name: str) -> tuple[str, str] | None:
    """``dir/abc.seg.png`` -> ``("dir/abc", "seg.png")`` (WebDataset's rule); None for a name without a dot."""
    slash = name.rfind("/") + 1
    dot = name.find(".", slash)
    if dot <= slash or dot == len(name) - 1:
        return None
    return name[:dot], name[dot + 1 :].lower()


@dataclass(frozen=True)
class Identity:
    """What an index was built from; compared with the tar as listed now on every open."""

    size: int
    version: str
    head_crc: int | None = None
    tail_crc: int | None = None

    def matches(self, now: Identity) -> bool:
        """Same size and version, or same size and the same first and last 64 KiB (a copy)."""
        if self.size != now.size:
            return False
        if self.version == now.version:
            return True
        return self.head_crc is not None and (self.head_crc, self.tail_crc) == (now.head_crc, now.tail_crc)


def identity_of(read: Callable[[int, int], bytes], size: int, version: str) -> Identity:
    """Identity from a ``read(start, end)`` of the tar's first and last 64 KiB."""
    head = read(0, min(size, PROBE))
    tail = read(max(0, size - PROBE), size)
    return Identity(size, version, zlib.crc32(head), zlib.crc32(tail))


@dataclass
class TarIndex:
    """Where every sample's members lie in one tar (arrays may be memory-mapped)."""

    sample_first: np.ndarray
    key_offset: np.ndarray
    member_data: np.ndarray
    member_size: np.ndarray
    member_field: np.ndarray
    keys: bytes
    fields: list[str]
    source: Identity

    def __len__(self) -> int:
        return len(self.sample_first) - 1

    def key(self, i: int) -> str:
        return self.keys[int(self.key_offset[i]) : int(self.key_offset[i + 1])].decode("utf-8")


def scan(f: IO[bytes], size: int, name: str) -> tuple[list[int], list[str], list[int], list[int], list[str]]:
    """Walk the tar headers of ``f`` (seekable, ``size`` bytes): per sample and per member lists.

    Returns ``(sample_first, keys, member_data, member_size, member_fields)``. Members that are
    not regular files, WebDataset metadata (``__*__``) and names without an extension are skipped,
    as WebDataset does.

    Raises:
        ReaderError: naming ``name``: not a tar, a corrupt header, a member running past the end
            (truncated), a key whose members are not contiguous, a field twice in one sample.
    """
    first: list[int] = []
    keys: list[str] = []
    data: list[int] = []
    sizes: list[int] = []
    fields: list[str] = []
    seen: dict[str, int] = {}
    current: str | None = None
    current_fields: set[str] = set()
    f.seek(0)  # tarfile starts at the file's current position
    try:
        tf = tarfile.open(fileobj=f, mode="r:")
    except tarfile.ReadError as exc:
        raise ReaderError(f"{name}: not a readable tar file ({exc})") from None
    except EOFError:
        raise ReaderError(f"{name}: not a readable tar file (ends inside the first header): truncated") from None
    with tf:
        while True:
            try:
                info = tf.next()
            except (tarfile.TarError, EOFError, UnicodeDecodeError) as exc:
                raise ReaderError(f"{name}: corrupt tar header near byte {tf.offset} ({exc})") from None
            if info is None:
                break
            tf.members = []  # keep memory flat on large shards (only headers are looked at)
            end = info.offset_data + info.size
            if end > size:
                raise ReaderError(
                    f"{name}: member {info.name!r} needs bytes up to {end} but the file has {size}: truncated"
                )
            if not info.isreg() or _META.match(info.name):
                continue
            parts = split_name(info.name)
            if parts is None:
                continue
            key, field = parts
            if key != current:
                if key in seen:
                    raise ReaderError(
                        f"{name}: the members of sample {key!r} are not contiguous (it reappears at "
                        f"{info.name!r} after other samples); WebDataset groups a sample's files together"
                    )
                seen[key] = len(keys)
                first.append(len(data))
                keys.append(key)
                current, current_fields = key, set()
            if field in current_fields:
                raise ReaderError(f"{name}: sample {key!r} has field {field!r} twice ({info.name!r})")
            current_fields.add(field)
            data.append(info.offset_data)
            sizes.append(info.size)
            fields.append(field)
        stop = tf.offset
    _check_end(f, stop, size, name)
    first.append(len(data))
    return first, keys, data, sizes, fields


def _check_end(f: IO[bytes], stop: int, size: int, name: str) -> None:
    """The walk stopped at the end-of-archive zero block, not at a bad header or the end of the file.

    :mod:`tarfile` ends iteration quietly at an invalid or cut header after the first, which would
    drop every sample behind it; both are errors here. Tar writers (``tarfile``, GNU tar,
    WebDataset's ``TarWriter``) always end an archive with zero blocks, so a file that ends
    without one was cut at a member boundary.
    """
    f.seek(stop)
    block = f.read(BLOCK)
    if len(block) == BLOCK and not block.strip(b"\0"):
        return
    if len(block) < BLOCK:
        raise ReaderError(
            f"{name}: ends at byte {size} without the tar end-of-archive block (after byte {stop}): truncated"
        )
    raise ReaderError(f"{name}: corrupt tar header at byte {stop} (the samples behind it cannot be read)")


def build(f: IO[bytes], source: Identity, name: str) -> TarIndex:
    """Scan ``f`` and return its index (see :func:`scan`)."""
    first, keys, data, sizes, fields = scan(f, source.size, name)
    names = sorted(set(fields))
    ids = {n: k for k, n in enumerate(names)}
    encoded = [k.encode("utf-8") for k in keys]
    offsets = np.zeros(len(keys) + 1, dtype=np.int64)
    if encoded:
        offsets[1:] = np.cumsum([len(k) for k in encoded])
    return TarIndex(
        np.asarray(first, dtype=np.int64),
        offsets,
        np.asarray(data, dtype=np.int64),
        np.asarray(sizes, dtype=np.int64),
        np.asarray([ids[x] for x in fields], dtype=np.int32),
        b"".join(encoded),
        names,
        source,
    )


def write(path: str, idx: TarIndex) -> None:
    """Write ``idx`` atomically (temp file + rename): readers never see half an index."""
    src = idx.source
    header = json.dumps(
        {
            "samples": len(idx),
            "members": len(idx.member_data),
            "key_bytes": len(idx.keys),
            "fields": idx.fields,
            "source": {"size": src.size, "version": src.version, "head_crc": src.head_crc, "tail_crc": src.tail_crc},
        }
    ).encode()
    header += b" " * (-len(header) % 8)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".zidx-", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(MAGIC + struct.pack("<B3xQ", VERSION, len(header)) + header)
            for arr, dt in (
                (idx.sample_first, "<i8"),
                (idx.key_offset, "<i8"),
                (idx.member_data, "<i8"),
                (idx.member_size, "<i8"),
                (idx.member_field, "<i4"),
            ):
                f.write(np.asarray(arr).astype(dt).tobytes())
            f.write(b"\0" * (4 * (len(idx.member_field) % 2)))
            f.write(idx.keys)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def read(path: str, name: str) -> TarIndex:
    """Load an index; the member arrays are memory-mapped (worker processes share the page cache)."""
    try:
        with open(path, "rb") as f:
            pre = f.read(16)
            if len(pre) < 16 or pre[:4] != MAGIC:
                raise ReaderError(f"{name}: index {path} is not a zephon-webdataset index")
            version, hlen = struct.unpack("<B3xQ", pre[4:])
            if version != VERSION:
                raise ReaderError(f"{name}: index {path} has version {version}, expected {VERSION}; rebuild it")
            header: dict[str, Any] = json.loads(f.read(hlen))
        n, m, kb = int(header["samples"]), int(header["members"]), int(header["key_bytes"])
        base = 16 + hlen
        arrays_end = base + 8 * (2 * (n + 1) + 2 * m) + 4 * (m + m % 2)
        if os.path.getsize(path) != arrays_end + kb:
            raise ReaderError(f"{name}: index {path} is truncated; delete it or rebuild it with `zephon index`")

        def arr(dt: str, offset: int, count: int) -> np.ndarray:
            if count == 0:
                return np.zeros(0, dtype=dt)
            return np.memmap(path, dtype=dt, mode="r", offset=offset, shape=(count,))

        first = np.array(arr("<i8", base, n + 1))
        key_offset = np.array(arr("<i8", base + 8 * (n + 1), n + 1))
        pos = base + 16 * (n + 1)
        member_data = arr("<i8", pos, m)
        member_size = arr("<i8", pos + 8 * m, m)
        member_field = arr("<i4", pos + 16 * m, m)
        with open(path, "rb") as f:
            f.seek(arrays_end)
            keys = f.read(kb)
        src = header["source"]
        ident = Identity(int(src["size"]), str(src["version"]), src.get("head_crc"), src.get("tail_crc"))
        return TarIndex(first, key_offset, member_data, member_size, member_field, keys, list(header["fields"]), ident)
    except ReaderError:
        raise
    except (OSError, ValueError, KeyError, TypeError, struct.error) as exc:
        raise ReaderError(f"{name}: cannot read index {path}: {type(exc).__name__}: {exc}") from None
