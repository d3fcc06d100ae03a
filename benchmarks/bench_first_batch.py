"""Time to the first batch, the longest gap between batches, and what flushes cost in padding.

The text demo's pipeline (GPT-2 tokenize -> pack_sequences(2048) -> ensure_mixture -> batch(2),
70:30 in tokens) on the demo's own corpus (Shakespeare's speeches as Parquet, single lines as JSON
Lines), with the **default** ``chunk_size`` and ``flush_every_k_chunks`` unless told otherwise:

* first batch: seconds from ``iter(pipeline)`` to the first global step, in a fresh pipeline;
* gaps: the longest wait for one global step at steady state (after the first ``--warmup`` steps);
* work between batches (``--work-between``): the same run with the ``inline`` runner, counting the
  documents tokenized between consecutive global batches instead of seconds. The most any step
  waited for, in global batches' worth of work (documents per step on average), moves little with
  the machine's load, unlike the gaps: use it to compare feeder orderings on a shared machine;
* flush overhead: the padding one flush adds (measured with a flush after every chunk, against the
  same records packed without flushes) over the tokens of the pipeline's window, in percentage
  points of tokens.

It also runs the same corpus with ``exhaustion="stop"`` (a corpus smaller than one default window)
to show it ends cleanly. Absolute times move with the machine's load; run it on a quiet machine.

    python benchmarks/bench_first_batch.py [--lanes 4 32] [--steps 300] [--chunk-size N] [--flush-every K]
        [--work-between]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any, cast

import numpy as np

from zephon_core import Dataset, MixtureSpec, Pipeline, StaticMixtureWorkSource

RELEASE = "balanced"
"""``ensure_mixture``'s release rule (the text demo's); ``--release most_behind`` shows the older rule."""


def build(
    root: Path, lanes: int, exhaustion: Any, chunk_size: Any, flush_every: Any, runner: str = "threads"
) -> Pipeline:
    from zephon_demo import corpus

    plays_dir, lines_dir, _, _, _ = corpus.write(root)
    kw: dict[str, Any] = {} if chunk_size is None else {"chunk_size": chunk_size}
    ws = StaticMixtureWorkSource(
        [Dataset.from_path("plays", str(plays_dir)), Dataset.from_path("lines", str(lines_dir))],
        mixture=MixtureSpec({"plays": 0.7, "lines": 0.3}),
        seed=1234,
        weight_by="tokens",
        exhaustion=exhaustion,
        **kw,
    )
    opts: dict[str, Any] = {"lanes": lanes, "runner": runner}
    if flush_every is not None:
        opts["flush_every_k_chunks"] = flush_every
    return (
        Pipeline(ws)
        .tokenize(tokenizer_id="gpt2", parallelism=2)
        .pack_sequences(target_length=2048)
        .ensure_mixture(release=RELEASE)
        .batch(microbatch_size=2)
        .options(**opts)
    )


def padding(batches: list[Any]) -> tuple[int, int]:
    """(padding tokens, all tokens) of some microbatches (zeros in ``attention_mask`` are padding)."""
    pad = total = 0
    for b in batches:
        mask = np.asarray(b.to_training()["attention_mask"])
        pad += int(mask.size - mask.sum())
        total += int(mask.size)
    return pad, total


def run(root: Path, lanes: int, steps: int, warmup: int, chunk_size: Any, flush_every: Any) -> dict[str, float]:
    p = build(root, lanes, "repeat", chunk_size, flush_every)
    t0 = time.perf_counter()
    it = iter(p)
    batches, gaps = [], []
    first = 0.0
    last = t0
    with p:
        for step in range(steps):
            for _ in range(lanes):
                batches.append(next(it))
            now = time.perf_counter()
            if step == 0:
                first = now - t0
            elif step >= warmup:
                gaps.append(now - last)
            last = now
        chunk = cast(StaticMixtureWorkSource, p._active_source()).chunk_size
        resolved_k = p.flush_every
    pad, total = padding(batches)
    window_tokens = resolved_k * chunk * min_tokens_per_sample(p)
    return {
        "first_s": first,
        "max_gap_s": max(gaps) if gaps else 0.0,
        "median_gap_s": float(np.median(gaps)) if gaps else 0.0,
        "padding_pct": 100 * pad / total,
        "flush_pp": 100 * pad_per_flush(root, lanes, chunk, min_tokens_per_sample(p)) / window_tokens,
        "window_tokens": window_tokens,
        "chunk_size": chunk,
        "k": resolved_k,
    }


def work_between(root: Path, lanes: int, steps: int, warmup: int, chunk_size: Any, flush_every: Any) -> float:
    """The most work any global step waited for at steady state, in global batches' worth.

    Work is documents tokenized (the tokenize step's records out). With the ``inline`` runner each
    step works in its own thread, one task at a time, so what is done between two global batches
    follows the feeder's order and hardly depends on the machine's load, unlike the seconds it took.
    Steps ``warmup`` to ``steps``; one global batch's worth is the mean over them.
    """
    p = build(root, lanes, "repeat", chunk_size, flush_every, runner="inline")
    done = []
    with p:
        it = iter(p)
        for _ in range(steps):
            for _ in range(lanes):
                next(it)
            done.append(next(int(s["records_out"]) for s in p.metrics()["stages"] if s["name"] == "tokenize"))
    between = np.diff(done[max(warmup, 1) - 1 :])
    return float(between.max() / between.mean()) if len(between) and between.mean() > 0 else 0.0


def min_tokens_per_sample(p: Pipeline) -> float:
    """The mixture's mean tokens per sample (what the window is sized for)."""
    return float(cast(StaticMixtureWorkSource, p._active_source())._fewest_tokens_per_sample())


def pad_per_flush(root: Path, lanes: int, chunk: int, tokens_per_sample: float, flushes_per_lane: int = 24) -> float:
    """Padding tokens one flush adds, measured where flushes are frequent (windows of one chunk).

    A run over the pipeline's own window would need several windows of 4Mi tokens per lane; the
    padding a flush adds does not depend on how long the window was, so it is measured with
    ``flush_every_k_chunks=1`` against the same records packed without flushes, and divided by the
    pipeline's window.
    """
    steps = max(1, flushes_per_lane * chunk // 160)  # ~160 documents per lane and step on this corpus
    pads = []
    for k in (1, 1 << 20):
        q = build(root, lanes, "repeat", chunk, k)
        with q:
            it = iter(q)
            pads.append(padding([next(it) for _ in range(steps * lanes)]))
    (pad1, total1), (pad0, _) = pads
    flushes = (total1 - pad1) / (chunk * tokens_per_sample)  # one flush per chunk consumed
    return max(0.0, pad1 - pad0) / max(1.0, flushes)


def smoke_stop(root: Path, lanes: int, chunk_size: Any, flush_every: Any) -> str:
    """Run the whole corpus once with exhaustion="stop": global steps delivered, or the error."""
    p = build(root, lanes, "stop", chunk_size, flush_every)
    try:
        with p:
            n = sum(1 for _ in p)
        return f"{n // lanes} global steps, ended cleanly"
    except Exception as exc:  # reported, not raised: this is what a user would see
        return f"FAILED: {type(exc).__name__}: {exc}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lanes", type=int, nargs="+", default=[4, 32])
    ap.add_argument("--steps", type=int, default=300, help="global steps per run (gaps are measured after --warmup)")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--chunk-size", default=None, help="default: the source's default")
    ap.add_argument("--flush-every", default=None, help="default: the pipeline's default")
    ap.add_argument("--release", default=RELEASE, choices=["balanced", "most_behind"], help="ensure_mixture's rule")
    ap.add_argument(
        "--work-between",
        action="store_true",
        help="also run with the inline runner and report the most work between two global batches",
    )
    args = ap.parse_args()
    globals()["RELEASE"] = args.release
    chunk = (
        None if args.chunk_size is None else (args.chunk_size if args.chunk_size == "auto" else int(args.chunk_size))
    )
    k = (
        None
        if args.flush_every is None
        else (args.flush_every if args.flush_every == "auto" else int(args.flush_every))
    )
    root = Path(tempfile.gettempdir()) / "zephon-demo"
    print(
        f"chunk_size={chunk or 'default'} flush_every_k_chunks={k or 'default'} ensure_mixture(release={RELEASE!r}); "
        f"threads; {args.steps} global steps"
    )
    print(
        "| lanes | chunk | K | window tokens | first batch s | max gap s | median gap s | max work between (batches) "
        "| padding % | flush overhead pp | stop run |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for lanes in args.lanes:
        r = run(root, lanes, args.steps, args.warmup, chunk, k)
        stop = smoke_stop(root, lanes, chunk, k)
        work = f"{work_between(root, lanes, args.steps, args.warmup, chunk, k):.2f}" if args.work_between else "-"
        print(
            f"| {lanes} | {r['chunk_size']} | {r['k']} | {r['window_tokens'] / 2**20:.1f}Mi | {r['first_s']:.2f} | {r['max_gap_s']:.3f} | "
            f"{r['median_gap_s']:.4f} | {work} | {r['padding_pct']:.3f} | {r['flush_pp']:.3f} | {stop} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
