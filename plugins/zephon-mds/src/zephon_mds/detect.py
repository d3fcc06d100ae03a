"""Whether a folder is an MDS dataset: its ``index.json`` lists shards of format ``"mds"``.

LitData datasets also have an ``index.json`` (with ``chunks``/``config``), so the file name alone
cannot tell the two apart: the detector peeks at the content, which is small and read once.
"""

from __future__ import annotations

from typing import Any

from zephon_storage import detect_index

from zephon_mds.layout import is_mds_index


def detect(fs: Any, root: str, files: list[str]) -> bool:
    """True when ``root`` (a folder, or its ``index.json``) holds an MDS index."""
    return detect_index(fs, root, files, is_mds_index)
