"""Helpers for tests of WebDataset shards: samples written by WebDataset's own ``TarWriter``.

Shipped with the plugin (like :mod:`zephon_core.testing`) so any test can import them, whatever
pytest's import mode; ``webdataset`` itself is a test-only dependency, imported when first used.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

Record = dict[str, Any]


def as_sample(doc: Record) -> Record:
    """A corpus document as a WebDataset sample (fields ``txt``, ``json``, ``cls``), as written."""
    return {
        "__key__": f"docs/{doc['id']:06d}",
        "txt": doc["text"],
        "json": {"id": doc["id"], "source": doc["source"]},
        "cls": doc["id"] % 10,
    }


def write_tar(path: Path, samples: list[Record]) -> None:
    """Write ``samples`` (dicts with ``__key__``) into one tar with ``webdataset.TarWriter``.

    ``mtime`` is fixed so the same samples give the same bytes.
    """
    TarWriter = _webdataset().TarWriter
    path.parent.mkdir(parents=True, exist_ok=True)
    with TarWriter(str(path), mtime=1_700_000_000) as w:
        for s in samples:
            w.write(s)


def _webdataset() -> Any:
    """``import webdataset`` without torch (when torch is not imported yet).

    webdataset imports torch whenever it is installed, only for its DataLoader wrappers; that costs
    10+ s per test session on a loaded machine and writing tars never needs it. The real
    ``TarWriter`` is used either way.
    """
    import sys

    if "webdataset" in sys.modules or "torch" in sys.modules:
        import webdataset

        return webdataset
    sys.modules["torch"] = None  # type: ignore[assignment]  # import torch -> ModuleNotFoundError
    try:
        import webdataset
    finally:
        del sys.modules["torch"]
    return webdataset
