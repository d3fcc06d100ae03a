"""The binary layouts of a LitData chunk file, parsed and checked once per opened chunk.

``litdata.streaming.writer.BinaryWriter`` writes one of these (after undoing whole-file zstd):

* **classic**: ``uint32 n | uint32 offsets[n+1] | item bytes``; item ``i`` is
  ``file[offsets[i]:offsets[i+1]]`` (with ``compression_level="sample"`` each item is its own
  zstd frame).
* **framed** (``compression_level="batch"``): ``"LDFZ01\\0\\0" | u16 version | u16 flags | u32 n |
  u32 frame_rows | u32 n_frames | u32 offsets[n+1]`` (offsets into the *uncompressed* item bytes)
  ``| n_frames x (u32 first, u32 count, u64 file_offset, u32 zlen, u32 len) | zstd frames``.
* **Arrow footer** (dict samples of plain JSON-like types): a classic header whose items may be
  empty, then an Arrow IPC file holding every row, then ``u32 ipc_len | "LDARW01\\0"``. LitData's own
  reader serves such rows from the Arrow table, so this reader does too.
* **tokens** (``TokensLoader``): a classic header followed by one flat array of tokens.

Every count and offset is checked against the file size and against ``index.json`` so that a
truncated, corrupt or mismatched chunk is a clear error instead of garbage samples.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

from zephon_core import ReaderError

FRAMED_MAGIC = b"LDFZ01\0\0"
ARROW_MAGIC = b"LDARW01\0"
ARROW_IPC_MAGIC = b"ARROW1"
_FRAMED_PREFIX = struct.Struct("<8sHHIII")
_FRAME_DTYPE = np.dtype([("first", "<u4"), ("count", "<u4"), ("offset", "<u8"), ("zlen", "<u4"), ("len", "<u4")])


@dataclass(frozen=True, slots=True)
class Classic:
    """A classic chunk: item ``i`` is ``buf[offsets[i]:offsets[i+1]]``."""

    buf: memoryview
    offsets: np.ndarray

    def nbytes(self) -> int:
        return int(self.offsets.nbytes)


@dataclass(frozen=True, slots=True)
class Framed:
    """A framed-zstd chunk: items live in zstd frames of ``frame_rows`` items each."""

    buf: memoryview
    offsets: np.ndarray
    frames: np.ndarray
    frame_rows: int

    def nbytes(self) -> int:
        return int(self.offsets.nbytes + self.frames.nbytes)


@dataclass(frozen=True, slots=True)
class ArrowRows:
    """A chunk whose rows are read from its Arrow IPC footer (a pyarrow Table)."""

    table: Any
    heap_bytes: int

    def nbytes(self) -> int:
        return self.heap_bytes


def _u32(buf: memoryview, offset: int, what: str) -> int:
    if len(buf) < offset + 4:
        raise ReaderError(f"{what}: truncated chunk ({len(buf)} bytes, header needs {offset + 4})")
    return int(struct.unpack_from("<I", buf, offset)[0])


def _check_count(n: int, expected: int, what: str) -> None:
    if n != expected:
        raise ReaderError(f"{what}: chunk header holds {n} items but index.json says {expected}")


def parse_classic(buf: memoryview, expected: int, what: str) -> Classic:
    """Check a classic header against the file size and ``expected`` items."""
    _check_count(_u32(buf, 0, what), expected, what)
    header = 4 + 4 * (expected + 1)
    if len(buf) < header:
        raise ReaderError(f"{what}: truncated chunk ({len(buf)} bytes, header needs {header})")
    offsets = np.frombuffer(buf, dtype="<u4", count=expected + 1, offset=4).astype(np.int64)
    if offsets[0] != header or (np.diff(offsets) < 0).any():
        raise ReaderError(f"{what}: corrupt chunk header (item offsets are not increasing from {header})")
    end = _payload_end(buf)
    if offsets[-1] > end:
        raise ReaderError(f"{what}: truncated chunk (items end at byte {offsets[-1]}, data ends at {end})")
    return Classic(buf, offsets)


def parse_framed(buf: memoryview, expected: int, what: str) -> Framed:
    """Check a framed-zstd header: magic, counts, offsets and every frame's extent."""
    if len(buf) < _FRAMED_PREFIX.size or bytes(buf[:8]) != FRAMED_MAGIC:
        raise ReaderError(f"{what}: index.json says compression_level='batch' but the chunk lacks the LDFZ01 header")
    _, version, _flags, n, rows, n_frames = _FRAMED_PREFIX.unpack_from(buf, 0)
    if version != 1:
        raise ReaderError(f"{what}: framed zstd version {version} is not supported (only 1)")
    _check_count(n, expected, what)
    if rows <= 0 or n_frames != (n + rows - 1) // rows:
        raise ReaderError(f"{what}: corrupt framed header ({n} items, {rows} per frame, {n_frames} frames)")
    off_at = _FRAMED_PREFIX.size
    table_at = off_at + 4 * (n + 1)
    table_end = table_at + _FRAME_DTYPE.itemsize * n_frames
    if len(buf) < table_end:
        raise ReaderError(f"{what}: truncated chunk (framed header needs {table_end} bytes, file has {len(buf)})")
    offsets = np.frombuffer(buf, dtype="<u4", count=n + 1, offset=off_at).astype(np.int64)
    frames = np.frombuffer(buf, dtype=_FRAME_DTYPE, count=n_frames, offset=table_at).copy()
    if offsets[0] != 0 or (np.diff(offsets) < 0).any():
        raise ReaderError(f"{what}: corrupt framed header (item offsets are not increasing from 0)")
    ends = frames["offset"].astype(np.int64) + frames["zlen"]
    if n_frames and (frames["offset"].min() < table_end or ends.max() > len(buf)):
        raise ReaderError(f"{what}: truncated or corrupt chunk (a zstd frame lies outside the file)")
    starts = np.arange(n_frames, dtype=np.int64) * rows
    if (frames["first"] != starts).any() or (frames["count"] != np.minimum(rows, n - starts)).any():
        raise ReaderError(f"{what}: corrupt framed header (frame table does not cover the items in order)")
    return Framed(buf, offsets, frames, int(rows))


