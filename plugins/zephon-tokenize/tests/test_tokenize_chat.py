"""``tokenize_chat``: templates from every place a model keeps them, masks, packing, errors, sandbox."""

from __future__ import annotations

import functools
import inspect
import json
import pickle
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from zephon_pack import segment_spans
from zephon_tokenize import TokenizeChat, gpt2_tokenizer
from zephon_tokenize.chat_template import FIXED_NOW, load_template

from zephon_core import ConfigError, Dataset, OperatorError, Pipeline, StaticMixtureWorkSource

SIMPLE = (
    "{% for m in messages %}{{ m['role'] + ': ' }}{% if m['role'] == 'assistant' %}{% generation %}"
    "{{ m['content'] + eos_token }}{% endgeneration %}{% else %}{{ m['content'] + '\\n' }}{% endif %}{% endfor %}"
)
HI = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]


@functools.cache
def gpt2() -> Any:
    return gpt2_tokenizer()  # parsing GPT-2 takes a while: once per module


def decode(ids: Any) -> str:
    return gpt2().decode(np.asarray(ids).tolist(), skip_special_tokens=False)


def one(op: TokenizeChat, messages: Any, **fields: Any) -> dict[str, Any] | None:
    return op.worker()([{"messages": messages, **fields}])[0]


def source(records: list[dict[str, Any]], chunk_size: int = 8) -> StaticMixtureWorkSource:
    return StaticMixtureWorkSource(
        [Dataset.from_records("chats", records, shard_size=20)], chunk_size=chunk_size, seed=1
    )


# -- output ------------------------------------------------------------------------------------------
def test_ids_mask_and_fields():
    out = one(TokenizeChat("gpt2", SIMPLE), HI, source="web", n=3)
    assert out is not None and set(out) == {"input_ids", "num_tokens", "loss_mask", "source", "n"}
    tok = gpt2()
    assert out["input_ids"].dtype == np.int32 and out["loss_mask"].dtype == np.uint8
    assert out["input_ids"].tolist() == tok.encode("user: Hi\nassistant: Hello<|endoftext|>").ids
    assert out["num_tokens"] == len(out["input_ids"]) == len(out["loss_mask"])
    trained = [tok.id_to_token(int(i)) for i, m in zip(out["input_ids"], out["loss_mask"]) if m]
    assert trained == ["ĠHello", "<|endoftext|>"]  # the reply's first token carries the space: it overlaps


def test_several_replies_and_empty_content(chat):
    op = TokenizeChat("gpt2", chat.CHATML)
    conv = chat.HAND_WRITTEN[1] + [{"role": "user", "content": "?"}, {"role": "assistant", "content": ""}]
    out = one(op, conv)
    assert out is not None
    runs = re.findall(r"1+", "".join(map(str, out["loss_mask"].tolist())))
    assert len(runs) == 3  # "4<|im_end|>", "6<|im_end|>", "<|im_end|>"
    assert decode(out["input_ids"][out["loss_mask"] == 1]) == "4<|im_end|>6<|im_end|><|im_end|>"


def test_conversation_without_assistant_is_kept_with_a_zero_mask_and_empty_one_dropped(chat):
    op = TokenizeChat("gpt2", chat.CHATML)
    out = one(op, [{"role": "user", "content": "only a question"}])
    assert out is not None and out["loss_mask"].sum() == 0
    assert one(op, []) is None  # renders to nothing: dropped (a tombstone in a pipeline)


def test_keep_messages_mask_field_and_none_values():
    op = TokenizeChat("gpt2", SIMPLE, mask_field="assistant_mask", keep_messages=True)
    msgs = [*HI, {"role": "assistant", "content": "x", "tool_calls": None}]
    out = one(op, msgs)
    assert out is not None and out["messages"] == msgs and "assistant_mask" in out and "loss_mask" not in out


def test_prefix_mode_trains_on_what_follows_the_generation_prompt(chat):
    # Zephyr prompts with "<|assistant|>\n": the reply and its EOS are trained on, the newline after it is not
    op = TokenizeChat("gpt2", chat.ZEPHYR)
    out = one(op, HI)
    assert out is not None
    assert decode(out["input_ids"][out["loss_mask"] == 1]) == "Hello<|endoftext|>"
    assert decode(out["input_ids"]).endswith("Hello<|endoftext|>\n")


