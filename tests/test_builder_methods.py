"""Plugin operators are discoverable on the builder: on the class (``help``, ``inspect``, editors) and on
each pipeline from its own plugin manager; typed options; clear errors with the closest name."""

from __future__ import annotations

import dataclasses
import inspect
import pydoc
import subprocess
import sys
import typing
from typing import Any

import pytest

from zephon_core import ConfigError, Dataset, Operator, Pipeline, StaticMixtureWorkSource, hookimpl
from zephon_core.builder_methods import Unchanged
from zephon_core.defaults.operators.mapping import MapTransform
from zephon_core.pipeline import Options
from zephon_core.plugins import ZephonPluginManager


def _pipeline(plugins: ZephonPluginManager | None = None) -> Pipeline:
    ds = Dataset.from_records("a", [{"text": f"x{i}"} for i in range(10)], 5)
    return Pipeline(StaticMixtureWorkSource([ds], shuffle=False), plugins=plugins)


def test_registered_operators_appear_in_dir_with_their_signature_and_docstring() -> None:
    p = _pipeline()
    assert {"shuffle", "map_transform", "stateful_transform"} <= set(dir(p))
    sig = inspect.signature(p.stateful_transform)
    assert "name" in sig.parameters
    assert inspect.signature(p.shuffle).parameters["buffer_size"]


def test_a_plugin_operator_shows_its_own_parameters() -> None:
    pytest.importorskip("zephon_tokenize")
    p = _pipeline()
    assert "tokenize" in dir(p)
    params = inspect.signature(p.tokenize).parameters
    assert {"tokenizer_id", "field", "parallelism", "max_length"} <= set(params)
    assert "tokenizer" in (p.tokenize.__doc__ or "").lower()
    with pytest.raises(ConfigError, match=r"tokenize\(\).*'feild'.*did you mean 'field'"):
        p.tokenize("gpt2", feild="text")


def test_a_plugin_operator_is_an_attribute_of_the_class_for_help_and_inspect() -> None:
    pytest.importorskip("zephon_tokenize")
    sig = inspect.signature(Pipeline.tokenize)
    assert list(sig.parameters)[:3] == ["self", "tokenizer_id", "field"]
    assert {"max_length", "parallelism"} <= set(sig.parameters) and sig.return_annotation == "Pipeline"
    page = pydoc.render_doc(Pipeline.tokenize, renderer=pydoc.plaintext)
    assert "tokenizer_id" in page and "registered by zephon-tokenize" in page
    assert "tokenize" in dir(Pipeline)
    assert "tokenize(self, tokenizer_id" in pydoc.render_doc(Pipeline, renderer=pydoc.plaintext)
    p = Pipeline.tokenize(_pipeline(), "gpt2")  # called through the class: still a builder step
    assert [step.name for step in p.operators] == ["fetch", "tokenize"]


