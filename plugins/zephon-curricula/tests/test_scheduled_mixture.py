"""Scheduled mixtures: weights that follow a schedule fixed in advance.

Chunk ``g`` stays a pure function of the configuration and ``g``; the realised shares track the
schedule within 1 percentage point in every segment (samples and tokens, step and linear); the
checkpoint stays small whatever the progress and the number of breakpoints; and the determinism
matrix (runners x parallelism x world sizes x resume with a world-size change) holds for a
schedule crossing two breakpoints.
"""

from __future__ import annotations

import functools
import json
import time

import numpy as np
import pytest
from zephon_curricula import MixtureSchedule, ScheduledMixtureWorkSource

from zephon_core import ConfigError, Dataset, Pipeline
from zephon_core.conformance.harness import run_global
from zephon_core.demo import build, corpus


def _ds(name: str, n: int, shard: int = 500, tokens: int = 1) -> Dataset:
    return Dataset.from_records(name, [{"i": i, "n": tokens} for i in range(n)], shard_size=shard)


def _sequence(ws: ScheduledMixtureWorkSource, n: int) -> np.ndarray:
    out, g = [], 0
    while sum(len(c) for c in out) < n and (ch := ws.chunk(g)) is not None:
        out.append(ch.dataset)
        g += 1
    return np.concatenate(out)[:n]


CURRICULUM = MixtureSchedule(
    [
        (0, {"web": 0.7, "code": 0.3}),
        (20_000, {"web": 0.3, "code": 0.7}),
        (40_000, {"web": 0.5, "code": 0.2, "math": 0.3}),  # math enters
        (60_000, {"web": 0.8, "math": 0.2}),  # code leaves
    ]
)


def _curriculum_source(lanes: int = 4, **kw) -> ScheduledMixtureWorkSource:
    datasets = [_ds("web", 60_000), _ds("code", 40_000), _ds("math", 20_000)]
    kw.setdefault("exhaustion", "repeat")
    return ScheduledMixtureWorkSource(datasets, schedule=CURRICULUM, chunk_size=64, seed=3, **kw).with_lanes(lanes)


@pytest.mark.parametrize("lanes", [1, 4, 32])
def test_realised_shares_within_one_point_of_the_schedule_in_every_segment(lanes):
    seq = _sequence(_curriculum_source(lanes), 80_000)
    names = ["web", "code", "math"]
    for (lo, want), (hi, _) in zip(CURRICULUM.breakpoints, [*CURRICULUM.breakpoints[1:], (80_000, {})]):
        got = np.bincount(seq[lo:hi], minlength=3) / (hi - lo)
        total = sum(want.values())
        for d, name in enumerate(names):
            assert abs(got[d] - want.get(name, 0.0) / total) < 0.01, (lanes, lo, name, got[d])
    assert (seq[:40_000] != 2).all(), "math enters at 40,000"
    assert (seq[60_000:] != 1).all(), "code leaves at 60,000"


def test_linear_interpolation_tracks_the_ramp():
    sch = MixtureSchedule([(0, {"a": 1.0, "b": 0.0}), (50_000, {"a": 0.0, "b": 1.0})], interpolate="linear")
    ws = ScheduledMixtureWorkSource(
        [_ds("a", 100_000), _ds("b", 100_000)], schedule=sch, chunk_size=128, exhaustion="repeat"
    ).with_lanes(4)
    seq = _sequence(ws, 60_000)
    assert abs((seq[:50_000] == 1).mean() - 0.5) < 0.01  # the segment's average
    for lo in range(0, 50_000, 5_000):  # and every tenth of the ramp, against the ramp's mean there
        want = (lo + 2_500) / 50_000
        assert abs((seq[lo : lo + 5_000] == 1).mean() - want) < 0.02, lo
    assert (seq[50_000:] == 1).all()