def test_prefix_mode_refuses_a_template_whose_prefixes_render_differently():
    # the system prompt goes into the last user message: a shorter conversation is not a prefix
    t = (
        "{% for m in messages %}{% if m['role'] == 'user' and loop.last %}[SYS] {% endif %}"
        "{{ m['role'] + ': ' + m['content'] + '\n' }}{% endfor %}"
    )
    op = TokenizeChat("gpt2", t)
    with pytest.raises(Exception, match=r"generation %\}") as info:
        one(op, [*HI, {"role": "user", "content": "more"}, {"role": "assistant", "content": "ok"}])
    assert "rendering prefixes" in str(info.value)


def test_prefix_mode_explains_a_template_that_fails_on_a_prefix():
    t = (
        "{% if messages[-1]['role'] != 'assistant' %}{{ raise_exception('must end with a reply') }}{% endif %}"
        "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    )
    with pytest.raises(Exception, match=r"fails on the first 1 messages.*must end with a reply.*generation") as info:
        one(TokenizeChat("gpt2", t), HI)
    assert info.typename == "ItemFailure"


def test_variables_special_tokens_and_fixed_clock():
    t = "{{ bos_token }}|{{ eos_token }}|{{ greeting }}|{{ strftime_now('%Y-%m-%d') }}|{{ messages[0]['content'] }}"
    op = TokenizeChat("gpt2", t, bos_token=50256, eos_token="<|endoftext|>", template_variables={"greeting": "héllo"})
    text = decode(one(op, HI)["input_ids"])
    assert text == f"<|endoftext|>|<|endoftext|>|héllo|{FIXED_NOW:%Y-%m-%d}|Hi"
    with pytest.raises(ConfigError, match="JSON"):
        TokenizeChat("gpt2", t, template_variables={"x": object()})
    with pytest.raises(ConfigError, match="vocabulary"):
        TokenizeChat("gpt2", t, bos_token=10**9)


def test_tojson_does_not_escape_html():
    op = TokenizeChat("gpt2", "{{ messages | tojson }}")
    text = decode(one(op, [{"role": "user", "content": "<b>ü</b>"}])["input_ids"])
    assert text == '[{"role": "user", "content": "<b>ü</b>"}]'


# -- where the template comes from -----------------------------------------------------------------
def test_template_from_config_folder_jinja_and_named(tmp_path, chat, chatml_model):
    assert load_template(str(chatml_model / "tokenizer_config.json")).template == chat.CHATML
    assert load_template(str(chatml_model)).special_tokens["eos_token"] == "<|im_end|>"
    assert load_template(None, str(chatml_model / "tokenizer.json")).template == chat.CHATML
    jinja = tmp_path / "t.jinja"
    jinja.write_text(SIMPLE)
    assert load_template(jinja).template == SIMPLE
    named = tmp_path / "named"
    named.mkdir()
    config = {
        "eos_token": {"content": "</s>", "lstrip": False, "__type": "AddedToken"},
        "bos_token": None,
        "chat_template": [{"name": "default", "template": SIMPLE}, {"name": "tool_use", "template": "{{ 1 }}"}],
    }
    (named / "tokenizer_config.json").write_text(json.dumps(config))
    src = load_template(named)
    assert src.template == SIMPLE and src.special_tokens == {"eos_token": "</s>", "bos_token": None}
    assert load_template(named, name="tool_use").template == "{{ 1 }}"
    with pytest.raises(ConfigError, match="no chat template named 'other'"):
        load_template(named, name="other")
    (named / "chat_template.jinja").write_text("{{ 2 }}")  # transformers >= 4.43 saves it on its own
    assert load_template(named).template == "{{ 2 }}"


def test_model_folder_gives_tokenizer_template_and_specials(chatml_model):
    op = TokenizeChat(str(chatml_model))
    assert op.variables == {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}  # bos is null: undefined
    out = one(op, HI)
    assert 50257 in out["input_ids"].tolist() and 50258 in out["input_ids"].tolist()  # ChatML control tokens


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"chat_template": None}, "pass chat_template="),
        ({"chat_template": "/no/such/file.json"}, "neither a Jinja template"),
        ({"chat_template": "{% for m in messages %}"}, "does not compile"),
        ({"chat_template": "{{ messages }}", "mask_from": "generation"}, "no \\{% generation %\\} block"),
        ({"chat_template": "{{ messages }}", "mask_from": "both"}, "mask_from must be one of"),
        ({"chat_template": "{{ messages }}", "mask_field": "input_ids"}, "would overwrite"),
        ({"chat_template": 3}, "template string or a path"),
    ],
)
def test_configuration_errors(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        TokenizeChat("gpt2", **kwargs)


def test_folder_without_template(tmp_path):
    gpt2().save(str(tmp_path / "tokenizer.json"))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|endoftext|>"}))
    with pytest.raises(ConfigError, match="has no 'chat_template'"):
        TokenizeChat(str(tmp_path))


def test_builder_method_signature_and_config():
    ws = source([{"messages": HI}])
    sig = inspect.signature(Pipeline(ws).tokenize_chat)
    assert {"tokenizer_id", "chat_template", "field", "mask_from", "mask_field", "parallelism"} <= set(sig.parameters)
    a, b = TokenizeChat("gpt2", SIMPLE), TokenizeChat("gpt2", SIMPLE.replace(": ", ":: "))
    assert json.loads(json.dumps(a.config())) == a.config()
    assert a.config()["chat_template_sha256"] != b.config()["chat_template_sha256"]
    assert a.config()["mask_from"] == "generation"


def test_worker_pickles_and_rebuilds_lazily(chat):
    op = TokenizeChat("gpt2", chat.ZEPHYR)
    clone = pickle.loads(pickle.dumps(op.worker()))
    assert clone.template._template is None and clone.encoder._tok is None
    a, b = op.worker()([{"messages": HI}])[0], clone([{"messages": HI}])[0]
    assert a["input_ids"].tolist() == b["input_ids"].tolist() and a["loss_mask"].tolist() == b["loss_mask"].tolist()


# -- sandbox -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "template",
    [
        "{{ messages.__class__.__mro__ }}",
        "{{ cycler.__init__.__globals__ }}",
        "{% set ns = namespace(_hidden=1) %}{{ ns }}",
        "{{ dict.__class__ }}{{ ''.__class__.__subclasses__() }}",
    ],
)
def test_templates_run_in_a_sandbox(template):
    op = TokenizeChat("gpt2", template)
    with pytest.raises(Exception, match="tokenize_chat") as info:
        op.worker()([{"messages": HI}])
    assert "Security" in str(info.value) or "unsafe" in str(info.value) or "undefined" in str(info.value)


