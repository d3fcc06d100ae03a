"""Two import rules, read from the source, each shown to fail on a deliberate violation.

**The plugin contract.** Plugins (``plugins/*/src``), integrations (``contrib/*/src``) and the plugin
template (``cookiecutter/``, rendered for each kind) import the kernel only through its public plugin
surface: ``zephon_core``, ``zephon_core.plugin_api``, ``zephon_core.hookspecs`` and the
``zephon_core.conformance`` / ``zephon_core.testing`` packages. Readers build on the storage
toolkit, ``zephon_storage`` (plugins/zephon-storage), which is held to the same rule and is itself
used only through its root (the names of its ``__all__``) and its test kit. Any
other ``zephon_core.X`` import, at any depth (inside a function or under ``TYPE_CHECKING`` too), is
reported with its file, line and module. The plugins' own test suites are not shipped and may test
kernel internals, so they are not held to it.

**The kernel's layers.** :data:`LAYERS` orders the kernel's modules from the foundation up; a module's
top-level imports reach only its own layer or a lower one, so a low layer can be imported, reasoned
about and moved without pulling in the builder or the CLI. Names imported from a lazy re-export module
(``from zephon_core import Pipeline``) count as imports of the module that defines them. Where
today's code imports upward at the top level, the edge is listed in :data:`KNOWN_EXCEPTIONS`; an
upward import inside a function or under ``TYPE_CHECKING`` does not run at import time, but is still a
dependency and is listed in :data:`DEFERRED_UPWARD`. Anything not listed fails, and so does a listed
entry the code no longer needs, so both lists only shrink.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.kernel_imports import (
    KERNEL,
    Layers,
    Source,
    kernel_modules,
    layer_of,
    layer_report,
    plugin_sources,
    plugin_violations,
    storage_public_names,
    storage_violations,
)

LAYERS: Layers = (
    ("foundation", ("zephon_core.errors", "zephon_core.hashing")),
    (
        "contracts",
        (
            "zephon_core.hookspecs",
            "zephon_core.ops",
            "zephon_core.ops.contract",
            "zephon_core.work",
            "zephon_core.work.contract",
            "zephon_core.work.ids",
            "zephon_core.work.readers",
        ),
    ),
    (
        "registry",
        (
            "zephon_core.plugins",
            "zephon_core._kernel",
            "zephon_core.defaults",
            "zephon_core.defaults.memory",
            "zephon_core.defaults.operators",
            "zephon_core.defaults.sources",
            "zephon_core.defaults.observers",
        ),
    ),
    ("work", ("zephon_core.ops.*", "zephon_core.work.*")),
    ("defaults", ("zephon_core.defaults.*",)),
    ("checkpoint", ("zephon_core.checkpoint", "zephon_core.checkpoint.*")),
    ("runtime", ("zephon_core.runtime", "zephon_core.runtime.*")),
    (
        "builder",
        (
            "zephon_core.pipeline",
            "zephon_core.builder_methods",
            "zephon_core.options",
            "zephon_core.definition",
            "zephon_core.binding",
            "zephon_core.starting",
            "zephon_core.answers",
            "zephon_core.steering",
            "zephon_core.checkpointing",
        ),
    ),
    ("observers", ("zephon_core.defaults.observers.*",)),
    (
        "surface",
        (
            "zephon_core",
            "zephon_core.plugin_api",
            "zephon_core.cli",
            "zephon_core.cli_*",
            "zephon_core.conformance",
            "zephon_core.conformance.*",
            "zephon_core.testing",
            "zephon_core.testing.*",
            "zephon_core.demo",
            "zephon_core.progress",
            "zephon_core.storage",
            "zephon_core.validation",  # forwards, lazily, to zephon-observe's run-time validation
        ),
    ),
)
"""The kernel's layers, lowest first.

* foundation — the error hierarchy and the stable hashes everything else is built on;
* contracts — what operators, readers and work sources promise each other (``ops.contract``,
  ``work.contract``, ``work.readers``, sample ids) and the plugin hooks;
* registry — the plugin manager, the kernel's own registrations (runners, commands) and the hook
  modules of the default plugins (``zephon_core.defaults`` and its plugin packages, which register
  lazy factory strings only);
* work — what every work source uses (datasets, lanes, chunk sizing, prefetch), and the 0.1.0
  module paths that now only forward: ``work.moved`` resolves them lazily in their new homes (the
  default plugins; scheduled mixtures in zephon-curricula);
* defaults — the default plugins' code: the built-in operators and the static mixture work source
  with its shuffles, exhaustion policies and steering gate, implementing the contracts like any
  plugin's (readers on storage are zephon-storage's and its plugins');
