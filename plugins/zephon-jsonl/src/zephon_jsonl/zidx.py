"""The ``.zidx`` byte-offset index of one JSON Lines file, built once and checked on every open.

A random sample then costs one ``pread`` of exactly its bytes. Layout (little endian)::

    b"ZIDX" u8 version  3 pad bytes  u64 header_len  header (JSON, padded to 8 bytes)
    int64  start[count]    byte offset of each record in the (decompressed) data
    uint32 length[count]   record length without the newline
    uint32 crc32[count]    checksum of the record's bytes

Blank lines are not records. The header records what the index was built from — the source's
size and version (mtime for local files, ETag/LastModified for remote ones) and CRCs of its first
and last 64 KiB — so a changed file is detected as a stale index instead of yielding wrong records.
Checksums per record catch an index that disagrees with the data, or corrupted bytes, at read time.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import struct
import threading
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from zephon_core import ReaderError
from zephon_core.storage.manifest import shared_mode

MAGIC = b"ZIDX"
VERSION = 1
SUFFIX = ".zidx"
PROBE = 64 * 1024
_BLOCK = 16 * 1024 * 1024
_WS = b" \t\r\n\f\v"


@dataclass(frozen=True)
class Identity:
    """What an index was built from; compared with the source file on every open."""

    size: int
    version: str
    head_crc: int | None = None
    tail_crc: int | None = None

    def matches(self, now: Identity) -> bool:
        """Same size and either the same version or (local files) the same head and tail bytes.

        Falling back to content CRCs keeps an index valid across ``cp`` / ``rsync`` without
        ``-t``, which change the mtime but not the data.
        """
        if self.size != now.size:
            return False
        if self.version == now.version:
            return True
        return self.head_crc is not None and (self.head_crc, self.tail_crc) == (now.head_crc, now.tail_crc)


def local_identity(path: str, *, with_crc: bool = True) -> Identity:
    """Identity of a local file: size, mtime and (optionally) CRCs of its first and last 64 KiB."""
    st = os.stat(path)
    if not with_crc:
        return Identity(st.st_size, str(st.st_mtime_ns))
    fd = os.open(path, os.O_RDONLY)
    try:
        head = os.pread(fd, PROBE, 0)
        tail = os.pread(fd, PROBE, max(0, st.st_size - PROBE))
    finally:
        os.close(fd)
    return Identity(st.st_size, str(st.st_mtime_ns), zlib.crc32(head), zlib.crc32(tail))


@dataclass
class LineIndex:
    """Offsets, lengths and checksums of every record of one file (arrays may be memory-mapped)."""

    starts: np.ndarray
    lengths: np.ndarray
    crcs: np.ndarray
    source: Identity
    compression: str
    data_size: int

    def __len__(self) -> int:
        return len(self.starts)


def scan(path: str, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Scan a plain JSON Lines file: (starts, lengths, crcs, size). The last record must parse.

    A last line that is not valid JSON means the file was cut short (a writer died or a copy was
    interrupted); that is reported now rather than as a decode error deep into training.
    """
    starts: list[int] = []
    lengths: list[int] = []
    crcs: list[int] = []
    crc32 = zlib.crc32
    offset = 0
    carry = b""
    with open(path, "rb") as f:
        while True:
            block = f.read(_BLOCK)
            data = carry + block if carry else block
            if not block:
                lines = [data] if data else []
                carry = b""
            else:
                lines = data.split(b"\n")
                carry = lines.pop()
            for line in lines:
                n = len(line)
                if n and (line[0] not in _WS or line.strip()):
                    starts.append(offset)
                    lengths.append(n)
                    crcs.append(crc32(line))
                offset += n + 1
            if not block:
                break
    size = os.path.getsize(path)
    if starts:
        last = _read(path, starts[-1], lengths[-1])
        try:
            json.loads(last)
        except ValueError:
            raise ReaderError(
                f"{name}: the last record (line at byte {starts[-1]}) is not valid JSON; the file looks truncated"
            ) from None
    return (
        np.asarray(starts, dtype=np.int64),
        np.asarray(lengths, dtype=np.uint32),
        np.asarray(crcs, dtype=np.uint32),
        size,
    )


def _read(path: str, start: int, length: int) -> bytes:
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.pread(fd, length, start)
    finally:
        os.close(fd)


def write(path: str, idx: LineIndex, like: str | None = None) -> None:
    """Write ``idx`` to ``path`` atomically (temp file + rename), so readers never see half an index.

    ``like``: the data file the index describes; the index gets its permission bits (execute bits
    dropped), so whoever may read the data may read its index. Without it, the process umask
    decides, as for any new file (a private temp file's 0600 would lock out a dataset's group).
    """
    header = json.dumps(
        {
            "count": len(idx),
            "compression": idx.compression,
            "data_size": idx.data_size,
            "source": {
                "size": idx.source.size,
                "version": idx.source.version,
                "head_crc": idx.source.head_crc,
                "tail_crc": idx.source.tail_crc,
            },
        }
    ).encode()
    header += b" " * (-len(header) % 8)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, f".zidx-{os.getpid()}-{threading.get_ident()}-{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # umask applies, unlike mkstemp's 0600
    try:
        with os.fdopen(fd, "wb") as f:
            mode = shared_mode([like]) if like is not None else None
            if mode is not None:
                os.fchmod(f.fileno(), mode)
            f.write(MAGIC + struct.pack("<B3xQ", VERSION, len(header)) + header)
            f.write(idx.starts.astype("<i8").tobytes())
            f.write(idx.lengths.astype("<u4").tobytes())
            f.write(idx.crcs.astype("<u4").tobytes())
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def read(path: str, name: str) -> LineIndex:
    """Load an index (arrays memory-mapped, so worker processes share one copy in the page cache)."""
    try:
        with open(path, "rb") as f:
            pre = f.read(16)
            if len(pre) < 16 or pre[:4] != MAGIC:
                raise ReaderError(f"{name}: index {path} is not a zephon-jsonl index")
            version, hlen = struct.unpack("<B3xQ", pre[4:])
            if version != VERSION:
                raise ReaderError(f"{name}: index {path} has version {version}, expected {VERSION}; rebuild it")
            header: dict[str, Any] = json.loads(f.read(hlen))
        n = int(header["count"])
        base = 16 + hlen
        if os.path.getsize(path) != base + 16 * n:
            raise ReaderError(f"{name}: index {path} is truncated; delete it or rebuild it with `zephon index`")
        if n == 0:
            empty = np.zeros(0, dtype=np.int64)
            starts, lengths, crcs = empty, empty.astype(np.uint32), empty.astype(np.uint32)
        else:
            starts = np.memmap(path, dtype="<i8", mode="r", offset=base, shape=(n,))
            lengths = np.memmap(path, dtype="<u4", mode="r", offset=base + 8 * n, shape=(n,))
            crcs = np.memmap(path, dtype="<u4", mode="r", offset=base + 12 * n, shape=(n,))
        src = header["source"]
        ident = Identity(int(src["size"]), str(src["version"]), src.get("head_crc"), src.get("tail_crc"))
        return LineIndex(starts, lengths, crcs, ident, str(header["compression"]), int(header["data_size"]))
    except ReaderError:
        raise
    except (OSError, ValueError, KeyError, struct.error) as exc:
        raise ReaderError(f"{name}: cannot read index {path}: {type(exc).__name__}: {exc}") from None
