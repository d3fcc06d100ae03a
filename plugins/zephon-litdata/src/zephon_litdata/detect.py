"""Whether a folder is a LitData dataset: its ``index.json`` has LitData's ``chunks``/``config`` keys.

Mosaic MDS datasets also have an ``index.json`` (with ``shards``), so the file name alone cannot
tell the two apart: the detector peeks at the content, which is small and read once.
"""

from __future__ import annotations

import json
from typing import Any

from zephon_litdata.layout import INDEX_FILE, is_litdata_index


def detect(fs: Any, root: str, files: list[str]) -> bool:
    """True when ``root`` (a folder, or its ``index.json``) holds a LitData index."""
    if INDEX_FILE not in files:
        return False
    path = (
        root
        if root.rstrip("/").endswith("/" + INDEX_FILE) or root == INDEX_FILE
        else f"{root.rstrip('/')}/{INDEX_FILE}"
    )
    try:
        obj = json.loads(fs.cat_file(path))
    except Exception:
        return False
    return is_litdata_index(obj)
