"""Token-aware mixing: calibration, frozen estimates, shares over 1M tokens, ensure_mixture."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from zephon_tokenize import EnsureMixture, Tokenize

from zephon_core import CheckpointError, ConfigError, Dataset, MixtureSpec, Pipeline, Records, StaticMixtureWorkSource
from zephon_core.conformance.harness import run_global
from zephon_core.plugin_api import SourceInfo, dataset_of
from zephon_core.testing.corpus import english_and_technical, english_texts, grouped_texts, numbered_records
from zephon_core.work.ids import sample_id, split_sample_id

TARGET = {"short": 0.5, "long": 0.5}


def short_and_long(
    weight_by: str, exhaustion: str = "repeat", chunk_size: int = 256, n: int | None = None
) -> StaticMixtureWorkSource:
    """English documents, and runs of four of them: documents 4x longer on average."""
    s = english_texts()[:n]
    return StaticMixtureWorkSource(
        [
            Dataset.from_records("short", numbered_records(s), shard_size=500),
            Dataset.from_records("long", numbered_records(grouped_texts(s, 4)), shard_size=200),
        ],
        mixture=MixtureSpec(TARGET),
        chunk_size=chunk_size,
        exhaustion=exhaustion,  # type: ignore[arg-type]
        weight_by=weight_by,  # type: ignore[arg-type]
        seed=11,
    )


def count_collate(rows: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    return {"num_tokens": np.array([r["num_tokens"] for r in rows], dtype=np.int64)}


def whole_run(weight_by: str) -> tuple[np.ndarray, np.ndarray, dict[str, float] | None]:
    """Tokens and documents per dataset over a whole run that stops when the first dataset runs out.

    Whole passes, not a prefix: a prefix of a run is a sample of shards, and its share carries that
    sample's noise (about +-1.5 pp over 1M tokens of this corpus, depending on the shuffle seed).
    """
    ws = short_and_long(weight_by, exhaustion="stop")
    pipe = Pipeline(ws).tokenize(tokenizer_id="gpt2", parallelism=2).batch(microbatch_size=256, collate=count_collate)
    tokens, docs = np.zeros(2), np.zeros(2)
    with pipe as p:
        for b in p:
            comp = [ws.dataset_index(lin[0]) for lin in b.lineage]
            np.add.at(tokens, comp, b.data["num_tokens"])
            np.add.at(docs, comp, 1)
    return tokens, docs, pipe.token_estimates


@pytest.fixture(scope="module")
def runs() -> dict[str, tuple[np.ndarray, np.ndarray, dict[str, float] | None]]:
    return {mode: whole_run(mode) for mode in ("samples", "tokens")}


@pytest.mark.slow  # the runs fixture: two whole passes over the corpus
def test_calibration_is_close_to_the_realised_mean(runs):
    tokens, docs, estimates = runs["tokens"]
    assert estimates is not None
    realised = tokens / docs  # over (nearly) whole passes of both datasets
    assert docs[0] >= 0.95 * len(english_texts()) and docs[1] >= 0.95 * (len(english_texts()) // 4)
    for i, name in enumerate(("short", "long")):
        assert estimates[name] == pytest.approx(realised[i], rel=0.02)
    assert realised[1] / realised[0] == pytest.approx(4, rel=0.1)


def test_calibration_is_identical_on_every_rank_and_frozen_in_the_checkpoint():
    a, b = short_and_long("tokens"), short_and_long("tokens")
    est_a = Tokenize(tokenizer_id="gpt2", parallelism=2).estimate_tokens(a.datasets)
    est_b = Tokenize(tokenizer_id="gpt2").estimate_tokens(b.datasets)
    assert est_a == est_b  # bit-identical, not just close

    def build() -> Pipeline:
        return Pipeline(short_and_long("tokens")).tokenize(tokenizer_id="gpt2").batch(64, collate=count_collate)

    pipe = build()
    with pipe as p:
        next(iter(p))
        state = p.state_dict()
    assert state["calibration"]["tokens_per_sample"] == est_a
    assert pipe.source.tokens_per_sample is None, "calibration is the pipeline's, never a change to the source"

    frozen = json.loads(json.dumps(state))
    frozen["calibration"]["tokens_per_sample"] = {"short": 10.0, "long": 20.0}
    restored = build()
    restored.load_state_dict(frozen)
    assert restored.calibrate() == {"short": 10.0, "long": 20.0}  # keeps what the checkpoint froze

    bad = json.loads(json.dumps(state))
    bad["calibration"]["tokens_per_sample"] = {"short": -1.0, "long": 20.0}
    untouched = build()
    with pytest.raises(CheckpointError, match="short"):
        untouched.load_state_dict(bad)
    assert untouched.token_estimates is None, "a rejected checkpoint changes nothing"


@pytest.mark.slow
def test_sample_level_is_off_by_the_length_ratio_token_aware_hits_the_target(runs):
    s_tokens, _, _ = runs["samples"]
    t_tokens, t_docs, _ = runs["tokens"]
    assert min(s_tokens.sum(), t_tokens.sum()) >= 1_000_000
    by_samples, by_tokens = s_tokens / s_tokens.sum(), t_tokens / t_tokens.sum()
    means = t_tokens / t_docs
    expected = means[0] / (means[0] + means[1])  # equal sample counts: about 1/5 of the tokens
    print(
        f"\nshort share over {s_tokens.sum():,.0f} / {t_tokens.sum():,.0f} tokens: by samples {by_samples[0]:.4f} "
        f"(predicted {expected:.4f}), by tokens {by_tokens[0]:.4f} (target 0.5)"
    )
    assert by_samples[0] == pytest.approx(expected, abs=0.01)
    assert abs(by_samples[0] - 0.5) > 0.25
    assert abs(by_tokens[0] - 0.5) < 0.01


def _window_rows(
    ws: StaticMixtureWorkSource, mix: bool, lanes: int, k: int, release: str = "most_behind"
) -> list[list[tuple[int, int, int]]]:
    """Per lane: (window, dataset, tokens) of every record in delivery order (documents split at 64)."""
    pipe = Pipeline(ws).tokenize(tokenizer_id="gpt2", parallelism=2, max_length=64, split_long_samples=True)
    if mix:
        pipe = pipe.ensure_mixture(release=release)
    pipe = pipe.batch(microbatch_size=1, collate=count_collate).options(lanes=lanes, flush_every_k_chunks=k)
    out: list[list[tuple[int, int, int]]] = [[] for _ in range(lanes)]
    with pipe as p:
        for b in p:
            sid = b.lineage[0][0]
            window = (split_sample_id(sid)[0] // lanes) // k
            out[b.lane].append((window, ws.dataset_index(sid), int(b.data["num_tokens"][0])))
    return out


def _block_deviation(rows: list[tuple[int, int, int]], block: int = 2048) -> float:
    """Mean |share of dataset 0 - 0.5| over consecutive blocks of about ``block`` tokens."""
    devs, acc = [], np.zeros(2)
    for _, d, n in rows:
        acc[d] += n
        if acc.sum() >= block:
            devs.append(abs(acc[0] / acc.sum() - 0.5))
            acc[:] = 0
    return float(np.mean(devs))


@pytest.mark.slow
@pytest.mark.parametrize("release", ["most_behind", "balanced"])
def test_ensure_mixture_only_reorders_within_windows_and_smooths_the_mix(release):
    # Documents are split into pieces of at most 64 tokens, so a long document arrives as a burst
    # of pieces from one dataset: the reordering spreads such bursts out. (It cannot change the
    # composition of a window, which the source's token-aware schedule sets.)
    ws = short_and_long("tokens", exhaustion="stop", chunk_size=64, n=8000)
    plain = _window_rows(ws, mix=False, lanes=1, k=4)
    mixed = _window_rows(ws, mix=True, lanes=1, k=4, release=release)
    for a, b in zip(plain, mixed):
        assert sorted(a) == sorted(b), "the same records, only in another order"
        windows = [w for w, _, _ in b]
        assert windows == sorted(windows), "a window is drained at its flush sentinel"
        for w in set(windows):
            assert sorted(r for r in a if r[0] == w) == sorted(r for r in b if r[0] == w)
    before, after = _block_deviation(plain[0]), _block_deviation(mixed[0])
    print(f"\nmean |share - target| per 2048-token block: {before:.4f} without, {after:.4f} with ensure_mixture")
    assert after < 0.75 * before


def _mixed_rows(count: int) -> list[tuple[dict[str, Any], list[int]]]:
    """Packed-like rows of 100 tokens that each already carry the 70:30 mixture (70 + 30 tokens)."""
    rows = []
    for i in range(count):
        doc = np.array([0] * 70 + [1] * 30, dtype=np.int32)
        lineage = [sample_id(2 * i, 0, dataset=0), sample_id(2 * i + 1, 0, dataset=1)]
        rows.append(({"input_ids": np.zeros(100, dtype=np.int32), "document_ids": doc}, lineage))
    return rows


def _held_after_each_push(release: str, rows: list[tuple[dict[str, Any], list[int]]]) -> list[int]:
    op = EnsureMixture(unit="tokens", max_buffered=64, max_buffered_tokens=1000, release=release)
    op.setup(SourceInfo(names=("a", "b"), shares=(0.7, 0.3), unit="tokens"))
    acc = op.new_accumulator(0)
    held = []
    for i, (payload, lineage) in enumerate(rows):
        acc.push(Records([payload], [i], [lineage], []))
        held.append(sum(acc.state()["held"]))
    return held


def test_balanced_release_lets_rows_that_carry_the_mixture_go_at_once():
    # Rows that already mix 70:30 are all queued under the majority dataset: the older rule waits
    # for a minority row that never comes, up to its token bound (10 rows here), before each release.
    rows = _mixed_rows(30)
    assert max(_held_after_each_push("balanced", rows)) == 0
    assert max(_held_after_each_push("most_behind", rows)) >= 10


def test_balanced_release_still_waits_for_a_dataset_that_fell_behind_by_more_than_a_record():
    # 10 single-dataset rows of "a", then "b": after about two "a" rows "b" is short by more than
    # one row, so "a" rows wait until "b" rows arrive, and then they alternate.
    def row(i: int, d: int) -> tuple[dict[str, Any], list[int]]:
        return {"input_ids": np.zeros(100, dtype=np.int32), "num_tokens": 100}, [sample_id(i, 0, dataset=d)]

    op = EnsureMixture(unit="tokens", release="balanced")
    op.setup(SourceInfo(names=("a", "b"), shares=(0.5, 0.5), unit="tokens"))
    acc = op.new_accumulator(0)
    order = []
    for i, (payload, lineage) in enumerate([row(i, 0) for i in range(10)] + [row(10 + i, 1) for i in range(10)]):
        for out in acc.push(Records([payload], [i], [lineage], [])):
            order.extend(dataset_of(lin[0]) for lin in out.lineage)
    for out in acc.flush():
        order.extend(dataset_of(lin[0]) for lin in out.lineage)
    assert sorted(order) == [0] * 10 + [1] * 10
    assert order[:6] == [0, 0, 1, 0, 1, 0], order


def test_the_default_rule_is_balanced_and_only_that_rule_is_recorded():
    assert EnsureMixture().config()["release"] == "balanced"
    assert EnsureMixture(release="balanced").config()["release"] == "balanced"
    # zephon-tokenize 0.1 wrote exactly these keys: its checkpoints read as "most_behind"
    assert EnsureMixture(release="most_behind").config() == {
        "unit": "auto",
        "max_buffered": 64,
        "max_buffered_tokens": 32768,
    }
    with pytest.raises(ConfigError, match="release must be"):
        EnsureMixture(release="fifo")  # type: ignore[arg-type]


def _mixture_pipeline(release: str | None) -> Pipeline:
    ws = short_and_long("tokens", exhaustion="repeat", chunk_size=32, n=1200)
    kw = {} if release is None else {"release": release}
    return (
        Pipeline(ws)
        .tokenize(tokenizer_id="gpt2", parallelism=1)
        .pack_sequences(target_length=256)
        .ensure_mixture(**kw)
        .batch(microbatch_size=2)
    )


def test_a_checkpoint_of_the_older_rule_resumes_with_it_when_the_rule_is_left_at_its_default():
    def old(par: int) -> Pipeline:
        return _mixture_pipeline("most_behind")

    def default(par: int) -> Pipeline:
        return _mixture_pipeline(None)

    def explicit(par: int) -> Pipeline:
        return _mixture_pipeline("balanced")

    whole = run_global(old, lanes=2, flush_every=3, steps=8)
    first = run_global(old, lanes=2, flush_every=3, steps=3)
    assert "release" not in json.dumps(first.state["definition"]["operators"])
    rest = run_global(default, lanes=2, world_size=2, flush_every=3, resume=first.state, steps=5)
    assert first.hashes + rest.hashes == whole.hashes
    assert run_global(default, lanes=2, flush_every=3, steps=8).hashes != whole.hashes, "the rules differ here"
    with pytest.raises(CheckpointError, match=r"config\.release"):
        run_global(explicit, lanes=2, flush_every=3, resume=first.state, steps=1)


def test_ensure_mixture_needs_the_source():
    with pytest.raises(Exception, match="setup"):
        EnsureMixture().new_accumulator(0)


def test_two_sources_helper_runs_token_aware():
    ws = english_and_technical(exhaustion="stop")
    assert set(Tokenize(tokenizer_id="gpt2").estimate_tokens(ws.datasets)) == {"english", "technical"}
