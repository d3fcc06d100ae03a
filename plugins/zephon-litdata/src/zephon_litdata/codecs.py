"""zstd decompression for LitData's three ways of compressing a chunk.

LitData writes zstd with the ``zstd`` package or Arrow's C++ codec; both produce standard zstd
frames, so the small ``zstandard`` binding reads them all: a whole ``.zstd.bin`` file (decompressed
once into the node cache), one frame per group of items (``compression_level="batch"``) or one
frame per item (``"sample"``).
"""

from __future__ import annotations

import threading
from typing import Any

from zephon_core import ReaderError

_local = threading.local()


def _decompressor() -> Any:
    # A ZstdDecompressor is not safe to share between threads; one per thread is cheap.
    dctx = getattr(_local, "dctx", None)
    if dctx is None:
        import zstandard

        dctx = _local.dctx = zstandard.ZstdDecompressor()
    return dctx


def zstd_decompress(data: bytes | memoryview, expected_size: int | None, *, what: str) -> bytes:
    """Inflate one zstd frame; a size other than ``expected_size`` (when known) is corruption."""
    try:
        if expected_size is not None:
            out = _decompressor().decompress(data, max_output_size=max(1, expected_size))
        else:
            out = _decompressor().decompressobj().decompress(data)
    except Exception as exc:  # zstandard.ZstdError and friends
        raise ReaderError(f"{what}: corrupt zstd data ({type(exc).__name__}: {exc})") from exc
    if expected_size is not None and len(out) != expected_size:
        raise ReaderError(f"{what}: zstd frame inflated to {len(out)} bytes, expected {expected_size}")
    return out


def decompress_file(codec: str, src: str, dst: str, *, what: str) -> None:
    """Write the decompressed content of ``src`` to ``dst`` (the node cache calls this once per file)."""
    if not codec.startswith("zstd"):
        raise ReaderError(f"{what}: compression {codec!r} is not supported (LitData writes only zstd)")
    import zstandard

    try:
        with open(src, "rb") as fin, open(dst, "wb") as fout:
            zstandard.ZstdDecompressor().copy_stream(fin, fout)
    except OSError:
        raise
    except Exception as exc:
        raise ReaderError(f"{what}: corrupt zstd file ({type(exc).__name__}: {exc})") from exc
