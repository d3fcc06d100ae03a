"""Validation before anything runs: each broken recipe gives the error naming its file, line and key.

Every file under ``broken/`` breaks one rule; the line that is wrong carries a ``# error: TEXT``
comment, and the error must name that file and line, the key, and contain TEXT. No pipeline may be
built for any of them.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from zephon_recipes import RecipeError, load_recipe, read_recipe

from zephon_core import Pipeline
from zephon_core.plugin_api import ZephonPluginManager

HERE = Path(__file__).parent

KEYS = {
    "unknown_operator.yaml": "operators[1].tokenise",
    "misspelled_argument.yaml": "operators[0].shuffle.bufer_size",
    "wrong_type.yaml": "operators[0].shuffle.buffer_size",
    "weights_sum.yaml": "mixture.weights",
    "missing_path.yaml": "datasets.code.path",
    "unknown_format.yaml": "datasets.web.format",
    "lanes_world_size.yaml": "options.lanes",
    "unknown_option.yaml": "options.lanse",
    "user_function.yaml": "operators[0].map_transform.fn",
    "unknown_runner.yaml": "options.runner",
    "misspelled_argument.toml": "operators[1].shuffle.sed",
}


def _expected(path: Path) -> tuple[int, str]:
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        found = re.search(r"# error: (.+)$", line)
        if found:
            return number, found.group(1).strip()
    raise AssertionError(f"{path.name} has no '# error:' marker")


def test_every_broken_recipe_is_listed() -> None:
    assert sorted(p.name for p in (HERE / "broken").iterdir()) == sorted(KEYS)


@pytest.mark.parametrize("name", sorted(KEYS))
def test_broken_recipe_names_file_line_and_key(
    name: str, workdir: Path, plugins: ZephonPluginManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_pipeline(*args: object, **kwargs: object) -> None:
        raise AssertionError("a pipeline was built for an invalid recipe")

    monkeypatch.setattr(Pipeline, "__init__", no_pipeline)
    path = workdir / "broken" / name
    line, text = _expected(path)
    with pytest.raises(RecipeError) as info:
        load_recipe(path, plugins=plugins)
    problems = info.value.problems
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"{path}:{line}: {KEYS[name]}: "), problems[0]
    assert text in problems[0], problems[0]


def test_the_valid_recipes_validate(workdir: Path, plugins: ZephonPluginManager) -> None:
    for name in ("tiny.yaml", "tiny.toml", "variant.yaml"):
        read_recipe(workdir / "recipes" / name, plugins=plugins)


def test_an_operator_of_a_package_not_installed_names_the_package(workdir: Path) -> None:
    """A manager without the entry points lacks zephon-tokenize: the error says what to install."""
    bare = ZephonPluginManager(load_entrypoints=False)
    with pytest.raises(RecipeError) as info:
        read_recipe(workdir / "recipes" / "tiny.yaml", ["operators[1]=tokenize"], plugins=bare)
    assert "zephon-tokenize" in str(info.value) and "pip install" in str(info.value)


def test_several_problems_are_reported_together(workdir: Path, plugins: ZephonPluginManager) -> None:
    overrides = ["options.lanse=4", "mixture.weights.web=0.5", "operators.shuffle.seed=x"]
    with pytest.raises(RecipeError) as info:
        read_recipe(workdir / "recipes" / "tiny.yaml", overrides, plugins=plugins)
    text = str(info.value)
    assert len(info.value.problems) == 3, text
    assert "--set options.lanse: options.lanse:" in text and "--set mixture.weights.web" in text


def test_a_missing_required_argument_and_an_unset_variable(
    workdir: Path, plugins: ZephonPluginManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ZEPHON_NOWHERE", raising=False)
    overrides = {"operators[1]": {"shuffle": {"seed": 1}}, "datasets.web.path": "${ZEPHON_NOWHERE}/web"}
    with pytest.raises(RecipeError) as info:
        read_recipe(workdir / "recipes" / "tiny.yaml", overrides, plugins=plugins)
    text = str(info.value)
    assert "needs the argument 'buffer_size'" in text and "environment variable" in text, text
