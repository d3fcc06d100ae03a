"""Exhaustion policies: stop, repeat and redistribute, per dataset, with an
end-of-data report naming which dataset ran out at which draw; redistribute holds the determinism
matrix on both sources."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from tests.helpers import demo_datasets, demo_mixture
from zephon_core import (
    ConfigError,
    Dataset,
    MixtureSchedule,
    MixtureSpec,
    Pipeline,
    ScheduledMixtureWorkSource,
    StaticMixtureWorkSource,
)
from zephon_core.conformance.harness import run_global
from zephon_core.demo import build


def _ds(name: str, n: int, shard: int = 100) -> Dataset:
    return Dataset.from_records(name, [{"i": i} for i in range(n)], shard_size=shard)


def _all(ws) -> list:
    out, g = [], 0
    while (ch := ws.chunk(g)) is not None:
        out.append(ch)
        g += 1
    return out


def test_static_redistribute_gives_the_share_to_the_others_and_ends_when_all_ran_out():
    ws = StaticMixtureWorkSource(
        [_ds("a", 3000), _ds("b", 500), _ds("c", 1000)],
        mixture=MixtureSpec({"a": 0.5, "b": 0.3, "c": 0.2}),
        chunk_size=100,
        seed=1,
        exhaustion="redistribute",
    )
    chunks = _all(ws)
    ds = np.concatenate([c.dataset for c in chunks])
    assert len(ds) == 4500, "every sample of every dataset, once"
    pairs = [(int(d), int(s), int(i)) for c in chunks for d, s, i in zip(c.dataset, c.shard, c.index)]
    assert len(set(pairs)) == len(pairs)
    report = ws.exhaustion_report()
    assert [(e.dataset, e.draw) for e in report] == [("b", 500), ("c", 1000), ("a", 3000)]
    b_out, c_out = report[0].position, report[1].position
    before = ds[:b_out]
    assert abs((before == 1).mean() - 0.3) < 0.01
    between = ds[b_out:c_out]  # b's 0.3 went to a and c in proportion 5:2
    assert (between != 1).all() and abs((between == 0).mean() - 5 / 7) < 0.01
    assert (ds[c_out:] == 0).all()
    assert "dataset 'b' ran out at its draw 500" in str(report[0])


def test_static_stop_and_repeat_are_unchanged_and_reported():
    half = MixtureSpec({"a": 0.5, "b": 0.5})
    stop = StaticMixtureWorkSource([_ds("a", 3000), _ds("b", 500)], half, chunk_size=100, exhaustion="stop")
    assert [(e.dataset, e.draw, e.policy) for e in stop.exhaustion_report()] == [("b", 500, "stop")]
    assert stop.end_position == stop.exhaustion_report()[0].position
    mixed = StaticMixtureWorkSource(
        [_ds("a", 300), _ds("b", 500)], half, chunk_size=100, exhaustion={"a": "repeat", "b": "redistribute"}
    )
    assert mixed.end_position is None
    (b_out,) = mixed.exhaustion_report()
    ds = np.concatenate([mixed.chunk(g).dataset for g in range(30)])
    assert (ds[b_out.position :] == 0).all() and (ds[: b_out.position] == 1).sum() == 500
    assert mixed.describe()["exhaustion"] == {"a": "repeat", "b": "redistribute"}
    with pytest.raises(ConfigError, match="exhaustion must name exactly"):
        StaticMixtureWorkSource([_ds("a", 10), _ds("b", 10)], exhaustion={"a": "stop"})
    with pytest.raises(ConfigError, match="exhaustion policy for 'a'"):
        StaticMixtureWorkSource([_ds("a", 10)], exhaustion={"a": "forever"})


def test_scheduled_redistribute_per_lane_and_the_report_in_stats():
    sch = MixtureSchedule([(0, {"a": 0.6, "b": 0.3, "c": 0.1})])
    ws = ScheduledMixtureWorkSource(
        [_ds("a", 20_000), _ds("b", 2_000), _ds("c", 20_000)],
        schedule=sch,
        chunk_size=50,
        exhaustion={"a": "repeat", "b": "redistribute", "c": "repeat"},
    ).with_lanes(2)
    for lane in (0, 1):
        (ev,) = ws.lane_plan(lane).exhausted
        assert (ev.dataset, ev.draw, ev.lane) == ("b", 1000, lane)  # each lane got half of b
        seq = np.concatenate([ws.chunk(g).dataset for g in range(lane, 2 * 400, 2)])
        assert (seq[: ev.position] == 1).sum() == 1000, "b drew its whole lane stream before it ran out"
        assert abs((seq[: ev.position] == 1).mean() - 0.3) < 0.01
        after = seq[ev.position :]
        assert (after != 1).all() and abs((after == 0).mean() - 6 / 7) < 0.01
    with Pipeline(ws).batch(10).options(lanes=2, runner="inline") as p:
        it = iter(p)
        for _ in range(10):
            next(it)
        text = " ".join(p.stats()["exhausted"])
    assert "dataset 'b' ran out at its draw 1000 (lane 0" in text and "(lane 1" in text


def test_scheduled_stop_ends_the_lane_at_the_first_dataset_to_run_out():
    half = MixtureSchedule([(0, {"a": 0.5, "b": 0.5})])
    ws = ScheduledMixtureWorkSource([_ds("a", 5000), _ds("b", 400)], half, chunk_size=20, exhaustion="stop")
    ws = ws.with_lanes(2)
    for lane in (0, 1):
        (ev,) = ws.lane_plan(lane).exhausted
        assert ev.dataset == "b" and ev.policy == "stop" and ws.lane_plan(lane).end == ev.position
    ds = np.concatenate([c.dataset for c in _all_lanes(ws, 2)])
    assert (ds == 1).sum() == 400


def _all_lanes(ws, lanes: int) -> list:
    out = []
    for lane in range(lanes):
        g = lane
        while (ch := ws.chunk(g)) is not None:
            out.append(ch)
            g += lanes
    return out


# -- the determinism matrix with redistribute --------------------------------------------------------
LANES, K = 4, 2


def _static_redistribute():
    return demo_mixture(700, 250, exhaustion="redistribute")


def _scheduled_redistribute():
    sch = MixtureSchedule([(0, {"paragraphs": 0.5, "sentences": 0.5}), (900, {"paragraphs": 0.2, "sentences": 0.8})])
    return ScheduledMixtureWorkSource(
        demo_datasets(900, 250),
        schedule=sch,
        chunk_size=32,
        seed=11,
        exhaustion={"paragraphs": "stop", "sentences": "redistribute"},
    )


@pytest.fixture(scope="module", params=["static", "scheduled"])
def redistribute_case(request):
    source = _static_redistribute() if request.param == "static" else _scheduled_redistribute()
    builder = functools.partial(_build, source=source)
    base = run_global(builder, lanes=LANES, world_size=1, runner="inline", flush_every=K)
    assert len(base.hashes) > 30
    bound = source.with_lanes(LANES) if hasattr(source, "with_lanes") else source
    assert any(e.dataset == "sentences" and e.policy == "redistribute" for e in bound.exhaustion_report())
    return builder, base.hashes


def _build(par: int, *, source) -> Pipeline:
    return build(par, source=source)


@pytest.mark.parametrize(("runner", "parallelism", "world_size"), [("threads", 2, 2), ("processes", 2, 4)])
def test_redistribute_same_global_batches(redistribute_case, runner, parallelism, world_size):
    builder, base = redistribute_case
    res = run_global(builder, lanes=LANES, world_size=world_size, runner=runner, parallelism=parallelism, flush_every=K)
    assert res.hashes == base


def test_redistribute_resume_with_world_size_change(redistribute_case):
    builder, base = redistribute_case
    for cut, before, after in [(len(base) // 3, 2, 4), (2 * len(base) // 3, 4, 1)]:
        first = run_global(builder, lanes=LANES, world_size=before, runner="threads", flush_every=K, steps=cut)
        rest = run_global(builder, lanes=LANES, world_size=after, runner="threads", flush_every=K, resume=first.state)
        assert first.hashes + rest.hashes == base, (cut, before, after)
