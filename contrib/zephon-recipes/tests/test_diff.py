"""``zephon diff``: which differences change the data and which are performance-only.

Each pair is the tiny recipe against itself with one override. The classification is also checked
against the kernel's own notion of "what determines the data": the pipeline definition that the
checkpoint fingerprint hashes. Performance-only pairs must build pipelines with equal definitions,
data-changing ones with different definitions.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from zephon_recipes import load_document, read_recipe
from zephon_recipes.diff import diff, report

from zephon_core.plugin_api import ZephonPluginManager

PERFORMANCE = [
    "operators.map_transform.parallelism=4",
    "operators.shuffle.runner=inline",
    "options.runner=inline",
    "options.queue_depth=8",
    "fetch.parallelism=3",
    "batch.parallelism=2",
    "datasets.web.options.prefetch=2",
    "world_sizes=[1, 2]",
]
DATA = [
    "mixture.seed=8",
    "operators.shuffle.seed=4",
    "options.lanes=8",
    "batch.microbatch_size=3",
    "mixture.chunk_size=8",
    "operators.shuffle.buffer_size=16",
    "datasets.code.path=data/web",  # a --set path is relative to the working folder
    "operators=[{map_transform: {fn: 'copy:copy'}}]",
]


@pytest.mark.parametrize("override", PERFORMANCE + DATA)
def test_pairs_are_classified_like_the_fingerprint(override: str, workdir: Path, plugins: ZephonPluginManager) -> None:
    path = workdir / "recipes" / "tiny.yaml"
    differences = diff(load_document(path), load_document(path, [override]))
    assert len(differences) == 1, differences
    expected = override in DATA
    assert differences[0].changes_data is expected, str(differences[0])
    a = read_recipe(path, plugins=plugins).build()
    b = read_recipe(path, [override], plugins=plugins).build()
    assert (a.definition() != b.definition()) is expected, override


def test_weights_change_the_data_and_say_from_when(workdir: Path) -> None:
    path = workdir / "recipes" / "tiny.yaml"
    differences = diff(load_document(path), load_document(workdir / "recipes" / "variant.yaml"))
    by_key = {".".join(map(str, d.key)): d for d in differences}
    assert set(by_key) == {"mixture.weights.web", "mixture.weights.code", "operators.0.map_transform.parallelism", "operators.1.shuffle.seed"}
    assert by_key["mixture.weights.web"].changes_data and "global step 0" in by_key["mixture.weights.web"].note
    assert not by_key["operators.0.map_transform.parallelism"].changes_data
    text = report(differences)
    assert text.startswith("3 difference(s) that change the data") and "1 performance-only" in text


def test_a_schedule_changes_the_data_from_the_first_differing_breakpoint(workdir: Path) -> None:
    def write(name: str, second: float) -> Path:
        p = workdir / name
        p.write_text(
            "include: recipes/tiny.yaml\nmixture:\n  weights: null\n  schedule:\n    breakpoints:\n"
            "      - {at: 0, weights: {web: 0.5, code: 0.5}}\n"
            f"      - {{at: 400, weights: {{web: {second}, code: {1 - second}}}}}\n"
        )
        return p

    differences = diff(load_document(write("a.yaml", 0.75)), load_document(write("b.yaml", 0.25)))
    assert len(differences) == 1 and differences[0].changes_data
    assert differences[0].note == "data differs from schedule position 400"


def test_same_recipes(workdir: Path) -> None:
    path = workdir / "recipes" / "tiny.yaml"
    assert diff(load_document(path), load_document(workdir / "recipes" / "tiny.toml")) == []
    assert report([]) == "the recipes are the same"
