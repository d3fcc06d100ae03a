"""Run-time validation, the autotuner, the reader suite and the packing checks live in packages of
their own; the kernel's options and names keep working when those are installed and name the
package when they are not.

``options(validate=...)`` and ``options(autotune=True)`` are zephon-observe's observers (like
``manifest``); ``zephon_core.validation``, ``zephon_core.conformance.ReaderConformance`` and
``zephon_core.testing.packing`` resolve in zephon-observe, zephon-storage and zephon-pack, lazily.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest

from zephon_core import ConfigError, Dataset, Pipeline, PluginError, StaticMixtureWorkSource
from zephon_core import plugins as plugins_module
from zephon_core.plugins import ZephonPluginManager

OPTIONS = [{"validate": "warn"}, {"validate": "strict"}, {"autotune": True}]


def _pipeline(plugins: ZephonPluginManager | None = None) -> Pipeline:
    ds = Dataset.from_records("a", [{"i": i} for i in range(64)], shard_size=16)
    return Pipeline(StaticMixtureWorkSource([ds], chunk_size=16, seed=0), plugins=plugins).batch(4)


@pytest.fixture
def without_observe(monkeypatch: pytest.MonkeyPatch) -> None:
    """The installed plugins as they are, less zephon-observe (as if it were not installed)."""
    scan = plugins_module.entrypoint_plugins()
    assert any(ep.package == "zephon-observe" for ep in scan), "zephon-observe is not installed"
    monkeypatch.setattr(plugins_module, "_scan", tuple(ep for ep in scan if ep.package != "zephon-observe"))


@pytest.mark.parametrize("option", OPTIONS, ids=str)
def test_without_zephon_observe_the_option_fails_at_once_naming_it(
    without_observe: None, option: dict[str, Any]
) -> None:
    with pytest.raises(ConfigError) as info:
        _pipeline().options(**option)
    msg = str(info.value)
    assert "\n" not in msg
    assert msg.startswith(f"option {next(iter(option))}= needs an observer that no installed package registers")
    assert "`pip install zephon-observe`" in msg and "`pip install -e contrib/zephon-observe`" in msg


@pytest.mark.parametrize("option", OPTIONS, ids=str)
def test_a_manager_without_zephon_observe_fails_when_the_pipeline_starts(option: dict[str, Any]) -> None:
    p = _pipeline(ZephonPluginManager(load_entrypoints=False)).options(**option)  # installed: accepted
    with pytest.raises(ConfigError, match=rf"option {next(iter(option))}= needs an observer .*zephon-observe"), p:
        next(iter(p))


def test_the_options_are_zephon_observes_observers() -> None:
    registry = ZephonPluginManager().registry
    assert {n: registry.get("observer", n).package for n in ("validate", "autotune")} == dict.fromkeys(
        ("validate", "autotune"), "zephon-observe"
    )


def test_the_former_names_resolve_in_their_new_homes() -> None:
    from zephon_observe.validation import ValidationWarning, probe_operator
    from zephon_pack.checking import token_documents
    from zephon_storage.testing.conformance import ReaderConformance as home

    import zephon_core.validation
    from zephon_core.conformance import ReaderConformance
    from zephon_core.testing import packing

    assert zephon_core.validation.ValidationWarning is ValidationWarning
    assert zephon_core.validation.probe_operator is probe_operator
    assert ReaderConformance is home
    assert packing.token_documents is token_documents


@pytest.mark.parametrize(
    ("module", "name", "home"),
    [
        ("zephon_core.validation", "probe_pipeline", "zephon_observe.validation"),
        ("zephon_core.conformance", "ReaderConformance", "zephon_storage.testing.conformance"),
        ("zephon_core.testing.packing", "check_packed_rows", "zephon_pack.checking"),
    ],
)
def test_without_the_package_a_former_name_is_an_error_naming_it(
    monkeypatch: pytest.MonkeyPatch, module: str, name: str, home: str
) -> None:
    import importlib

    forwarder = importlib.import_module(module)
    monkeypatch.delitem(vars(forwarder), name, raising=False)  # not kept from an earlier use
    top = home.partition(".")[0]
    for missing in (top, home):
        monkeypatch.setitem(sys.modules, missing, None)  # as if the distribution were not installed
    package = top.replace("_", "-")
    with pytest.raises(PluginError, match=rf"`pip install {package}`") as info:
        getattr(forwarder, name)
    assert "\n" not in str(info.value)
