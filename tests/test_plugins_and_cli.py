"""Plugin discovery, registration rules, and the ``zephon`` command."""

from __future__ import annotations

import json
import subprocess
import sys
import types

import pytest

from zephon_core import Dataset, Pipeline, PluginError, StaticMixtureWorkSource, hookimpl
from zephon_core.ops.mapping import MapTransform
from zephon_core.plugins import ZephonPluginManager


def _plugin(**hooks):
    mod = types.ModuleType("fake_plugin")
    for name, fn in hooks.items():
        setattr(mod, name, fn)
    return mod


def _double(payload):
    return {"i": payload["i"] * 2}


class Doubler(MapTransform):
    kind = "doubler"

    def __init__(self, parallelism: int = 1, runner: str | None = None) -> None:
        super().__init__(_double, parallelism=parallelism, runner=runner, name="doubler")


def test_registered_operator_becomes_builder_method():
    @hookimpl
    def zephon_register_operators(register):
        register(name="doubler", factory=Doubler, description="x2")

    pm = ZephonPluginManager(
        load_entrypoints=False, plugins=[_plugin(zephon_register_operators=zephon_register_operators)]
    )
    ds = Dataset.from_records("n", [{"i": i} for i in range(8)], shard_size=8)
    ws = StaticMixtureWorkSource([ds], chunk_size=8, shuffle=False)
    with Pipeline(ws, plugins=pm).doubler(parallelism=2).batch(8) as p:
        (b,) = list(p)
    assert sorted(b.data["i"].tolist()) == [0, 2, 4, 6, 8, 10, 12, 14]
    assert {
        "name": "doubler",
        "kind": "operator",
        "package": "fake_plugin",
        "version": "unknown",
        "description": "x2",
    } in pm.listing()


def test_misspelled_hook_fails_loudly():
    @hookimpl
    def zephon_register_operator(register):  # missing "s"
        pass

    with pytest.raises(PluginError, match="zephon_register_operator"):
        ZephonPluginManager(
            load_entrypoints=False, plugins=[_plugin(zephon_register_operator=zephon_register_operator)]
        )

    def zephon_register_reader(register):  # not even marked: still rejected
        pass

    with pytest.raises(PluginError, match="not a zephon hook"):
        ZephonPluginManager(load_entrypoints=False, plugins=[_plugin(zephon_register_reader=zephon_register_reader)])


def test_duplicate_and_malformed_registrations():
    @hookimpl
    def zephon_register_operators(register):
        register(name="shuffle", factory="x:y")

    with pytest.raises(PluginError, match="'shuffle' is registered twice: by zephon-core and by fake_plugin"):
        ZephonPluginManager(
            load_entrypoints=False, plugins=[_plugin(zephon_register_operators=zephon_register_operators)]
        )

    @hookimpl
    def zephon_register_runners(register):
        register(name="gpu", factory="x:y", detect="nope")

    with pytest.raises(PluginError, match="unknown arguments \\['detect'\\]"):
        ZephonPluginManager(load_entrypoints=False, plugins=[_plugin(zephon_register_runners=zephon_register_runners)])


def test_lazy_factory_that_does_not_exist_names_it():
    @hookimpl
    def zephon_register_operators(register):
        register(name="ghost", factory="no_such_module_zz:Ghost")

    pm = ZephonPluginManager(
        load_entrypoints=False, plugins=[_plugin(zephon_register_operators=zephon_register_operators)]
    )
    ds = Dataset.from_records("n", [{"i": 1}], shard_size=1)
    with pytest.raises(PluginError, match="cannot load 'no_such_module_zz:Ghost'"):
        Pipeline(StaticMixtureWorkSource([ds]), plugins=pm).ghost()


def test_import_is_cheap():
    """Loading every installed plugin's registrations must not import any format or ML library."""
    code = (
        "import sys, zephon_core as z; ds = z.Dataset.from_records('a', [{'i': 1}]);"
        "p = z.Pipeline(z.StaticMixtureWorkSource([ds])).batch(1); p.plugins.listing();"
        "print(json.dumps(sorted(m for m in ('pyarrow','torch','tokenizers','vortex','litdata','streaming') if m in sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", "import json;" + code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


def test_cli_plugins_lists_builtins():
    out = subprocess.run(
        [sys.executable, "-m", "zephon_core.cli", "plugins"], capture_output=True, text=True, check=True
    )
    lines = out.stdout.splitlines()
    assert lines[0].split() == ["NAME", "KIND", "PACKAGE", "VERSION"]
    assert any(line.split()[:3] == ["processes", "runner", "zephon-core"] for line in lines)
    assert any(line.split()[:3] == ["stateful_transform", "operator", "zephon-core"] for line in lines)


def test_cli_index_on_unknown_layout_is_a_clear_error(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    out = subprocess.run(
        [sys.executable, "-m", "zephon_core.cli", "index", str(tmp_path)], capture_output=True, text=True
    )
    assert out.returncode == 2
    assert "no installed format recognises" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.slow
def test_cli_demo_passes_its_self_check():
    out = subprocess.run(
        [sys.executable, "-m", "zephon_core.cli", "demo", "--kernel", "--quick"], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "ALL GLOBAL BATCH HASHES MATCHED" in out.stdout
    assert "rows/s" in out.stdout
