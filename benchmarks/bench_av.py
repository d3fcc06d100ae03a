"""Decode + sample throughput of ``zephon-av``'s ``decode_video`` against Megatron-Energon's ``AVDecoder``
and a decode-everything loop, on the same files and the same frames; and the seek check (8 frames
from a 60 s clip against 8 frames from a 2 s clip).

    python benchmarks/bench_av.py [--energon-python /path/to/venv/bin/python] [--repeat 5]
    python benchmarks/bench_av.py --memory [--seconds 60]

``--memory`` encodes a long 1080p clip (H.264, 30 fps, a keyframe every second) in a temporary
folder and, in a fresh process, reads it and takes 8 frames with ``decode_video``: it reports the
peak RSS of that process before and after the decode, and the size of the clip decoded whole.

Clips are H.264 MP4 (B-frames, a keyframe every second) encoded here with PyAV. Energon lives in
its own environment (it needs torch): give that environment's interpreter with ``--energon-python``
(``pip install megatron-energon av`` there); this script runs itself there for Energon's timings.
"""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path
from typing import Any


def time_per_call(fn: Any, repeat: int) -> float:
    """Best wall-clock seconds of ``repeat`` calls (after a warm-up call)."""
    return _best(fn, repeat, time.perf_counter)


def cpu_per_call(fn: Any, repeat: int) -> float:
    """Best CPU seconds of this process per call: on a shared machine the wall clock mostly
    measures the other tenants, while CPU time (every decode here runs on one thread) does not."""
    return _best(fn, repeat, time.process_time)


def _best(fn: Any, repeat: int, clock: Any) -> float:
    fn()  # warm up (imports, codec initialisation)
    best = float("inf")
    for _ in range(repeat):
        start = clock()
        fn()
        best = min(best, clock() - start)
    return float(best)


def energon_times(spec: dict[str, Any]) -> dict[str, float]:
    """Seconds per sample for Energon's ``AVDecoder.get_video_clips`` on each file (run in Energon's venv)."""
    from megatron.energon.av import AVDecoder  # type: ignore[import-untyped]

    out = {}
    for name, item in spec["files"].items():
        data = Path(item["path"]).read_bytes()
        ranges = [(p, p) for p in item["positions"]]

        def run(data: bytes = data, ranges: list[tuple[int, int]] = ranges) -> None:
            AVDecoder(io.BytesIO(data), suppress_warnings=True).get_video_clips(ranges, video_unit="frames")

        out[name] = time_per_call(run, spec["repeat"])
        out[f"{name} cpu"] = cpu_per_call(run, spec["repeat"])
    return out


def encode_long_1080p(path: Path, seconds: int, fps: int = 30) -> None:
    """A ``seconds``-long 1920x1080 H.264 clip, frame by frame (never the whole clip in memory)."""
    import av
    import numpy as np

    y, x = np.mgrid[0:1080, 0 : 1920 + 256]
    wide = np.stack([x % 256, y % 256, (x + y) // 4 % 256], axis=-1).astype(np.uint8)  # pans by slicing
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=fps, options={"preset": "ultrafast", "g": str(fps), "bf": "2"})
        stream.width, stream.height, stream.pix_fmt = 1920, 1080, "yuv420p"
        for i in range(seconds * fps):
            frame = np.ascontiguousarray(wide[:, (7 * i) % 256 : (7 * i) % 256 + 1920])
            top, left = (5 * i) % 980, (11 * i) % 1820
            frame[top : top + 100, left : left + 100] = (255, 40, 200)  # a moving box: every frame differs
            for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)


def _status_mib(key: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {key} in /proc/self/status (the memory probe needs Linux)")


def peak_rss_child(path: str) -> None:
    """Run in a fresh process: RSS (MiB) with the clip read, then the peak RSS while decoding 8 frames.

    The peak is reset just before the decode (``/proc/self/clear_refs``), so it is the decode's
    own high-water mark, not that of imports or of reading the file.
    """
    from zephon_av.video import DecodeVideo

    record = {"video": Path(path).read_bytes()}
    op = DecodeVideo(num_frames=8)
    Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
    before = _status_mib("VmRSS")
    out = op.fn(record)
    assert out is not None
    after = _status_mib("VmHWM")
    frames = out["video"]
    print(json.dumps({"before": before, "after": after, "frames_mib": frames.nbytes / 2**20, "shape": frames.shape}))


def memory(seconds: int) -> None:
    with tempfile.TemporaryDirectory(prefix="bench_av_mem_") as tmp:
        path = Path(tmp) / f"long_{seconds}s_1080p.mp4"
        encode_long_1080p(path, seconds)
        out = subprocess.run(
            [sys.executable, __file__, "--rss-child", str(path)], capture_output=True, text=True, check=True
        )
        r = json.loads(out.stdout.strip().splitlines()[-1])
        whole = seconds * 30 * 1920 * 1080 * 3 / 2**20
        print(
            f"8 frames from a {seconds} s 1080p H.264 clip ({path.stat().st_size / 2**20:.1f} MiB): peak RSS "
            f"{r['before']:.0f} MiB with it read, {r['after']:.0f} MiB at the peak of decoding "
            f"(+{r['after'] - r['before']:.0f} MiB; the 8 frames kept: {r['frames_mib']:.0f} MiB; "
            f"the clip decoded whole would be {whole / 1024:.1f} GiB)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--energon-python", help="interpreter of an environment with megatron-energon and av")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--memory", action="store_true", help="peak RSS of 8 frames from a long 1080p clip")
    parser.add_argument("--seconds", type=int, default=60, help="length of the --memory clip")
    parser.add_argument("--energon-spec", help=argparse.SUPPRESS)
    parser.add_argument("--rss-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rss_child:
        peak_rss_child(args.rss_child)
        return
    if args.memory:
        memory(args.seconds)
        return
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

    def measure(row: str, name: str, fn: Any) -> None:
        results[row][name] = time_per_call(fn, args.repeat)
        results[row][f"{name} cpu"] = cpu_per_call(fn, args.repeat)

    for name, item in files.items():
        data = Path(item["path"]).read_bytes()
        record = {"video": data}
        measure("zephon (index cached)", name, lambda record=record: op.fn(record))

        def cold(record: dict[str, Any] = record) -> None:
            INDEX_CACHE.clear()
            op.fn(record)

        measure("zephon (cold)", name, cold)
        wanted = set(item["positions"])

        def naive(data: bytes = data, wanted: set[int] = wanted) -> None:
            with av.open(io.BytesIO(data)) as c:
                frames = [f for f in c.decode(video=0)]
                frames.sort(key=lambda f: f.pts)
                np.stack([frames[p].to_ndarray(format="rgb24") for p in sorted(wanted)])

        measure("decode everything", name, naive)
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
    print("| decoder | 2 s clip | 60 s clip | 60 s / 2 s | CPU 2 s | CPU 60 s | CPU 60 s / 2 s |")
    print("|---|---|---|---|---|---|---|")
    for name, row in results.items():
        wall, cpu = (row["2s"], row["60s"]), (row["2s cpu"], row["60s cpu"])
        print(
            f"| {name} | {wall[0] * 1e3:.1f} | {wall[1] * 1e3:.1f} | {wall[1] / wall[0]:.1f}x "
            f"| {cpu[0] * 1e3:.1f} | {cpu[1] * 1e3:.1f} | {cpu[1] / cpu[0]:.2f}x |"
        )


if __name__ == "__main__":
    main()