def arrow_span(buf: memoryview) -> tuple[int, int] | None:
    """``(start, length)`` of a trailing Arrow IPC footer, or None when the chunk has none."""
    if len(buf) < 12 or bytes(buf[-8:]) != ARROW_MAGIC:
        return None
    (length,) = struct.unpack_from("<I", buf, len(buf) - 12)
    start = len(buf) - 12 - length
    return (start, length) if start >= 0 and length > 0 else None


def _payload_end(buf: memoryview) -> int:
    span = arrow_span(buf)
    return span[0] if span else len(buf)


def open_arrow(buf: memoryview, expected: int, what: str) -> ArrowRows:
    """Open the Arrow IPC footer as a Table (zero-copy over the mapping unless IPC-compressed)."""
    span = arrow_span(buf)
    assert span is not None
    _check_count(_u32(buf, 0, what), expected, what)
    try:
        import pyarrow as pa
        import pyarrow.ipc as ipc
    except ImportError:
        raise ReaderError(
            f"{what}: this chunk stores its rows as Arrow IPC, which needs pyarrow: pip install 'zephon-litdata[arrow]'"
        ) from None
    start, length = span
    blob = buf[start : start + length]
    try:
        source = pa.py_buffer(blob)
        opened = ipc.open_file(source) if bytes(blob[:6]) == ARROW_IPC_MAGIC else ipc.open_stream(source)
        table = opened.read_all()
        # Arrow trusts offsets in IPC bodies: a corrupt chunk could crash the process on access.
        table.validate(full=True)
    except Exception as exc:
        raise ReaderError(f"{what}: corrupt Arrow IPC footer ({type(exc).__name__}: {exc})") from exc
    if table.num_rows != expected:
        raise ReaderError(f"{what}: Arrow footer holds {table.num_rows} rows but index.json says {expected}")
    heap = 0 if _zero_copy(table, blob) else int(table.nbytes)
    return ArrowRows(table, heap)


def _zero_copy(table: Any, blob: memoryview) -> bool:
    """Whether the table's buffers point into the mapping (uncompressed IPC) rather than the heap."""
    try:
        base = np.frombuffer(blob, dtype=np.uint8).ctypes.data
    except ValueError:
        return False
    end = base + len(blob)
    for column in table.columns:
        for chunk in column.chunks:
            for b in chunk.buffers():
                if b is not None and b.size and not base <= b.address < end:
                    return False
    return True


def tokens_view(buf: memoryview, items: int, dim: int, dtype: np.dtype, what: str) -> np.ndarray:
    """The flat token array of a TokensLoader chunk (a view into the mapping)."""
    _check_count(_u32(buf, 0, what), items, what)
    start = 4 * (items + 2)
    need = start + dim * dtype.itemsize
    if len(buf) < need:
        raise ReaderError(f"{what}: truncated chunk ({len(buf)} bytes, {dim} tokens need {need})")
    return np.frombuffer(buf, dtype=dtype, count=dim, offset=start)
