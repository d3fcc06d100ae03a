"""``decode_video``: the frames taken equal the same frames of a naive decode-everything loop (H.264
with B-frames, VP9, variable frame rate, starts on non-keyframes), the sampling policies, resizing,
the index cache, and bad input (an error naming the sample, or a tombstone)."""

from __future__ import annotations

import functools
import io
import time
from fractions import Fraction
from typing import Any

import av
import numpy as np
import pytest
from zephon_av import DecodeVideo, FramePolicy, decode_frames, select, video_index
from zephon_av.testing import chirp, encode_audio, encode_video, moving_frames
from zephon_av.video import INDEX_CACHE, frame_size

from zephon_core import Dataset, Pipeline, StaticMixtureWorkSource
from zephon_core.errors import ConfigError, OperatorError
from zephon_core.work.ids import split_sample_id

CLIPS = {
    "h264_bframes": {},
    "vp9_webm": {"codec": "libvpx-vp9", "container": "webm"},
    "h264_vfr": {"durations_ms": [40, 120, 250, 70, 90]},
    "h264_long_gop": {"gop": 16, "b_frames": 3},
}


@functools.cache
def clip(name: str, frames: int = 40) -> bytes:
    return encode_video(moving_frames(frames, seed=len(name)), **CLIPS[name])  # type: ignore[arg-type]


def naive(data: bytes) -> tuple[list[int], list[np.ndarray]]:
    """Decode every frame, in presentation order: what a user would write without any seeking."""
    with av.open(io.BytesIO(data)) as c:
        frames = [(f.pts, f.to_ndarray(format="rgb24")) for f in c.decode(video=0)]
    frames.sort(key=lambda pf: pf[0])
    return [p for p, _ in frames], [f for _, f in frames]


def policy(**kw: Any) -> FramePolicy:
    base = {
        "fps": None,
        "num_frames": None,
        "clip_seconds": None,
        "clip_start": "start",
        "min_frames": 1,
        "max_frames": None,
        "frame_factor": 1,
    }
    return FramePolicy(**{**base, **kw})


@pytest.mark.parametrize("name", sorted(CLIPS))
def test_frames_equal_a_naive_decode(name):
    data = clip(name)
    pts, frames = naive(data)
    index = video_index(data)
    assert index.pts.tolist() == pts
    if name != "vp9_webm":  # the H.264 clips do have B-frames (decode order differs from presentation order)
        with av.open(io.BytesIO(data)) as c:
            assert any(int(f.pict_type) == 3 for f in c.decode(video=0))  # AV_PICTURE_TYPE_B
    keys = set(index.key_pts.tolist())
    cases = [
        policy(num_frames=4),
        policy(num_frames=7),
        policy(fps=3.0, clip_seconds=1.2, clip_start="center", frame_factor=2),
        policy(num_frames=5, clip_seconds=0.9),
        policy(num_frames=40),  # every frame (duplicates where the VFR window has fewer)
    ]
    for u in (Fraction(0), Fraction(0.31), Fraction(0.77)):
        for pol in cases:
            positions = select(index.pts, index.end, index.time_base, pol, u)
            got = decode_frames(
                data, index, positions, height=index.height, width=index.width, interpolation="bilinear", threads=1
            )
            assert got.shape == (len(positions), 48, 64, 3) and got.dtype == np.uint8
            for j, p in enumerate(positions):
                assert np.array_equal(got[j], frames[p]), (name, pol, float(u), j, int(p))
    # the cases above do start on frames that are not keyframes, and ask for only a few of them
    starts = {
        int(select(index.pts, index.end, index.time_base, pol, u)[0])
        for pol in cases
        for u in (Fraction(0.31), Fraction(0.77))
    }
    assert any(pts[s] not in keys for s in starts)


def test_a_single_non_keyframe_after_a_seek():
    data = clip("h264_long_gop", 60)
    pts, frames = naive(data)
    index = video_index(data)
    keys = set(index.key_pts.tolist())
    for position in (5, 23, 37, 58):
        assert pts[position] not in keys
        got = decode_frames(data, index, np.array([position]), height=48, width=64, interpolation="bilinear", threads=1)
        assert np.array_equal(got[0], frames[position])


