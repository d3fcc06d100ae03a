"""The recipe is part of the run's identity: its checkpoints refuse an edited recipe, naming the
recipe keys that differ, and accept a performance-only edit; the provenance manifest records it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from zephon_recipes import load_recipe, read_recipe
from zephon_recipes.identity import RECIPE_LABEL, data_form

from zephon_core import CheckpointError
from zephon_core.cli import main
from zephon_core.conformance.harness import run_global
from zephon_core.plugin_api import ZephonPluginManager

LANES = 4


def test_the_definition_carries_the_data_form(workdir: Path, plugins: ZephonPluginManager) -> None:
    recipe = read_recipe(workdir / "recipes" / "tiny.yaml", plugins=plugins)
    form = recipe.build().definition()["labels"][RECIPE_LABEL]
    assert form == data_form(recipe.data)
    assert "description" not in form and "world_sizes" not in form and "runner" not in form["options"]
    assert "parallelism" not in form["operators"][0]["map_transform"]
    assert form["operators"][1] == {"shuffle": {"buffer_size": 8, "seed": 3}}


def test_resume_under_an_edited_recipe_names_the_key(workdir: Path, plugins: ZephonPluginManager) -> None:
    path = workdir / "recipes" / "tiny.yaml"
    first = run_global(lambda par: load_recipe(path, plugins=plugins), lanes=LANES, world_size=2, steps=2)
    assert first.state is not None
    edited = load_recipe(path, ["operators.shuffle.seed=4"], plugins=plugins)
    with pytest.raises(
        CheckpointError,
        match=r"different pipeline: .*labels\.recipe\.operators\[1\]\.shuffle\.seed: 3 in checkpoint, 4 now",
    ):
        edited.load_state_dict(first.state)
    edited = load_recipe(path, ["mixture.weights={web: 0.5, code: 0.5}"], plugins=plugins)
    with pytest.raises(CheckpointError, match=r"labels\.recipe\.mixture\.weights\.code: 0\.25 in checkpoint, 0\.5 now"):
        edited.load_state_dict(first.state)


def test_a_performance_only_edit_resumes_with_the_same_batches(workdir: Path, plugins: ZephonPluginManager) -> None:
    path = workdir / "recipes" / "tiny.yaml"
    want = run_global(lambda par: load_recipe(path, plugins=plugins), lanes=LANES, runner="threads", steps=5).hashes
    first = run_global(lambda par: load_recipe(path, plugins=plugins), lanes=LANES, world_size=2, steps=2)
    perf = [
        "operators.map_transform.parallelism=3",
        "options.queue_depth=2",
        "fetch.parallelism=2",
        "world_sizes=[1, 4]",
    ]
    rest = run_global(
        lambda par: load_recipe(path, perf, plugins=plugins),
        lanes=LANES,
        world_size=4,
        runner="inline",
        resume=first.state,
        steps=3,
    )
    assert first.hashes + rest.hashes == want


def test_the_provenance_manifest_records_the_recipe(
    workdir: Path, plugins: ZephonPluginManager, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("zephon_observe")
    assert main(["run", "recipes/tiny.yaml", "--steps", "2", "--manifest", "prov"], plugins=plugins) == 0
    capsys.readouterr()
    written = json.loads((workdir / "prov" / "recipe.json").read_text())
    assert written["recipe"] == read_recipe("recipes/tiny.yaml", plugins=plugins).identity
    assert len(written["fingerprint"]) == 64
