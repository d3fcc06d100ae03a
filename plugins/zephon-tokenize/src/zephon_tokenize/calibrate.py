"""Calibrating tokens per sample for token-aware mixing.

Mixture weights are meant in tokens, but the work source deals in sample pointers, so it needs each
dataset's mean tokens per sample. Tokenizing a whole dataset to learn it would be an offline pass,
which is what Zephon exists to avoid; tokenizing a small sample is cheap but document lengths vary
a lot, so a mean over a few hundred documents can be off by several percent. The estimate is
therefore split in two parts with very different variance:

* **tokens per byte**, which varies far less from document to document, from about
  ``tokenize_bytes`` of text spread evenly over the read documents (a ratio of sums; 256 KiB keeps
  the error under about 1% on real text, at a fraction of a second per dataset);
* **bytes per document**, which varies a lot but costs only a read, from ``read_samples``
  documents (the whole dataset when it is smaller than that).

Each read document's tokens are estimated as ``specials + ratio * bytes`` (capped at
``max_length`` when documents are truncated) and averaged. The sample is systematic (evenly spaced
over at most ``max_shards`` evenly spaced shards, so remote datasets need few shard reads) and
therefore identical on every rank: every rank computes bit-identical estimates, and the estimates
are frozen into the checkpoint anyway.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from zephon_core import ConfigError, ReaderError
from zephon_tokenize.worker import TokenizeWorker

MIN_TOKENIZED = 64
"""Documents tokenized at least, however long they are."""


def sample_plan(sizes: np.ndarray, n: int, max_shards: int) -> list[tuple[int, np.ndarray]]:
    """Up to ``n`` evenly spaced ``(shard, indices)`` reads; every sample when the dataset is small."""
    sizes = np.asarray(sizes, dtype=np.int64)
    nonempty = np.flatnonzero(sizes > 0)
    if int(sizes.sum()) <= n:
        return [(int(s), np.arange(int(sizes[s]), dtype=np.int64)) for s in nonempty.tolist()]
    if len(nonempty) > max_shards:
        pick = ((np.arange(max_shards) + 0.5) * len(nonempty) / max_shards).astype(np.int64)
        nonempty = nonempty[pick]
    chosen = sizes[nonempty]
    # samples per shard proportional to shard size, at least one
    quota = np.maximum(1, np.floor(n * chosen / chosen.sum()).astype(np.int64))
    plan = []
    for s, size, q in zip(nonempty.tolist(), chosen.tolist(), quota.tolist()):
        q = min(q, size)
        idx = ((np.arange(q) + 0.5) * size / q).astype(np.int64)
        plan.append((s, idx))
    return plan


def estimate_tokens_per_sample(
    dataset: Any,
    worker: TokenizeWorker,
    *,
    read_samples: int = 4096,
    tokenize_bytes: int = 1 << 18,
    max_shards: int = 64,
) -> float:
    """Estimated mean tokens per sample of ``dataset`` after ``worker`` (see the module docstring)."""
    payloads: list[dict[str, Any]] = []
    for shard, idx in sample_plan(dataset.sizes, read_samples, max_shards):
        try:
            payloads.extend(dataset.reader.read(shard, idx))
        except ReaderError:
            raise
        except Exception as exc:
            raise ReaderError(f"dataset {dataset.name!r}: calibration read of shard {shard} failed: {exc}") from exc
    if not payloads:
        return 0.0
    try:
        texts = worker.texts(payloads)
    except ConfigError as exc:
        raise ConfigError(f"dataset {dataset.name!r}: {exc}") from None
    nbytes = np.array([len(t.encode("utf-8")) for t in texts], dtype=np.float64)
    mean_bytes = float(nbytes.mean())
    k = min(len(texts), max(MIN_TOKENIZED, math.ceil(tokenize_bytes / max(mean_bytes, 1.0))))
    pick = ((np.arange(k) + 0.5) * len(texts) / k).astype(np.int64)
    specials = (worker.bos_id is not None) + (worker.eos_id is not None)
    untruncated = TokenizeWorker(
        worker.tokenizer_json, worker.field, None, None, None, False, tokenizer=worker.tokenizer()
    )
    content = np.array(untruncated.count_tokens([payloads[i] for i in pick.tolist()]), dtype=np.float64)
    sub_bytes = nbytes[pick].sum()
    ratio = content.sum() / sub_bytes if sub_bytes > 0 else 0.0
    per_doc = specials + ratio * nbytes
    if worker.max_length is not None and not worker.split_long_samples:
        per_doc = np.minimum(per_doc, worker.max_length)
    return float(per_doc.mean())