def test_in_a_fresh_interpreter_help_works_and_importing_loads_no_plugin() -> None:
    pytest.importorskip("zephon_tokenize")
    code = (
        "import inspect, sys, zephon_core\n"
        "from zephon_core import Pipeline\n"
        "assert not [m for m in sys.modules if m.startswith(('zephon_tokenize', 'tokenizers'))], 'import loaded a plugin'\n"
        "help(zephon_core.Pipeline.tokenize)\n"
        "print(inspect.signature(Pipeline.tokenize))\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "(self, tokenizer_id" in run.stdout and "max_length" in run.stdout


def _shout(payload: dict[str, Any]) -> dict[str, Any]:
    return {"text": payload["text"].upper()}


def shout(field: str = "text", *, parallelism: int = 1) -> Operator:
    """Upper-case the text (registered as ``tokenize``, to tell it from zephon-tokenize's)."""
    return MapTransform(_shout, parallelism=parallelism, name="shout")


class ShoutPlugin:
    """A plugin configured in code that registers its own ``tokenize`` and nothing else."""

    @hookimpl
    def zephon_register_operators(self, register: Any) -> None:
        register(name="tokenize", factory=shout, description="upper-case the text")


def test_a_pipeline_uses_the_operators_of_its_own_plugin_manager() -> None:
    pytest.importorskip("zephon_tokenize")
    assert "tokenizer_id" in inspect.signature(Pipeline.tokenize).parameters  # the class: the default manager
    pm = ZephonPluginManager(load_entrypoints=False, plugins=[ShoutPlugin()])
    p = _pipeline(pm)
    assert list(inspect.signature(p.tokenize).parameters) == ["field", "parallelism"]
    assert "Upper-case" in (p.tokenize.__doc__ or "")
    batches = list(p.tokenize().batch(5))
    assert sorted(t for b in batches for t in b.data["text"]) == sorted(f"X{i}" for i in range(10))
    assert list(inspect.signature(Pipeline.tokenize).parameters)[1] == "tokenizer_id"  # unchanged by p


def test_an_operator_the_pipelines_manager_lacks_is_missing_there_only() -> None:
    pytest.importorskip("zephon_tokenize")
    bare = _pipeline(ZephonPluginManager(load_entrypoints=False))
    with pytest.raises(AttributeError, match=r"no method 'tokenize'.*pip install zephon-tokenize"):
        bare.tokenize  # noqa: B018 - the attribute access is the test
    assert not hasattr(bare, "tokenize") and "tokenize" not in dir(bare) and "shuffle" in dir(bare)
    assert "tokenize" in dir(_pipeline())


def test_an_unknown_method_says_what_is_installed_and_the_closest_name() -> None:
    with pytest.raises(AttributeError, match=r"no method 'shufle' \(did you mean 'shuffle'\?\).*installed: "):
        _pipeline().shufle  # noqa: B018 - the attribute access is the test
    with pytest.raises(AttributeError, match=r"no method 'optins' \(did you mean 'options'\?\)"):
        _pipeline().optins  # noqa: B018
    with pytest.raises(AttributeError, match=r"'Pipeline' has no attribute 'shufle' \(did you mean 'shuffle'\?\)"):
        Pipeline.shufle  # noqa: B018


def test_the_misspelled_tokenize_gets_a_suggestion() -> None:
    pytest.importorskip("zephon_tokenize")
    with pytest.raises(AttributeError, match=r"no method 'tokenise' \(did you mean 'tokenize'\?\)"):
        _pipeline().tokenise  # noqa: B018 - the attribute access is the test


def test_options_has_one_typed_keyword_per_options_field() -> None:
    """Adding an ``Options`` field without adding it to ``Pipeline.options`` (same type) fails here."""
    params = inspect.signature(Pipeline.options).parameters
    hints = typing.get_type_hints(Pipeline.options)
    field_hints = typing.get_type_hints(Options)
    fields = [f.name for f in dataclasses.fields(Options)]
    assert [n for n in params if n != "self"] == fields
    for name in fields:
        assert params[name].kind is inspect.Parameter.KEYWORD_ONLY, name
        assert repr(params[name].default) == "UNCHANGED", name
        expected = set(typing.get_args(field_hints[name]) or [field_hints[name]]) | {Unchanged}
        assert set(typing.get_args(hints[name])) == expected, name


def test_options_keeps_what_is_not_given_and_names_a_misspelled_option() -> None:
    p = _pipeline().options(lanes=2, timeout_s=5.0)
    p.options(queue_depth=3)
    assert (p.run_options.lanes, p.run_options.timeout_s, p.run_options.queue_depth) == (2, 5.0, 3)
    p.options(timeout_s=None)  # None is a value, not "unchanged"
    assert p.run_options.timeout_s is None and p.run_options.lanes == 2
    with pytest.raises(
        ConfigError, match=r"unknown option\(s\) \['lanse'\] \(did you mean 'lanes'\?\); valid options: "
    ):
        p.options(lanse=4)  # type: ignore[call-arg]
    with pytest.raises(ConfigError, match="keyword arguments only"):
        Pipeline.options(p, 4)  # type: ignore[misc]