def test_token_breakpoints_and_token_shares():
    """Documents of 100 and 400 tokens; weights and breakpoints in tokens, through frozen estimates."""
    sch = MixtureSchedule([(0, {"short": 0.5, "long": 0.5}), (2_000_000, {"short": 0.8, "long": 0.2})], unit="tokens")
    datasets = [_ds("short", 50_000, tokens=100), _ds("long", 50_000, tokens=400)]
    ws = ScheduledMixtureWorkSource(datasets, schedule=sch, chunk_size=64, exhaustion="repeat")
    assert ws.mixing_unit == "tokens"
    with pytest.raises(ConfigError, match="token estimates"):
        ws.chunk(0)
    ws = ws.with_token_estimates({"short": 100.0, "long": 400.0}).with_lanes(2)
    seq = _sequence(ws, 40_000)
    tokens = np.where(seq == 0, 100, 400)
    cut = int(np.searchsorted(np.cumsum(tokens), 2_000_000))
    for lo, hi, want in [(0, cut, 0.5), (cut, len(seq), 0.8)]:
        share = tokens[lo:hi][seq[lo:hi] == 0].sum() / tokens[lo:hi].sum()
        assert abs(share - want) < 0.01, (lo, hi, share)


def test_chunks_are_pure_functions_of_their_number():
    a, b = _curriculum_source(), _curriculum_source()
    ref = {g: a.chunk(g) for g in (0, 5, 700, 1300)}
    for g in (1300, 0, 700, 5):  # another instance, another order
        c1, c2 = ref[g], b.chunk(g)
        assert (c1.dataset == c2.dataset).all() and (c1.shard == c2.shard).all() and (c1.index == c2.index).all()


def test_each_lane_draws_disjoint_samples_and_every_epoch_is_covered():
    ws = ScheduledMixtureWorkSource(
        [_ds("a", 3000, 300), _ds("b", 1000, 250)], chunk_size=50, seed=7, exhaustion="stop"
    ).with_lanes(3)
    seen: list[tuple[int, int, int]] = []
    for g in range(10_000):
        ch = ws.chunk(g)
        if ch is not None:
            seen += list(zip(ch.dataset.tolist(), ch.shard.tolist(), ch.index.tolist()))
    assert len(seen) == len(set(seen)), "no sample twice in one epoch, across lanes"
    assert sum(1 for d, _, _ in seen if d == 1) >= 950, "b runs out: (nearly) all of it was drawn"


def test_a_far_chunk_costs_no_more_than_an_early_one():
    ws = _curriculum_source(lanes=8)
    t0 = time.perf_counter()
    ws.chunk(3)
    early = time.perf_counter() - t0
    t0 = time.perf_counter()
    ws.chunk(40_000_000)  # billions of samples in, past every breakpoint
    far = time.perf_counter() - t0
    assert far < max(0.5, 20 * early)


def test_checkpoint_is_small_for_32_lanes_and_1000_breakpoints_whatever_the_progress():
    rng = np.random.default_rng(0)
    points = [(i * 100, {"a": float(x), "b": float(1 - x)}) for i, x in enumerate(rng.uniform(0.05, 0.95, 1000))]
    sch = MixtureSchedule(points, interpolate="linear")
    ws = ScheduledMixtureWorkSource([_ds("a", 100_000), _ds("b", 100_000)], schedule=sch, chunk_size=8)
    sizes = []
    with Pipeline(ws).batch(4).options(lanes=32, runner="inline", flush_every_k_chunks=2) as p:
        it = iter(p)
        for n in (1, 32 * 40):
            for _ in range(n):
                next(it)
            sizes.append(len(json.dumps(p.state_dict())))
    assert max(sizes) <= 64 * 1024, sizes
    assert sizes[1] - sizes[0] < 200, "the checkpoint does not grow with progress"


