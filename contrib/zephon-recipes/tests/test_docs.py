"""The docs page shows the demo recipes as they ship (so it cannot drift from the files the tests run)."""

from __future__ import annotations

import importlib.resources
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[3] / "docs" / "recipes.md"


@pytest.mark.parametrize("name", ["text.yaml", "vlm.yaml"])
def test_docs_show_the_demo_recipes(name: str) -> None:
    if not DOCS.is_file():
        pytest.skip("the docs are in the repository checkout only")
    recipe = (importlib.resources.files("zephon_recipes") / "examples" / name).read_text()
    assert f"```yaml\n{recipe}```" in DOCS.read_text(), f"docs/recipes.md does not show examples/{name} as it is"
