"""The plugin contract: its version, and the one module of names it covers.

Plugins declare the contract they were built for, the kernel refuses an incompatible one with a
message naming the distribution and both contracts. The names the contract promises are those of
``zephon_core.plugin_api`` (besides the root, the hooks, the storage toolkit and the test helpers):
each is the kernel's own object, importing the module stays light, and the reference page lists
exactly them. Which modules plugins may import is checked in ``tests/test_layers.py``.
"""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

import zephon_core
from zephon_core import plugin_api
from zephon_core.errors import PluginError
from zephon_core.hookspecs import PLUGIN_CONTRACT
from zephon_core.plugins import Kind, ZephonPluginManager, entrypoint_plugins

ROOT = Path(__file__).resolve().parents[1]
FIRST_PARTY = (
    "zephon-hf",
    "zephon-jsonl",
    "zephon-litdata",
    "zephon-mds",
    "zephon-pack",
    "zephon-parquet",
    "zephon-tokenize",
    "zephon-vision",
    "zephon-vortex",
    "zephon-lance",
    "zephon-webdataset",
    "zephon-demo",
    "zephon-vlm-demo",
    "zephon-ray",
    "zephon-observe",
)

PLUGIN_SOURCE = """
from zephon_core.hookspecs import hookimpl

ZEPHON_CONTRACT = {contract!r}


@hookimpl
def zephon_register_operators(register):
    register(name="future_op", factory="builtins:dict")
"""


def _plugin(contract: object, name: str = "my_plugin") -> types.ModuleType:
    mod = types.ModuleType(name)
    exec(PLUGIN_SOURCE.format(contract=contract), mod.__dict__)
    return mod


def test_kernel_declares_its_contract() -> None:
    assert zephon_core.PLUGIN_CONTRACT is PLUGIN_CONTRACT
    assert isinstance(PLUGIN_CONTRACT, tuple) and len(PLUGIN_CONTRACT) == 2
    assert all(isinstance(n, int) for n in PLUGIN_CONTRACT)


@pytest.mark.parametrize("contract", [PLUGIN_CONTRACT, (PLUGIN_CONTRACT[0], 0), None])
def test_compatible_or_undeclared_plugin_loads(contract: tuple[int, int] | None) -> None:
    plugin = _plugin(contract)
    if contract is None:
        del plugin.ZEPHON_CONTRACT
    pm = ZephonPluginManager(load_entrypoints=False, plugins=[plugin])
    assert "future_op" in pm.registry.names("operator")


@pytest.mark.parametrize(
    "contract", [(PLUGIN_CONTRACT[0] + 1, 0), (PLUGIN_CONTRACT[0] - 1, 0), (PLUGIN_CONTRACT[0], PLUGIN_CONTRACT[1] + 1)]
)
def test_incompatible_plugin_is_refused(contract: tuple[int, int]) -> None:
    with pytest.raises(PluginError) as info:
        ZephonPluginManager(load_entrypoints=False, plugins=[_plugin(contract, "my_plugin")])
    msg = str(info.value)
    assert "my_plugin" in msg
    assert f"built for plugin contract {contract[0]}.{contract[1]}" in msg
    assert f"implements contract {PLUGIN_CONTRACT[0]}.{PLUGIN_CONTRACT[1]}" in msg
    assert f"zephon-core {zephon_core.__version__}" in msg


@pytest.mark.parametrize("contract", ["1.0", (1,), (1, 0, 0), (1.0, 0), [1, 0], (True, 0)])
def test_malformed_declaration_is_refused(contract: object) -> None:
    with pytest.raises(PluginError, match=r"my_plugin: ZEPHON_CONTRACT must be a \(major, minor\) tuple"):
        ZephonPluginManager(load_entrypoints=False, plugins=[_plugin(contract)])