def test_bad_schedules_are_refused_with_what_is_wrong():
    with pytest.raises(ConfigError, match="first breakpoint must be at 0"):
        MixtureSchedule([(5, {"a": 1.0})])
    with pytest.raises(ConfigError, match="is not after"):
        MixtureSchedule([(0, {"a": 1.0}), (10, {"a": 1.0}), (10, {"a": 2.0})])
    with pytest.raises(ConfigError, match="at least one weight must be positive"):
        MixtureSchedule([(0, {"a": 0.0})])
    with pytest.raises(ConfigError, match="unit"):
        MixtureSchedule([(0, {"a": 1.0})], unit="steps")
    with pytest.raises(ConfigError, match="not in the source"):
        ScheduledMixtureWorkSource([_ds("a", 10)], schedule=MixtureSchedule([(0, {"a": 1.0, "z": 1.0})]))
    with pytest.raises(ConfigError, match="weight 0 at every breakpoint"):
        ScheduledMixtureWorkSource([_ds("a", 10), _ds("b", 10)], schedule=MixtureSchedule([(0, {"a": 1.0})]))


# -- the determinism matrix for a schedule crossing two breakpoints -----------------------------------
LANES, K = 4, 2


def _scheduled_demo_source() -> ScheduledMixtureWorkSource:
    paragraphs, sentences = corpus()
    schedule = MixtureSchedule(
        [
            (0, {"paragraphs": 0.75, "sentences": 0.25}),
            (1_200, {"paragraphs": 0.3, "sentences": 0.7}),
            (2_400, {"paragraphs": 0.6, "sentences": 0.4}),
        ]
    )
    return ScheduledMixtureWorkSource(
        [Dataset.from_records("paragraphs", paragraphs, 500), Dataset.from_records("sentences", sentences, 1000)],
        schedule=schedule,
        chunk_size=32,
        seed=1234,
    )


@pytest.fixture(scope="module")
def scheduled_builder():
    return functools.partial(_build, source=_scheduled_demo_source())


def _build(par: int, *, source: ScheduledMixtureWorkSource) -> Pipeline:
    return build(par, source=source)


@pytest.fixture(scope="module")
def scheduled_baseline(scheduled_builder):
    res = run_global(scheduled_builder, lanes=LANES, world_size=1, runner="inline", flush_every=K, keep_batches=True)
    assert len(res.hashes) > 60
    return res


def test_the_run_crosses_two_breakpoints(scheduled_builder, scheduled_baseline):
    """Positions the lanes delivered from reach past global sample 2,400 (both breakpoints)."""
    last = scheduled_baseline.batches[0][-1]
    assert max(sid for lin in last.lineage for sid in lin) >> 16 & 0xFFFFFFFF > 2_400 // 32


@pytest.mark.parametrize(
    ("runner", "parallelism", "world_size"),
    [("threads", 4, 1), ("processes", 2, 2), ("inline", 1, 4), ("threads", 1, 2), ("processes", 1, 4)],
)
def test_scheduled_same_global_batches(scheduled_builder, scheduled_baseline, runner, parallelism, world_size):
    res = run_global(
        scheduled_builder, lanes=LANES, world_size=world_size, runner=runner, parallelism=parallelism, flush_every=K
    )
    assert res.hashes == scheduled_baseline.hashes


@pytest.mark.slow
@pytest.mark.parametrize(("before", "after"), [(2, 4), (4, 1), (1, 2)])
def test_scheduled_resume_with_world_size_change(scheduled_builder, scheduled_baseline, before, after):
    n = len(scheduled_baseline.hashes)
    for cut in (1, n // 3, 2 * n // 3, n - 2):
        first = run_global(
            scheduled_builder, lanes=LANES, world_size=before, runner="threads", parallelism=2, flush_every=K, steps=cut
        )
        rest = run_global(
            scheduled_builder, lanes=LANES, world_size=after, runner="threads", flush_every=K, resume=first.state
        )
        assert first.hashes + rest.hashes == scheduled_baseline.hashes, f"cut at {cut}, {before}->{after} ranks"
