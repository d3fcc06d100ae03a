"""Memory stays bounded by the frames kept: 8 frames from a long 1080p clip, in a fresh process.

The clip is a minute of 1920x1080 H.264 at 10 fps (600 frames, a keyframe every second, B-frames),
encoded at a low bitrate so that making it takes seconds. Decoded whole it would be 3.5 GiB of RGB;
``decode_video`` must hold only the frames it keeps, the decoder's reference frames and the file.

The peak is read from ``VmHWM`` after resetting it (``/proc/self/clear_refs``) with the file already
read: ``getrusage().ru_maxrss`` cannot be reset and Linux carries it over ``exec`` from the process
that forked it, so under a test runner that already holds more than the decode needs it would not move.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

SECONDS, FPS, WIDTH, HEIGHT = 60, 10, 1920, 1080
KEPT = 8
FRAME_BYTES = WIDTH * HEIGHT * 3
BOUND_FRAMES = 3
"""The decode's peak may be at most this many times the kept frames' bytes (the kept frames themselves,
FFmpeg's frame-threaded decoder's reference frames in YUV, the RGB conversion of the frame in hand) ..."""
ALLOWANCE_MIB = 64
"""... plus this much (FFmpeg's copy of the file, codec tables, the index and its numpy arrays)."""

CHILD = r"""
import json, sys
from pathlib import Path

def status_mib(key):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    raise SystemExit(f"no {key} in /proc/self/status")

from zephon_av.video import DecodeVideo
import av  # imported before the baseline: its libraries are not the decode's memory

record = {"video": Path(sys.argv[1]).read_bytes()}
op = DecodeVideo(num_frames=int(sys.argv[2]))
Path("/proc/self/clear_refs").write_text("5")  # the high-water mark restarts from the current RSS
before = status_mib("VmRSS")
out = op.fn(record)
peak = status_mib("VmHWM")
frames = out["video"]
print(json.dumps({"before": before, "peak": peak, "kept": frames.nbytes / 2**20, "shape": list(frames.shape),
                  "timestamps": [float(t) for t in out["video_timestamps"]]}))
"""


def encode_long_clip(path: Path) -> None:
    """A pan over a wide gradient with a moving box (every frame differs), frame by frame."""
    import av

    y, x = np.mgrid[0:HEIGHT, 0 : WIDTH + 256]
    wide = np.stack([x % 256, y % 256, (x + y) // 4 % 256], axis=-1).astype(np.uint8)
    options = {"preset": "ultrafast", "g": str(FPS), "bf": "2", "crf": "45"}
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=FPS, options=options)
        stream.width, stream.height, stream.pix_fmt = WIDTH, HEIGHT, "yuv420p"
        for i in range(SECONDS * FPS):
            frame = np.ascontiguousarray(wide[:, (7 * i) % 256 : (7 * i) % 256 + WIDTH])
            top, left = (5 * i) % (HEIGHT - 100), (11 * i) % (WIDTH - 100)
            frame[top : top + 100, left : left + 100] = (255, 40, 200)
            for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="the peak-RSS probe needs Linux /proc")
def test_peak_memory_is_bounded_by_the_frames_kept(tmp_path):
    path = tmp_path / "long_1080p.mp4"
    encode_long_clip(path)
    env = {"TMPDIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), str(KEPT)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert r["shape"] == [KEPT, HEIGHT, WIDTH, 3]
    assert r["timestamps"][0] > 0 and r["timestamps"][-1] > SECONDS - 8  # spread over the whole minute
    kept_mib = KEPT * FRAME_BYTES / 2**20
    whole_mib = SECONDS * FPS * FRAME_BYTES / 2**20
    grew = r["peak"] - r["before"]
    bound = BOUND_FRAMES * kept_mib + ALLOWANCE_MIB
    print(
        f"peak RSS +{grew:.0f} MiB for {kept_mib:.0f} MiB kept (bound {bound:.0f}, whole clip {whole_mib:.0f} MiB): {r}"
    )
    assert grew >= kept_mib * 0.9, r  # the probe sees the frames kept: it measures something
    assert grew <= bound, f"decoding {KEPT} frames grew the peak RSS by {grew:.0f} MiB (bound {bound:.0f} MiB): {r}"
    assert grew < whole_mib / 10, (grew, whole_mib)
