"""Whether a folder is an MDS dataset: its ``index.json`` lists shards of format ``"mds"``.

LitData datasets also have an ``index.json`` (with ``chunks``/``config``), so the file name alone
cannot tell the two apart: the detector peeks at the content, which is small and read once.
"""

from __future__ import annotations

import json
from typing import Any

from zephon_mds.layout import INDEX_FILE, is_mds_index


def detect(fs: Any, root: str, files: list[str]) -> bool:
    """True when ``root`` (a folder, or its ``index.json``) holds an MDS index."""
    if INDEX_FILE not in files:
        return False
    folder = root.rstrip("/")
    path = folder if folder.endswith("/" + INDEX_FILE) or folder == INDEX_FILE else f"{folder}/{INDEX_FILE}"
    try:
        obj = json.loads(fs.cat_file(path))
    except Exception:
        return False
    return is_mds_index(obj)
