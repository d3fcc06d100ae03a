"""Scheduled mixtures live in zephon-curricula: the kernel's former names forward there lazily and name
the package when it is missing, and importing the kernel never imports it."""

from __future__ import annotations

import subprocess
import sys

import pytest

import zephon_core
from zephon_core.errors import PluginError


def test_the_root_and_the_former_modules_resolve_in_zephon_curricula() -> None:
    zephon_curricula = pytest.importorskip("zephon_curricula")
    from zephon_core.work.schedule import LINEAR_STEPS, MixtureSchedule, check_weights
    from zephon_core.work.scheduled import DEFAULT_LEAD_WINDOWS, ScheduledMixtureWorkSource

    assert (
        zephon_core.ScheduledMixtureWorkSource
        is ScheduledMixtureWorkSource
        is zephon_curricula.ScheduledMixtureWorkSource
    )
    assert zephon_core.MixtureSchedule is MixtureSchedule is zephon_curricula.MixtureSchedule
    assert check_weights is zephon_curricula.check_weights and LINEAR_STEPS > 0 and DEFAULT_LEAD_WINDOWS >= 1
    import zephon_core.work.scheduled as former

    with pytest.raises(
        AttributeError, match=r"'zephon_core.work.scheduled' has no attribute 'Nope' \(it moved to zephon_curricula"
    ):
        former.Nope  # noqa: B018


@pytest.mark.parametrize(
    ("module", "name"),
    [("zephon_core.work.scheduled", "ScheduledMixtureWorkSource"), ("zephon_core.work.schedule", "MixtureSchedule")],
)
def test_without_zephon_curricula_a_former_name_names_the_package(
    monkeypatch: pytest.MonkeyPatch, module: str, name: str
) -> None:
    former = __import__(module, fromlist=["_"])
    for loaded in [m for m in sys.modules if m.startswith("zephon_curricula.")]:
        monkeypatch.delitem(sys.modules, loaded)
    monkeypatch.setitem(sys.modules, "zephon_curricula", None)  # what an environment without it sees
    monkeypatch.delitem(former.__dict__, name, raising=False)
    monkeypatch.delitem(zephon_core.__dict__, name, raising=False)
    with pytest.raises(PluginError, match=rf"^{module} moved to zephon_curricula: .*pip install zephon-curricula"):
        getattr(zephon_core, name)


def test_importing_the_kernel_and_building_a_pipeline_does_not_import_zephon_curricula() -> None:
    """The kernel alone: its built-ins only (an installed plugin that uses schedules may import them)."""
    script = (
        "import sys\n"
        "from zephon_core import Dataset, MixtureSpec, Pipeline, StaticMixtureWorkSource\n"
        "from zephon_core.plugins import ZephonPluginManager\n"
        "ds = Dataset.from_records('a', [{'x': i} for i in range(64)], 16)\n"
        "source = StaticMixtureWorkSource([ds], mixture=MixtureSpec({'a': 1.0}), chunk_size=8)\n"
        "p = Pipeline(source, plugins=ZephonPluginManager(load_entrypoints=False)).batch(4)\n"
        "with p.options(lanes=2, runner='inline') as run:\n"
        "    next(iter(run))\n"
        "assert 'zephon_curricula' not in sys.modules, 'the kernel imported zephon_curricula'\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
