"""Packing figures: padding of every ``pack_sequences`` algorithm, with and without ``order``, side by side.

The text benchmark corpus of ``bench_text_pipeline.py`` (section 2), pretokenized with GPT-2 and
repeated, one lane, ``target_length=2048``, chunks of 256 documents. For each algorithm and order
(``arrival``, ``length`` and ``random`` over order windows of 256 documents) it prints the padding
fraction with the default flush every 8 chunks and without flushes (K=0), and the share of
documents whose tokens went to more than one row (documents longer than a row always do). Run:
``python benchmarks/bench_packing.py`` (``--quick`` for a short smoke run).
"""

from __future__ import annotations

import argparse
import os
from typing import Any

import numpy as np
from bench_text_pipeline import NEVER, TARGET_LENGTH, corpus_texts, pretokenize

from zephon_core import Dataset, Pipeline, StaticMixtureWorkSource

ALGORITHMS: list[tuple[str, dict[str, Any]]] = [
    ("wrap", {"algorithm": "wrap"}),
    ("first_fit", {"algorithm": "first_fit"}),
    ("best_fit", {"algorithm": "best_fit"}),
    ("best_fit allow_split", {"algorithm": "best_fit", "allow_split": True}),
    ("best_fit_wrap", {"algorithm": "best_fit_wrap"}),
    ("best_fit_wrap age<=256", {"algorithm": "best_fit_wrap", "max_candidate_age": 256}),
]
ORDERS = ("arrival", "length", "random")


def padding(docs: list[np.ndarray], k: int, min_tokens: int, **kw: Any) -> tuple[float, float]:
    """(padding / all tokens, share of documents in more than one row) over at least ``min_tokens``."""
    ds = Dataset.from_records("ids", [{"input_ids": a} for a in docs], shard_size=4096)
    ws = StaticMixtureWorkSource([ds], chunk_size=256, seed=2, exhaustion="repeat")
    pipe = (
        Pipeline(ws)
        .pack_sequences(target_length=TARGET_LENGTH, **kw)
        .batch(microbatch_size=64)
        .options(lanes=1, flush_every_k_chunks=k or NEVER)
    )
    pad = total = 0
    segments: dict[int, int] = {}
    with pipe as p:
        for b in p:
            pad += int(b.data["num_padding"].sum())
            total += b.data["input_ids"].size
            for lin in b.lineage:
                for sid in lin:
                    segments[sid] = segments.get(sid, 0) + 1
            if total >= min_tokens:
                break
    split = sum(v > 1 for v in segments.values()) / max(len(segments), 1)
    return pad / total, split


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small corpus and budgets (smoke run)")
    ap.add_argument("--tokens", type=float, default=5e6, help="tokens of rows per case")
    args = ap.parse_args()
    english, technical = corpus_texts()
    if args.quick:
        english, technical = english[:4000], technical[:1000]
    docs = pretokenize(english + technical)
    budget = 1_000_000 if args.quick else int(args.tokens)
    lengths = np.array([len(a) for a in docs])
    print(
        f"{len(docs)} documents, mean {lengths.mean():.1f} tokens, {(lengths > TARGET_LENGTH).mean() * 100:.2f}% "
        f"longer than a row; target_length {TARGET_LENGTH}, chunks of 256, {budget / 1e6:.0f}M tokens per case; "
        f"{os.cpu_count()} cores"
    )
    print("| algorithm | order | padding, K=8 (default) | padding, K=0 (never flush) | documents in >1 row (K=8) |")
    print("|---|---|---:|---:|---:|")
    for label, kw in ALGORITHMS:
        for order in ORDERS:
            with_flush, split = padding(docs, 8, budget, order=order, **kw)
            never, _ = padding(docs, 0, budget, order=order, **kw)
            print(f"| `{label}` | `{order}` | {100 * with_flush:.3f}% | {100 * never:.3f}% | {100 * split:.2f}% |")


if __name__ == "__main__":
    main()
