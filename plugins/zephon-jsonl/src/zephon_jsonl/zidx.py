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

import json
import os
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from zephon_storage import SourceIdentity, check_sidecar_size, read_sidecar_header, write_sidecar

from zephon_core import ReaderError

MAGIC = b"ZIDX"
VERSION = 1
SUFFIX = ".zidx"
_BLOCK = 16 * 1024 * 1024
_WS = b" \t\r\n\f\v"

Identity = SourceIdentity
"""What an index was built from (the kernel's :class:`~zephon_storage.SourceIdentity`)."""


@dataclass
class LineIndex:
    """Offsets, lengths and checksums of every record of one file (arrays may be memory-mapped)."""

    starts: np.ndarray
    lengths: np.ndarray
    crcs: np.ndarray
    source: SourceIdentity
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
    """Write ``idx`` to ``path`` atomically (:func:`~zephon_storage.write_sidecar`).

    ``like``: the data file the index describes; the index gets its permission bits (execute bits
    dropped), so whoever may read the data may read its index. Without it, the process umask
    decides, as for any new file.
    """
    header = {
        "count": len(idx),
        "compression": idx.compression,
        "data_size": idx.data_size,
        "source": idx.source.to_json(),
    }

    def body() -> Iterator[bytes]:
        yield idx.starts.astype("<i8").tobytes()
        yield idx.lengths.astype("<u4").tobytes()
        yield idx.crcs.astype("<u4").tobytes()

    write_sidecar(path, MAGIC, VERSION, header, body(), like=like)


def read(path: str, name: str) -> LineIndex:
    """Load an index (arrays memory-mapped, so worker processes share one copy in the page cache)."""
    try:
        header, base = read_sidecar_header(path, name, MAGIC, VERSION, "zephon-jsonl")
        n = int(header["count"])
        check_sidecar_size(path, name, base + 16 * n)
        if n == 0:
            empty = np.zeros(0, dtype=np.int64)
            starts, lengths, crcs = empty, empty.astype(np.uint32), empty.astype(np.uint32)
        else:
            starts = np.memmap(path, dtype="<i8", mode="r", offset=base, shape=(n,))
            lengths = np.memmap(path, dtype="<u4", mode="r", offset=base + 8 * n, shape=(n,))
            crcs = np.memmap(path, dtype="<u4", mode="r", offset=base + 12 * n, shape=(n,))
        ident = SourceIdentity.from_json(header["source"])
        return LineIndex(starts, lengths, crcs, ident, str(header["compression"]), int(header["data_size"]))
    except ReaderError:
        raise
    except (OSError, ValueError, KeyError, struct.error) as exc:
        raise ReaderError(f"{name}: cannot read index {path}: {type(exc).__name__}: {exc}") from None
