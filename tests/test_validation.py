"""``options(validate=...)``: the conformance rules probed at start-up on a pipeline's own steps. Every
deliberately broken operator of the conformance tests is flagged with its rule; every built-in passes."""

from __future__ import annotations

import random
import warnings

import pytest

from tests.broken_operators import BROKEN
from zephon_core import ConfigError, Dataset, Pipeline, StaticMixtureWorkSource
from zephon_core.conformance import samples
from zephon_core.conformance.samples import text_records
from zephon_core.validation import ValidationWarning


def _source() -> StaticMixtureWorkSource:
    return StaticMixtureWorkSource([Dataset.from_records("docs", text_records(200), shard_size=50)], chunk_size=64)


def coin(payload: dict) -> dict:
    return {**payload, "coin": random.random() < 0.5}


def shout(payload: dict) -> dict:
    return {**payload, "text": payload["text"].upper()}


def _first(p: Pipeline) -> dict:
    with p:
        next(iter(p))
        return p.stats()["validation"]


@pytest.mark.parametrize("broken", list(BROKEN), ids=lambda c: c.__name__)
def test_every_broken_operator_is_flagged_with_its_rule(broken):
    p = Pipeline(_source()).add(broken()).batch(4, collate=samples.digest_collate).options(validate="strict")
    with pytest.raises(ConfigError, match=rf"validate='strict': operator '{broken.kind}' \[rule {BROKEN[broken]}:"), p:
        next(iter(p))


def test_builtin_and_registered_steps_pass_and_the_probe_is_cheap():
    p = (
        Pipeline(_source())
        .map_transform(samples.upper_or_drop)
        .flat_map(samples.split_sentences)
        .stateful_transform(
            "words",
            init_state=samples.words_init,
            push=samples.words_push,
            flush=samples.words_flush,
            transform=samples.words_transform,
        )
        .shuffle(16, seed=3)
        .map_transform(shout)
        .batch(4, collate=samples.digest_collate)
        .options(validate="strict")
    )
    report = _first(p)
    assert report["findings"] == [] and report["records"] == 48
    print(f"\nvalidation probe: {report['seconds'] * 1000:.0f} ms for 5 steps")


def test_warn_mode_warns_and_runs_and_off_costs_nothing():
    p = Pipeline(_source()).map_transform(coin).batch(4).options(validate="warn")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = _first(p)
    msgs = [str(w.message) for w in caught if issubclass(w.category, ValidationWarning)]
    assert msgs == report["findings"] and "operator 'coin' [rule 3:" in msgs[0], msgs
    assert _first(Pipeline(_source()).map_transform(coin).batch(4)) == {}
    with pytest.raises(ConfigError, match=r"option validate must be one of \['off', 'warn', 'strict'\]"):
        Pipeline(_source()).options(validate=True)


def test_the_probe_passes_every_kernel_builtin_operator_directly():
    import functools

    from zephon_core.conformance.driver import records_from
    from zephon_core.defaults.operators.mapping import FlatMap, MapTransform
    from zephon_core.defaults.operators.shuffle import Shuffle
    from zephon_core.defaults.operators.stateful import StatefulTransform
    from zephon_core.defaults.operators.text import DecodeText
    from zephon_core.validation import PROBE_RECORDS, probe_operator

    records = records_from(text_records(PROBE_RECORDS))
    encoded = records_from([{**r, "text": r["text"].encode()} for r in text_records(PROBE_RECORDS)])
    subjects = {
        "map_transform": (functools.partial(MapTransform, samples.upper_or_drop), records),
        "flat_map": (functools.partial(FlatMap, samples.split_sentences), records),
        "stateful_transform": (
            functools.partial(
                StatefulTransform,
                "words",
                init_state=samples.words_init,
                push=samples.words_push,
                flush=samples.words_flush,
                transform=samples.words_transform,
            ),
            records,
        ),
        "shuffle": (functools.partial(Shuffle, 16, seed=3), records),
        "shuffle block": (functools.partial(Shuffle, 16, seed=3, algorithm="block"), records),
        "shuffle block_warmup": (functools.partial(Shuffle, 16, seed=3, algorithm="block_warmup"), records),
        "decode_text": (functools.partial(DecodeText, lowercase=True), encoded),
    }
    for label, (factory, recs) in subjects.items():
        assert probe_operator(factory(), recs) == [], label
