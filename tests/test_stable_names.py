"""Functions that moved keep their former names in fingerprints: the stable-name table.

The kernel demo's pipeline functions lived in ``zephon_core.demo`` in 0.1.0 and live in
``zephon_demo.kernel`` now. A fingerprint hashes every function's ``module:qualname``, and a
checkpoint loads only into a pipeline of its fingerprint, so the move alone would make every 0.1.0
checkpoint of that pipeline unloadable. zephon-demo declares the former names with
``zephon_core.plugin_api.stable_name``; these tests show that the stored 0.1.0 checkpoint resumes
with 0.1.0's global batches through the table, and is refused without it.
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.data.checkpoints_0_1_0.builders import CASES
from zephon_core.conformance.harness import run_global
from zephon_core.errors import CheckpointError, ConfigError
from zephon_core.ops import contract
from zephon_core.ops.contract import callable_name, stable_name

DATA = Path(__file__).parent / "data" / "checkpoints_0_1_0"
MOVED = ("to_bytes", "concat_init", "concat_push", "concat_flush", "concat_transform")
CASE = next(c for c in CASES if c.name == "kernel_demo")

pytestmark = pytest.mark.filterwarnings("ignore:MixtureSpec. the weights:UserWarning")


def _stored() -> dict[str, Any]:
    state: dict[str, Any] = json.loads((DATA / "kernel_demo.json").read_text())
    return state


def test_the_moved_functions_keep_their_0_1_0_names() -> None:
    kernel = pytest.importorskip("zephon_demo.kernel")
    for name in MOVED:
        fn = getattr(kernel, name)
        assert fn.__module__ == "zephon_demo.kernel"
        assert callable_name(fn) == f"zephon_core.demo:{name}"
        assert contract.STABLE_NAMES[f"zephon_demo.kernel:{name}"] == f"zephon_core.demo:{name}"


def test_the_0_1_0_checkpoint_resumes_with_the_same_batches_through_the_table() -> None:
    expected = json.loads((DATA / "expected.json").read_text())["cases"]["kernel_demo"]["after_resume"]
    res = run_global(
        CASE.build, lanes=CASE.lanes, world_size=2, runner="threads", flush_every=CASE.flush_every, resume=_stored()
    )
    assert res.hashes == expected


def test_without_the_table_the_0_1_0_checkpoint_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(contract, "STABLE_NAMES", {})
    p = CASE.build(1).options(lanes=CASE.lanes, flush_every_k_chunks=CASE.flush_every)
    with pytest.raises(
        CheckpointError, match=r"'zephon_core\.demo:to_bytes' in checkpoint, 'zephon_demo\.kernel:to_bytes' now"
    ):
        p.load_state_dict(copy.deepcopy(_stored()))
    p.close()


def _f() -> None: ...


def _g() -> None: ...


def test_a_declaration_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(contract, "STABLE_NAMES", {})
    here = f"{__name__}:"
    with pytest.raises(
        ConfigError, match=r"^stable_name\('old_module\.f'\): the former name must be 'module:qualname'$"
    ):
        stable_name("old_module.f")
    assert stable_name("old_module:f")(_f) is _f
    assert stable_name("old_module:f")(_f) is _f  # declared again, the same: fine (a module reloaded)
    assert callable_name(_f) == "old_module:f" and callable_name(_g) == f"{here}_g"
    with pytest.raises(
        ConfigError, match=rf"^stable_name\('old_module:f'\) on {here}_g: {here}_f already has that name$"
    ):
        stable_name("old_module:f")(_g)
    with pytest.raises(
        ConfigError, match=rf"^stable_name\('old_module:h'\) on {here}_f: it is already named 'old_module:f'$"
    ):
        stable_name("old_module:h")(_f)


def test_without_zephon_demo_the_former_module_names_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    import zephon_core.demo as former
    from zephon_core.errors import PluginError

    for module in ("zephon_demo", "zephon_demo.kernel"):
        monkeypatch.setitem(sys.modules, module, None)  # what an environment without it sees
    monkeypatch.delitem(former.__dict__, "build", raising=False)
    with pytest.raises(
        PluginError, match=r"^zephon_core.demo is the kernel demo of zephon-demo now: .*pip install zephon-demo"
    ):
        former.build  # noqa: B018
