"""Plugin discovery, registration rules, and the ``zephon`` command."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

import zephon_core.plugins as plugins_module
from zephon_core import Dataset, Pipeline, PluginError, StaticMixtureWorkSource, hookimpl
from zephon_core.cli import main as cli_main
from zephon_core.defaults.operators.mapping import MapTransform
from zephon_core.hookspecs import DemoRegister, ReaderRegister, Register
from zephon_core.plugins import ZephonPluginManager, default_plugin_manager, entrypoint_plugins


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


class _RunnerPlugin:
    """A plugin object (not a module) with a hook method, as code would register it."""

    def __init__(self, name: str) -> None:
        self.name = name

    @hookimpl
    def zephon_register_runners(self, register: Register) -> None:
        register(name=self.name, factory="zephon_core.runtime.runners:ThreadRunner", description="threads, renamed")


def test_plugin_object_registered_in_code_stays_in_its_manager():
    pm = ZephonPluginManager(load_entrypoints=False, plugins=[_RunnerPlugin("my_threads")])
    assert "my_threads" in pm.registry.names("runner")
    row = next(r for r in pm.listing() if r["name"] == "my_threads")
    assert row["package"].endswith("_RunnerPlugin") and row["version"] == "unknown"
    ds = Dataset.from_records("n", [{"i": i} for i in range(4)], shard_size=4)
    with Pipeline(StaticMixtureWorkSource([ds], chunk_size=4), plugins=pm).batch(4).options(runner="my_threads") as p:
        assert len(list(p)) == 1
    # Nothing is global: a default manager (fresh per call) does not see it, nor does another one.
    assert "my_threads" not in default_plugin_manager().registry.names("runner")
    assert default_plugin_manager() is not default_plugin_manager()
    assert entrypoint_plugins() is entrypoint_plugins()  # only the entry-point scan is cached
    with pytest.raises(PluginError, match="no runner named 'my_threads'"):
        Pipeline(StaticMixtureWorkSource([ds])).batch(4).options(runner="my_threads")


def test_register_takes_keyword_arguments_only():
    @hookimpl
    def zephon_register_operators(register):
        register("positional", factory="x:y")

    with pytest.raises(PluginError, match="fake_plugin: register\\(\\) for a operator takes keyword arguments only"):
        ZephonPluginManager(
            load_entrypoints=False, plugins=[_plugin(zephon_register_operators=zephon_register_operators)]
        )

    @hookimpl
    def zephon_register_demos(register):
        register(name="nofactory")

    with pytest.raises(PluginError, match="register\\(\\) for a demo is missing \\['factory'\\]"):
        ZephonPluginManager(load_entrypoints=False, plugins=[_plugin(zephon_register_demos=zephon_register_demos)])


def test_dataset_from_path_uses_the_manager_it_is_given(tmp_path):
    from zephon_core.work.readers import MemoryReader

    def detect(fs, root, files):
        return bool(files) and all(f.endswith(".fake") for f in files)

    def fake_reader(path, shard_size=2):
        return MemoryReader([{"i": i} for i in range(5)], shard_size)

    @hookimpl
    def zephon_register_readers(register: ReaderRegister) -> None:
        register(name="fakefmt", factory=fake_reader, detect=detect, description="test format")

    (tmp_path / "a.fake").write_text("x")
    pm = ZephonPluginManager(load_entrypoints=False, plugins=[_plugin(zephon_register_readers=zephon_register_readers)])
    ds = Dataset.from_path("f", str(tmp_path), plugins=pm, shard_size=3)
    assert ds.format == "fakefmt" and ds.num_samples == 5 and len(ds.shards) == 2
    with pytest.raises(Exception, match="no installed format recognises"):
        Dataset.from_path("f", str(tmp_path), plugins=ZephonPluginManager(load_entrypoints=False))


# -- entry points, through pluggy, as an installed distribution provides them --------------------


@pytest.fixture
def site_dir(tmp_path, monkeypatch):
    """A directory on sys.path to "install" throwaway distributions into, with a fresh scan cache.

    Setting the cached scan through monkeypatch restores the real one afterwards, so the fake
    distributions cannot leak into other tests.
    """
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(plugins_module, "_scan", None)
    before = set(sys.modules)
    yield site
    for name in set(sys.modules) - before:
        if name.startswith("zephon_fake_"):
            del sys.modules[name]


def _install(site: Path, package: str, version: str, entry_points: dict[str, str], modules: dict[str, str]) -> None:
    info = site / f"{package.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text("[zephon]\n" + "".join(f"{k} = {v}\n" for k, v in entry_points.items()))
    for mod, code in modules.items():
        (site / f"{mod}.py").write_text(code)


_FAKE_PLUGIN = """
from zephon_core.hookspecs import hookimpl

