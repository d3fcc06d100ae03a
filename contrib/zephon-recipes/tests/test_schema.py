"""The JSON Schema comes from the registrations: every operator, a third-party one included.

The third-party operator is the plugin template's (``cookiecutter/``), rendered as a plugin author
would and registered unchanged: a recipe can use it, validation checks its arguments, and the
schema lists them.
"""

from __future__ import annotations

import importlib
import importlib.resources
import importlib.util
import json
import sys
from pathlib import Path

import pytest
from zephon_recipes import RecipeError, load_document, load_recipe
from zephon_recipes.schema import recipe_schema

from zephon_core.conformance.harness import run_global
from zephon_core.plugin_api import ZephonPluginManager

jsonschema = pytest.importorskip("jsonschema")
ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = importlib.resources.files("zephon_recipes") / "examples"


def _steps(schema: dict) -> dict[str, dict]:
    out = {}
    for item in schema["properties"]["operators"]["items"]["anyOf"]:
        if "required" in item:
            (name,) = item["required"]
            out[name] = item["properties"][name]["anyOf"][0]
    return out


def test_every_registered_operator_is_in_the_schema(plugins: ZephonPluginManager) -> None:
    schema = recipe_schema(plugins)
    steps = _steps(schema)
    assert sorted(steps) == plugins.registry.names("operator")
    shuffle = steps["shuffle"]
    assert shuffle["required"] == ["buffer_size"] and shuffle["properties"]["buffer_size"]["type"] == "integer"
    assert shuffle["additionalProperties"] is False
    pack = steps.get("pack_sequences")
    if pack is not None:
        assert pack["properties"]["algorithm"]["enum"] == ["wrap", "first_fit", "best_fit", "best_fit_wrap"]
    assert "threads" in schema["properties"]["options"]["properties"]["runner"]["anyOf"][0]["enum"]
    assert schema["properties"]["options"]["properties"]["lanes"]["type"] == "integer"


def test_the_recipes_validate_against_the_schema(workdir: Path, plugins: ZephonPluginManager) -> None:
    validator = jsonschema.Draft202012Validator(recipe_schema(plugins))
    docs = [load_document(workdir / "recipes" / n).data for n in ("tiny.yaml", "tiny.toml", "variant.yaml")]
    for name in ("text.yaml", "vlm.yaml"):
        docs.append(load_document(str(EXAMPLES / name)).data)
    for data in docs:
        errors = [e.message for e in validator.iter_errors(data)]
        assert not errors, errors
    broken = load_document(workdir / "broken" / "misspelled_argument.yaml").data
    assert list(validator.iter_errors(broken)), "a misspelled argument must not pass the schema"


@pytest.fixture
def template_plugin(tmp_path: Path) -> object:
    cookiecutter = pytest.importorskip("cookiecutter.main")
    template = ROOT / "cookiecutter"
    if not template.is_dir():
        pytest.skip("the plugin template is in the repository checkout only")
    out = Path(cookiecutter.cookiecutter(str(template), no_input=True, output_dir=str(tmp_path / "t"), extra_context={"kind": "operator"}))
    # imported from its folder as the package it is, without touching sys.path
    package = out / "src" / "zephon_dedupe"
    spec = importlib.util.spec_from_file_location("zephon_dedupe", package / "__init__.py", submodule_search_locations=[str(package)])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["zephon_dedupe"] = module
    try:
        spec.loader.exec_module(module)
        yield importlib.import_module("zephon_dedupe.plugin")
    finally:
        for name in [m for m in sys.modules if m == "zephon_dedupe" or m.startswith("zephon_dedupe.")]:
            del sys.modules[name]


def test_a_template_operator_works_in_a_recipe_unchanged(
    workdir: Path, plugins: ZephonPluginManager, template_plugin: object
) -> None:
    pm = ZephonPluginManager(plugins=[template_plugin])
    assert "dedupe" in _steps(recipe_schema(pm))
    assert _steps(recipe_schema(pm))["dedupe"]["properties"]["field"]["type"] == "string"
    path = workdir / "recipes" / "tiny.yaml"
    overrides = {"operators[1]": {"dedupe": {"field": "text", "parallelism": 2}}}
    hashes = run_global(lambda par: load_recipe(path, overrides, plugins=pm), lanes=4, steps=3).hashes
    assert len(hashes) == 3
    with pytest.raises(RecipeError, match=r"operators\[1\]\.dedupe\.feild: .*did you mean 'field'"):
        load_recipe(path, {"operators[1]": {"dedupe": {"feild": "text"}}}, plugins=pm)


def test_recipe_schema_command(tmp_path: Path, plugins: ZephonPluginManager) -> None:
    from zephon_core.cli import main

    out = tmp_path / "recipe.schema.json"
    assert main(["recipe-schema", "-o", str(out)], plugins=plugins) == 0
    assert json.loads(out.read_text())["title"] == "Zephon recipe"
