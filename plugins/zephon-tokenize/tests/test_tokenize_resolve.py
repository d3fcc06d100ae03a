"""Tokenizer resolution is offline: GPT-2 is bundled, paths and objects work, unknown names explain."""

from __future__ import annotations

import socket

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers
from zephon_tokenize import Tokenize, resolve_tokenizer

from zephon_core import ConfigError


@pytest.fixture
def no_network(monkeypatch):
    """Any attempt to open a connection fails the test."""

    def refuse(*args, **kwargs):
        raise AssertionError(f"network access attempted: {args!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def test_gpt2_gives_the_real_gpt2_ids_without_network(no_network):
    r = resolve_tokenizer("gpt2")
    tok = r.tokenizer
    assert tok.encode("Hello world").ids == [15496, 995]
    assert tok.encode("Hello, world!").ids == [15496, 11, 995, 0]
    assert tok.encode(" the").ids == [262]
    assert r.eos_id == 50256 and tok.id_to_token(50256) == "<|endoftext|>"
    assert tok.encode("a<|endoftext|>b").ids == [64, 50256, 65], "the EOS text is one special token"
    assert tok.get_vocab_size() == 50257
    text = "Tabs\tand  spaces, ünïcödé and emoji 🙂 survive."
    assert tok.decode(tok.encode(text).ids) == text


def test_worker_output_for_hello_world(no_network):
    worker = Tokenize(tokenizer_id="gpt2").worker()
    (out,) = worker([{"text": "Hello world", "id": 7}])
    assert out["input_ids"].dtype.name == "int32"
    assert out["input_ids"].tolist() == [15496, 995, 50256]
    assert out["num_tokens"] == 3 and out["id"] == 7 and "text" not in out


def test_unknown_name_is_a_clear_error(no_network):
    with pytest.raises(ConfigError) as info:
        Tokenize(tokenizer_id="no-such-tokenizer")
    msg = str(info.value)
    for needle in ("no-such-tokenizer", "never downloads", "gpt2", "tokenizer.json", "tokenizers.Tokenizer"):
        assert needle in msg
    with pytest.raises(ConfigError, match="unknown tokenizer"):
        resolve_tokenizer(42)


def test_path_folder_and_object_resolve_to_the_same_tokenizer(tmp_path, no_network):
    gpt2 = resolve_tokenizer("gpt2").tokenizer
    gpt2.save(str(tmp_path / "tokenizer.json"))
    ops = [
        Tokenize(tokenizer_id="gpt2"),
        Tokenize(tokenizer_id=str(tmp_path / "tokenizer.json")),
        Tokenize(tokenizer_id=tmp_path),
        Tokenize(tokenizer_id=Tokenizer.from_file(str(tmp_path / "tokenizer.json"))),
    ]
    shas = {op.config()["tokenizer_sha256"] for op in ops}
    assert len(shas) == 1
    for op in ops:
        assert op.worker()([{"text": "Hello world"}])[0]["input_ids"].tolist() == [15496, 995, 50256]


def test_special_tokens_must_exist():
    tok = Tokenizer(models.WordLevel({"a": 0, "b": 1, "[UNK]": 2}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    with pytest.raises(ConfigError, match="no known EOS"):
        Tokenize(tokenizer_id=tok)
    with pytest.raises(ConfigError, match="not a token"):
        Tokenize(tokenizer_id=tok, eos_token="</s>")
    op = Tokenize(tokenizer_id=tok, eos_token="b", add_bos=True, bos_token=0)
    assert op.worker()([{"text": "a b zz"}])[0]["input_ids"].tolist() == [0, 0, 1, 2, 1]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"split_long_samples": True}, "needs max_length"),
        ({"max_length": 0}, "max_length"),
        ({"field": ""}, "field"),
        ({"add_eos": "yes"}, "add_eos"),
        ({"parallelism": 0}, "parallelism"),
    ],
)
def test_bad_configuration(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        Tokenize(tokenizer_id="gpt2", **kwargs)


@pytest.mark.parametrize(
    ("spec", "meant"),
    [("gtp2", "gpt2"), ("GPT2", "gpt2"), ("r50k", "r50k_base"), ("openai-community/gtp2", "openai-community/gpt2")],
)
def test_a_misspelled_builtin_name_gets_the_closest_one(spec, meant, no_network):
    with pytest.raises(
        ConfigError, match=rf"unknown tokenizer '{spec}' \(did you mean '{meant}'\?\)\. .*never downloads"
    ):
        Tokenize(tokenizer_id=spec)


def test_a_misspelled_file_gets_the_closest_file_of_its_folder(tmp_path, no_network):
    resolve_tokenizer("gpt2").tokenizer.save(str(tmp_path / "tokenizer.json"))
    typo = tmp_path / "tokenizer.jsno"
    with pytest.raises(ConfigError, match=r"\(did you mean '.*tokenizer\.json'\?\)") as info:
        resolve_tokenizer(str(typo))
    assert str(tmp_path / "tokenizer.json") in str(info.value) and "\n" not in str(info.value)


def test_a_name_close_to_nothing_gets_no_suggestion(no_network):
    with pytest.raises(ConfigError) as info:
        resolve_tokenizer("no-such-tokenizer")
    assert "did you mean" not in str(info.value)