* checkpoint — the checkpoint format: its schema, fingerprint, rank merge and files, and replay (how a
  lane resumes from it, which the runtime's stages use);
* runtime — runners, stages, the engine, and the observers it hands delivered batches to (the
  provenance manifest itself is zephon-observe's);
* builder — ``Pipeline``, its parts (options, source binding, answers, steering, its side of
  checkpoints) and its plugin builder methods;
* observers — the default plugin's observer code (the metrics reporter), which reads what the
  runtime counts and is started by the builder through the registry, never imported by it;
* surface — what is built on a pipeline: the CLI, the conformance suite and test helpers, and the
  lazy re-export modules (``zephon_core``, ``zephon_core.plugin_api``: their own imports are all
  under ``TYPE_CHECKING``; ``validation`` forwards to zephon-observe's run-time validation).
"""

KNOWN_EXCEPTIONS: frozenset[tuple[str, str]] = frozenset()
"""Top-level imports from a module to a higher layer that today's code makes, ``(importer, imported)``.

None today. Add an entry only to record an existing break that is being untangled, never to let a
new one in: the fix is to move the shared piece down a layer, or to invert the dependency (the
lower module takes a callable or a protocol instead of importing the higher one).
"""

DEFERRED_UPWARD: frozenset[tuple[str, str]] = frozenset(
    {
        # Type annotations only: the contracts name the built-in classes their methods accept or return.
        ("zephon_core.ops.contract", "zephon_core.work.dataset"),
        ("zephon_core.work.contract", "zephon_core.work.dataset"),
        ("zephon_core.work.contract", "zephon_core.defaults.sources.exhaustion"),
        ("zephon_core.hookspecs", "zephon_core.plugins"),  # the manager a hook may be handed
        # ... and what an observer is handed: each delivered batch, and the run's options.
        ("zephon_core.hookspecs", "zephon_core.runtime.types"),
        ("zephon_core.hookspecs", "zephon_core.options"),
    }
)
"""Upward imports inside a function or under ``TYPE_CHECKING``, ``(importer, imported)``: they do not
run when the importer is imported, so they are allowed, but each one is a dependency and is named here."""


# -- the plugin contract ---------------------------------------------------------------------------


def test_plugins_import_only_the_plugin_api() -> None:
    sources = plugin_sources()
    assert any("cookiecutter" in s.path for s in sources), "the plugin template was not read"
    found = plugin_violations(sources, kernel_modules())
    assert not found, "\n".join(found)


@pytest.mark.parametrize(
    ("snippet", "line", "module"),
    [
        ("from zephon_core.runtime.stage import Stage\n", 1, "zephon_core.runtime.stage"),
        ("import zephon_core.ops.contract\n", 1, "zephon_core.ops.contract"),
        ("from zephon_core import runtime\n", 1, "zephon_core.runtime"),
        ("from zephon_core.storage import FileReader\n", 1, "zephon_core.storage"),
        (
            "from zephon_core.conformance import harness\nfrom zephon_core.work.readers import Reader\n",
            2,
            "zephon_core.work.readers",
        ),
        ("def build():\n    from zephon_core.pipeline import Pipeline\n", 2, "zephon_core.pipeline"),
        (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from zephon_core.plugins import X\n",
            3,
            "zephon_core.plugins",
        ),
    ],
)
def test_a_plugin_importing_a_kernel_internal_is_reported(snippet: str, line: int, module: str) -> None:
    found = plugin_violations([Source("zephon_fake/plugin.py", snippet)], kernel_modules())
    assert len(found) == 1, found
    assert found[0].startswith(f"zephon_fake/plugin.py:{line}: imports {module}, which is internal"), found


def test_the_allowed_modules_are_not_reported() -> None:
    snippet = (
        "import zephon_core\n"
        "from zephon_core import ConfigError, Pipeline\n"
        "from zephon_core.plugin_api import MapTransform\n"
        "from zephon_core.hookspecs import hookimpl\n"
        "from zephon_core.conformance import OperatorConformance\n"
        "from zephon_core.testing.corpus import documents\n"
        "from zephon_storage import FileReader\n"
        "from . import sibling\n"
    )
    assert plugin_violations([Source("zephon_fake/plugin.py", snippet)], kernel_modules()) == []


@pytest.mark.slow
def test_plugins_use_the_storage_toolkit_through_its_public_surface() -> None:
    found = storage_violations(plugin_sources(), storage_public_names())
    assert not found, "\n".join(found)


@pytest.mark.parametrize(
    ("snippet", "message"),
    [
        (
            "from zephon_storage.integrity import file_checksums\n",
            "imports zephon_storage.integrity, which is internal",
        ),
        ("import zephon_storage.sidecar\n", "imports zephon_storage.sidecar, which is internal"),
        (
            "def f():\n    from zephon_storage.readers import FileReader\n",
            "imports zephon_storage.readers, which is internal",
        ),
        (
            "from zephon_storage import Release\n",
            "imports zephon_storage.Release, which zephon_storage.__all__ does not list",
        ),
    ],
)
def test_a_plugin_importing_a_storage_internal_is_reported(snippet: str, message: str) -> None:
    found = storage_violations([Source("zephon_fake/reader.py", snippet)], storage_public_names())
    assert len(found) == 1 and message in found[0] and found[0].startswith("zephon_fake/reader.py:"), found
    allowed = (
        "from zephon_storage import FileReader, Storage, __version__\n"
        "from zephon_storage.testing.readers import split\n"
        "import zephon_storage.testing.fixtures\n"
    )
    assert storage_violations([Source("zephon_fake/reader.py", allowed)], storage_public_names()) == []
    inside = Source("plugins/zephon-storage/src/zephon_storage/readers.py", "from zephon_storage.integrity import x\n")
    assert storage_violations([inside], storage_public_names()) == []


def test_an_unparsable_plugin_file_is_an_error_naming_it() -> None:
    with pytest.raises(AssertionError, match=r"^zephon_fake/broken\.py:1: cannot parse"):
        plugin_violations([Source("zephon_fake/broken.py", "from zephon_core import (\n")], kernel_modules())


# -- the kernel's layers ---------------------------------------------------------------------------


def test_every_kernel_module_has_a_layer() -> None:
    unplaced = [m for m in kernel_modules() if layer_of(m, LAYERS) is None]
    assert unplaced == [], f"add these modules to LAYERS in {Path(__file__).name}: {unplaced}"


def test_the_kernel_keeps_its_layer_order() -> None:
    report = layer_report(KERNEL, LAYERS, KNOWN_EXCEPTIONS, DEFERRED_UPWARD)
    assert not report.violations, "\n".join(report.violations)
    assert not report.stale, "no longer needed, remove from the lists: " + "; ".join(report.stale)


def _fake_kernel(tmp_path: Path, files: dict[str, str]) -> Path:
    """A package named ``zephon_core`` under ``tmp_path`` holding ``files`` (path -> source)."""
    kernel = tmp_path / "zephon_core"
    for rel, text in {"__init__.py": "", **files}.items():
        (kernel / rel).parent.mkdir(parents=True, exist_ok=True)
        (kernel / rel).write_text(text)
    return kernel


def test_an_upward_top_level_import_is_reported(tmp_path: Path) -> None:
    kernel = _fake_kernel(
        tmp_path,
        {"errors.py": "from zephon_core.pipeline import Pipeline\n", "pipeline.py": "class Pipeline: ...\n"},
    )
    report = layer_report(kernel, LAYERS, frozenset(), frozenset())
    assert report.violations == [
        "zephon_core/errors.py:1: zephon_core.errors (foundation) imports zephon_core.pipeline (builder), a higher layer"
    ]
    # Recorded as a known exception, the same edge passes; recorded but gone, the entry is stale.
    edge = ("zephon_core.errors", "zephon_core.pipeline")
    assert layer_report(kernel, LAYERS, frozenset({edge}), frozenset()).violations == []
    (kernel / "errors.py").write_text("")
    assert layer_report(kernel, LAYERS, frozenset({edge}), frozenset()).stale == [
        "KNOWN_EXCEPTIONS zephon_core.errors -> zephon_core.pipeline"
    ]


def test_a_name_from_a_re_export_module_counts_as_its_defining_module(tmp_path: Path) -> None:
    kernel = _fake_kernel(
        tmp_path,
        {
            "__init__.py": '_EXPORTS = {"Pipeline": "zephon_core.pipeline"}\n__version__ = "0"\n',
            "pipeline.py": "class Pipeline: ...\n",
            "runtime/__init__.py": "",
            "runtime/stage.py": "from zephon_core import Pipeline\nfrom zephon_core import __version__\n",
        },
    )
    assert layer_report(kernel, LAYERS, frozenset(), frozenset()).violations == [
        "zephon_core/runtime/stage.py:1: zephon_core.runtime.stage (runtime) imports zephon_core.pipeline (builder), "
        "a higher layer"
    ]


def test_an_unlisted_deferred_upward_import_is_reported(tmp_path: Path) -> None:
    kernel = _fake_kernel(
        tmp_path,
        {
            "hashing.py": "def h():\n    from zephon_core import cli\n",
            "work/__init__.py": "",
            "work/readers.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from zephon_core.checkpoint import C\n",
            "cli.py": "",
            "checkpoint.py": "class C: ...\n",
        },
    )
    report = layer_report(kernel, LAYERS, frozenset(), frozenset())
    assert report.violations == [
        "zephon_core/hashing.py:2: zephon_core.hashing (foundation) imports zephon_core.cli (surface), a higher layer, "
        "in a deferred import not in DEFERRED_UPWARD",
        "zephon_core/work/readers.py:3: zephon_core.work.readers (contracts) imports zephon_core.checkpoint "
        "(checkpoint), a higher layer, in a typing import not in DEFERRED_UPWARD",
    ]
    listed = frozenset(
        {("zephon_core.hashing", "zephon_core.cli"), ("zephon_core.work.readers", "zephon_core.checkpoint")}
    )
    assert layer_report(kernel, LAYERS, frozenset(), listed).violations == []


def test_a_new_kernel_module_without_a_layer_is_reported(tmp_path: Path) -> None:
    kernel = _fake_kernel(tmp_path, {"newthing.py": "import zephon_core.errors\n", "errors.py": ""})
    assert layer_report(kernel, LAYERS, frozenset(), frozenset()).violations == [
        "zephon_core/newthing.py: zephon_core.newthing is in no layer; add it to LAYERS"
    ]