@hookimpl
def zephon_register_operators(register):
    register(name="fake_op", factory="zephon_core.defaults.operators.mapping:MapTransform", description="from a dist")

def _hello(argv, *, plugins):
    print("hello from the fake demo", argv, "fake_op" in plugins.registry.names("operator"))
    return 0

@hookimpl
def zephon_register_demos(register):
    register(name="hello", factory=_hello, description="says hello")
"""


def test_entry_point_plugin_is_credited_to_its_distribution(site_dir, capsys):
    _install(
        site_dir, "zephon-fake-good", "2.5.0", {"fakegood": "zephon_fake_good"}, {"zephon_fake_good": _FAKE_PLUGIN}
    )
    pm = ZephonPluginManager()
    rows = {(r["kind"], r["name"]): r for r in pm.listing()}
    assert rows[("operator", "fake_op")]["package"] == "zephon-fake-good"
    assert rows[("operator", "fake_op")]["version"] == "2.5.0"
    assert rows[("demo", "hello")]["package"] == "zephon-fake-good"
    assert pm.pm.has_plugin("fakegood")  # registered under the entry point's name
    # The CLI builds one manager per invocation; the demo receives it.
    assert cli_main(["demo", "--list"]) == 0
    assert "hello" in capsys.readouterr().out
    assert cli_main(["demo", "--name", "hello", "--quick"]) == 0
    assert "hello from the fake demo ['--quick'] True" in capsys.readouterr().out


def test_broken_entry_point_is_an_error_naming_its_package(site_dir, capsys):
    _install(
        site_dir,
        "zephon-fake-broken",
        "0.3.0",
        {"fakebroken": "zephon_fake_broken"},
        {"zephon_fake_broken": "import zephon_no_such_dependency_zz\n"},
    )
    with pytest.raises(PluginError) as info:
        ZephonPluginManager()
    msg = str(info.value)
    assert "'fakebroken' of package zephon-fake-broken 0.3.0 failed to load" in msg
    assert "zephon_no_such_dependency_zz" in msg and "reinstall or uninstall zephon-fake-broken" in msg
    with pytest.raises(PluginError, match="zephon-fake-broken"):  # not cached: fails again
        entrypoint_plugins()
    assert ZephonPluginManager(load_entrypoints=False).registry.names("runner")  # hermetic still works
    assert cli_main(["plugins"]) == 2
    err = capsys.readouterr().err
    assert "zephon: error: plugin 'fakebroken' of package zephon-fake-broken" in err


def test_misspelled_hook_in_an_installed_plugin_names_its_package(site_dir):
    code = "from zephon_core.hookspecs import hookimpl\n\n@hookimpl\ndef zephon_register_demo(register):\n    pass\n"
    _install(site_dir, "zephon-fake-typo", "1.0", {"faketypo": "zephon_fake_typo"}, {"zephon_fake_typo": code})
    with pytest.raises(PluginError, match="plugin 'zephon-fake-typo' defines 'zephon_register_demo'"):
        ZephonPluginManager()


def test_demo_registered_through_the_hook_is_listed_and_run(capsys):
    seen = {}

    def hello(argv, *, plugins):
        seen["argv"], seen["plugins"] = argv, plugins
        return 0

    class Demos:
        @hookimpl
        def zephon_register_demos(self, register: DemoRegister) -> None:
            register(name="hello", factory=hello, description="says hello")

    pm = ZephonPluginManager(load_entrypoints=False, plugins=[Demos()])
    assert cli_main(["demo", "--list"], plugins=pm) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[0] == "hello" and out[0].endswith("says hello")
    assert len(out) == 1  # the kernel demo comes with zephon-demo, which this manager does not load
    assert cli_main(["plugins", "--kind", "demo"], plugins=pm) == 0
    assert capsys.readouterr().out.splitlines()[1].split()[:2] == ["hello", "demo"]
    assert cli_main(["demo", "--quick"], plugins=pm) == 0  # the only installed demo is the default
    assert seen == {"argv": ["--quick"], "plugins": pm}
    assert cli_main(["demo", "--name", "nope"], plugins=pm) == 2
    assert "no demo 'nope'; installed: hello" in capsys.readouterr().err
    seen.clear()
    assert cli_main(["demo", "hello", "--quick"], plugins=pm) == 0  # the name as a positional argument
    assert seen == {"argv": ["--quick"], "plugins": pm}
    assert cli_main(["demo", "nope"], plugins=pm) == 2
    assert cli_main(["demo", "hello", "--name", "other"], plugins=pm) == 2
    assert "two demos named" in capsys.readouterr().err
    assert cli_main(["demo", "--kernel"], plugins=pm) == 2  # not installed: the error names its package
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no demo named 'kernel' is installed" in err and "pip install zephon-demo" in err


def test_the_kernel_demo_comes_with_zephon_demo_and_gets_the_lanes() -> None:
    reg = default_plugin_manager().registry.get("demo", "kernel")
    assert (reg.package, reg.factory) == ("zephon-demo", "zephon_demo.kernel:main")
    seen = {}

    def kernel(argv, *, plugins):
        seen["argv"] = argv
        return 0

    class Demos:
        @hookimpl
        def zephon_register_demos(self, register: DemoRegister) -> None:
            register(name="kernel", factory=kernel, description="a demo named like zephon-demo's kernel demo")
            register(name="text", factory=kernel, description="and like its text demo")

    pm = ZephonPluginManager(load_entrypoints=False, plugins=[Demos()])
    assert cli_main(["demo", "--kernel", "--quick", "--lanes", "2"], plugins=pm) == 0
    assert seen == {"argv": ["--quick", "--lanes", "2"]}  # --lanes is the kernel demo's option
    assert cli_main(["demo", "--lanes", "2"], plugins=pm) == 0
    assert seen == {"argv": []}


def test_conformance_fixture_is_a_fresh_manager(zephon_plugins):
    assert isinstance(zephon_plugins, ZephonPluginManager)
    assert "map_transform" in zephon_plugins.registry.names("operator")


class TestConformanceFixtureOverride:
    """A plugin under test that is not installed: override ``zephon_plugins``; the suite follows."""

    @pytest.fixture
    def zephon_plugins(self):
        return ZephonPluginManager(load_entrypoints=False, plugins=[_RunnerPlugin("fixture_threads")])

    def test_accessor_sees_the_override(self, request, zephon_plugins):
        from zephon_core.conformance import get_zephon_plugins

        assert get_zephon_plugins(request) is zephon_plugins
        assert "fixture_threads" in zephon_plugins.registry.names("runner")


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


@pytest.mark.slow
def test_cli_demo_passes_its_self_check():
    out = subprocess.run(
        [sys.executable, "-m", "zephon_core.cli", "demo", "--kernel", "--quick"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "ALL GLOBAL BATCH HASHES MATCHED" in out.stdout
    assert "rows/s" in out.stdout
