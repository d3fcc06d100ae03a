"""Streaming decompression of ``.gz`` and ``.zst`` files that refuses truncated input.

Compressed streams cannot be read at random offsets, so the reader decompresses each compressed
shard once into the node-local cache and indexes the plain copy. The decompressors here must
notice a truncated file: ``zstandard``'s stream reader silently returns the bytes it could decode,
which would index a shorter file without complaint.
"""

from __future__ import annotations

import gzip
import shutil
from typing import IO

from zephon_core import ReaderError

_BLOCK = 4 * 1024 * 1024


def decompress(kind: str, src: IO[bytes], dst: IO[bytes], name: str) -> None:
    """Write the decompressed content of ``src`` to ``dst``; ReaderError naming ``name`` if damaged."""
    if kind == "gzip":
        try:
            with gzip.GzipFile(fileobj=src, mode="rb") as gz:
                shutil.copyfileobj(gz, dst, _BLOCK)
        except (OSError, EOFError, gzip.BadGzipFile) as exc:
            raise ReaderError(f"{name}: corrupt or truncated gzip data ({type(exc).__name__}: {exc})") from None
    elif kind == "zstd":
        _unzstd(src, dst, name)
    else:
        raise ReaderError(f"{name}: unknown compression {kind!r}")


def _unzstd(src: IO[bytes], dst: IO[bytes], name: str) -> None:
    try:
        import zstandard
    except ImportError:
        raise ReaderError(f"{name}: reading .zst files needs zstandard: pip install 'zephon-jsonl[zstd]'") from None
    dctx = zstandard.ZstdDecompressor()
    obj = dctx.decompressobj()
    in_frame = False
    try:
        while block := src.read(_BLOCK):
            while block:
                dst.write(obj.decompress(block))
                in_frame = True
                if obj.eof:
                    block = obj.unused_data
                    obj = dctx.decompressobj()
                    in_frame = False
                else:
                    block = b""
    except zstandard.ZstdError as exc:
        raise ReaderError(f"{name}: corrupt zstd data ({exc})") from None
    if in_frame:
        raise ReaderError(f"{name}: truncated zstd data (the last frame does not end)")
