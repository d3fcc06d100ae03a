"""Video and audio pipelines end to end give the same global batches (SHA-256 of each) on every
runner, parallelism and world size, and after a checkpoint on 2 ranks resumed on 4; and
``patchify_video``'s layout (the image path's, for pairs of frames)."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from zephon_av import PatchifyVideo, temporal_patches
from zephon_av.testing import audio_records, moving_frames, video_records

from zephon_core import Dataset, MixtureSpec, Pipeline, StaticMixtureWorkSource
from zephon_core.conformance.harness import run_global
from zephon_core.conformance.samples import digest_collate

LANES = 4
K = 2


@functools.lru_cache(maxsize=1)
def corpus() -> StaticMixtureWorkSource:
    return StaticMixtureWorkSource(
        [
            Dataset.from_records("clips", video_records(24, seconds=1.6), shard_size=6),
            Dataset.from_records("more", video_records(12, seconds=1.2, seed=50), shard_size=6),
        ],
        mixture=MixtureSpec({"clips": 0.75, "more": 0.25}),
        chunk_size=4,
        seed=5,
    )


@functools.lru_cache(maxsize=1)
def speech() -> StaticMixtureWorkSource:
    return StaticMixtureWorkSource(
        [Dataset.from_records("speech", audio_records(32, seconds=0.6), shard_size=8)], chunk_size=4, seed=2
    )


def video_pipeline(parallelism: int) -> Pipeline:
    return (
        Pipeline(corpus())
        .decode_video(
            num_frames=3, clip_seconds=0.8, size_factor=16, max_pixels=48 * 64, seed=7, parallelism=parallelism
        )
        .patchify_video(8, merge_size=2, parallelism=parallelism)
        .batch(2, collate=digest_collate)
    )


def audio_pipeline(parallelism: int) -> Pipeline:
    return (
        Pipeline(speech())
        .decode_audio(sample_rate=8000, clip_seconds=0.4, parallelism=parallelism)
        .log_mel(80, n_fft=200, hop_length=80, sample_rate=8000, pad_to_seconds=None, parallelism=parallelism)
        .batch(2, collate=digest_collate)
    )


@pytest.fixture(scope="module")
def baselines() -> dict[str, list[str]]:
    out = {
        name: run_global(build, lanes=LANES, flush_every=K).hashes
        for name, build in (("video", video_pipeline), ("audio", audio_pipeline))
    }
    assert all(len(h) >= 3 for h in out.values()), {k: len(v) for k, v in out.items()}
    return out


@pytest.mark.parametrize("name", ["video", "audio"])
@pytest.mark.parametrize(
    ("runner", "parallelism", "world_size"),
    [("threads", 2, 1), ("threads", 1, 2), ("threads", 2, 4), pytest.param("processes", 2, 2, marks=pytest.mark.slow)],
)
def test_same_global_batches(baselines, name, runner, parallelism, world_size):
    build = video_pipeline if name == "video" else audio_pipeline
    got = run_global(build, lanes=LANES, world_size=world_size, runner=runner, parallelism=parallelism, flush_every=K)
    assert got.hashes == baselines[name]


def test_resume_on_more_ranks(baselines):
    ref = baselines["video"]
    cut = len(ref) // 2
    first = run_global(video_pipeline, lanes=LANES, world_size=2, runner="threads", flush_every=K, steps=cut)
    rest = run_global(
        video_pipeline, lanes=LANES, world_size=4, runner="threads", parallelism=2, flush_every=K, resume=first.state
    )
    assert first.hashes + rest.hashes == ref


def test_the_seed_changes_the_clips(baselines):
    def reseeded(parallelism: int) -> Pipeline:
        return (
            Pipeline(corpus())
            .decode_video(num_frames=3, clip_seconds=0.8, size_factor=16, max_pixels=48 * 64, seed=8)
            .patchify_video(8, merge_size=2)
            .batch(2, collate=digest_collate)
        )

    assert run_global(reseeded, lanes=LANES, flush_every=K).hashes != baselines["video"]


# -- patchify_video ----------------------------------------------------------------------------------
def test_patch_rows_are_pairs_of_frames_in_merge_order():
    frames = moving_frames(3, 32, 48).astype(np.float32)  # odd: the last frame is repeated
    patches, grid = temporal_patches(frames, 8, 2, 2)
    assert grid == (2, 4, 6) and patches.shape == (48, 3 * 2 * 8 * 8)
    t, bh, bw, mh, mw = 1, 1, 2, 0, 1
    row = (((t * 2 + bh) * 3 + bw) * 2 + mh) * 2 + mw
    y, x = (bh * 2 + mh) * 8, (bw * 2 + mw) * 8
    block = patches[row].reshape(3, 2, 8, 8)  # (channel, frame, y, x)
    assert np.array_equal(block[:, 0], frames[2, y : y + 8, x : x + 8].transpose(2, 0, 1))
    assert np.array_equal(block[:, 1], frames[2, y : y + 8, x : x + 8].transpose(2, 0, 1))  # repeated


def test_patchify_video_equals_the_image_paths_patchify():
    vision = pytest.importorskip("zephon_vision", reason="zephon-vision is not installed")
    frames = moving_frames(5, 32, 48)
    ours = PatchifyVideo(8).fn({"video": frames, "n": 1})
    theirs = vision.Patchify(8, min_pixels=8 * 8, max_pixels=32 * 48, field="video").fn({"video": frames, "n": 1})
    assert np.array_equal(ours["pixel_values_videos"], theirs["pixel_values"])
    assert ours["video_grid_thw"].tolist() == theirs["image_grid_thw"].tolist() == [3, 4, 6]
    assert "video" not in ours and ours["n"] == 1


def test_patchify_video_checks_its_input():
    with pytest.raises(ValueError, match="size_factor=16"):
        PatchifyVideo(8).fn({"video": moving_frames(2, 30, 48)})
    with pytest.raises(TypeError, match="decode_video"):
        PatchifyVideo(8).fn({"video": moving_frames(1)[0]})


def test_video_samples_pack_with_pack_sequences():
    zephon_pack = pytest.importorskip("zephon_pack", reason="zephon-pack is not installed")
    video_token = 151656

    def add_text(p: dict) -> dict:
        grid = p["video_grid_thw"]
        ids = np.concatenate([[1, 2, 3], np.full(int(np.prod(grid)) // 4, video_token), [4, p["n"] + 10]]).astype(
            np.int64
        )
        return {"input_ids": ids, "pixel_values_videos": p["pixel_values_videos"], "video_grid_thw": grid[None]}

    src = StaticMixtureWorkSource(
        [Dataset.from_records("v", video_records(6, seconds=1.0))], chunk_size=3, shuffle=False
    )
    pipe = (
        Pipeline(src)
        .decode_video(num_frames=4, size_factor=16, max_pixels=48 * 64)
        .patchify_video(8)
        .map_transform(add_text)
        .pack_sequences(
            64,
            "first_fit",
            image_token_id=video_token,
            patch_dim=3 * 2 * 8 * 8,
            pixel_field="pixel_values_videos",
            grid_field="video_grid_thw",
        )
        .batch(1, collate=zephon_pack.MultimodalCollate("pixel_values_videos", "video_grid_thw"))
    )
    with pipe:
        batches = [b.to_training() for b in pipe]
    grids = np.concatenate([b["video_grid_thw"] for b in batches])
    patches = sum(len(b["pixel_values_videos"]) for b in batches)
    assert len(grids) == 6 and patches == int(np.prod(grids, axis=1).sum())
    tokens = sum(int((b["input_ids"] == video_token).sum()) for b in batches)
    assert tokens == patches // 4  # one placeholder per merged 2x2 window, none split across rows
