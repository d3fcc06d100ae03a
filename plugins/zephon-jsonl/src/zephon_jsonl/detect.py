"""Which files are JSON Lines data, and whether a dataset folder is a JSON Lines dataset."""

from __future__ import annotations

from typing import Any

SUFFIXES = (".jsonl", ".ndjson")
COMPRESSIONS = {"": "none", ".gz": "gzip", ".zst": "zstd", ".zstd": "zstd"}


def compression_of(rel: str) -> str | None:
    """``"none"``, ``"gzip"`` or ``"zstd"`` for a JSON Lines file name, None for any other file."""
    name = rel.rsplit("/", 1)[-1].lower()
    for ext, kind in COMPRESSIONS.items():
        if ext and not name.endswith(ext):
            continue
        stem = name[: len(name) - len(ext)] if ext else name
        if stem.endswith(SUFFIXES):
            return kind
    return None


def is_data_file(rel: str) -> bool:
    """A JSON Lines file that is not hidden or private (``.x``/``_x`` path parts are skipped)."""
    if any(part.startswith((".", "_")) for part in rel.split("/")):
        return False
    return compression_of(rel) is not None


def detect(fs: Any, root: str, files: list[str]) -> bool:
    """True when the folder (or single file) holds at least one JSON Lines file."""
    return any(is_data_file(f) for f in files)
