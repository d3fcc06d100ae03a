"""Decode throughput of ``decode_image`` (Pillow vs simplejpeg) and of a decode → augment pipeline.

Run: ``python plugins/zephon-vision/benchmarks/bench_decode.py`` (needs ``zephon-vision[test]``).
Images are scikit-image's photographs re-encoded as JPEG (quality 90, 4:2:0) at three sizes; the
pipeline part runs decode → random_resized_crop(224) → horizontal_flip → normalize(chw) → batch(32)
on a few hundred of them. Prints a Markdown table.
"""

from __future__ import annotations

import io
import time

import numpy as np
from PIL import Image
from zephon_vision import decode_bytes
from zephon_vision.decode import resolve_backend
from zephon_vision.testing import photographs

from zephon_core import Dataset, Pipeline, StaticMixtureWorkSource


def jpegs(side: int) -> list[bytes]:
    """Each photograph resized so its longer side is ``side``, as JPEG."""
    out = []
    for _, photo in photographs():
        im = Image.fromarray(photo).convert("RGB")
        scale = side / max(im.size)
        im = im.resize((max(1, round(im.width * scale)), max(1, round(im.height * scale))), Image.Resampling.BICUBIC)
        buf = io.BytesIO()
        im.save(buf, "JPEG", quality=90)
        out.append(buf.getvalue())
    return out


def per_image(data: list[bytes], backend: str, seconds: float = 2.0) -> tuple[float, float]:
    """(images/s, decoded MB/s) of one thread decoding ``data`` round robin for about ``seconds``."""
    n = pixels = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        for d in data:
            pixels += decode_bytes(d, backend=backend).nbytes
            n += 1
    dt = time.perf_counter() - start
    return n / dt, pixels / dt / 1e6


def pipeline_rate(runner: str, parallelism: int, backend: str, n: int = 480) -> tuple[float, float]:
    """(images/s, time to first batch in s) of the decode → augment pipeline."""
    data = jpegs(512)
    recs = [{"image": data[i % len(data)], "n": i} for i in range(n)]
    ws = StaticMixtureWorkSource([Dataset.from_records("photos", recs, shard_size=64)], chunk_size=32, seed=0)
    pipe = (
        Pipeline(ws)
        .decode_image(backend=backend, parallelism=parallelism)
        .random_resized_crop(224, parallelism=parallelism)
        .horizontal_flip()
        .normalize(chw=True, parallelism=parallelism)
        .batch(32)
        .options(runner=runner, lanes=1)
    )
    start = time.perf_counter()
    first = None
    count = 0
    with pipe as p:
        for b in p:
            if first is None:
                first = time.perf_counter() - start
            count += len(b)
    return count / (time.perf_counter() - start), first or 0.0


def main() -> None:
    backends = ["pillow"] + (["simplejpeg"] if resolve_backend("auto") == "simplejpeg" else [])
    print("| JPEG, longer side | backend | images/s (1 thread) | decoded MB/s |")
    print("|---|---|---|---|")
    for side in (256, 512, 1024):
        data = jpegs(side)
        for backend in backends:
            rate, mbs = per_image(data, backend)
            print(f"| {side} px ({np.mean([len(d) for d in data]) / 1e3:.0f} KB) | {backend} | {rate:,.0f} | {mbs:,.0f} |")
    print()
    print("| pipeline (decode 512 px → crop 224 → flip → normalize, batch 32) | backend | images/s | first batch |")
    print("|---|---|---|---|")
    for runner, par in (("inline", 1), ("threads", 2), ("processes", 2)):
        for backend in backends:
            rate, first = pipeline_rate(runner, par, backend)
            print(f"| {runner}, parallelism {par} | {backend} | {rate:,.0f} | {first:.2f} s |")


if __name__ == "__main__":
    main()