def test_sampling_policies():
    data = clip("h264_bframes")  # 40 frames at 10 fps: 4 s
    index = video_index(data)
    sel = functools.partial(select, index.pts, index.end, index.time_base)
    # segment centres (2j+1) * 40 / 8 = 5, 15, 25, 35
    assert sel(policy(num_frames=4), Fraction(0)).tolist() == [5, 15, 25, 35]
    # fps 2 over 4 s: 8 frames, rounded to the temporal patch
    assert len(sel(policy(fps=2.0, frame_factor=2), Fraction(0))) == 8
    assert len(sel(policy(fps=0.9, frame_factor=2), Fraction(0))) == 4  # 3.6 frames → round(1.8) * 2
    assert len(sel(policy(fps=2.0, frame_factor=2, max_frames=5), Fraction(0))) == 4
    assert len(sel(policy(num_frames=3, frame_factor=2), Fraction(0))) == 2
    assert len(sel(policy(num_frames=100), Fraction(0))) == 40  # at most the frames there are
    # a 1 s window: start at floor(u * 3 s)
    assert sel(policy(num_frames=2, clip_seconds=1.0), Fraction(0)).tolist() == [2, 7]
    assert sel(policy(num_frames=2, clip_seconds=1.0), Fraction(1, 2)).tolist() == [17, 22]
    assert sel(policy(num_frames=2, clip_seconds=10.0), Fraction(1, 2)).tolist() == [10, 30]  # longer than the clip


def test_variable_frame_rate_is_sampled_in_time():
    data = clip("h264_vfr")
    index = video_index(data)
    times = (index.pts - index.pts[0]) * float(index.time_base)
    positions = select(index.pts, index.end, index.time_base, policy(num_frames=6), Fraction(0))
    span = float((index.end - index.pts[0]) * index.time_base)
    for j, p in enumerate(positions):  # the frame on screen at each segment's centre
        centre = (j + 0.5) * span / 6
        assert times[p] <= centre + 1e-9 and (p + 1 == len(times) or times[p + 1] > centre)


def records(names: list[str]) -> list[dict[str, Any]]:
    return [{"video": clip(n), "n": i} for i, n in enumerate(names)]


def source(recs: list[dict[str, Any]]) -> StaticMixtureWorkSource:
    return StaticMixtureWorkSource([Dataset.from_records("clips", recs, shard_size=8)], chunk_size=4, shuffle=False)


def test_operator_output_and_random_clips_per_record():
    op = DecodeVideo(num_frames=4, clip_seconds=1.5, seed=3)
    assert op.takes_rng and op.config()["seed"] == 3
    a = op.fn({"video": clip("h264_bframes"), "n": 0}, rng=np.random.default_rng(1))
    b = op.fn({"video": clip("h264_bframes"), "n": 0}, rng=np.random.default_rng(2))
    assert a["video"].shape == (4, 48, 64, 3) and "n" in a and a["video_timestamps"].dtype == np.float64
    assert a["video_timestamps"].tolist() != b["video_timestamps"].tolist()  # the draw moves the window
    assert np.all(np.diff(a["video_timestamps"]) > 0) and a["video_timestamps"][-1] - a["video_timestamps"][0] < 1.5
    assert not DecodeVideo(num_frames=4).takes_rng  # no random clip: no generator, no seed
    with pytest.raises(ConfigError, match="seed"):
        DecodeVideo(num_frames=4, seed=1)


def test_resize_and_smart_resize():
    op = DecodeVideo(num_frames=2, size=(32, 40), interpolation="area")
    out = op.fn({"video": clip("vp9_webm")})
    assert out["video"].shape == (2, 32, 40, 3)
    assert frame_size(48, 64, size=24, min_pixels=None, max_pixels=None, factor=1) == (24, 32)
    assert frame_size(480, 640, size=None, min_pixels=None, max_pixels=200 * 28 * 28, factor=28) == (336, 448)
    assert frame_size(48, 64, size=None, min_pixels=56 * 56 * 4, max_pixels=None, factor=28) == (112, 140)
    out = DecodeVideo(num_frames=2, size_factor=16, max_pixels=32 * 48).fn({"video": clip("h264_bframes")})
    assert out["video"].shape[1] % 16 == 0 and out["video"].shape[2] % 16 == 0


