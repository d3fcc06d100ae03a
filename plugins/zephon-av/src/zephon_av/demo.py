"""``zephon demo video``: video + audio training samples from clips made offline, checked for determinism.

    StaticMixtureWorkSource([WebDataset tars of .mp4 + .flac members], shuffled)
      -> decode_video(num_frames=4, clip_seconds=1.5, random start, size_factor 28)
      -> decode_audio(16 kHz mono, clip_seconds=1.0, random start)
      -> log_mel(80 bins, 25 ms window, 10 ms hop)
      -> patchify_video(14, temporal pairs, merge 2)              (Qwen2-VL layout)
      -> batch(2), on threads

The clips are made in a temporary folder on every run, so nothing is downloaded: pans, zooms and
crossfades over the photographs that ship with scikit-image (synthetic moving patterns when it is
not installed), H.264 with B-frames, and a speech-like sound (a voiced buzz with moving formants
and syllable-rate bursts) as FLAC. The random clip windows come from the kernel's per-record
generator, so the demo prints the SHA-256 of every global batch, runs the same pipeline again with
worker processes (or threads with another parallelism) and exits non-zero unless every hash matched.
"""

from __future__ import annotations

import argparse
import io
import tarfile
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from zephon_core import Dataset, Pipeline, StaticMixtureWorkSource, hash_global_batch
from zephon_core.conformance.harness import run_global

if TYPE_CHECKING:
    from zephon_core.plugin_api import ZephonPluginManager

LANES = 2
MICROBATCH = 2
FPS = 10
HEIGHT, WIDTH = 120, 160
SAMPLE_RATE = 16000
NUM_FRAMES = 4
PATCH, MERGE = 14, 2


def photographs() -> tuple[list[np.ndarray], str]:
    """RGB photographs from scikit-image's bundled data, or moving patterns when it is missing.

    Returns the images and a word saying which, for the demo's first line.
    """
    try:
        from skimage import data
    except ImportError:
        from zephon_av.testing import moving_frames

        return [moving_frames(1, 240, 320, seed=s)[0] for s in range(3)], "synthetic patterns"
    return [np.asarray(getattr(data, name)()) for name in ("astronaut", "coffee", "chelsea")], "photographs"


def _view(image: np.ndarray, cx: float, cy: float, zoom: float) -> np.ndarray:
    """A ``HEIGHT x WIDTH`` window of ``image`` centred at (cx, cy) in [0, 1], ``zoom`` >= 1 (nearest pixel)."""
    h, w = image.shape[:2]
    scale = min(h / HEIGHT, w / WIDTH) / zoom  # source pixels per output pixel
    vh, vw = HEIGHT * scale, WIDTH * scale
    top = cy * (h - vh)
    left = cx * (w - vw)
    ys = np.clip((top + (np.arange(HEIGHT) + 0.5) * scale).astype(np.int64), 0, h - 1)
    xs = np.clip((left + (np.arange(WIDTH) + 0.5) * scale).astype(np.int64), 0, w - 1)
    window: np.ndarray = image[ys[:, None], xs[None, :]]
    return window


def clip_frames(images: list[np.ndarray], i: int, n: int) -> np.ndarray:
    """``n`` frames of clip ``i``: a pan and a zoom over one photograph, crossfading into the next."""
    rng = np.random.default_rng(1000 + i)  # corpus making, not pipeline randomness
    a, b = images[i % len(images)], images[(i + 1) % len(images)]
    x0, y0, x1, y1 = rng.uniform(0, 1, 4)
    z0, z1 = rng.uniform(1.0, 1.3), rng.uniform(1.4, 2.2)
    fade_from = int(n * rng.uniform(0.55, 0.75))
    out = np.empty((n, HEIGHT, WIDTH, 3), np.uint8)
    for t in range(n):
        s = t / max(1, n - 1)
        cx, cy, zoom = x0 + (x1 - x0) * s, y0 + (y1 - y0) * s, z0 + (z1 - z0) * s
        frame = _view(a, cx, cy, zoom).astype(np.float32)
        if t >= fade_from:
            alpha = (t - fade_from + 1) / (n - fade_from)
            frame = (1 - alpha) * frame + alpha * _view(b, 1 - cx, cy, 1.0).astype(np.float32)
        out[t] = np.clip(frame, 0, 255).astype(np.uint8)
    return out


