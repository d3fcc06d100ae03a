"""Decode + sample throughput of ``zephon-av``'s ``decode_video`` against Megatron-Energon's ``AVDecoder``
and a decode-everything loop, on the same files and the same frames; and the seek check (8 frames
from a 60 s clip against 8 frames from a 2 s clip).

    python benchmarks/bench_av.py [--energon-python /path/to/venv/bin/python] [--repeat 5]

Clips are H.264 MP4 (B-frames, a keyframe every second) encoded here with PyAV. Energon lives in
its own environment (it needs torch): give that environment's interpreter with ``--energon-python``
(``pip install megatron-energon av`` there); this script runs itself there for Energon's timings.
"""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import tempfile
import time
from fractions import Fraction
from pathlib import Path
from typing import Any


def time_per_call(fn: Any, repeat: int) -> float:
    fn()  # warm up (imports, codec initialisation)
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def energon_times(spec: dict[str, Any]) -> dict[str, float]:
    """Seconds per sample for Energon's ``AVDecoder.get_video_clips`` on each file (run in Energon's venv)."""
    from megatron.energon.av import AVDecoder

    out = {}
    for name, item in spec["files"].items():
        data = Path(item["path"]).read_bytes()
        ranges = [(p, p) for p in item["positions"]]

        def run(data: bytes = data, ranges: list[tuple[int, int]] = ranges) -> None:
            AVDecoder(io.BytesIO(data), suppress_warnings=True).get_video_clips(ranges, video_unit="frames")

        out[name] = time_per_call(run, spec["repeat"])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--energon-python", help="interpreter of an environment with megatron-energon and av")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--energon-spec", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.energon_spec:  # the child run in Energon's environment
        print(json.dumps(energon_times(json.loads(Path(args.energon_spec).read_text()))))
        return

    import av
    import numpy as np
    from zephon_av.sampling import FramePolicy, select
    from zephon_av.testing import encode_video, moving_frames
    from zephon_av.video import INDEX_CACHE, DecodeVideo, video_index

    fps = 30
    tmp = Path(tempfile.mkdtemp(prefix="bench_av_"))
    files: dict[str, dict[str, Any]] = {}
    for seconds in (2, 60):
        data = encode_video(moving_frames(seconds * fps, 240, 320), fps=fps, gop=fps, b_frames=2)
        path = tmp / f"clip_{seconds}s.mp4"
        path.write_bytes(data)
        index = video_index(data)
        policy = FramePolicy(None, 8, None, "start", 1, None, 2)
        positions = select(index.pts, index.end, index.time_base, policy, Fraction(0))
        files[f"{seconds}s"] = {"path": str(path), "positions": [int(p) for p in positions], "bytes": len(data)}

    op = DecodeVideo(num_frames=8)
    results: dict[str, dict[str, float]] = {"zephon (index cached)": {}, "zephon (cold)": {}, "decode everything": {}}
    for name, item in files.items():
        data = Path(item["path"]).read_bytes()
        record = {"video": data}
        results["zephon (index cached)"][name] = time_per_call(lambda record=record: op.fn(record), args.repeat)

        def cold(record: dict[str, Any] = record) -> None:
            INDEX_CACHE.clear()
            op.fn(record)

        results["zephon (cold)"][name] = time_per_call(cold, args.repeat)
        wanted = set(item["positions"])

        def naive(data: bytes = data, wanted: set[int] = wanted) -> None:
            with av.open(io.BytesIO(data)) as c:
                frames = [f for f in c.decode(video=0)]
                frames.sort(key=lambda f: f.pts)
                np.stack([frames[p].to_ndarray(format="rgb24") for p in sorted(wanted)])

        results["decode everything"][name] = time_per_call(naive, args.repeat)
    if args.energon_python:
        spec = tmp / "spec.json"
        spec.write_text(json.dumps({"files": files, "repeat": args.repeat}))
        out = subprocess.run(
            [args.energon_python, __file__, "--energon-spec", str(spec)], capture_output=True, text=True, check=True
        )
        results["energon AVDecoder"] = json.loads(out.stdout.strip().splitlines()[-1])
    print(
        f"8 frames per sample from 320x240 H.264 at {fps} fps, keyframe every second; best of {args.repeat}, ms per sample\n"
    )
    print("| decoder | 2 s clip | 60 s clip | 60 s / 2 s |\n|---|---|---|---|")
    for name, row in results.items():
        print(f"| {name} | {row['2s'] * 1e3:.1f} | {row['60s'] * 1e3:.1f} | {row['60s'] / row['2s']:.1f}x |")


if __name__ == "__main__":
    main()
