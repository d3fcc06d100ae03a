"""The two hooks through which the kernel stays small: observers by option name, and ``zephon`` commands.

The provenance manifest and ``zephon profile`` / ``zephon manifest`` live in zephon-observe; the kernel
only knows the option and builds its command line from what the installed packages register. Each
check here uses the real installed plugins, with zephon-observe taken out of the entry-point scan to
see the kernel without it (what a user who did not install it gets).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from zephon_core import ConfigError, Dataset, Pipeline, StaticMixtureWorkSource, hookimpl
from zephon_core import plugins as plugins_module
from zephon_core.cli import build_parser
from zephon_core.cli import main as cli_main
from zephon_core.errors import PluginError
from zephon_core.hookspecs import Subparsers
from zephon_core.plugins import ZephonPluginManager, entrypoint_plugins


def _source() -> StaticMixtureWorkSource:
    ds = Dataset.from_records("a", [{"i": i} for i in range(64)], shard_size=16)
    return StaticMixtureWorkSource([ds], chunk_size=16, seed=0)


@pytest.fixture
def without_observe(monkeypatch: pytest.MonkeyPatch) -> None:
    """The installed plugins as they are, less zephon-observe (as if it were not installed)."""
    scan = entrypoint_plugins()
    assert any(ep.package == "zephon-observe" for ep in scan), "zephon-observe is not installed"
    monkeypatch.setattr(plugins_module, "_scan", tuple(ep for ep in scan if ep.package != "zephon-observe"))


OBSERVABILITY = (
    "zephon_observe.manifest",
    "zephon_observe.profile",
    "zephon_observe.export",
    "zephon_core.progress",
    "pyarrow",
    "matplotlib",
    "prometheus_client",
)
"""What a plain pipeline must not import (zephon-observe's own ``plugin`` module, which only registers, it may)."""


def _imported_after(code: str) -> list[str]:
    probe = f"{code}\nimport sys, json\nprint(json.dumps(sorted(m for m in sys.modules if m.startswith({OBSERVABILITY!r}))))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120)
    return list(json.loads(out.stdout.strip().splitlines()[-1]))


def test_a_plain_pipeline_imports_no_observability_module() -> None:
    plain = (
        "import zephon_core.pipeline, zephon_core as z\n"
        "ds = z.Dataset.from_records('a', [{'i': i} for i in range(64)], shard_size=16)\n"
        "p = z.Pipeline(z.StaticMixtureWorkSource([ds], chunk_size=16)).map_transform(dict).batch(4)\n"
        "n = sum(1 for _ in p); p.close(); assert n == 16, n"
    )
    assert _imported_after(plain) == []
    # The probe does see them when they are used: the same run with a manifest.
    observed = plain.replace(".batch(4)", ".batch(4).options(manifest=__import__('tempfile').mkdtemp())")
    assert {"zephon_observe.manifest", "pyarrow"} <= set(_imported_after(observed))


def test_the_manifest_option_is_the_installed_observer() -> None:
    reg = ZephonPluginManager().registry.get("observer", "manifest")
    assert reg.package == "zephon-observe"
    assert reg.extra["check"] == "zephon_observe.manifest:check_option"


def test_without_zephon_observe_the_manifest_option_fails_at_once_naming_it(
    without_observe: None, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError) as info:
        Pipeline(_source()).batch(4).options(manifest=str(tmp_path / "m"))
    msg = str(info.value)
    assert "\n" not in msg
    assert msg.startswith("option manifest= needs an observer that no installed package registers")
    assert "`pip install zephon-observe`" in msg and "`pip install -e contrib/zephon-observe`" in msg
    assert not (tmp_path / "m").exists()


def test_a_manager_without_the_observer_fails_when_the_pipeline_starts(tmp_path: Path) -> None:
    p = Pipeline(_source(), plugins=ZephonPluginManager(load_entrypoints=False)).batch(4)
    p = p.options(manifest=str(tmp_path / "m"))  # zephon-observe is installed: the option is accepted
    with pytest.raises(ConfigError, match=r"option manifest= needs an observer .*zephon-observe"):
        next(iter(p))
    p.close()


def test_an_observer_registered_by_a_plugin_sees_every_batch_and_is_flushed_and_closed(tmp_path: Path) -> None:
    calls: list[str] = []

    class Recorder:
        def record(self, batch: object) -> None:
            calls.append("record")

        def flush(self, wait: bool = False) -> None:
            calls.append(f"flush wait={wait}")

        def close(self) -> None:
            calls.append("close")

    def start(value: object, *, options: object, source: object, lanes_per_rank: int) -> Recorder:
        calls.append(f"start {value} {lanes_per_rank}")
        return Recorder()

    class Observers:
        @hookimpl
        def zephon_register_observers(self, register: object) -> None:
            register(name="manifest", factory=start, description="records calls")  # type: ignore[operator]

    pm = ZephonPluginManager(load_entrypoints=False, plugins=[Observers()])
    p = Pipeline(_source(), plugins=pm).batch(4).options(lanes=2, manifest="anywhere")
    with p:
        batches = list(p)
        p.state_dict()
    assert calls[0] == "start anywhere 2"
    assert calls.count("record") == len(batches) == 16
    assert calls[-3:] == ["flush wait=False", "flush wait=True", "close"]


def test_without_zephon_observe_its_commands_name_the_package(
    without_observe: None, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in (["profile", "pipe.py"], ["manifest", "show", "m"]):
        assert cli_main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert "\n" not in err
        assert err.startswith(f"zephon: error: the command {argv[0]!r} is not installed"), err
        assert "`pip install zephon-observe`" in err and "`pip install -e contrib/zephon-observe`" in err
    with pytest.raises(SystemExit):
        cli_main(["--help"])
    text = capsys.readouterr().out
    assert "    profile " not in text and "    index " in text
    assert "profile, manifest: not installed (pip install zephon-observe)" in text
    with pytest.raises(SystemExit):
        cli_main(["frobnicate"])  # not a known command: argparse's own error
    assert "invalid choice: 'frobnicate'" in capsys.readouterr().err


def test_help_lists_the_commands_and_which_package_brought_them(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli_main(["--help"])
    text = capsys.readouterr().out
    for command in ("plugins", "show", "inspect", "index", "stubs", "demo", "profile", "manifest"):
        assert f"    {command} " in text, command
    assert "profile, manifest: from zephon-observe 0.1.0" in text
    assert cli_main(["plugins", "--kind", "observer"]) == 0
    rows = [line.split()[:3] for line in capsys.readouterr().out.splitlines()[1:]]
    assert [r for r in rows if r[0] in ("autotune", "manifest", "validate")] == [
        [name, "observer", "zephon-observe"] for name in ("autotune", "manifest", "validate")
    ]


def _hello(args: argparse.Namespace, plugins: ZephonPluginManager) -> int:
    print(f"hello {args.name} from {len(plugins.registry.names('runner'))} runners")
    return 7


class _Hello:
    @hookimpl
    def zephon_register_commands(self, subparsers: Subparsers) -> None:
        p = subparsers.add_parser("hello", help="say hello")
        p.add_argument("--name", default="world", help="whom to greet")
        p.set_defaults(fn=_hello)


def test_a_plugin_command_comes_through_the_hook_and_gets_the_invocations_manager(
    capsys: pytest.CaptureFixture[str],
) -> None:
    pm = ZephonPluginManager(load_entrypoints=False, plugins=[_Hello()])
    assert cli_main(["hello", "--name", "you"], plugins=pm) == 7
    assert capsys.readouterr().out == f"hello you from {len(pm.registry.names('runner'))} runners\n"
    help_text = build_parser(pm).format_help()
    assert "    hello " in help_text and "hello: from tests.test_observer_and_command_hooks._Hello" in help_text


def test_a_command_added_twice_is_an_error_naming_both_packages(capsys: pytest.CaptureFixture[str]) -> None:
    class Index:
        @hookimpl
        def zephon_register_commands(self, subparsers: Subparsers) -> None:
            subparsers.add_parser("demo", help="a second demo command")

    pm = ZephonPluginManager(load_entrypoints=False, plugins=[Index()])
    with pytest.raises(PluginError, match=r"zephon command demo is added twice: by zephon-core and by .*Index"):
        build_parser(pm)
    assert cli_main(["plugins"], plugins=pm) == 2
    assert "zephon: error: " in capsys.readouterr().err