def speechlike(seconds: float, i: int) -> np.ndarray:
    """``(1, samples)`` float32: a voiced buzz (pitch ~100-220 Hz) shaped by moving formants, in syllables."""
    rng = np.random.default_rng(2000 + i)
    n = round(seconds * SAMPLE_RATE)
    t = np.arange(n) / SAMPLE_RATE
    pitch = rng.uniform(100, 220) * (1 + 0.08 * np.sin(2 * np.pi * 0.7 * t))
    phase = 2 * np.pi * np.cumsum(pitch) / SAMPLE_RATE
    signal = np.zeros(n)
    for k in range(1, 25):  # harmonics, weighted by two formant bumps that drift
        f = k * pitch
        f1 = 500 + 250 * np.sin(2 * np.pi * 1.1 * t + i)
        f2 = 1500 + 500 * np.sin(2 * np.pi * 0.6 * t + 2 * i)
        gain = np.exp(-(((f - f1) / 180) ** 2)) + 0.6 * np.exp(-(((f - f2) / 250) ** 2)) + 0.02
        signal += gain * np.sin(k * phase)
    syllables = np.clip(np.sin(2 * np.pi * rng.uniform(3.0, 5.0) * t + rng.uniform(0, 6)), 0, None) ** 0.7
    signal = signal * syllables + 0.02 * rng.standard_normal(n)
    out: np.ndarray = (0.3 * signal / np.abs(signal).max()).astype(np.float32)[None]
    return out


