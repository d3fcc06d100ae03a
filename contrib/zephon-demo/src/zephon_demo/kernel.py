"""The kernel demo (``zephon demo --kernel``): real English text, byte-level tokens, an n-to-m packing operator.

It needs the kernel only (no reader or operator plugin): the corpus is made from the Python
documentation that ships with the standard library (``pydoc_data``), so there is no download;
paragraphs form one dataset, single sentences a second, mixed 3:1. Everything here is module-level
so the processes runner can pickle it.

This module was ``zephon_core.demo`` in zephon-core 0.1.0, which still forwards to it. Its pipeline
functions keep their 0.1.0 names in fingerprints (:func:`~zephon_core.plugin_api.stable_name`), so a
checkpoint of this pipeline taken with 0.1.0 still loads.
"""

from __future__ import annotations

import argparse
import re
from typing import TYPE_CHECKING, Any

import numpy as np

from zephon_core import Dataset, Emit, MixtureSpec, Pipeline, StaticMixtureWorkSource, take_sources
from zephon_core.plugin_api import stable_name

if TYPE_CHECKING:
    from zephon_core.plugin_api import ZephonPluginManager

ROW = 128
FORMER_MODULE = "zephon_core.demo"
"""Where these functions lived in 0.1.0, and the module name their fingerprints keep."""


def corpus() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Paragraphs and sentences of the standard library's documentation topics."""
    from pydoc_data.topics import topics

    paragraphs = [p.strip() for key in sorted(topics) for p in topics[key].split("\n\n") if len(p.strip()) > 40]
    sentences = [s.strip() for p in paragraphs for s in re.split(r"(?<=[.!?])\s+", p) if len(s.strip()) > 20]
    return (
        [{"text": t, "doc": i} for i, t in enumerate(paragraphs)],
        [{"text": t, "doc": i} for i, t in enumerate(sentences)],
    )


@stable_name(f"{FORMER_MODULE}:to_bytes")
def to_bytes(payload: dict[str, Any]) -> dict[str, Any] | None:
    """Byte-level tokens of the text; drops very short documents (a filtering map)."""
    text = payload["text"]
    if len(text) < 48:
        return None
    return {"tokens": np.frombuffer(text.encode("utf-8"), dtype=np.uint8).astype(np.int32), "doc": payload["doc"]}


@stable_name(f"{FORMER_MODULE}:concat_init")
def concat_init() -> dict[str, Any]:
    """The row buffer, and whose tokens it holds: ``[document index, tokens still in buf]`` pairs.

    ``pushed`` counts the documents pushed to the lane, which is how :class:`Emit` names them. The
    spans exist only for lineage: a row cut after pushing document C may start with the tail of
    document B that the buffer carried over, and must name B as well as C.
    """
    return {"buf": [], "spans": [], "pushed": 0}


@stable_name(f"{FORMER_MODULE}:concat_push")
def concat_push(state: dict[str, Any], payload: dict[str, Any]) -> list[Emit]:
    """Append a document's tokens (plus a separator) and cut every full row of ``ROW`` tokens.

    The separator counts as its document's last token, so a row that holds only the separator of a
    document names that document.
    """
    buf = state["buf"]
    tokens = payload["tokens"].tolist()
    buf.extend(tokens)
    buf.append(0)
    state["spans"].append([state["pushed"], len(tokens) + 1])
    state["pushed"] += 1
    rows = []
    while len(buf) >= ROW:
        rows.append(Emit(buf[:ROW], take_sources(state["spans"], ROW)))
        del buf[:ROW]
    return rows


@stable_name(f"{FORMER_MODULE}:concat_flush")
def concat_flush(state: dict[str, Any]) -> list[Emit]:
    """Emit the partial row, padded with -1, so the lane restarts clean."""
    buf = state["buf"]
    if not buf:
        return []
    row = buf + [-1] * (ROW - len(buf))
    sources = take_sources(state["spans"], len(buf))
    buf.clear()
    return [Emit(row, sources)]


@stable_name(f"{FORMER_MODULE}:concat_transform")
def concat_transform(row: list[int]) -> dict[str, Any]:
    """A row as model inputs: ``input_ids`` and how many of them are not padding."""
    arr = np.asarray(row, dtype=np.int32)
    return {"input_ids": arr, "valid": np.int32((arr >= 0).sum())}


def make_source(seed: int = 1234, chunk_size: int = 64, scale: int = 1) -> StaticMixtureWorkSource:
    """Paragraphs and sentences (each repeated ``scale`` times) mixed 3:1 by samples."""
    paragraphs, sentences = corpus()
    a = Dataset.from_records("paragraphs", paragraphs * scale, shard_size=500)
    b = Dataset.from_records("sentences", sentences * scale, shard_size=1000)
    return StaticMixtureWorkSource(
        [a, b], mixture=MixtureSpec({"paragraphs": 0.75, "sentences": 0.25}), chunk_size=chunk_size, seed=seed
    )


