"""``tokenize_chat`` through the kernel's conformance suite, and end to end with packing and resume.

The suite feeds chat records (system/user/assistant turns, several replies, empty content,
unicode). Its lineage check perturbs every string of a record by default, roles included, which
would make the conversation malformed; ``perturb_payload`` therefore changes only the contents.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest
from zephon_tokenize import TokenizeChat

from zephon_core import Dataset, MixtureSpec, Pipeline, StaticMixtureWorkSource
from zephon_core.conformance import OperatorConformance
from zephon_core.conformance import samples as conformance_samples
from zephon_core.conformance.harness import run_global


def perturb_contents(payload: dict[str, Any]) -> dict[str, Any]:
    """Same conversation shape and roles, other contents (what rule 5's exactness check needs)."""
    out = dict(payload)
    out["messages"] = [{**m, "content": conformance_samples.perturb(m["content"])} for m in payload["messages"]]
    return out


class ChatConformance(OperatorConformance):
    __test__ = False
    template_name = "CHATML"

    @pytest.fixture
    def operator_factory(self, chat):
        return functools.partial(TokenizeChat, "gpt2", getattr(chat, self.template_name))

    @pytest.fixture
    def sample_records(self, chat):
        return chat.chat_records(128, seed=5, max_chars=120)  # the suite replays it hundreds of times

    @pytest.fixture
    def perturb_payload(self):
        return perturb_contents


@pytest.mark.slow
class TestTokenizeChatConformance(ChatConformance):
    """Generation tags (ChatML)."""


@pytest.mark.slow
@pytest.mark.exhaustive  # the tagged template's class covers the operator in every run
class TestTokenizeChatPrefixConformance(ChatConformance):
    """No tags (Llama-2): spans from rendered prefixes, three renders per assistant turn."""

    template_name = "LLAMA2"


# -- end to end: tokenize_chat -> pack_sequences(mask) -> batch, across ranks, runners and resume ------
LANES = 4


def _source(records: list[dict[str, Any]]) -> StaticMixtureWorkSource:
    cut = (2 * len(records)) // 3
    return StaticMixtureWorkSource(
        [
            Dataset.from_records("chat_a", records[:cut], shard_size=30),
            Dataset.from_records("chat_b", records[cut:], shard_size=30),
        ],
        mixture=MixtureSpec({"chat_a": 0.6, "chat_b": 0.4}),
        weight_by="tokens",
        chunk_size=16,
        seed=7,
    )


def _builder(par: int, *, records: list[dict[str, Any]], template: str) -> Pipeline:
    return (
        Pipeline(_source(records))
        .tokenize_chat(tokenizer_id="gpt2", chat_template=template, parallelism=par)
        .pack_sequences(target_length=256, mask_field="loss_mask", parallelism=par)
        .batch(microbatch_size=2)
    )


@pytest.fixture(scope="module")
def builder(chat):
    return functools.partial(_builder, records=chat.chat_records(160, seed=9), template=chat.CHATML)


@pytest.fixture(scope="module")
def baseline(builder):
    res = run_global(builder, lanes=LANES, world_size=1, runner="inline", flush_every=2)
    assert len(res.hashes) >= 12
    return res.hashes


def test_resume_on_another_world_size_is_hash_identical(builder, baseline):
    cut = len(baseline) // 3
    first = run_global(builder, lanes=LANES, world_size=2, runner="threads", parallelism=2, flush_every=2, steps=cut)
    rest = run_global(builder, lanes=LANES, world_size=4, runner="threads", flush_every=2, resume=first.state)
    assert first.hashes + rest.hashes == baseline


@pytest.mark.slow
@pytest.mark.parametrize(
    ("runner", "parallelism", "world_size"),
    [("threads", 3, 1), ("processes", 2, 2), ("inline", 1, 4), ("threads", 2, 4)],
)
def test_same_global_batches_for_every_setting(builder, baseline, runner, parallelism, world_size):
    got = run_global(builder, lanes=LANES, world_size=world_size, runner=runner, parallelism=parallelism, flush_every=2)
    assert got.hashes == baseline


@pytest.mark.slow
@pytest.mark.parametrize(("before", "after"), [(4, 1), (1, 2)])
def test_resume_matrix(builder, baseline, before, after):
    for cut in sorted({1, len(baseline) // 2, len(baseline) - 2}):
        first = run_global(builder, lanes=LANES, world_size=before, runner="threads", flush_every=2, steps=cut)
        rest = run_global(
            builder, lanes=LANES, world_size=after, runner="processes", parallelism=2, flush_every=2, resume=first.state
        )
        assert first.hashes + rest.hashes == baseline, f"cut at step {cut}, {before} -> {after} ranks"