def write_corpus(root: Path, clips: int = 12, per_shard: int = 6) -> tuple[Path, str]:
    """Encode ``clips`` clips (2-3 s each) as WebDataset tars under ``root``; returns the folder and the source."""
    from zephon_av.testing import encode_audio, encode_video

    images, source = photographs()
    folder = root / "clips"
    folder.mkdir(parents=True, exist_ok=True)
    for shard in range(0, clips, per_shard):
        with tarfile.open(folder / f"shard-{shard // per_shard:03d}.tar", "w") as tar:
            for i in range(shard, min(clips, shard + per_shard)):
                seconds = 2.0 + 0.25 * (i % 5)
                frames = clip_frames(images, i, round(seconds * FPS))
                members = (
                    ("mp4", encode_video(frames, fps=FPS, gop=FPS, b_frames=2)),
                    ("flac", encode_audio(speechlike(seconds, i), sample_rate=SAMPLE_RATE)),
                )
                for ext, data in members:
                    info = tarfile.TarInfo(f"clip{i:04d}.{ext}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
    return folder, source


def build(ws: StaticMixtureWorkSource, parallelism: int, plugins: ZephonPluginManager | None = None) -> Pipeline:
    """The demo pipeline: decode and sample video and audio, log-mel, temporal patchify, batch."""
    par = parallelism
    return (
        Pipeline(ws, plugins=plugins)
        .decode_video(
            field="mp4",
            num_frames=NUM_FRAMES,
            clip_seconds=1.5,
            size_factor=PATCH * MERGE,
            max_pixels=HEIGHT * WIDTH,
            seed=7,
            parallelism=par,
        )
        .decode_audio(field="flac", sample_rate=SAMPLE_RATE, channels=1, clip_seconds=1.0, seed=8, parallelism=par)
        .log_mel(80, pad_to_seconds=None, parallelism=par)
        .patchify_video(PATCH, merge_size=MERGE, parallelism=par)
        .batch(microbatch_size=MICROBATCH)
    )


def _shape(value: Any) -> str:
    return "x".join(str(s) for s in np.shape(value))


def run(
    steps: int = 4,
    *,
    clips: int = 12,
    check: str = "processes",
    root: Path | None = None,
    plugins: ZephonPluginManager | None = None,
) -> bool:
    """Make the corpus, run ``steps`` global batches on threads, re-run them with ``check``; True when equal."""
    if plugins is None:
        from zephon_core.plugin_api import default_plugin_manager

        plugins = default_plugin_manager()
    with tempfile.TemporaryDirectory(prefix="zephon_demo_video_", dir=root) as tmp:
        t0 = time.perf_counter()
        folder, source = write_corpus(Path(tmp), clips=clips)
        made = time.perf_counter() - t0
        size = sum(f.stat().st_size for f in folder.iterdir())
        print(
            f"Zephon video demo: {clips} clips ({source} with pans, zooms and crossfades; H.264 {WIDTH}x{HEIGHT} "
            f"@ {FPS} fps + speech-like FLAC at {SAMPLE_RATE} Hz), {size / 1024:.0f} KiB of WebDataset tars, "
            f"made in {made:.1f} s"
        )
        print(
            f"  decode_video(num_frames={NUM_FRAMES}, clip_seconds=1.5) -> decode_audio(clip_seconds=1.0) -> "
            f"log_mel(80) -> patchify_video({PATCH}, merge {MERGE}) -> batch({MICROBATCH}); {LANES} lanes"
        )
        ws = StaticMixtureWorkSource(
            [Dataset.from_path("clips", str(folder), plugins=plugins)], seed=3, exhaustion="repeat"
        )

        def builder(par: int) -> Pipeline:
            return build(ws, par, plugins)

        hashes: list[str] = []
        step: list[Any] = []
        samples = 0
        t0 = time.perf_counter()
        with builder(2).options(lanes=LANES, runner="threads") as p:
            for b in p:
                d = b.data
                samples += len(b)
                step.append(b)
                if len(step) == LANES:
                    hashes.append(hash_global_batch(step))
                    if len(hashes) == 1:
                        print(
                            f"  one microbatch: video_timestamps {_shape(d['video_timestamps'])}, "
                            f"pixel_values_videos {_shape(d['pixel_values_videos'])}, video_grid_thw "
                            f"{np.asarray(d['video_grid_thw'])[0].tolist()}, input_features {_shape(d['input_features'])}"
                        )
                    for lane_batch in step:
                        ld = lane_batch.data
                        for ts, off in zip(ld["video_timestamps"], ld["audio_offset"]):
                            frames = ", ".join(f"{float(x):.2f}" for x in ts)
                            print(f"    lane {lane_batch.lane}: frames at [{frames}] s, audio from {float(off):.2f} s")
                    print(f"  global batch {len(hashes)}: sha256 {hashes[-1]}")
                    step = []
                    if len(hashes) == steps:
                        break
        dt = time.perf_counter() - t0
        print(
            f"run 1 (threads, parallelism 2): {steps} global batches, {samples} clips, "
            f"{samples * NUM_FRAMES} frames in {dt:.2f} s: {samples / dt:.1f} clips/s"
        )
        kw: dict[str, Any]
        if check == "processes":
            label, kw = "processes, parallelism 2, 2 ranks", {"runner": "processes", "parallelism": 2, "world_size": 2}
        else:
            label, kw = "threads, parallelism 1, 2 ranks", {"runner": "threads", "parallelism": 1, "world_size": 2}
        t0 = time.perf_counter()
        again = run_global(builder, lanes=LANES, steps=steps, **kw).hashes
        good = again == hashes
        match = sum(a == b for a, b in zip(again, hashes))
        print(
            f"run 2 ({label}): {match}/{len(hashes)} global batch hashes match in "
            f"{time.perf_counter() - t0:.2f} s {'OK' if good else 'MISMATCH'}"
        )
    print("ALL GLOBAL BATCH HASHES MATCHED" if good else "DETERMINISM CHECK FAILED")
    return good


def main(argv: list[str] | None = None, *, plugins: ZephonPluginManager | None = None) -> int:
    """The registered demo (a :class:`~zephon_core.hookspecs.DemoMain`); ``zephon demo video`` passes its manager."""
    ap = argparse.ArgumentParser(prog="zephon demo video", description=__doc__)
    ap.add_argument("--steps", type=int, default=4, help="global batches per run (default 4)")
    ap.add_argument("--clips", type=int, default=12, help="clips in the corpus (default 12)")
    ap.add_argument(
        "--check",
        choices=("processes", "threads"),
        default="processes",
        help="the second run: worker processes on 2 ranks (default) or threads on 2 ranks",
    )
    ap.add_argument("--quick", action="store_true", help="3 global batches, 8 clips")
    args = ap.parse_args(argv)
    if args.steps < 1 or args.clips < 1:
        ap.error("--steps and --clips must be at least 1")
    if args.quick:
        return 0 if run(steps=3, clips=8, check=args.check, plugins=plugins) else 1
    return 0 if run(steps=args.steps, clips=args.clips, check=args.check, plugins=plugins) else 1


if __name__ == "__main__":
    raise SystemExit(main())
