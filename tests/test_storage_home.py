"""The storage toolkit lives in zephon-storage: the kernel names it when it is missing, and the
former ``zephon_core.storage`` forwards to it lazily (readers written against 0.1.0 keep working)."""

from __future__ import annotations

import sys

import pytest

from zephon_core.cli import main
from zephon_core.errors import PluginError
from zephon_core.plugins import ZephonPluginManager


def test_the_former_module_forwards_each_name_to_zephon_storage() -> None:
    zephon_storage = pytest.importorskip("zephon_storage")
    from zephon_core.storage import FileReader, Storage

    assert FileReader is zephon_storage.FileReader and Storage is zephon_storage.Storage
    import zephon_core.storage as former

    with pytest.raises(AttributeError, match=r"'zephon_core.storage' has no attribute 'Nope' \(see zephon_storage"):
        former.Nope  # noqa: B018


def test_without_zephon_storage_the_former_module_names_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    import zephon_core.storage as former

    monkeypatch.setitem(sys.modules, "zephon_storage", None)  # what an environment without it sees
    monkeypatch.delitem(former.__dict__, "IndexedFileReader", raising=False)
    with pytest.raises(PluginError, match=r"zephon_core.storage needs the storage toolkit: .*pip install zephon-storage"):
        former.IndexedFileReader  # noqa: B018


@pytest.mark.parametrize("command", ["show", "inspect", "index"])
def test_a_storage_command_without_zephon_storage_says_what_to_install(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    kernel_only = ZephonPluginManager(load_entrypoints=False)
    assert main([command, "somewhere"], plugins=kernel_only) == 2
    err = capsys.readouterr().err
    assert f"the command {command!r} is not installed" in err and "pip install zephon-storage" in err, err
