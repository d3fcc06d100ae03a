"""The plugin contract version: plugins declare the contract they were built for, the kernel refuses
an incompatible one with a message naming the distribution and both contracts."""

from __future__ import annotations

import re
import types
from pathlib import Path

import pytest

import zephon_core
from zephon_core.errors import PluginError
from zephon_core.hookspecs import PLUGIN_CONTRACT
from zephon_core.plugins import ZephonPluginManager, entrypoint_plugins

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


def test_kernel_declares_its_contract():
    assert zephon_core.PLUGIN_CONTRACT is PLUGIN_CONTRACT
    assert isinstance(PLUGIN_CONTRACT, tuple) and len(PLUGIN_CONTRACT) == 2
    assert all(isinstance(n, int) for n in PLUGIN_CONTRACT)


@pytest.mark.parametrize("contract", [PLUGIN_CONTRACT, (PLUGIN_CONTRACT[0], 0), None])
def test_compatible_or_undeclared_plugin_loads(contract):
    plugin = _plugin(contract)
    if contract is None:
        del plugin.ZEPHON_CONTRACT
    pm = ZephonPluginManager(load_entrypoints=False, plugins=[plugin])
    assert "future_op" in pm.registry.names("operator")


@pytest.mark.parametrize(
    "contract", [(PLUGIN_CONTRACT[0] + 1, 0), (PLUGIN_CONTRACT[0] - 1, 0), (PLUGIN_CONTRACT[0], PLUGIN_CONTRACT[1] + 1)]
)
def test_incompatible_plugin_is_refused(contract):
    with pytest.raises(PluginError) as info:
        ZephonPluginManager(load_entrypoints=False, plugins=[_plugin(contract, "my_plugin")])
    msg = str(info.value)
    assert "my_plugin" in msg
    assert f"built for plugin contract {contract[0]}.{contract[1]}" in msg
    assert f"implements contract {PLUGIN_CONTRACT[0]}.{PLUGIN_CONTRACT[1]}" in msg
    assert f"zephon-core {zephon_core.__version__}" in msg


@pytest.mark.parametrize("contract", ["1.0", (1,), (1, 0, 0), (1.0, 0), [1, 0], (True, 0)])
def test_malformed_declaration_is_refused(contract):
    with pytest.raises(PluginError, match=r"my_plugin: ZEPHON_CONTRACT must be a \(major, minor\) tuple"):
        ZephonPluginManager(load_entrypoints=False, plugins=[_plugin(contract)])


def test_installed_distribution_with_another_major_is_refused_by_name(tmp_path, monkeypatch):
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


def test_first_party_plugins_declare_the_kernels_contract():
    declared = {ep.package: getattr(ep.plugin, "ZEPHON_CONTRACT", None) for ep in entrypoint_plugins()}
    installed = [p for p in FIRST_PARTY if p in declared]
    assert installed, "no first-party plugin installed"
    assert {p: declared[p] for p in installed} == dict.fromkeys(installed, PLUGIN_CONTRACT)


@pytest.mark.parametrize("package", (*FIRST_PARTY, "zephon-torch"))
def test_first_party_packages_pin_a_compatible_kernel_range(package):
    folder = next(ROOT / w / package for w in ("plugins", "contrib") if (ROOT / w / package).is_dir())
    text = (folder / "pyproject.toml").read_text()
    minor = zephon_core.__version__.split(".")[1]
    assert f'"zephon-core>=0.{minor},<0.{int(minor) + 1}"' in text, package


@pytest.mark.parametrize(
    ("kind", "name", "path"),
    [("operator", "tokenize", "plugins/zephon-tokenize"), ("runner", "ray", "contrib/zephon-ray")],
)
def test_missing_plugin_error_says_how_to_install(kind, name, path):
    bare = ZephonPluginManager(load_entrypoints=False)
    with pytest.raises(PluginError) as info:
        bare.registry.get(kind, name)
    msg = str(info.value)
    package = path.split("/")[1]
    assert f"provided by the distribution {package}" in msg
    assert f"`pip install {package}` (once published)" in msg
    assert f"`pip install -e {path}`" in msg
