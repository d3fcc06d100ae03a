"""Whether a folder is a LitData dataset: its ``index.json`` has LitData's ``chunks``/``config`` keys.

Mosaic MDS datasets also have an ``index.json`` (with ``shards``), so the file name alone cannot
tell the two apart: the detector peeks at the content, which is small and read once.
"""

from __future__ import annotations

from typing import Any

from zephon_storage import detect_index

from zephon_litdata.layout import is_litdata_index


def detect(fs: Any, root: str, files: list[str]) -> bool:
    """True when ``root`` (a folder, or its ``index.json``) holds a LitData index."""
    return detect_index(fs, root, files, is_litdata_index)
