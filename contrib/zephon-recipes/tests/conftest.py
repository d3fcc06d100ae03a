"""Shared fixtures: a plugin manager with this package's commands, and a tiny two-dataset corpus.

The corpus is written with the JSON Lines format's own layout (one ``.jsonl`` file per shard) into
the test's temporary folder, next to copies of the recipes under ``recipes/`` and ``broken/``, so
the recipes' relative paths (``data/web``) point at it and nothing is written into the checkout.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from zephon_core.plugin_api import ZephonPluginManager, default_plugin_manager

HERE = Path(__file__).parent


def recipes_manager() -> ZephonPluginManager:
    """Every installed plugin, with zephon-recipes' commands whether or not it is installed."""
    import zephon_recipes.plugin

    pm = default_plugin_manager()
    if zephon_recipes.plugin in pm.pm.get_plugins():
        return pm
    return ZephonPluginManager(plugins=[zephon_recipes.plugin])


@pytest.fixture
def plugins() -> ZephonPluginManager:
    return recipes_manager()


def write_corpus(root: Path) -> None:
    """``data/web`` (3 shards of 20 lines) and ``data/code`` (2 shards of 15), deterministic."""
    for name, shards, size in (("web", 3, 20), ("code", 2, 15)):
        folder = root / "data" / name
        folder.mkdir(parents=True, exist_ok=True)
        for s in range(shards):
            with open(folder / f"part-{s}.jsonl", "w", encoding="utf-8") as f:
                for i in range(size):
                    n = s * size + i
                    f.write(json.dumps({"text": f"{name} document {n} " + "word " * (n % 7), "n": n}) + "\n")


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder with the corpus, the recipes and the broken recipes (the working directory)."""
    write_corpus(tmp_path)
    for sub in ("recipes", "broken"):
        shutil.copytree(HERE / sub, tmp_path / sub)
    monkeypatch.chdir(tmp_path)
    return tmp_path
