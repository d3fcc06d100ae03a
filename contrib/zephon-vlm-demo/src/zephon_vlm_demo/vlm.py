"""``zephon demo vlm``: vision-language training rows from captioned photographs, checked.

    StaticMixtureWorkSource([captioned JPEGs as Parquet | WebDataset | LitData], shuffled)
      -> decode_image -> random_resized_crop(224) -> horizontal_flip       (zephon-vision)
      -> patchify(14, merge 2)                                              (Qwen2-VL layout)
      -> tokenize(gpt2, field="txt")                                        (zephon-tokenize)
      -> map: <image placeholders> + caption tokens
      -> pack_sequences(1024, best_fit, image_token_id=50257)               (zephon-pack)
      -> batch(2, collate_multimodal), 4 lanes

The corpus (see :mod:`zephon_vlm_demo.corpus`) is made offline from the photographs that ship in
scikit-image (and scikit-learn) and written once with each format's own writer. The crop and the
flip draw from the kernel's per-sample generator, so they are a pure function of (seed, operator,
record): the demo prints throughput, then runs the same pipeline with other runners, parallelism
and world sizes, from a checkpoint taken on 2 ranks and resumed on 4, and on the other two copies
of the corpus, and prints whether every global batch hash matched.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from zephon_core import Dataset, Pipeline, StaticMixtureWorkSource, hash_global_batch
from zephon_core.conformance.harness import run_global
from zephon_vlm_demo import corpus as corpus_mod

if TYPE_CHECKING:
    from zephon_core.plugin_api import ZephonPluginManager

LANES = 4
MICROBATCH = 2
SEQ = 1024
IMAGE_SIZE = 224
OPEN_BINS = 4
PATCH, TEMPORAL, MERGE = 14, 2, 2
PATCH_DIM = 3 * TEMPORAL * PATCH * PATCH
IMAGE_PAD = 50257
"""The image placeholder id: one past GPT-2's vocabulary (Qwen2-VL's ``<|image_pad|>``)."""


def make_source(path: str | Path, plugins: ZephonPluginManager | None = None, *, chunk_size: int | None = None) -> StaticMixtureWorkSource:
    """A shuffled, repeating work source over one copy of the corpus (any of the three formats)."""
    ds = Dataset.from_path("photos", str(path), plugins=plugins)
    return StaticMixtureWorkSource([ds], chunk_size=chunk_size, seed=1234, exhaustion="repeat")


def add_placeholders(p: dict[str, Any]) -> dict[str, Any]:
    """One run of ``h·w / merge²`` placeholders for the image, then the caption's tokens."""
    grid = p["image_grid_thw"]
    run = np.full(int(np.prod(grid)) // (MERGE * MERGE), IMAGE_PAD, dtype=np.int32)
    return {
        "input_ids": np.concatenate([run, np.asarray(p["input_ids"], dtype=np.int32)]),
        "pixel_values": p["pixel_values"],
        "image_grid_thw": np.asarray(grid).reshape(1, 3),
    }


def samples(
    ws: StaticMixtureWorkSource,
    parallelism: int,
    plugins: ZephonPluginManager | None = None,
    *,
    image_size: int = IMAGE_SIZE,
) -> Pipeline:
    """Everything before packing: decode → augment → patchify → tokenize → placeholders."""
    par = parallelism
    return (
        Pipeline(ws, plugins=plugins)
        .decode_image(field="jpg", parallelism=par)
        .random_resized_crop(image_size, scale=(0.25, 1.0), seed=11, parallelism=par)
        .horizontal_flip(seed=12, parallelism=par)
        .patchify(
            PATCH,
            temporal_patch_size=TEMPORAL,
            merge_size=MERGE,
            min_pixels=image_size * image_size,
            max_pixels=image_size * image_size,
            parallelism=par,
        )
        .tokenize(tokenizer_id="gpt2", field="txt", parallelism=par)
        .map_transform(add_placeholders, parallelism=par)
    )


def build(
    ws: StaticMixtureWorkSource,
    parallelism: int,
    plugins: ZephonPluginManager | None = None,
    *,
    image_size: int = IMAGE_SIZE,
    seq: int = SEQ,
) -> Pipeline:
    """The demo pipeline: :func:`samples`, then multimodal packing (``OPEN_BINS`` open rows per lane) and batching."""
    from zephon_pack import collate_multimodal

    return (
        samples(ws, parallelism, plugins, image_size=image_size)
        .pack_sequences(
            seq,
            "best_fit",
            num_open_bins=OPEN_BINS,
            image_token_id=IMAGE_PAD,
            merge_size=MERGE,
            patch_dim=PATCH_DIM,
            parallelism=parallelism,
        )
        .batch(microbatch_size=MICROBATCH, collate=collate_multimodal)
    )


def _check(label: str, got: list[str], want: list[str]) -> bool:
    good = got == want
    match = sum(a == b for a, b in zip(got, want))
    print(f"  check {label}: {match}/{len(want)} global batch hashes match {'OK' if good else 'MISMATCH'}")
    return good


def run(
    steps: int = 16,
    *,
    n: int = 2000,
    root: Path | None = None,
    image_size: int = IMAGE_SIZE,
    seq: int = SEQ,
    formats: bool = True,
    plugins: ZephonPluginManager | None = None,
) -> bool:
    """Write (once) the corpus of ``n`` photographs, run the demo and its checks; True when all match."""
    if plugins is None:
        from zephon_core.plugin_api import default_plugin_manager

        plugins = default_plugin_manager()
    corpus = corpus_mod.write(root, n=n, shard_size=max(10, n // 8))
    print(f"Zephon VLM demo: {corpus.describe()} (made in {corpus.seconds:.1f} s, cached in {corpus.root})")
    print(
        f"  decode -> random_resized_crop({image_size}) + horizontal_flip -> patchify({PATCH}, merge {MERGE}) -> "
        f"tokenize(gpt2) -> placeholders -> pack({seq}, best_fit) -> batch({MICROBATCH}); {LANES} lanes"
    )
    main_fmt = "parquet"
    ws = make_source(corpus.paths[main_fmt], plugins)
    hashes: list[str] = []
    step: list[Any] = []
    rows = images = patches = text = padding = 0
    t0 = time.perf_counter()
    with build(ws, 2, plugins, image_size=image_size, seq=seq).options(lanes=LANES, runner="threads") as p:
        for b in p:
            d = b.data
            rows += len(b)
            images += int(d["num_images"].sum())
            patches += int(d["num_patches"].sum())
            padding += int(d["num_padding"].sum())
            text += int(d["loss_mask"].sum())
            step.append(b)
            if len(step) == LANES:
                hashes.append(hash_global_batch(step))
                step = []
                if len(hashes) == steps:
                    break
    dt = time.perf_counter() - t0
    total = rows * seq
    print(f"run 1 ({main_fmt}, threads, parallelism 2, 1 rank): {steps} global steps, {rows} rows of {seq} in {dt:.1f} s")
    print(
        f"  {images / dt:,.0f} images/s ({patches / dt:,.0f} patches/s), usable (non-padding) tokens/s "
        f"{(total - padding) / dt:,.0f} ({100 * (total - padding - text) / max(1, total - padding):.0f}% image "
        f"placeholders), padding {100 * padding / max(1, total):.2f}% of tokens, {images / max(1, rows):.1f} images per row"
    )

    def builder(par: int) -> Pipeline:
        return build(ws, par, plugins, image_size=image_size, seq=seq)

    ok = True
    checks: list[tuple[str, dict[str, Any]]] = [
        ("processes, parallelism 2, 2 ranks", {"runner": "processes", "parallelism": 2, "world_size": 2}),
        ("inline, parallelism 1, 4 ranks", {"runner": "inline", "parallelism": 1, "world_size": 4}),
    ]
    for label, kw in checks:
        ok &= _check(label, run_global(builder, lanes=LANES, steps=steps, **kw).hashes, hashes)
    cut = max(1, steps // 3)
    first = run_global(builder, lanes=LANES, world_size=2, runner="threads", parallelism=2, steps=cut)
    rest = run_global(
        builder, lanes=LANES, world_size=4, runner="processes", parallelism=1, resume=first.state, steps=steps - cut
    )
    size = len(json.dumps(first.state))
    ok &= _check(
        f"checkpoint at step {cut} on 2 ranks ({size} bytes of JSON), resumed on 4 ranks with processes",
        first.hashes + rest.hashes,
        hashes,
    )
    if formats:
        for fmt, path in corpus.paths.items():
            if fmt == main_fmt:
                continue
            other = make_source(path, plugins)

            def from_other(par: int, other: StaticMixtureWorkSource = other) -> Pipeline:
                return build(other, par, plugins, image_size=image_size, seq=seq)

            got = run_global(from_other, lanes=LANES, world_size=2, runner="threads", parallelism=2, steps=steps).hashes
            ok &= _check(f"the {fmt} copy ({other.datasets[0].format} reader), threads, 2 ranks", got, hashes)
        for fmt, why in corpus.skipped.items():
            print(f"  check the {fmt} copy: skipped ({why})")
    print("ALL GLOBAL BATCH HASHES MATCHED" if ok else "DETERMINISM CHECK FAILED")
    return ok


def main(argv: list[str] | None = None, *, plugins: ZephonPluginManager | None = None) -> int:
    """The registered demo (a :class:`~zephon_core.hookspecs.DemoMain`); ``zephon demo`` passes its manager."""
    ap = argparse.ArgumentParser(prog="zephon demo vlm", description=__doc__)
    ap.add_argument("--steps", type=int, default=16, help="global steps per run (default 16)")
    ap.add_argument("--images", type=int, default=2000, help="photographs in the corpus (default 2000)")
    ap.add_argument("--quick", action="store_true", help="400 photographs, 6 global steps")
    args = ap.parse_args(argv)
    if args.quick:
        return 0 if run(steps=6, n=400, plugins=plugins) else 1
    return 0 if run(steps=args.steps, n=args.images, plugins=plugins) else 1


if __name__ == "__main__":
    raise SystemExit(main())