def test_installed_distribution_with_another_major_is_refused_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real (if hand-made) installed distribution, found through its entry point on sys.path."""
    major = PLUGIN_CONTRACT[0] + 1
    (tmp_path / "zephon_future_plugin.py").write_text(PLUGIN_SOURCE.format(contract=(major, 0)))
    info = tmp_path / "zephon_future-3.1.4.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: zephon-future\nVersion: 3.1.4\n")
    (info / "entry_points.txt").write_text("[zephon]\nfuture = zephon_future_plugin\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        entrypoint_plugins(rescan=True)
        with pytest.raises(PluginError) as exc:
            ZephonPluginManager()
        assert re.search(
            rf"plugin zephon-future 3\.1\.4 was built for plugin contract {major}\.0, but zephon-core "
            rf"{re.escape(zephon_core.__version__)} implements contract {PLUGIN_CONTRACT[0]}\.{PLUGIN_CONTRACT[1]}",
            str(exc.value),
        ), exc.value
        assert "uninstall zephon-future" in str(exc.value)
    finally:
        monkeypatch.undo()
        entrypoint_plugins(rescan=True)
    ZephonPluginManager()  # the scan without it loads again


def test_first_party_plugins_declare_the_kernels_contract() -> None:
    declared = {ep.package: getattr(ep.plugin, "ZEPHON_CONTRACT", None) for ep in entrypoint_plugins()}
    installed = [p for p in FIRST_PARTY if p in declared]
    assert installed, "no first-party plugin installed"
    assert {p: declared[p] for p in installed} == dict.fromkeys(installed, PLUGIN_CONTRACT)


@pytest.mark.parametrize("package", (*FIRST_PARTY, "zephon-torch", "zephon-testkit"))
def test_first_party_packages_pin_a_compatible_kernel_range(package: str) -> None:
    folder = next(ROOT / w / package for w in ("plugins", "contrib") if (ROOT / w / package).is_dir())
    text = (folder / "pyproject.toml").read_text()
    minor = zephon_core.__version__.split(".")[1]
    assert f'"zephon-core>=0.{minor},<0.{int(minor) + 1}"' in text, package


@pytest.mark.parametrize(
    ("kind", "name", "path"),
    [("operator", "tokenize", "plugins/zephon-tokenize"), ("runner", "ray", "contrib/zephon-ray")],
)
def test_missing_plugin_error_says_how_to_install(kind: Kind, name: str, path: str) -> None:
    bare = ZephonPluginManager(load_entrypoints=False)
    with pytest.raises(PluginError) as info:
        bare.registry.get(kind, name)
    msg = str(info.value)
    package = path.split("/")[1]
    assert f"provided by the distribution {package}" in msg
    assert f"`pip install {package}` (once published)" in msg
    assert f"`pip install -e {path}`" in msg


def test_plugin_api_lists_its_names_sorted_and_each_is_the_kernels_own() -> None:
    assert plugin_api.__all__ == sorted(plugin_api.__all__)
    assert set(plugin_api.__all__) == set(plugin_api._EXPORTS)
    for name, module in plugin_api._EXPORTS.items():
        assert getattr(plugin_api, name) is getattr(importlib.import_module(module), name), name
    assert plugin_api.PLUGIN_CONTRACT is PLUGIN_CONTRACT
    assert "PLUGIN_CONTRACT" in (plugin_api.__doc__ or "")


def test_an_unknown_plugin_api_name_says_what_there_is() -> None:
    with pytest.raises(AttributeError, match=r"'zephon_core.plugin_api' has no attribute 'Stage'; the plugin API is: (\w+, )*CHUNK_BITS, (\w+, )*ConfigError, "):
        plugin_api.Stage  # noqa: B018


HEAVY = ("numpy", "pyarrow", "torch", "tokenizers")
"""Libraries a plugin's ``plugin.py`` must not pull in just by importing the plugin API."""


def _heavy_imports_of(module: str) -> list[str]:
    """Which of :data:`HEAVY` importing ``module`` loads, in a fresh interpreter."""
    code = f"import sys, {module}; print(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return run.stdout.split()


def test_importing_the_plugin_api_imports_no_numerical_library() -> None:
    assert _heavy_imports_of("zephon_core.plugin_api") == []
    # The probe does see one where there is one: the module behind MapTransform imports numpy.
    assert "numpy" in _heavy_imports_of("zephon_core.defaults.operators.mapping")


def test_the_reference_page_lists_exactly_the_plugin_api() -> None:
    page = (ROOT / "docs" / "reference" / "plugin-api.md").read_text()
    section = page.split("## `zephon_core.plugin_api`", 1)[1]
    rows = re.findall(r"^\| `([A-Za-z_][A-Za-z0-9_]*)` \|", section, flags=re.M)
    assert sorted(rows) == plugin_api.__all__, "docs/reference/plugin-api.md and plugin_api.__all__ differ"
