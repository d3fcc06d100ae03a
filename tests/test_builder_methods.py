"""Plugin operators are discoverable on the builder: real signatures, docstrings, dir(), clear errors."""

from __future__ import annotations

import inspect

import pytest

from zephon_core import ConfigError, Dataset, Pipeline, StaticMixtureWorkSource


def _pipeline() -> Pipeline:
    return Pipeline(StaticMixtureWorkSource([Dataset.from_records("a", [{"text": "x"}] * 10, 5)]))


def test_registered_operators_appear_in_dir_with_their_signature_and_docstring():
    p = _pipeline()
    assert {"shuffle", "map_transform", "stateful_transform"} <= set(dir(p))
    sig = inspect.signature(p.stateful_transform)
    assert "name" in sig.parameters
    assert inspect.signature(p.shuffle).parameters["buffer_size"]


def test_a_plugin_operator_shows_its_own_parameters():
    pytest.importorskip("zephon_tokenize")
    p = _pipeline()
    assert "tokenize" in dir(p)
    params = inspect.signature(p.tokenize).parameters
    assert {"tokenizer_id", "field", "parallelism", "max_length"} <= set(params)
    assert "tokenizer" in (p.tokenize.__doc__ or "").lower()
    with pytest.raises(ConfigError, match=r"tokenize\(\).*'feild'.*did you mean 'field'"):
        p.tokenize("gpt2", feild="text")


def test_an_unknown_method_says_what_is_installed():
    with pytest.raises(AttributeError, match="no method 'tokenise'"):
        _pipeline().tokenise  # noqa: B018 - the attribute access is the test
