"""``zephon profile``: a pipeline from a Python file or a JSON/YAML definition, the per-stage table,
the diagnosis, the plot and the trace; nothing but the result when not on a terminal (the progress
display itself is the kernel's, tested in the kernel's tests/test_progress.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

from zephon_core import ConfigError
from zephon_core.cli import main as cli_main

PIPELINE_PY = textwrap.dedent(
    """
    import time
    from zephon_core import Dataset, Pipeline, StaticMixtureWorkSource


    def slow(r):
        time.sleep(0.0005)
        return r


    def quick(r):
        return r


    def build_pipeline(plugins=None):
        ds = Dataset.from_records("d", [{"i": i} for i in range(200_000)], shard_size=1000)
        return (
            Pipeline(StaticMixtureWorkSource([ds], chunk_size=64, seed=0), plugins=plugins)
            .map_transform(quick, name="first")
            .map_transform(slow, name="slow_step")
            .batch(16)
            .options(lanes=2)
        )
    """
)


@pytest.fixture
def pipeline_py(tmp_path: Path) -> Path:
    path = tmp_path / "pipe.py"
    path.write_text(PIPELINE_PY)
    return path


def test_profile_prints_the_table_and_names_the_slow_step(pipeline_py, capsys):
    assert cli_main(["profile", str(pipeline_py), "--seconds", "2"]) == 0
    out = capsys.readouterr()
    lines = out.out.splitlines()
    header = next(line for line in lines if line.startswith("stage"))
    for column in ("in rec/s", "out rec/s", "workers busy", "acc busy", "input wait", "out blocked", "queue fill", "p99 ms"):
        assert column in header
    assert [line.split()[0] for line in lines[lines.index(header) + 1 :][:4]] == ["fetch", "first", "slow_step", "batch"]
    assert any(line.startswith("diagnosis: slow_step: workers busy") for line in lines)
    assert out.err == ""  # not a terminal: no progress


def test_profile_json_plot_and_trace(pipeline_py, tmp_path, capsys):
    png, trace = tmp_path / "p.png", tmp_path / "t.json"
    args = ["profile", str(pipeline_py), "--batches", "150", "--json", "--plot", str(png), "--trace", str(trace)]
    assert cli_main(args) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["batches"] == 150 and result["rows"] == 150 * 16
    assert [s["name"] for s in result["stages"]] == ["fetch", "first", "slow_step", "batch"]
    slow = result["stages"][2]
    assert slow["worker_busy"] > 0.5 and slow["latency_ms"]["p50"] > 0 and 0 <= slow["queue_fill"] <= 1
    assert result["diagnosis"]["stage"] == "slow_step"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
    events = json.loads(trace.read_text())["traceEvents"]
    assert {e["name"] for e in events if e["ph"] == "X"} >= {"fetch", "first", "slow_step", "batch"}


def test_profile_is_quiet_and_parseable_when_not_on_a_terminal(pipeline_py):
    run = subprocess.run(
        [sys.executable, "-m", "zephon_core.cli", "profile", str(pipeline_py), "--batches", "40", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert run.stderr == ""
    assert json.loads(run.stdout)["batches"] == 40


def _jsonl(folder: Path, name: str, n: int) -> Path:
    d = folder / name
    d.mkdir()
    with open(d / "part-0.jsonl", "w") as f:
        for i in range(n):
            f.write(json.dumps({"i": i, "text": f"{name} {i}"}) + "\n")
    return d


DEFINITION = {
    "source": {
        "datasets": [
            {"name": "web", "path": "web", "format": "jsonl"},
            {"name": "code", "path": "code", "format": "jsonl"},
        ],
        "mixture": {"web": 3, "code": 1},
        "chunk_size": 32,
        "seed": 1,
    },
    "fetch": {"parallelism": 2},
    "operators": [
        {"operator": "map_transform", "kwargs": {"fn": {"import": "tests.helpers:quick"}, "name": "clean"}},
        {"operator": "shuffle", "args": [64]},
    ],
    "batch": {"microbatch_size": 8},
    "options": {"lanes": 2},
}


def test_profile_a_json_definition(tmp_path, capsys):
    _jsonl(tmp_path, "web", 3000)
    _jsonl(tmp_path, "code", 1000)
    path = tmp_path / "pipeline.json"
    path.write_text(json.dumps(DEFINITION))
    assert cli_main(["profile", str(path), "--batches", "30", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert [s["name"] for s in result["stages"]] == ["fetch", "clean", "shuffle", "batch"]
    assert result["stages"][0]["parallelism"] == 2 and result["batches"] == 30


def test_profile_a_yaml_definition(tmp_path, capsys):
    yaml = pytest.importorskip("yaml")
    _jsonl(tmp_path, "web", 3000)
    _jsonl(tmp_path, "code", 1000)
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump(DEFINITION))
    assert cli_main(["profile", str(path), "--batches", "10"]) == 0
    assert "profiled 10 microbatches" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"stages": []}, "unknown keys ['stages']"),
        ({"batch": {}}, "batch.microbatch_size is required"),
        ({"operators": [{"op": "shuffle"}]}, "operators[0] needs 'operator'"),
        ({"operators": [{"operator": "map_transform", "kwargs": {"fn": {"import": "nowhere:fn"}}}]}, "cannot load"),
        ({"source": {"datasets": []}}, "source.datasets must be a non-empty list"),
    ],
)
def test_a_bad_definition_is_a_clear_error(tmp_path, capsys, change, message):
    _jsonl(tmp_path, "web", 100)
    _jsonl(tmp_path, "code", 100)
    path = tmp_path / "pipeline.json"
    path.write_text(json.dumps(DEFINITION | change))
    assert cli_main(["profile", str(path), "--batches", "5"]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_a_missing_build_pipeline_and_a_missing_matplotlib_are_clear_errors(tmp_path, pipeline_py, capsys, monkeypatch):
    empty = tmp_path / "empty.py"
    empty.write_text("x = 1\n")
    assert cli_main(["profile", str(empty)]) == 2
    assert "defines no build_pipeline()" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert cli_main(["profile", str(pipeline_py), "--batches", "5", "--plot", str(tmp_path / "x.png")]) == 2
    assert "pip install 'zephon-observe[plot]'" in capsys.readouterr().err


def test_a_profile_definition_whose_mixture_does_not_sum_to_one_warns_once_naming_the_definition(tmp_path):
    from zephon_observe.profile import from_definition

    from zephon_core.plugins import default_plugin_manager

    for name in ("web", "code"):
        (tmp_path / f"{name}.jsonl").write_text("".join(f'{{"i": {i}}}\n' for i in range(20)))
    datasets = [{"name": n, "path": f"{n}.jsonl", "format": "jsonl"} for n in ("web", "code")]

    def build(mixture: dict) -> None:
        definition = {"source": {"datasets": datasets, "mixture": mixture}, "batch": {"microbatch_size": 4}}
        from_definition(definition, default_plugin_manager(), base=tmp_path)

    with pytest.warns(UserWarning) as caught:
        build({"web": 3, "code": 1})
    assert [str(w.message) for w in caught] == [
        "definition: source.mixture: the weights {'web': 3, 'code': 1} sum to 4, not 1; they are normalised to "
        "{'web': 0.75, 'code': 0.25}; give shares that sum to 1"
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        build({"web": 0.75, "code": 0.25})
    with pytest.raises(ConfigError, match=r"definition: source.mixture must be an object of weights per dataset"):
        build([0.75, 0.25])