def build(
    parallelism: int = 2,
    *,
    source: StaticMixtureWorkSource | None = None,
    microbatch: int = 8,
    plugins: ZephonPluginManager | None = None,
) -> Pipeline:
    """The demo pipeline: filter+tokenize, pack into rows, shuffle, batch (``plugins`` as for ``Pipeline``)."""
    return (
        Pipeline(source or make_source(), plugins=plugins)
        .map_transform(to_bytes, parallelism=parallelism)
        .stateful_transform(
            "concat_rows",
            init_state=concat_init,
            push=concat_push,
            flush=concat_flush,
            transform=concat_transform,
            parallelism=parallelism,
        )
        .shuffle(buffer_size=64, seed=7)
        .batch(microbatch_size=microbatch)
    )


def run(
    *, lanes: int = 4, flush_every: int = 2, quick: bool = False, plugins: ZephonPluginManager | None = None
) -> bool:
    """Run the demo pipeline, print throughput, then check itself against other configurations.

    Every pipeline of the run is built with ``plugins`` (default: a fresh default manager, made
    once here so the checks compare like with like). Returns True when every global batch hash of
    every check matched the first run.
    """
    if plugins is None:
        from zephon_core.plugin_api import default_plugin_manager

        plugins = default_plugin_manager()
    import time

    from zephon_core import hash_global_batch
    from zephon_core.conformance.harness import run_global
    from zephon_core.plugin_api import Progress

    source = make_source(chunk_size=32 if quick else 64, scale=1 if quick else 3)

    def builder(par: int) -> Pipeline:
        return build(par, source=source, plugins=plugins)

    names = ", ".join(f"{d.name} ({d.num_samples} docs)" for d in source.datasets)
    print(f"Zephon demo: {names}, mixed 3:1; {lanes} lanes; flush every {flush_every} chunks")
    print("pipeline: fetch -> map_transform(byte tokens, drop short) -> concat_rows(128) -> shuffle -> batch(8)")
    total = source.num_chunks
    t0 = time.perf_counter()
    rows = tokens = 0
    hashes: list[str] = []
    step: list[Any] = []
    p = builder(2).options(lanes=lanes, runner="threads", flush_every_k_chunks=flush_every)
    with p, Progress(None, "  run 1", "global steps") as bar:  # drawn only on a terminal
        for b in p:
            rows += len(b)
            tokens += int(b.data["valid"].sum())
            step.append(b)
            if len(step) == lanes:
                hashes.append(hash_global_batch(step))
                step = []
                bar.update(1)
    dt = time.perf_counter() - t0
    print(
        f"run 1 (threads, parallelism 2, 1 rank): {len(hashes)} global steps from {total} chunks, "
        f"{rows} rows in {dt:.2f} s = {rows / dt:,.0f} rows/s, {tokens / dt / 1e6:.2f} M tokens/s"
    )
    checks: list[tuple[str, dict[str, Any]]] = [
        ("processes, parallelism 3, 2 ranks", {"runner": "processes", "parallelism": 3, "world_size": 2}),
        ("inline, parallelism 1, 4 ranks", {"runner": "inline", "parallelism": 1, "world_size": 4}),
    ]
    ok = True
    for label, kw in checks:
        res = run_global(builder, lanes=lanes, flush_every=flush_every, **kw)
        match = sum(a == b for a, b in zip(res.hashes, hashes))
        good = res.hashes == hashes
        ok &= good
        print(f"  check {label}: {match}/{len(hashes)} global batch hashes match {'OK' if good else 'MISMATCH'}")
    cut = len(hashes) // 3
    first = run_global(builder, lanes=lanes, flush_every=flush_every, world_size=2, runner="threads", steps=cut)
    rest = run_global(
        builder,
        lanes=lanes,
        flush_every=flush_every,
        world_size=4,
        runner="processes",
        parallelism=2,
        resume=first.state,
    )
    good = first.hashes + rest.hashes == hashes
    ok &= good
    size = len(__import__("json").dumps(first.state))
    print(
        f"  check checkpoint at step {cut} on 2 ranks ({size} bytes of JSON), resume on 4 ranks with processes: "
        f"{sum(a == b for a, b in zip(first.hashes + rest.hashes, hashes))}/{len(hashes)} match {'OK' if good else 'MISMATCH'}"
    )
    print("ALL GLOBAL BATCH HASHES MATCHED" if ok else "DETERMINISM CHECK FAILED")
    return ok


def main(argv: list[str] | None = None, *, plugins: ZephonPluginManager | None = None) -> int:
    """The registered ``kernel`` demo (a :class:`~zephon_core.hookspecs.DemoMain`); ``zephon demo --kernel`` runs it."""
    ap = argparse.ArgumentParser(prog="zephon demo --kernel", description=__doc__)
    ap.add_argument("--lanes", type=int, default=4, help="lanes (default 4)")
    ap.add_argument("--quick", action="store_true", help="a shorter run")
    args = ap.parse_args(argv)
    if args.lanes < 1:
        ap.error(f"--lanes must be at least 1, got {args.lanes}")
    return 0 if run(lanes=args.lanes, quick=args.quick, plugins=plugins) else 1