# -- errors name the sample --------------------------------------------------------------------------
BAD = [
    ({"text": "no conversation"}, "record has no field 'messages'"),
    ({"messages": "hello"}, "must be a list of"),
    ({"messages": [{"role": "user", "content": "x"}, "oops"]}, "message 1 is a str"),
    ({"messages": [{"content": "x"}]}, "message 0 has no string 'role'"),
    ({"messages": [{"role": "user"}]}, "message 0 \\(user\\) has no 'content'"),
    ({"messages": [{"role": "user", "content": 5}]}, "content must be a string"),
    ({"messages": [{"role": "assistant", "content": "first"}]}, "Conversation roles must alternate"),
]


@pytest.mark.parametrize(("bad", "match"), BAD)
def test_bad_records_fail_naming_the_sample(chat, bad, match):
    records = [
        {"messages": [{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": "a"}]} for i in range(30)
    ]
    records[17] = bad
    ws = StaticMixtureWorkSource([Dataset.from_records("chats", records, shard_size=10)], chunk_size=8, shuffle=False)
    pipe = Pipeline(ws).tokenize_chat(tokenizer_id="gpt2", chat_template=chat.LLAMA2).batch(1).options(runner="threads")
    with pytest.raises(OperatorError, match=match) as info, pipe:
        list(pipe)
    msg = str(info.value)
    assert "tokenize_chat" in msg and "chats[shard 1" in msg and "index 7]" in msg, msg


def test_template_error_on_processes_runner_names_the_sample(chat):
    records = [{"messages": HI} for _ in range(12)]
    records[5] = {"messages": [{"role": "assistant", "content": "first"}]}
    ws = StaticMixtureWorkSource([Dataset.from_records("chats", records, shard_size=6)], chunk_size=4, shuffle=False)
    pipe = (
        Pipeline(ws)
        .tokenize_chat(tokenizer_id="gpt2", chat_template=chat.LLAMA2, parallelism=2)
        .batch(1)
        .options(runner="processes")
    )
    with pytest.raises(OperatorError, match="roles must alternate") as info, pipe:
        list(pipe)
    assert "chats[shard 0" in str(info.value) and "index 5]" in str(info.value)


# -- with pack_sequences and the training view --------------------------------------------------------
@pytest.fixture(scope="module")
def expected(chat) -> dict[tuple[int, ...], list[int]]:
    """Each record's ids -> its mask, straight from the worker (conversations are distinct)."""
    op = TokenizeChat("gpt2", chat.CHATML)
    outs = [o for o in op.worker()(chat.chat_records(120, seed=4)) if o is not None]
    table = {tuple(o["input_ids"].tolist()): o["loss_mask"].tolist() for o in outs}
    assert len(table) == len(outs)
    return table


@pytest.mark.parametrize("algorithm", ["first_fit", "wrap"])
def test_packed_rows_keep_the_mask_and_labels_follow_it(chat, expected, algorithm):
    L = 512
    pipe = (
        Pipeline(source(chat.chat_records(120, seed=4)))
        .tokenize_chat(tokenizer_id="gpt2", chat_template=chat.CHATML, parallelism=2)
        .pack_sequences(target_length=L, algorithm=algorithm, mask_field="loss_mask")
        .batch(microbatch_size=1)  # no partial microbatch left over: every token is delivered
        .options(runner="threads", lanes=1)
    )
    pieces: dict[int, list[tuple[list[int], list[int]]]] = {}
    trained = 0
    with pipe:
        for b in pipe:
            t = b.to_training()
            ids, labels, doc, mask = t["input_ids"], t["labels"], t["document_ids"], t["loss_mask"]
            assert mask.shape == ids.shape and mask.dtype == np.uint8
            assert not mask[doc < 0].any()  # padding is never trained on
            nxt_same = (doc[:, 1:] == doc[:, :-1]) & (doc[:, 1:] >= 0)
            keep = nxt_same & (mask[:, 1:] == 1)
            assert np.array_equal(labels[:, :-1] != -100, keep)
            assert np.array_equal(labels[:, :-1][keep], ids[:, 1:][keep])
            assert (labels[:, -1] == -100).all()
            assert t["num_valid_tokens"].tolist() == keep.sum(axis=1).tolist()
            trained += int(keep.sum())
            for r in range(ids.shape[0]):
                for sid, a, z in segment_spans(doc[r], b.lineage[r]):
                    pieces.setdefault(sid, []).append((ids[r, a:z].tolist(), mask[r, a:z].tolist()))
    assert len(pieces) == len(expected)
    for parts in pieces.values():  # every conversation's pieces put back together: ids and mask as made
        got_ids = [t for p in parts for t in p[0]]
        assert [m for p in parts for m in p[1]] == expected[tuple(got_ids)]
    assert trained > 0


def test_pack_without_mask_field_drops_the_mask(chat):
    pipe = (
        Pipeline(source(chat.chat_records(40, seed=4)))
        .tokenize_chat(tokenizer_id="gpt2", chat_template=chat.CHATML)
        .pack_sequences(target_length=256)
        .batch(microbatch_size=2)
    )
    with pipe:
        t = next(iter(pipe)).to_training()
    assert "loss_mask" not in t  # labels then cover every token: the mask must be asked for


def test_mixing_chats_by_tokens_calibrates_exactly_on_small_datasets(chat):
    short = [{"messages": HI} for _ in range(40)]
    long = [{"messages": c} for c in chat.make_conversations(40, seed=2)]
    ws = StaticMixtureWorkSource(
        [Dataset.from_records("short", short, 20), Dataset.from_records("long", long, 20)],
        weight_by="tokens",
        chunk_size=8,
    )
    op = TokenizeChat("gpt2", chat.CHATML)
    est = op.estimate_tokens(ws.datasets)
    counts = op.worker().count_tokens(long)
    assert est["short"] == one(op, HI)["num_tokens"] and est["long"] == pytest.approx(np.mean(counts))


# -- the docs example ---------------------------------------------------------------------------------
def test_docs_chat_example_runs():
    page = Path(__file__).resolve().parents[3] / "docs" / "text-pipeline.md"
    if not page.is_file():
        pytest.skip("not run from a checkout")
    section = page.read_text().split("## Chat fine-tuning", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert blocks, "the Chat fine-tuning section has an example"
    namespace: dict[str, Any] = {"__name__": "docs_chat_example"}
    exec(compile(blocks[0], str(page), "exec"), namespace)
    assert "batch" in namespace
