"""The kernel demo: registered by this package, importable from its 0.1.0 home, and run by ``zephon demo --kernel``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile

import pytest
from zephon_demo import kernel

import zephon_core.demo as former
from zephon_core.plugin_api import callable_name, default_plugin_manager


def test_registered_as_the_kernel_demo() -> None:
    reg = default_plugin_manager().registry.get("demo", "kernel")
    assert (reg.package, reg.factory) == ("zephon-demo", "zephon_demo.kernel:main")


def test_the_0_1_0_module_forwards_here_and_fingerprints_keep_its_names() -> None:
    for name in ("build", "make_source", "corpus", "ROW", "to_bytes", "concat_push"):
        assert getattr(former, name) is getattr(kernel, name)
    assert callable_name(kernel.concat_flush) == "zephon_core.demo:concat_flush"
    with pytest.raises(AttributeError, match=r"no attribute 'nope' \(see zephon_demo\.kernel\)"):
        former.nope  # noqa: B018


def test_bad_lanes_are_one_line_naming_the_option(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        kernel.main(["--lanes", "0"])
    assert "--lanes must be at least 1, got 0" in capsys.readouterr().err


@pytest.mark.slow
def test_zephon_demo_kernel_quick() -> None:
    # a short TMPDIR of its own: the processes runner's fork server binds a Unix socket there, and
    # pytest's tmp_path under a long TMPDIR exceeds the 107-byte socket path limit
    tmp = tempfile.mkdtemp(prefix="zk-", dir="/tmp")
    env = dict(os.environ, TMPDIR=tmp)
    out = subprocess.run(
        [sys.executable, "-m", "zephon_core.cli", "demo", "--kernel", "--quick"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    shutil.rmtree(tmp, ignore_errors=True)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "ALL GLOBAL BATCH HASHES MATCHED" in out.stdout and "rows/s" in out.stdout
