"""The kernel's built-ins are default plugins: registered through the hooks, blockable unless essential.

Each check here was seen to fail on a deliberate violation: the defaults registered without their
names, the essential check removed, a forwarder pointing at the wrong module, the listing's marks
dropped.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType
from typing import cast

import pytest

from zephon_core import Dataset, Pipeline, PluginError, StaticMixtureWorkSource, hookimpl
from zephon_core.cli import main as cli_main
from zephon_core.defaults import DEFAULT_PLUGINS, ESSENTIAL, KERNEL, provided
from zephon_core.hookspecs import Register
from zephon_core.plugins import ZephonPluginManager, load_object

ROOT = Path(__file__).resolve().parents[1]

BUILTIN_OPERATORS = ["decode_text", "flat_map", "map_transform", "shuffle", "stateful_transform"]

FORMER: dict[str, str] = {
    **{f"zephon_core.ops.{m}": f"zephon_core.defaults.operators.{m}" for m in
       ("mapping", "stateful", "shuffle", "text", "function_operator")},
    "zephon_core.work.source": "zephon_core.defaults.sources.static_mixture",
    **{f"zephon_core.work.{m}": f"zephon_core.defaults.sources.{m}" for m in
       ("shuffle", "mixture", "exhaustion", "steering", "permutation", "feistel")},
}
"""0.1.0 module -> its home among the default plugins."""


def _plugin_of(pm: ZephonPluginManager, hook: str) -> list[str]:
    return [impl.plugin_name for impl in getattr(pm.pm.hook, hook).get_hookimpls()]


def test_the_defaults_are_plugins_registered_through_the_hooks() -> None:
    pm = ZephonPluginManager(load_entrypoints=False)
    names = [name for name, _ in pm.pm.list_name_plugin()]
    assert names == [KERNEL, *DEFAULT_PLUGINS]
    assert _plugin_of(pm, "zephon_register_operators") == ["zephon_core.defaults.operators"]
    assert _plugin_of(pm, "zephon_register_readers") == ["zephon_core.defaults.memory"]
    assert pm.registry.names("operator") == BUILTIN_OPERATORS
    assert {pm.registry.get("operator", n).package for n in BUILTIN_OPERATORS} == {"zephon-core"}
    assert set(ESSENTIAL) < set(DEFAULT_PLUGINS)


def test_blocking_a_default_removes_what_it_provides_and_frees_its_names() -> None:
    pm = ZephonPluginManager(load_entrypoints=False, block=["zephon_core.defaults.operators"])
    assert pm.registry.names("operator") == []
    assert pm.registry.names("reader") == ["memory"] and pm.registry.names("runner")  # the rest is there
    ds = Dataset.from_records("a", [{"x": 1}])
    with pytest.raises(PluginError, match=r"^no operator named 'map_transform' is installed \(installed: none\)"):
        Pipeline(StaticMixtureWorkSource([ds]), plugins=pm).map_transform(lambda p: p)

    class OwnMap:
        @hookimpl
        def zephon_register_operators(self, register: Register) -> None:
            register(name="map_transform", factory="zephon_core.defaults.operators.mapping:MapTransform")

    own = ZephonPluginManager(load_entrypoints=False, block=["zephon_core.defaults.operators"], plugins=[OwnMap()])
    assert own.registry.names("operator") == ["map_transform"]
    assert own.registry.get("operator", "map_transform").package.endswith("OwnMap")


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("zephon_core.defaults.memory", "it is an essential default plugin"),
        ("zephon_core.defaults.sources", "it is an essential default plugin"),
        ("zephon_core._kernel", "it holds the kernel's own runners and commands"),
        ("zephon_core.defaults", "it holds the essential default plugins"),
    ],
)
def test_blocking_an_essential_default_or_the_kernel_is_refused(name: str, why: str) -> None:
    with pytest.raises(PluginError, match=rf"^plugin '{name}' cannot be blocked: {why}"):
        ZephonPluginManager(load_entrypoints=False, block=[name])


def test_block_takes_plugin_names() -> None:
    with pytest.raises(PluginError, match=r"^block= takes plugin names \(strings\), got 3$"):
        ZephonPluginManager(load_entrypoints=False, block=cast("list[str]", [3]))


def test_what_each_default_provides_is_what_the_manager_credits_it_with() -> None:
    pm = ZephonPluginManager(load_entrypoints=False)
    registered = {(r["kind"], r["name"]) for r in pm.listing() if r["kind"] != "runner"}
    from_defaults = {entry for name in DEFAULT_PLUGINS for entry in provided(importlib.import_module(name))}
    assert from_defaults == registered


def test_the_listing_marks_the_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["plugins"], plugins=ZephonPluginManager(load_entrypoints=False)) == 0
    lines = {line.split()[0]: line.split()[4:] for line in capsys.readouterr().out.splitlines()[1:]}
    assert lines["memory"] == ["(essential)"]
    assert all(lines[op] == ["(default)"] for op in BUILTIN_OPERATORS)
    assert lines["threads"] == []  # a kernel part, not a default


@pytest.mark.parametrize("former", sorted(FORMER))
def test_a_0_1_0_module_path_forwards_to_its_default_plugin(former: str) -> None:
    old, new = importlib.import_module(former), importlib.import_module(FORMER[former])
    public = [n for n in vars(new) if not n.startswith("_") and not isinstance(vars(new)[n], ModuleType)]
    assert public and all(getattr(old, n) is getattr(new, n) for n in public)
    with pytest.raises(AttributeError, match=rf"^module '{former}' has no attribute 'nope' \(it moved to {FORMER[former]}\)$"):
        old.nope  # noqa: B018
    path = ROOT / (former.replace(".", "/") + ".py")
    assert len(path.read_text().splitlines()) <= 15, f"{path.name}: a forwarder stays a few lines"


def test_a_0_1_0_factory_string_still_loads() -> None:
    from zephon_core.defaults.operators.mapping import MapTransform
    from zephon_core.defaults.sources.static_mixture import StaticMixtureWorkSource

    assert load_object("zephon_core.ops.mapping:MapTransform") is MapTransform
    assert load_object("zephon_core.work.source:StaticMixtureWorkSource") is StaticMixtureWorkSource
