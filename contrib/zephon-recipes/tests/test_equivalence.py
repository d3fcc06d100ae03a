"""A recipe gives the same global batches as the Python pipeline it replaces, on 1, 2 and 4 ranks
and across a checkpoint taken on 2 ranks and resumed on 4.

The tiny recipe is checked on every run; the text and VLM demos' recipes (under the package's
``examples/``) against the demos' own ``build()`` functions, on small corpora, in the slow set.
"""

from __future__ import annotations

import importlib.resources
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from zephon_recipes import load_recipe

from zephon_core import Dataset, MixtureSpec, Pipeline, StaticMixtureWorkSource
from zephon_core.conformance.harness import run_global
from zephon_core.plugin_api import ZephonPluginManager

EXAMPLES = importlib.resources.files("zephon_recipes") / "examples"
LANES = 4


def _tiny_python(root: Path, plugins: ZephonPluginManager) -> Pipeline:
    import copy

    web = Dataset.from_path("web", str(root / "data" / "web"), "jsonl", plugins=plugins)
    code = Dataset.from_path("code", str(root / "data" / "code"), plugins=plugins)
    ws = StaticMixtureWorkSource(
        [web, code], MixtureSpec({"web": 0.75, "code": 0.25}), chunk_size=4, seed=7, exhaustion="repeat"
    )
    return (
        Pipeline(ws, plugins=plugins)
        .map_transform(copy.copy, parallelism=2)
        .shuffle(8, seed=3)
        .batch(microbatch_size=2)
        .options(lanes=LANES, runner="threads")
    )


def _same_everywhere(
    python: Callable[[], Pipeline], recipe: Callable[[], Pipeline], steps: int, worlds: tuple[int, ...] = (1, 2, 4)
) -> None:
    """The recipe's hashes on each of ``worlds`` ranks, and from a checkpoint taken on 2 ranks and
    resumed on 4, equal the Python pipeline's on 1 rank."""
    want = run_global(lambda par: python(), lanes=LANES, runner="threads", steps=steps).hashes
    assert len(want) == steps
    for world in worlds:
        got = run_global(lambda par: recipe(), lanes=LANES, world_size=world, runner="threads", steps=steps).hashes
        assert got == want, f"{world} rank(s)"
    cut = max(1, steps // 3)
    first = run_global(lambda par: recipe(), lanes=LANES, world_size=2, runner="threads", steps=cut)
    assert first.state is not None
    rest = run_global(lambda par: recipe(), lanes=LANES, world_size=4, runner="inline", resume=first.state, steps=steps - cut)
    assert first.hashes + rest.hashes == want, "checkpoint on 2 ranks, resumed on 4"


def test_tiny_recipe_equals_its_python_pipeline(workdir: Path, plugins: ZephonPluginManager) -> None:
    path = workdir / "recipes" / "tiny.yaml"
    _same_everywhere(lambda: _tiny_python(workdir, plugins), lambda: load_recipe(path, plugins=plugins), steps=6)


def test_a_python_checkpoint_resumes_under_the_recipe(workdir: Path, plugins: ZephonPluginManager) -> None:
    """Same definition but for the recipe's identity label, which the Python pipeline lacks: the
    recipe's pipeline accepts the Python pipeline's checkpoint."""
    py = _tiny_python(workdir, plugins)
    rec = load_recipe(workdir / "recipes" / "tiny.toml", plugins=plugins)
    assert "labels" not in py.definition()
    assert py.definition() == {k: v for k, v in rec.definition().items() if k != "labels"}
    want = run_global(lambda par: _tiny_python(workdir, plugins), lanes=LANES, runner="threads", steps=5).hashes
    first = run_global(lambda par: _tiny_python(workdir, plugins), lanes=LANES, world_size=2, steps=2)
    assert first.state is not None
    rest = run_global(lambda par: Pipeline.from_recipe(workdir / "recipes" / "tiny.toml", plugins=plugins),
                      lanes=LANES, world_size=4, resume=first.state, steps=3)
    assert first.hashes + rest.hashes == want


def test_a_changed_recipe_changes_the_batches(workdir: Path, plugins: ZephonPluginManager) -> None:
    """The comparison can fail: another shuffle seed gives other batches."""
    path = workdir / "recipes" / "tiny.yaml"
    a = run_global(lambda par: load_recipe(path, plugins=plugins), lanes=LANES, steps=3).hashes
    b = run_global(lambda par: load_recipe(path, ["operators.shuffle.seed=4"], plugins=plugins), lanes=LANES, steps=3).hashes
    assert a != b


@pytest.mark.slow
def test_text_demo_recipe(tmp_path: Path, plugins: ZephonPluginManager) -> None:
    from zephon_demo import text

    root = tmp_path / "corpus"
    ws = lambda: text.make_source(root, plugins)[0]
    ws()
    overrides = [f"datasets.plays.path={root / 'plays-parquet'}", f"datasets.lines.path={root / 'lines-jsonl'}"]
    recipe = EXAMPLES / "text.yaml"
    _same_everywhere(lambda: text.build(ws(), 2, plugins), lambda: load_recipe(str(recipe), overrides, plugins=plugins), steps=3,
                     worlds=(1,))  # 2 and 4 ranks: the checkpointed run


@pytest.mark.slow
def test_vlm_demo_recipe(tmp_path: Path, plugins: ZephonPluginManager) -> None:
    pytest.importorskip("skimage.data")
    from zephon_vlm_demo import corpus, vlm

    path = corpus.write(tmp_path, n=48, shard_size=16, formats=("parquet",)).paths["parquet"]
    size = 56
    overrides: list[Any] = [
        f"datasets.photos.path={path}",
        f"operators.random_resized_crop.size={size}",
        f"operators.patchify.min_pixels={size * size}",
        f"operators.patchify.max_pixels={size * size}",
        "operators.pack_sequences.target_length=128",
    ]
    recipe = EXAMPLES / "vlm.yaml"
    _same_everywhere(
        lambda: vlm.build(vlm.make_source(path, plugins), 2, plugins, image_size=size, seq=128),
        lambda: load_recipe(str(recipe), overrides, plugins=plugins),
        steps=3,
        worlds=(1,),  # 2 and 4 ranks: the checkpointed run
    )
