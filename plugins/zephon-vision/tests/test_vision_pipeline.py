"""A vision pipeline end to end — decode → random_resized_crop → horizontal_flip → normalize or
patchify → batch — gives the same global batches on every runner, parallelism and world size, and
after resuming on another world size."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from zephon_vision.testing import encoded_records

from zephon_core import Dataset, MixtureSpec, Pipeline, StaticMixtureWorkSource
from zephon_core.conformance.harness import run_global
from zephon_core.conformance.samples import digest_collate

LANES = 4
K = 2


@functools.lru_cache(maxsize=1)
def corpus() -> StaticMixtureWorkSource:
    photos = encoded_records(96, min_side=24, max_side=64, seed=3)
    more = encoded_records(48, min_side=24, max_side=64, seed=4, formats=("JPEG",))
    return StaticMixtureWorkSource(
        [Dataset.from_records("photos", photos, shard_size=24), Dataset.from_records("jpegs", more, shard_size=24)],
        mixture=MixtureSpec({"photos": 2.0, "jpegs": 1.0}),
        chunk_size=8,
        seed=9,
    )


def classifier(parallelism: int) -> Pipeline:
    """Fixed-size crops, normalized to CHW: collated by the default collate into (B, 3, 32, 32)."""
    return (
        Pipeline(corpus())
        .decode_image(parallelism=parallelism)
        .random_resized_crop(32, scale=(0.3, 1.0), parallelism=parallelism)
        .horizontal_flip(parallelism=parallelism)
        .normalize(chw=True, parallelism=parallelism)
        .batch(4)
    )


def encoder(parallelism: int) -> Pipeline:
    """Variable resolution: each image keeps its own grid (collated as digests)."""
    return (
        Pipeline(corpus())
        .decode_image(parallelism=parallelism)
        .random_resized_crop((48, 40), scale=(0.5, 1.0))
        .horizontal_flip(seed=1)
        .patchify(4, merge_size=2, min_pixels=16 * 16, max_pixels=48 * 48, max_patches=96, parallelism=parallelism)
        .batch(2, collate=digest_collate)
    )


@pytest.fixture(scope="module")
def baselines() -> dict[str, list[str]]:
    out = {}
    for name, build in (("classifier", classifier), ("encoder", encoder)):
        out[name] = run_global(build, lanes=LANES, runner="inline", flush_every=K).hashes
        assert len(out[name]) >= 8
    return out


def test_batches_hold_what_was_asked():
    with classifier(1).options(lanes=2) as p:
        batch = next(iter(p)).to_training()
    assert batch["image"].shape == (4, 3, 32, 32) and batch["image"].dtype == np.float32
    assert sorted(batch) == ["image", "n"]


@pytest.mark.parametrize("name", ["classifier", "encoder"])
@pytest.mark.parametrize(
    ("runner", "parallelism", "world_size"),
    [
        ("threads", 3, 1),
        ("threads", 1, 2),
        ("threads", 3, 4),
        pytest.param("processes", 2, 1, marks=pytest.mark.slow),
        pytest.param("processes", 3, 2, marks=pytest.mark.slow),
    ],
)
def test_same_global_batches(baselines, name, runner, parallelism, world_size):
    build = classifier if name == "classifier" else encoder
    got = run_global(build, lanes=LANES, world_size=world_size, runner=runner, parallelism=parallelism, flush_every=K)
    assert got.hashes == baselines[name]


@pytest.mark.parametrize(("before", "after"), [(2, 4), pytest.param(4, 1, marks=pytest.mark.slow)])
def test_resume_on_another_world_size(baselines, before, after):
    ref = baselines["encoder"]
    for cut in (1, len(ref) // 2):
        first = run_global(encoder, lanes=LANES, world_size=before, runner="threads", flush_every=K, steps=cut)
        rest = run_global(
            encoder, lanes=LANES, world_size=after, runner="threads", parallelism=2, flush_every=K, resume=first.state
        )
        assert first.hashes + rest.hashes == ref, f"cut at step {cut}"
