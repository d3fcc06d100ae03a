"""Whole-shard decompression for MDS ``zip_data`` files (``shard.NNNNN.mds.<ext>``).

MDSWriter compresses a finished shard as one blob with one of Streaming's codecs. zstd, gzip and
bzip2 are read with ``zstandard`` and the standard library; Brotli and Snappy need their own small
packages (``brotli``, ``python-snappy``), used only if installed. The node cache runs this once per
shard and node, like Streaming's own decompress-to-local-file step.
"""

from __future__ import annotations

import bz2
import gzip
import shutil
from typing import Any

from zephon_core import ReaderError

CODECS = ("zstd", "gz", "bz2", "br", "snappy")
_BLOCK = 8 << 20


def codec_of(compression: str | None) -> str | None:
    """The codec family of an index ``compression`` value (``"zstd:7"`` -> ``"zstd"``); None if none."""
    if not compression:
        return None
    return str(compression).split(":", 1)[0]


def decompress_file(codec: str, src: str, dst: str, *, what: str) -> None:
    """Write the decompressed content of ``src`` to ``dst``."""
    try:
        with open(src, "rb") as fin, open(dst, "wb") as fout:
            _copy(codec, fin, fout, what)
    except (ReaderError, OSError):
        raise
    except Exception as exc:  # codec errors: zstandard.ZstdError, EOFError, zlib.error, ...
        raise ReaderError(f"{what}: corrupt {codec} data ({type(exc).__name__}: {exc})") from exc


def _copy(codec: str, fin: Any, fout: Any, what: str) -> None:
    if codec == "zstd":
        import zstandard

        zstandard.ZstdDecompressor().copy_stream(fin, fout)
    elif codec == "gz":
        with gzip.GzipFile(fileobj=fin) as g:
            shutil.copyfileobj(g, fout, _BLOCK)
    elif codec == "bz2":
        with bz2.BZ2File(fin) as b:
            shutil.copyfileobj(b, fout, _BLOCK)
    elif codec == "br":
        fout.write(_optional("brotli", "brotli", what).decompress(fin.read()))
    elif codec == "snappy":
        fout.write(_optional("snappy", "python-snappy", what).decompress(fin.read()))
    else:
        raise ReaderError(f"{what}: MDS compression {codec!r} is not supported (supported: {', '.join(CODECS)})")


def _optional(module: str, package: str, what: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise ReaderError(f"{what}: reading {module}-compressed shards needs the {package!r} package") from None
