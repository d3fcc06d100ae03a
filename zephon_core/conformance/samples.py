"""Sample inputs and sample functions for the suite's no-code mode and the built-in operators."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from zephon_core.hashing import digest_payload


def text_records(n: int = 480) -> list[dict[str, Any]]:
    """Deterministic English paragraphs from the standard library's documentation."""
    from pydoc_data.topics import topics

    paras = [p.strip() for k in sorted(topics) for p in topics[k].split("\n\n") if len(p.strip()) > 30]
    return [{"text": paras[i % len(paras)], "n": i} for i in range(n)]


def digest_collate(rows: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """Collate any payloads into one digest row each, so arbitrary operator outputs can be hashed."""
    return {"digest": np.stack([np.frombuffer(digest_payload(r), dtype=np.uint8) for r in rows])}


# -- functions used to exercise the built-in operators in no-code mode ----------------------------
def upper_or_drop(payload: dict[str, Any]) -> dict[str, Any] | None:
    """A filtering map: drops every third record, upper-cases the rest."""
    if payload["n"] % 3 == 0:
        return None
    return {"text": payload["text"].upper(), "n": payload["n"]}


def split_sentences(payload: dict[str, Any]) -> list[dict[str, Any]]:
    """A 1-to-n split: one record per sentence (none for empty text)."""
    parts = [s for s in payload["text"].split(". ") if s]
    return [{"text": s, "n": payload["n"], "part": i} for i, s in enumerate(parts)]


def words_init() -> dict[str, Any]:
    return {"words": [], "docs": 0}


def words_push(state: dict[str, Any], payload: dict[str, Any]) -> list[list[str]]:
    """Concatenate words across documents and cut rows of 32 words (n-to-m)."""
    state["words"].extend(payload["text"].split())
    state["docs"] += 1
    rows = []
    while len(state["words"]) >= 32:
        rows.append(state["words"][:32])
        del state["words"][:32]
    return rows


def words_flush(state: dict[str, Any]) -> list[list[str]]:
    rows = [state["words"]] if state["words"] else []
    state["words"] = []
    return rows


def words_transform(row: list[str]) -> dict[str, Any]:
    text = " ".join(row)
    return {"text": text, "sha": hashlib.sha256(text.encode()).hexdigest()[:16]}


def drop_some(payload: dict[str, Any]) -> dict[str, Any] | None:
    """A field-agnostic filter: drops about one record in six, chosen by the payload's digest."""
    return None if digest_payload(payload)[0] < 43 else payload
