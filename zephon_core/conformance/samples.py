"""Sample inputs and sample functions for the suite's no-code mode and the built-in operators."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from zephon_core.defaults.operators.stateful import Emit, take_sources
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
    """Buffered words, documents pushed so far, and ``[document index, words in the buffer]`` spans."""
    return {"words": [], "docs": 0, "spans": []}


def words_push(state: dict[str, Any], payload: dict[str, Any]) -> list[Emit]:
    """Concatenate words across documents and cut rows of 32 words (n-to-m, exact lineage)."""
    words = payload["text"].split()
    state["words"].extend(words)
    state["spans"].append([state["docs"], len(words)])
    state["docs"] += 1
    rows = []
    while len(state["words"]) >= 32:
        rows.append(Emit(state["words"][:32], take_sources(state["spans"], 32)))
        del state["words"][:32]
    return rows


def words_flush(state: dict[str, Any]) -> list[Emit]:
    words = state["words"]
    rows = [Emit(words, take_sources(state["spans"], len(words)))] if words else []
    state["words"] = []
    return rows


def words_transform(row: list[str]) -> dict[str, Any]:
    text = " ".join(row)
    return {"text": text, "sha": hashlib.sha256(text.encode()).hexdigest()[:16]}


def drop_some(payload: dict[str, Any]) -> dict[str, Any] | None:
    """A field-agnostic filter: drops about one record in six, chosen by the payload's digest."""
    return None if digest_payload(payload)[0] < 43 else payload


# -- the lineage check's perturbation ----------------------------------------------------------------
class _Rot47:
    """``str.translate`` table: printable ASCII rotates within itself (ROT47); other characters move
    to a neighbouring code point unless either is whitespace. Whitespace, length and the ASCII-ness
    of every character are kept, so text splits into the same number of words."""

    def __getitem__(self, cp: int) -> int:
        if 33 <= cp <= 126:
            return 33 + (cp - 33 + 47) % 94
        if cp > 127:
            other = cp ^ 1
            if not (0xD800 <= other <= 0xDFFF or chr(cp).isspace() or chr(other).isspace()):
                return other
        raise LookupError(cp)


_ROT47 = _Rot47()


def perturb(payload: Any, *, in_sequence: bool = False) -> Any:
    """The same record with other content but the same structure: what rule 5's exactness check feeds.

    The check needs to change what a record *holds* without changing how an operator *arranges*
    records (how many words or tokens a record has decides where a packer cuts rows; ids and counts
    decide grouping), otherwise every later output of a concatenating operator would change and no
    lineage could be told right from wrong. So: strings keep their length and whitespace (ROT47),
    numeric arrays and lists of ints keep their shape and dtype (integers XOR 1, floats + 1,
    booleans negated), floats move by one. Scalar ints and bools (ids, counts, lengths, flags) and
    bytes (encoded media an operator would fail to decode) are left alone. Returns new objects; the
    input is not modified.
    """
    if isinstance(payload, dict):
        return {k: perturb(v) for k, v in payload.items()}
    if isinstance(payload, str):
        return payload.translate(_ROT47)
    if isinstance(payload, np.ndarray):
        kind = payload.dtype.kind
        if kind in "iu":
            return payload ^ payload.dtype.type(1)
        if kind in "fc":
            return payload + payload.dtype.type(1)
        if kind == "b":
            return ~payload
        if kind == "U":
            return np.vectorize(lambda t: t.translate(_ROT47), otypes=[payload.dtype])(payload) if payload.size else payload
        return payload.copy()
    if isinstance(payload, (list, tuple)):
        items = [perturb(x, in_sequence=True) for x in payload]
        return items if isinstance(payload, list) else tuple(items)
    if isinstance(payload, (bool, np.bool_)):
        return payload
    if isinstance(payload, (int, np.integer)):
        return payload ^ 1 if in_sequence else payload
    if isinstance(payload, (float, np.floating)):
        return payload + 1.0
    return payload

