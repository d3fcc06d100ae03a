"""Token documents that check a packing operator: every token says which document and position it is.

A packer cuts and concatenates documents into fixed-length rows; a bug drops, repeats, reorders or
mixes tokens. With token value ``doc * TOKEN_STRIDE + i`` for token ``i`` of document ``doc``,
:func:`check_packed_rows` can verify from the rows alone that every token of every document
arrived exactly once, in order, with consistent positions and segment ids. Used by zephon-pack's
tests; any other packing operator producing the same row layout can use it too (it needs no test
framework; the kernel's former ``zephon_core.testing.packing`` resolves its names here).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from zephon_core import Dataset, Pipeline, StaticMixtureWorkSource
from zephon_core.plugin_api import stable_hash64, uniforms

TOKEN_STRIDE = 100_000
"""Token value ``doc * TOKEN_STRIDE + i`` is token ``i`` of document ``doc`` (documents are < TOKEN_STRIDE long)."""


def token_documents(n: int, seed: int, mean: float = 300.0, longest: int = 9000) -> list[dict[str, Any]]:
    """``n`` documents ``{"input_ids", "doc"}`` with geometric-ish lengths (many short, a few longer than a row).

    Every 97th document is empty: a packer must drop it (with a tombstone) rather than emit an empty segment.
    """
    u = uniforms(stable_hash64("pack-test-docs", seed), np.arange(n))
    lengths = np.minimum((-mean * np.log1p(-u)).astype(np.int64) + 1, longest)
    lengths[::97] = 0  # a few empty documents: dropped with a tombstone
    return [
        {"input_ids": (d * TOKEN_STRIDE + np.arange(n_tok)).astype(np.int32), "doc": d}
        for d, n_tok in enumerate(lengths)
    ]


def token_source(docs: list[dict[str, Any]], chunk_size: int = 50) -> StaticMixtureWorkSource:
    """``docs`` as one in-memory dataset ``docs`` (shards of 300), shuffled with a fixed seed."""
    return StaticMixtureWorkSource([Dataset.from_records("docs", docs, shard_size=300)], chunk_size=chunk_size, seed=5)


def collect(pipeline: Pipeline) -> list[Any]:
    """Every microbatch of ``pipeline``, run to the end."""
    with pipeline as p:
        return list(p)


def check_packed_rows(rows: dict[str, np.ndarray], docs: list[dict[str, Any]], target: int, *, whole: bool) -> None:
    """Assert every token of every document arrived exactly once, in order, with consistent positions and segments.

    Args:
        rows: packed rows: ``input_ids``, ``position_ids``, ``document_ids`` (-1 for padding) of
            shape ``(rows, target)`` and ``num_padding`` per row.
        docs: the documents from :func:`token_documents`.
        target: the row length.
        whole: the packer promises not to split a document that fits in one row.
    """
    ids, pos, seg, pad = rows["input_ids"], rows["position_ids"], rows["document_ids"], rows["num_padding"]
    assert ids.dtype == np.int32 and ids.shape[1] == target
    seen: dict[int, list[tuple[int, int]]] = {}
    for r in range(ids.shape[0]):
        segs = seg[r]
        n_pad = int((segs < 0).sum())
        assert n_pad == int(pad[r])
        assert (segs[target - n_pad :] == -1).all(), "padding only at the end of a row"
        valid = target - n_pad
        k = int(segs[:valid].max()) + 1 if valid else 0
        assert np.array_equal(np.unique(segs[:valid]), np.arange(k)), "segment ids 0..k-1"
        assert (np.diff(segs[:valid]) >= 0).all(), "segments in order"
        for j in range(k):
            where = np.flatnonzero(segs == j)
            toks = ids[r, where]
            assert np.array_equal(pos[r, where], np.arange(len(where))), "positions restart at each segment"
            d = int(toks[0]) // TOKEN_STRIDE
            offsets = toks - d * TOKEN_STRIDE
            assert (toks // TOKEN_STRIDE == d).all(), "a segment holds one document"
            assert np.array_equal(offsets, offsets[0] + np.arange(len(toks))), "tokens in order, contiguous"
            seen.setdefault(d, []).append((int(offsets[0]), len(toks)))
    for d, doc in enumerate(docs):
        n = len(doc["input_ids"])
        if n == 0:
            assert d not in seen
            continue
        parts = sorted(seen.get(d, []))
        assert parts, f"document {d} missing"
        cursor = 0
        for start, length in parts:
            assert start == cursor, f"document {d}: token {cursor} missing or duplicated"
            cursor += length
        assert cursor == n, f"document {d}: {cursor} of {n} tokens"
        if whole and n <= target:
            assert len(parts) == 1, f"document {d} ({n} tokens) was split"
