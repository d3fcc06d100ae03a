"""``zephon check``, ``zephon run`` and ``zephon diff`` on the tiny recipe, and ``Pipeline.from_recipe``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from zephon_core import ConfigError, Pipeline
from zephon_core.cli import main
from zephon_core.plugin_api import ZephonPluginManager


def test_check_prints_the_plan(workdir: Path, plugins: ZephonPluginManager, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "recipes/variant.yaml"], plugins=plugins) == 0
    out = capsys.readouterr().out
    assert "recipes/variant.yaml (over " in out and ": valid" in out
    web = next(line.split() for line in out.splitlines() if line.strip().startswith("web "))
    assert web[:4] == ["web", "jsonl", "3", "60"] and "0.5" in web
    assert "map_transform" in out and "threads (default)  3" in out
    assert "on 4 rank(s): 1 lane(s) per rank" in out


def test_check_fails_with_the_line(workdir: Path, plugins: ZephonPluginManager, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "recipes/tiny.yaml", "--set", "world_sizes=[1, 3]"], plugins=plugins) == 2
    err = capsys.readouterr().err
    want = "zephon: error: recipes/tiny.yaml:20: options.lanes: lanes 4 cannot be split evenly over world size(s) 3"
    assert err.startswith(want), err
    assert main(["check", "recipes/tiny.yaml", "--set", "options.lanes=3"], plugins=plugins) == 2
    assert capsys.readouterr().err.startswith("zephon: error: --set options.lanes: options.lanes: lanes 3")


def test_run_prints_throughput_and_the_realised_mixture(
    workdir: Path, plugins: ZephonPluginManager, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "recipes/tiny.toml", "--steps", "4", "--hashes"], plugins=plugins) == 0
    out = capsys.readouterr().out
    assert out.startswith("ran 4 global step(s) of 4 microbatch(es)")
    assert "rows/s" in out
    mix = dict(part.split()[:2] for part in out.split("realised mixture (samples): ")[1].splitlines()[0].split(", "))
    assert set(mix) == {"web", "code"}
    assert abs(float(mix["web"].rstrip("%")) - 75) < 10, mix
    assert sum(line.strip().startswith("step ") for line in out.splitlines()) == 4


def test_diff_exit_status(workdir: Path, plugins: ZephonPluginManager, capsys: pytest.CaptureFixture[str]) -> None:
    perf = ["diff", "recipes/tiny.yaml", "recipes/tiny.yaml", "--set", "options.runner=inline"]
    assert main(perf, plugins=plugins) == 0
    assert "performance-only" in capsys.readouterr().out
    assert main(["diff", "recipes/tiny.yaml", "recipes/variant.yaml"], plugins=plugins) == 1
    assert "change the data" in capsys.readouterr().out


def test_from_recipe_and_without_the_package(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    p = Pipeline.from_recipe("recipes/tiny.yaml", ["options.lanes=2", "world_sizes=[1, 2]"])
    assert p.run_options.lanes == 2
    p.close()
    monkeypatch.setitem(sys.modules, "zephon_recipes", None)  # as if it were not installed
    with pytest.raises(ConfigError, match="needs zephon-recipes.*pip install zephon-recipes"):
        Pipeline.from_recipe("recipes/tiny.yaml")
