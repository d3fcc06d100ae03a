"""``tokenize_chat`` against ``transformers``' ``apply_chat_template``: the same ids and masks.

``transformers`` is the reference implementation of chat templates; it is installed for these tests
only (the plugin's ``test`` extra) and used fully offline: its tokenizer is built from the files this
plugin bundles (or from a local model folder the test writes), never from the Hub. For every
template and conversation the test asks ``apply_chat_template(conversation, tokenize=True,
return_dict=True, return_assistant_tokens_mask=True)`` and compares:

* ``input_ids`` with ours, for every template (tagged or not);
* ``assistant_masks`` with our ``loss_mask``: directly for the tagged ChatML template; for the Zephyr,
  Llama 2 and Llama 3 templates, which have no generation tags, ours comes from rendering prefixes and the
  reference is ``transformers``' mask for the tagged twin of the template (same rendered text,
  asserted).
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing below may touch the network
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
transformers = pytest.importorskip("transformers")

from zephon_tokenize import TokenizeChat, gpt2_tokenizer  # noqa: E402

N_GENERATED = 60


def _reference(hf: Any, template: str, conv: list[dict[str, Any]]) -> tuple[list[int], list[int], str]:
    out = hf.apply_chat_template(
        conv, chat_template=template, tokenize=True, return_dict=True, return_assistant_tokens_mask=True
    )
    text = hf.apply_chat_template(conv, chat_template=template, tokenize=False)
    return list(out["input_ids"]), list(out["assistant_masks"]), text


def _ours(op: TokenizeChat, convs: list[list[dict[str, Any]]]) -> list[tuple[list[int], list[int]]]:
    outs = op.worker()([{"messages": c} for c in convs])
    return [(o["input_ids"].tolist(), o["loss_mask"].tolist()) if o is not None else ([], []) for o in outs]


@pytest.fixture(scope="module")
def gpt2_hf() -> Any:
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=gpt2_tokenizer(), bos_token="<|endoftext|>", eos_token="<|endoftext|>"
    )


@pytest.fixture(scope="module")
def conversations(chat) -> list[list[dict[str, Any]]]:
    return chat.HAND_WRITTEN + chat.make_conversations(N_GENERATED, seed=11)


def _compare(ours: list[tuple[list[int], list[int]]], refs: list[tuple[list[int], list[int], str]], what: str) -> int:
    matched = 0
    for i, ((ids, mask), (ref_ids, ref_mask, _)) in enumerate(zip(ours, refs)):
        assert ids == ref_ids, f"{what}: conversation {i}: ids differ from transformers"
        assert mask == ref_mask, f"{what}: conversation {i}: mask differs from transformers"
        matched += 1
    assert matched == len(refs)
    print(f"{what}: {matched} conversations match transformers exactly")
    return matched


def test_chatml_with_generation_tags_from_a_model_folder(chat, chatml_model, conversations):
    """The tokenizer and the template both come from one local model folder, as saved by HF."""
    hf = transformers.PreTrainedTokenizerFast.from_pretrained(str(chatml_model), local_files_only=True)
    assert hf.chat_template == chat.CHATML
    op = TokenizeChat(str(chatml_model))  # template, eos and pad from tokenizer_config.json
    assert op.mask_from == "generation"
    refs = [_reference(hf, chat.CHATML, c) for c in conversations]
    assert _compare(_ours(op, conversations), refs, "chatml") == len(conversations)
    assert any(sum(m) for _, m, _ in refs) and any(50257 in ids for ids, _, _ in refs)  # really exercised


def test_chatml_prefix_fallback_equals_generation_tags(chat, chatml_model, conversations):
    """On a template with tags, finding turns by rendering prefixes gives transformers' mask too."""
    hf = transformers.PreTrainedTokenizerFast.from_pretrained(str(chatml_model), local_files_only=True)
    op = TokenizeChat(str(chatml_model), mask_from="prefix")
    refs = [_reference(hf, chat.CHATML, c) for c in conversations]
    _compare(_ours(op, conversations), refs, "chatml, prefix mode")


@pytest.mark.parametrize("name", ["ZEPHYR", "LLAMA2", "LLAMA3"])
def test_templates_without_tags(chat, gpt2_hf, conversations, name):
    plain, tagged = getattr(chat, name), getattr(chat, f"{name}_TAGGED")
    op = TokenizeChat("gpt2", plain)
    assert op.mask_from == "prefix"
    refs = []
    for c in conversations:
        plain_text = gpt2_hf.apply_chat_template(c, chat_template=plain, tokenize=False)
        plain_ids = list(gpt2_hf.apply_chat_template(c, chat_template=plain, return_dict=True)["input_ids"])
        ref_ids, ref_mask, tagged_text = _reference(gpt2_hf, tagged, c)
        assert tagged_text == plain_text, f"{name}: the tagged twin must render the same text"
        assert ref_ids == plain_ids
        refs.append((ref_ids, ref_mask, plain_text))
    assert _compare(_ours(op, conversations), refs, name.lower()) == len(conversations)
    # and the tagged twin through generation tags agrees as well
    _compare(_ours(TokenizeChat("gpt2", tagged), conversations), refs, f"{name.lower()} tagged")


@pytest.mark.slow
def test_the_reference_needs_no_network_and_no_torch(tmp_path):
    """In a fresh interpreter with sockets refused, the reference runs and never imports torch."""
    script = """
import socket, sys
def refuse(*a, **k):
    raise AssertionError("network access attempted")
socket.socket.connect = refuse
socket.create_connection = refuse
import transformers
from zephon_tokenize import gpt2_tokenizer
hf = transformers.PreTrainedTokenizerFast(tokenizer_object=gpt2_tokenizer(), eos_token="<|endoftext|>")
t = "{% for m in messages %}{% generation %}{{ m['content'] }}{% endgeneration %}{% endfor %}"
out = hf.apply_chat_template([{"role": "assistant", "content": "Hi"}], chat_template=t, return_dict=True,
                             return_assistant_tokens_mask=True)
assert out["assistant_masks"] == [1], out
assert "torch" not in sys.modules, "transformers imported torch"
print("REFERENCE OK")
"""
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0 and "REFERENCE OK" in run.stdout, run.stdout + run.stderr[-3000:]
