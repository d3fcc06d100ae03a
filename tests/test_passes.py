"""Bounded passes per dataset: ``max_repeats``, ``stop_after_passes`` and
``reshuffle_on_repeat``, with an end-of-data report that says which dataset ended the run after how
many passes, and exact resume on another world size."""

from __future__ import annotations

import collections
import functools

import numpy as np
import pytest

from tests.helpers import demo_mixture, numbered
from zephon_core import ConfigError, MixtureSpec, StaticMixtureWorkSource
from zephon_core.conformance.harness import run_global
from zephon_core.demo import build


def _draws(ws: StaticMixtureWorkSource) -> list[tuple[int, int, int]]:
    out, g = [], 0
    while (ch := ws.chunk(g)) is not None:
        out += [(int(d), int(s), int(i)) for d, s, i in zip(ch.dataset, ch.shard, ch.index)]
        g += 1
    return out


def test_stop_after_passes_ends_the_data_and_the_report_says_who_and_after_how_many_passes():
    ws = StaticMixtureWorkSource(
        [numbered("web", 1000, 50), numbered("code", 100, 50)],
        mixture=MixtureSpec({"web": 0.5, "code": 0.5}),
        chunk_size=20,
        exhaustion="repeat",
        stop_after_passes={"code": 3},
    )
    draws = _draws(ws)
    code = collections.Counter((s, i) for d, s, i in draws if d == 1)
    assert len(code) == 100 and set(code.values()) == {3}  # every code sample exactly three times
    [end] = ws.exhaustion_report()
    assert (end.dataset, end.passes, end.policy, end.draw) == ("code", 3, "stop", 300)
    assert "dataset 'code' ran out after 3 passes" in str(end) and "the data ends" in str(end)
    assert len(draws) == end.position


def test_max_repeats_lets_a_dataset_repeat_then_leave_the_mixture():
    ws = StaticMixtureWorkSource(
        [numbered("web", 1000, 50), numbered("code", 100, 50)],
        mixture=MixtureSpec({"web": 0.5, "code": 0.5}),
        chunk_size=20,
        exhaustion={"web": "stop", "code": "repeat"},
        max_repeats={"code": 1},
    )
    draws = _draws(ws)
    code = collections.Counter((s, i) for d, s, i in draws if d == 1)
    assert set(code.values()) == {2}  # the first pass and one repeat
    report = ws.exhaustion_report()
    assert [(e.dataset, e.passes, e.policy) for e in report] == [("code", 2, "redistribute"), ("web", 1, "stop")]
    after = [d for d, _, _ in draws[report[0].position :]]
    assert after and set(after) == {0}  # its share went to web, which then ends the data
    assert sum(1 for d, _, _ in draws if d == 0) == 1000


@pytest.mark.parametrize("reshuffle", [True, False])
def test_reshuffle_on_repeat(reshuffle):
    ws = StaticMixtureWorkSource(
        [numbered("a", 200, 50)], chunk_size=25, exhaustion="repeat", stop_after_passes=3, reshuffle_on_repeat=reshuffle, seed=5
    )
    draws = _draws(ws)
    passes = [draws[k * 200 : (k + 1) * 200] for k in range(3)]
    assert all(sorted(p) == sorted(passes[0]) for p in passes)  # each pass holds every sample once
    assert (passes[1] == passes[0]) is (not reshuffle)
    assert (passes[2] == passes[0]) is (not reshuffle)


def test_the_defaults_change_nothing():
    kw = dict(mixture=MixtureSpec({"a": 0.7, "b": 0.3}), chunk_size=16, seed=2, exhaustion="repeat")
    plain = StaticMixtureWorkSource([numbered("a", 300, 50), numbered("b", 90, 50)], **kw)
    explicit = StaticMixtureWorkSource([numbered("a", 300, 50), numbered("b", 90, 50)], **kw, reshuffle_on_repeat=True)
    for g in range(0, 200, 7):
        x, y = plain.chunk(g), explicit.chunk(g)
        assert np.array_equal(x.shard, y.shard) and np.array_equal(x.index, y.index)
    assert plain.describe() == explicit.describe()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_repeats": {"b": 1}}, r"max_repeats\['b'\]: dataset 'b' does not repeat"),
        ({"exhaustion": "repeat", "max_repeats": {"zz": 1}}, r"unknown datasets \['zz'\]"),
        ({"exhaustion": "repeat", "stop_after_passes": 0}, r"stop_after_passes\['a'\] must be an int >= 1"),
        ({"exhaustion": "repeat", "max_repeats": True}, "max_repeats must be an int"),
        ({"reshuffle_on_repeat": "yes"}, "reshuffle_on_repeat must be a bool"),
    ],
)
def test_bad_pass_options_are_named(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        StaticMixtureWorkSource([numbered("a", 100, 50), numbered("b", 100, 50)], **kwargs)


LANES, K = 4, 2


def _bounded_source() -> StaticMixtureWorkSource:
    return demo_mixture(
        300,
        100,
        exhaustion="repeat",
        max_repeats={"sentences": 1},
        stop_after_passes={"paragraphs": 2},
        reshuffle_on_repeat={"sentences": False},
    )


def test_bounded_passes_resume_exactly_on_another_world_size():
    builder = functools.partial(build, source=_bounded_source())
    base = run_global(builder, lanes=LANES, world_size=1, runner="inline", flush_every=K)
    assert len(base.hashes) > 20
    cut = len(base.hashes) // 2
    first = run_global(builder, lanes=LANES, world_size=2, runner="threads", flush_every=K, steps=cut)
    rest = run_global(
        builder, lanes=LANES, world_size=4, runner="threads", parallelism=2, flush_every=K, resume=first.state
    )
    assert first.hashes + rest.hashes == base.hashes
