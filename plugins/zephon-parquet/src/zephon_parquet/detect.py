"""Which files are Parquet data, and whether a dataset folder is a Parquet dataset."""

from __future__ import annotations

from typing import Any

SUFFIXES = (".parquet", ".pq")


def is_data_file(rel: str) -> bool:
    """A Parquet file that is not hidden or private (Spark's ``_SUCCESS``, ``_metadata`` are skipped)."""
    if any(part.startswith((".", "_")) for part in rel.split("/")):
        return False
    return rel.lower().endswith(SUFFIXES)


def detect(fs: Any, root: str, files: list[str]) -> bool:
    """True when the folder (or single file) holds at least one Parquet file."""
    return any(is_data_file(f) for f in files)
