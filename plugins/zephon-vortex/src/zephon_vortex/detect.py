"""Which files are Vortex data, and whether a dataset folder is a Vortex dataset."""

from __future__ import annotations

from typing import Any

SUFFIXES = (".vortex", ".vtx")


def is_data_file(rel: str) -> bool:
    """A Vortex file that is not hidden or private (``.x``/``_x`` path parts are skipped)."""
    if any(part.startswith((".", "_")) for part in rel.split("/")):
        return False
    return rel.lower().endswith(SUFFIXES)


def detect(fs: Any, root: str, files: list[str]) -> bool:
    """True when the folder (or single file) holds at least one Vortex file."""
    return any(is_data_file(f) for f in files)
