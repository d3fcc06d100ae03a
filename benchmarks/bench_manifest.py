"""What the provenance manifest (``options(manifest=PATH)``) costs: throughput with and without it.

Two pipelines, each run alternately with and without a manifest (best of ``--repeats``), with the
manifest's size on disk:

* ``kernel``: fetch + shuffle + batch(32) of 1 KB text samples from memory, the kernel benchmark's
  pipeline — the worst case, since each row is cheap and every row is one record to record.
* ``packed``: rows of 2048 tokens packed from documents of 16-256 tokens, with ``document_ids``
  (what ``pack_sequences`` produces), microbatch 8: each row names ~15 records and their token
  spans, as in language-model training.

Run: ``python benchmarks/bench_manifest.py`` (the manifest is zephon-observe's: ``pip install -e contrib/zephon-observe``).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from zephon_core import Dataset, MixtureSpec, Pipeline, StaticMixtureWorkSource
from zephon_core.defaults.operators.stateful import Emit, take_sources

ROW = 2048


def text_records(n: int) -> list[dict[str, str]]:
    rng = np.random.default_rng(0)
    letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz      ", dtype=np.uint8)
    return [{"text": letters[rng.integers(0, 32, 1024)].tobytes().decode()} for _ in range(n)]


def token_records(n: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(1)
    return [{"tokens": rng.integers(0, 50_000, rng.integers(16, 257), dtype=np.int32)} for _ in range(n)]


def pack_init() -> dict[str, Any]:
    return {"buf": [], "spans": [], "pushed": 0}


def pack_push(state: dict[str, Any], payload: dict[str, Any]) -> list[Emit]:
    """Whole documents into rows of ROW tokens (a document that does not fit starts the next row)."""
    tokens = payload["tokens"]
    out = []
    if sum(len(t) for t in state["buf"]) + len(tokens) > ROW:
        out.append(_row(state))
    state["buf"].append(tokens)
    state["spans"].append([state["pushed"], 1])
    state["pushed"] += 1
    return out


def pack_flush(state: dict[str, Any]) -> list[Emit]:
    return [_row(state)] if state["buf"] else []


def _row(state: dict[str, Any]) -> Emit:
    docs = state["buf"]
    ids = np.full(ROW, 0, dtype=np.int32)
    doc_ids = np.full(ROW, -1, dtype=np.int32)
    at = 0
    for j, t in enumerate(docs):
        ids[at : at + len(t)] = t
        doc_ids[at : at + len(t)] = j
        at += len(t)
    sources = take_sources(state["spans"], len(docs))
    state["buf"] = []
    return Emit({"input_ids": ids, "document_ids": doc_ids}, sources)


def build(kind: str, records: list[dict[str, Any]], manifest: str | None) -> Pipeline:
    ds = Dataset.from_records("data", records, shard_size=4096)
    ws = StaticMixtureWorkSource([ds], mixture=MixtureSpec({"data": 1.0}), chunk_size=1024, seed=0)
    opts: dict[str, Any] = {"lanes": 4, "runner": "threads"}
    if manifest is not None:
        opts["manifest"] = manifest
    if kind == "kernel":
        return Pipeline(ws).shuffle(buffer_size=1024, seed=1).batch(microbatch_size=32).options(**opts)
    return (
        Pipeline(ws)
        .stateful_transform("pack", init_state=pack_init, push=pack_push, flush=pack_flush)
        .batch(microbatch_size=8)
        .options(**opts)
    )


def rate(kind: str, records: list[dict[str, Any]], manifest: str | None) -> tuple[float, float]:
    """(rows/s, records/s) after the first batch."""
    with build(kind, records, manifest) as p:
        it = iter(p)
        next(it)
        t0 = time.perf_counter()
        rows = recs = 0
        for b in it:
            rows += len(b)
            recs += sum(len(lin) for lin in b.lineage)
        dt = time.perf_counter() - t0
    return rows / dt, recs / dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--samples", type=int, default=200_000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    print(f"manifest cost: best of {args.repeats}, alternating runs without and with the manifest")
    for kind, records in (("kernel", text_records(args.samples)), ("packed", token_records(args.samples))):
        best = {"off": (0.0, 0.0), "on": (0.0, 0.0)}
        size = steps = 0
        for r in range(args.repeats):
            for mode in ("off", "on") if r % 2 == 0 else ("on", "off"):
                with tempfile.TemporaryDirectory() as tmp:
                    got = rate(kind, records, tmp if mode == "on" else None)
                    if mode == "on":
                        files = list(Path(tmp).rglob("*.parquet"))
                        size = sum(f.stat().st_size for f in files)
                        from zephon_observe.manifest import Manifest

                        steps = len(Manifest(tmp).steps())
                best[mode] = max(best[mode], got)
        (off_rows, off_recs), (on_rows, _) = best["off"], best["on"]
        print(
            f"  {kind:7s} without: {off_rows:>9,.0f} rows/s ({off_recs:,.0f} records/s)   with: {on_rows:>9,.0f} rows/s   "
            f"cost {100 * (1 - on_rows / off_rows):5.1f}%   manifest {size / 2**20:.1f} MiB for {steps} steps "
            f"({size / max(1, steps):,.0f} bytes/step, {size / max(1, args.samples):.1f} bytes/record)"
        )


if __name__ == "__main__":
    main()
