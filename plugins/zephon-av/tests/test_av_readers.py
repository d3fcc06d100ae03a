"""Encoded video and audio carried by real files: a WebDataset tar (``.mp4`` + ``.flac`` + ``.txt``
members) and a Parquet table (binary columns), read by zephon-webdataset and zephon-parquet, decoded,
patchified, turned into log-mel features and packed beside their text with video and audio
placeholders. Both give the same samples; the global batches hash the same on threads and
processes, and a checkpoint on 2 ranks resumes on 4 with the same batches."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from zephon_av.testing import chirp, encode_audio, encode_video, moving_frames

from zephon_core import Dataset, Pipeline, StaticMixtureWorkSource
from zephon_core.conformance.harness import run_global

pytest.importorskip("zephon_webdataset", reason="zephon-webdataset is not installed")
pytest.importorskip("zephon_parquet", reason="zephon-parquet is not installed")
zephon_pack = pytest.importorskip("zephon_pack", reason="zephon-pack is not installed")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

VID, AUD = 60001, 60002
PS, M = 8, 2
PATCH_DIM = 3 * 2 * PS * PS
N_MELS, HOP, RATE = 16, 80, 8000
CLIP_S = 0.3
FRAMES = int(CLIP_S * RATE) // HOP  # log-mel frames of one audio clip (no 30 s padding here)
AUDIO_TOKENS = FRAMES // 4
LANES, K = 4, 2
N = 16


def clips() -> list[dict[str, Any]]:
    """``N`` samples of encoded bytes: a short H.264 clip, a FLAC clip and a caption."""
    return [
        {
            "mp4": encode_video(moving_frames(8 + (i % 3) * 2, 32, 48, seed=i), fps=10, gop=4),
            "flac": encode_audio(chirp(0.4 + 0.05 * (i % 3), sample_rate=RATE, seed=i), sample_rate=RATE),
            "txt": f"clip {i} of a moving pattern",
        }
        for i in range(N)
    ]


@pytest.fixture(scope="module")
def corpora(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("av_corpora")
    data = clips()
    wds = root / "wds"
    wds.mkdir()
    for shard in range(2):  # two shards of 8 samples, written member by member as WebDataset does
        with tarfile.open(wds / f"shard-{shard:05d}.tar", "w") as tar:
            for i in range(shard * 8, shard * 8 + 8):
                for ext in ("mp4", "flac", "txt"):
                    value = data[i][ext]
                    blob = value.encode() if isinstance(value, str) else value
                    info = tarfile.TarInfo(f"sample{i:04d}.{ext}")
                    info.size = len(blob)
                    tar.addfile(info, io.BytesIO(blob))
    parquet = root / "parquet"
    parquet.mkdir()
    for shard in range(2):
        rows = data[shard * 8 : shard * 8 + 8]
        table = pa.table(
            {
                "mp4": pa.array([r["mp4"] for r in rows], pa.binary()),
                "flac": pa.array([r["flac"] for r in rows], pa.binary()),
                "txt": pa.array([r["txt"] for r in rows], pa.string()),
            }
        )
        pq.write_table(table, parquet / f"part-{shard:05d}.parquet")
    return {"wds": wds, "parquet": parquet}


def with_placeholders(p: dict[str, Any]) -> dict[str, Any]:
    """``<video> caption <audio>`` as token ids (the caption's bytes stand in for a tokenizer)."""
    text = p["txt"]
    caption = np.frombuffer(text if isinstance(text, bytes) else text.encode(), np.uint8).astype(np.int32) + 10
    grid = p["video_grid_thw"]
    ids = np.concatenate(
        [np.full(int(np.prod(grid)) // (M * M), VID, np.int32), caption, np.full(AUDIO_TOKENS, AUD, np.int32)]
    )
    return {
        "input_ids": ids,
        "pixel_values_videos": p["pixel_values_videos"],
        "video_grid_thw": grid[None],
        "input_features": p["input_features"][None],
    }


def build(path: Path):  # type: ignore[no-untyped-def]
    def pipeline(parallelism: int) -> Pipeline:
        ws = StaticMixtureWorkSource([Dataset.from_path("clips", str(path))], chunk_size=3, seed=4)
        return (
            Pipeline(ws)
            .decode_video(
                field="mp4",
                num_frames=4,
                clip_seconds=0.6,
                size_factor=PS * M,
                max_pixels=32 * 48,
                seed=3,
                parallelism=parallelism,
            )
            .patchify_video(PS, merge_size=M, parallelism=parallelism)
            .decode_audio(field="flac", sample_rate=RATE, clip_seconds=CLIP_S, seed=5, parallelism=parallelism)
            .log_mel(N_MELS, n_fft=160, hop_length=HOP, sample_rate=RATE, pad_to_seconds=None, parallelism=parallelism)
            .map_transform(with_placeholders, parallelism=parallelism)
            .pack_sequences(
                48,
                "first_fit",
                num_open_bins=2,
                video_token_id=VID,
                audio_token_id=AUD,
                patch_dim=PATCH_DIM,
                audio_feature_shape=(N_MELS, FRAMES),
                audio_tokens_per_clip=AUDIO_TOKENS,
            )
            .batch(1, collate=zephon_pack.collate_multimodal)
        )

    return pipeline


@pytest.fixture(scope="module")
def baseline(corpora: dict[str, Path]) -> list[str]:
    hashes = run_global(build(corpora["wds"]), lanes=LANES, flush_every=K).hashes
    assert len(hashes) >= 3 and len(set(hashes)) == len(hashes)
    return hashes


def test_every_sample_decodes_from_both_formats(corpora):
    seen: dict[str, list[tuple[int, int]]] = {}
    for fmt, path in corpora.items():
        with build(path)(1).options(lanes=1) as p:
            batches = [b.data for b in p]
        assert sum(int(b["num_videos"].sum()) for b in batches) == N, fmt
        assert sum(int(b["num_audios"].sum()) for b in batches) == N, fmt
        for b in batches:
            assert b["input_features"].shape[1:] == (N_MELS, FRAMES)
            assert (b["input_ids"] == VID).sum() == (b["video_grid_thw"].prod(axis=1) // (M * M)).sum()
            assert not b["loss_mask"][np.isin(b["input_ids"], (VID, AUD))].any()
        seen[fmt] = sorted(
            (int(g.prod()), int(np.round(f.sum() * 1e3)))
            for b in batches
            for g, f in zip(b["video_grid_thw"], b["input_features"])
        )
    assert seen["wds"] == seen["parquet"], "the tar and the Parquet table carry the same bytes"


@pytest.mark.slow
def test_same_global_batches_on_processes(baseline, corpora, tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    got = run_global(build(corpora["wds"]), lanes=LANES, world_size=2, runner="processes", parallelism=2, flush_every=K)
    assert got.hashes == baseline


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["wds", "parquet"])
def test_same_global_batches_on_threads_and_ranks(corpora, baseline, fmt):
    got = run_global(build(corpora[fmt]), lanes=LANES, world_size=2, runner="threads", parallelism=2, flush_every=K)
    assert got.hashes == baseline, "the tar and the Parquet table give the same global batches"


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["wds", "parquet"])
def test_checkpoint_on_2_ranks_resumes_on_4(corpora, baseline, fmt):
    pipeline = build(corpora[fmt])
    cut = len(baseline) // 2
    first = run_global(pipeline, lanes=LANES, world_size=2, runner="threads", flush_every=K, steps=cut)
    rest = run_global(
        pipeline, lanes=LANES, world_size=4, runner="threads", parallelism=2, flush_every=K, resume=first.state
    )
    assert first.hashes + rest.hashes == baseline