def test_smart_resize_is_the_image_paths():
    vision = pytest.importorskip("zephon_vision.patchify", reason="zephon-vision is not installed")
    for h, w in [(48, 64), (1080, 1920), (720, 1280), (33, 500), (300, 301), (17, 17)]:
        for lo, hi in [(56 * 56, 28 * 28 * 1280), (128 * 28 * 28, 768 * 28 * 28), (28 * 28, 28 * 28 * 4)]:
            want = vision.smart_resize(h, w, factor=28, min_pixels=lo, max_pixels=hi)
            assert frame_size(h, w, size=None, min_pixels=lo, max_pixels=hi, factor=28) == want, (h, w, lo, hi)


def test_index_is_cached_by_content():
    INDEX_CACHE.clear()
    data = clip("h264_bframes")
    first = video_index(data)
    assert video_index(bytes(bytearray(data))) is first and len(INDEX_CACHE) == 1


def test_options_are_checked():
    for kw, msg in [
        ({"fps": 2, "num_frames": 4}, "not both"),
        ({"fps": 0}, "fps"),
        ({"clip_start": "end"}, "clip_start"),
        ({"max_frames": 1}, "frame_factor"),
        ({"size": (0, 3)}, "size"),
        ({"size": 32, "max_pixels": 1000}, "not both"),
        ({"interpolation": "cubic"}, "interpolation"),
        ({"on_error": "ignore"}, "on_error"),
        ({"on_error": "skip", "errors": "raise"}, "disagree"),
    ]:
        with pytest.raises(ConfigError, match=msg):
            DecodeVideo(**kw)


# -- bad input ---------------------------------------------------------------------------------------
def bad_inputs() -> dict[str, bytes]:
    good = clip("h264_bframes")
    return {
        "truncated": good[: len(good) // 2],
        "not a video": b"this is a caption, not a video" * 4,
        "audio only": encode_audio(chirp(0.5)),
        "empty": b"",
    }


@pytest.mark.parametrize("kind", ["truncated", "not a video", "audio only", "empty"])
def test_bad_video_is_an_error_naming_the_sample(kind):
    recs = records(["h264_bframes", "vp9_webm"])
    recs.insert(1, {"video": bad_inputs()[kind], "n": 99})
    pipe = (
        Pipeline(source(recs))
        .decode_video(num_frames=2, timeout_s=20)
        .batch(1, collate=lambda rows: {"n": np.asarray([r["n"] for r in rows])})
    )
    start = time.monotonic()
    with pytest.raises(OperatorError) as info:
        with pipe:
            list(pipe)
    assert time.monotonic() - start < 20
    msg = str(info.value)
    assert "decode_video" in msg and "not a decodable video" in msg and "on_error='skip'" in msg, msg
    assert "clips" in msg  # the sample: its dataset and position
    if kind == "audio only":
        assert "no video stream" in msg, msg


def test_skip_drops_bad_videos_as_tombstones():
    recs = records(["h264_bframes", "vp9_webm", "h264_vfr", "h264_bframes"])
    bad = bad_inputs()
    for i, kind in ((1, "truncated"), (4, "audio only"), (6, "not a video")):
        recs.insert(i, {"video": bad[kind], "n": 100 + i})
    pipe = (
        Pipeline(source(recs))
        .decode_video(num_frames=2, errors="skip")
        .batch(1, collate=lambda rows: {"n": np.asarray([r["n"] for r in rows])})
    )
    with pipe:
        batches = list(pipe)
    kept = [int(b.data["n"][0]) for b in batches]
    assert kept == [0, 1, 2, 3]
    dropped = sorted(
        chunk * 4 + offset for b in batches for lin in b.dropped for chunk, offset in map(split_sample_id, lin)
    )
    assert dropped == [1, 4, 6]


def test_wrong_field_type_is_never_skipped():
    with pytest.raises(TypeError, match="field 'video'"):
        DecodeVideo(on_error="skip").fn({"video": "clip.mp4"})
