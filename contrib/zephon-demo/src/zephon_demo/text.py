"""``zephon demo``: the announcement's pipeline on a self-made corpus, with a determinism self-check.

    StaticMixtureWorkSource([plays (Parquet), lines (JSONL)], 70:30 in tokens)
      -> tokenize(gpt2) -> pack_sequences(2048) -> ensure_mixture() -> batch(2), 4 lanes

It prints usable (non-padding) tokens/s, the padding fraction and the token share of each dataset,
then runs the same pipeline with other runners, parallelism and world sizes, and with a checkpoint
taken on 2 ranks and resumed on 4, and prints whether every global batch hash matched.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from zephon_core import Dataset, MixtureSpec, Pipeline, StaticMixtureWorkSource, hash_global_batch
from zephon_core.conformance.harness import run_global
from zephon_demo import corpus

if TYPE_CHECKING:
    from zephon_core.plugin_api import ZephonPluginManager

TARGET = {"plays": 0.7, "lines": 0.3}
LANES = 4
MICROBATCH = 2
SEQ = 2048


def make_source(root: Path, plugins: ZephonPluginManager | None = None) -> tuple[StaticMixtureWorkSource, str]:
    plays_dir, lines_dir, source, n_long, n_short = corpus.write(root)
    plays = Dataset.from_path("plays", str(plays_dir), plugins=plugins)
    lines = Dataset.from_path("lines", str(lines_dir), plugins=plugins)
    ws = StaticMixtureWorkSource(
        [plays, lines], mixture=MixtureSpec(TARGET), seed=1234, weight_by="tokens", exhaustion="repeat"
    )
    desc = (
        f"{source}: plays = {n_long} speeches as Parquet ({plays.format}), lines = {n_short} single lines "
        f"as JSON Lines ({lines.format})"
    )
    return ws, desc


def build(ws: StaticMixtureWorkSource, parallelism: int, plugins: ZephonPluginManager | None = None) -> Pipeline:
    return (
        Pipeline(ws, plugins=plugins)
        .tokenize(tokenizer_id="gpt2", parallelism=parallelism)
        .pack_sequences(target_length=SEQ)
        .ensure_mixture()
        .batch(microbatch_size=MICROBATCH)
    )


def _bar(done: int, total: int) -> None:
    if sys.stderr.isatty():
        filled = 30 * done // total
        sys.stderr.write(f"\r  [{'#' * filled}{'.' * (30 - filled)}] {done}/{total} global steps")
        if done == total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def run(steps: int = 40, root: Path | None = None, plugins: ZephonPluginManager | None = None) -> bool:
    """Run the demo and its checks; every dataset and pipeline is built with ``plugins``."""
    if plugins is None:
        from zephon_core.plugin_api import default_plugin_manager

        plugins = default_plugin_manager()
    root = root or Path(os.environ.get("ZEPHON_DEMO_DIR", Path(tempfile.gettempdir()) / "zephon-demo"))
    ws, desc = make_source(root, plugins)
    print(f"Zephon demo: {desc}")
    print(
        f"  mixture target in tokens {TARGET}; {LANES} lanes; GPT-2 tokenizer; packed to {SEQ}; microbatch {MICROBATCH}"
    )
    hashes: list[str] = []
    tokens = np.zeros(2)
    valid = padding = 0
    step: list[Any] = []
    t0 = time.perf_counter()
    with build(ws, 2, plugins).options(lanes=LANES, runner="threads") as p:
        for b in p:
            data = b.to_training()
            valid += int(data["num_valid_tokens"].sum()) if "num_valid_tokens" in data else 0
            padding += int(b.data["num_padding"].sum())
            for lin, seg in zip(b.lineage, b.data["document_ids"]):
                counts = np.bincount(seg[seg >= 0], minlength=len(lin))
                for sid, c in zip(lin, counts.tolist()):
                    tokens[ws.dataset_index(sid)] += c
            step.append(b)
            if len(step) == LANES:
                hashes.append(hash_global_batch(step))
                step = []
                _bar(len(hashes), steps)
                if len(hashes) == steps:
                    break
    dt = time.perf_counter() - t0
    total = steps * LANES * MICROBATCH * SEQ
    usable = total - padding
    shares = tokens / tokens.sum()
    print(f"run 1 (threads, parallelism 2, 1 rank): {steps} global steps, {total:,} tokens in {dt:.1f} s")
    print(f"  usable (non-padding) tokens/s: {usable / dt:,.0f}   padding: {100 * padding / total:.3f}% of tokens")
    print(
        "  token shares: "
        + ", ".join(
            f"{d.name} {100 * s:.1f}% (target {100 * TARGET[d.name]:.0f}%)" for d, s in zip(ws.datasets, shares)
        )
    )
    print(f"  tokens per sample, calibrated once and frozen into checkpoints: {json.dumps(p.token_estimates)}")

    def builder(par: int) -> Pipeline:
        return build(ws, par, plugins)

    ok = True
    checks = [
        ("processes, parallelism 3, 2 ranks", {"runner": "processes", "parallelism": 3, "world_size": 2}),
        ("inline, parallelism 1, 4 ranks", {"runner": "inline", "parallelism": 1, "world_size": 4}),
    ]
    for label, kw in checks:
        got = run_global(builder, lanes=LANES, steps=steps, **kw).hashes
        good = got == hashes
        ok &= good
        print(
            f"  check {label}: {sum(a == b for a, b in zip(got, hashes))}/{steps} global batch hashes match "
            f"{'OK' if good else 'MISMATCH'}"
        )
    cut = steps // 3
    first = run_global(builder, lanes=LANES, world_size=2, runner="threads", parallelism=2, steps=cut)
    rest = run_global(
        builder, lanes=LANES, world_size=4, runner="processes", parallelism=1, resume=first.state, steps=steps - cut
    )
    got = first.hashes + rest.hashes
    good = got == hashes
    ok &= good
    print(
        f"  check checkpoint at step {cut} on 2 ranks ({len(json.dumps(first.state))} bytes of JSON), resumed on "
        f"4 ranks with processes: {sum(a == b for a, b in zip(got, hashes))}/{steps} match {'OK' if good else 'MISMATCH'}"
    )
    print("ALL GLOBAL BATCH HASHES MATCHED" if ok else "DETERMINISM CHECK FAILED")
    return ok


def main(argv: list[str] | None = None, *, plugins: ZephonPluginManager | None = None) -> int:
    """The registered demo (a :class:`~zephon_core.hookspecs.DemoMain`); ``zephon demo`` passes its manager."""
    ap = argparse.ArgumentParser(prog="zephon demo", description=__doc__)
    ap.add_argument("--steps", type=int, default=40, help="global steps per run (default 40)")
    ap.add_argument("--quick", action="store_true", help="12 global steps")
    args = ap.parse_args(argv)
    return 0 if run(steps=12 if args.quick else args.steps, plugins=plugins) else 1


if __name__ == "__main__":
    raise SystemExit(main())
