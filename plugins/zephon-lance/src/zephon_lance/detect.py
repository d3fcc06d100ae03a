"""Whether a folder is a Lance dataset: it holds version manifests under ``_versions/``.

Names only: detection runs for every ``Dataset.from_path`` without ``format=`` and must not import
lance. A Lance dataset's data files (``data/*.lance``) alone are not a dataset: without a manifest
nobody knows which rows are live, so the folder root must be the dataset's root.
"""

from __future__ import annotations

from typing import Any


def detect(fs: Any, root: str, files: list[str]) -> bool:
    """True when ``files`` (relative to ``root``) include a ``_versions/*.manifest``."""
    return any(f.startswith("_versions/") and f.endswith(".manifest") and f.count("/") == 1 for f in files)
