"""Deterministic skip: ``pipeline.skip_global_steps(n)`` after a restore discards
exactly the next ``n`` global steps on every rank, whatever the world size, and is recorded in the
checkpoint."""

from __future__ import annotations

import functools
import itertools
from typing import Any

import pytest

from zephon_core import ConfigError, merge_checkpoints
from zephon_core.conformance.harness import run_global
from zephon_core.demo import build
from zephon_core.hashing import hash_global_batch

LANES, K = 4, 2


@pytest.fixture(scope="module")
def builder(demo_source):
    return functools.partial(_build, source=demo_source)


def _build(par: int, *, source):
    return build(par, source=source)


@pytest.fixture(scope="module")
def baseline(builder) -> list[str]:
    return run_global(builder, lanes=LANES, world_size=1, runner="inline", flush_every=K).hashes


def _resume_skipping(
    builder, state: dict[str, Any], world: int, skip: int, *, runner: str = "threads", steps: int | None = None
) -> tuple[list[str], dict[str, Any] | None]:
    """Every rank of ``world`` loads ``state``, skips ``skip`` global steps, then runs (``steps`` more)."""
    per = LANES // world
    ranks, states = [], []
    for rank in range(world):
        opts = {"lanes": LANES, "dp_rank": rank, "dp_world_size": world, "runner": runner, "flush_every_k_chunks": K}
        with builder(2).options(**opts) as p:
            p.load_state_dict(state)
            if skip:
                p.skip_global_steps(skip)
            got = list(itertools.islice(p, None if steps is None else steps * per))
            if steps is not None:
                states.append(p.state_dict())
        ranks.append(got)
    n = min(len(r) // per for r in ranks)
    hashes = [hash_global_batch([b for r in ranks for b in r[t * per : (t + 1) * per]]) for t in range(n)]
    return hashes, merge_checkpoints(states) if states else None


@pytest.mark.parametrize(("cut", "after"), [(10, 2), (10, 4), (31, 1), (1, 2)])
def test_restore_skip_continue_equals_the_run_from_later(builder, baseline, cut, after):
    first = run_global(builder, lanes=LANES, world_size=2, runner="threads", flush_every=K, steps=cut)
    rest, _ = _resume_skipping(builder, first.state, after, 5)
    assert rest == baseline[cut + 5 :]


def test_the_skip_is_in_the_checkpoint(builder, baseline):
    first = run_global(builder, lanes=LANES, world_size=2, runner="threads", flush_every=K, steps=12)
    # checkpoint right after the skip call (pending), on another world size: the resumed run still skips
    states = []
    for rank in range(2):
        with builder(1).options(lanes=LANES, dp_rank=rank, dp_world_size=2, flush_every_k_chunks=K) as p:
            p.load_state_dict(first.state)
            p.skip_global_steps(5)
            states.append(p.state_dict())
    pending = merge_checkpoints(states)
    assert pending["skipped_steps"] == {"log": [{"step": 12, "steps": 5}], "pending": 5}
    rest, _ = _resume_skipping(builder, pending, 4, 0)
    assert rest == baseline[17:]
    # after some steps: the log stays, nothing is pending, positions are past the skipped steps
    head, later = _resume_skipping(builder, first.state, 2, 5, steps=3)
    assert head == baseline[17:20]
    assert later["skipped_steps"] == {"log": [{"step": 12, "steps": 5}], "pending": 0}
    assert {lane["delivered"] for lane in later["lanes"].values()} == {20}
    rest, _ = _resume_skipping(builder, later, 1, 0, runner="inline")
    assert rest == baseline[20:]


def test_skip_mid_run_and_errors(builder, baseline):
    with builder(1).options(lanes=LANES, flush_every_k_chunks=K, runner="inline") as p:
        it = iter(p)
        got = [hash_global_batch(list(itertools.islice(it, LANES))) for _ in range(3)]
        p.skip_global_steps(2)
        got += [hash_global_batch(list(itertools.islice(it, LANES))) for _ in range(2)]
        assert got == baseline[:3] + baseline[5:7]
        next(it)
        with pytest.raises(ConfigError, match="between rounds"):
            p.skip_global_steps(1)
        with pytest.raises(ConfigError, match="int >= 0"):
            p.skip_global_steps(-1)
