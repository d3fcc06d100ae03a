"""Materialising a prefix: read-back gives the online batches, the bytes do not depend on how the
prefix ran, a killed run restarted writes the same files, and unusable prefixes are refused.

The tiny recipe (map_transform, then shuffle) runs on every test run; the text demo's recipe
(tokenize, then pack_sequences and ensure_mixture) on a small corpus is the slow done-when check,
with small chunks and windows so that several flush sentinels fall inside the compared steps.
"""

from __future__ import annotations

import importlib.resources
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from zephon_recipes import RecipeError, load_recipe
from zephon_recipes.materialize import MANIFEST, materialize

from zephon_core.conformance.harness import run_global
from zephon_core.plugin_api import ZephonPluginManager

EXAMPLES = importlib.resources.files("zephon_recipes") / "examples"
TEXT = str(EXAMPLES / "text.yaml")


def _files(root: Path) -> dict[str, bytes]:
    """Every file the materialisation wrote, by relative path (the manifest included)."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _tiny_back(workdir: Path, out: Path, lanes: int = 4) -> Path:
    path = workdir / "recipes" / "back.yaml"
    path.write_text(
        f"datasets:\n  written: {{path: {out}, format: parquet}}\n"
        "operators:\n  - shuffle: {buffer_size: 8, seed: 3}\n"
        f"batch: {{microbatch_size: 2}}\noptions: {{lanes: {lanes}, runner: threads}}\n"
    )
    return path


def test_tiny_read_back_equals_online(workdir: Path, plugins: ZephonPluginManager) -> None:
    tiny = workdir / "recipes" / "tiny.yaml"
    out = workdir / "out"
    report = materialize(tiny, out, until="map_transform", chunks=40, shard_records=7, plugins=plugins)
    assert report.written > 4 and report.records == 40 * 4
    back = _tiny_back(workdir, out)
    want = run_global(lambda par: load_recipe(tiny, plugins=plugins), lanes=4, runner="threads", steps=6).hashes
    for world in (1, 2):
        got = run_global(lambda par: load_recipe(back, plugins=plugins), lanes=4, world_size=world, steps=6).hashes
        assert got == want, f"{world} rank(s)"
    # the comparison can fail: another shuffle seed after the prefix gives other batches
    other = run_global(
        lambda par: load_recipe(back, ["operators.shuffle.seed=4"], plugins=plugins), lanes=4, steps=6
    ).hashes
    assert other != want


def test_read_back_needs_the_written_lanes(workdir: Path, plugins: ZephonPluginManager) -> None:
    out = workdir / "out"
    materialize(workdir / "recipes" / "tiny.yaml", out, until=0, chunks=8, shard_records=8, plugins=plugins)
    with pytest.raises(
        RecipeError,
        match=r"back\.yaml:\d+: options\.lanes: the materialised prefix was written for 4 lanes, this recipe has 2",
    ):
        load_recipe(_tiny_back(workdir, out, lanes=2), plugins=plugins)
    with pytest.raises(RecipeError, match=r"mixture: the dataset is a materialised prefix"):
        load_recipe(_tiny_back(workdir, out), ["mixture.seed=3"], plugins=plugins)


def test_same_bytes_whatever_runner_and_parallelism(workdir: Path, plugins: ZephonPluginManager) -> None:
    tiny = workdir / "recipes" / "tiny.yaml"
    a, b, w = workdir / "a", workdir / "b", workdir / "w"
    materialize(tiny, a, until="map_transform", chunks=12, shard_records=5, plugins=plugins)
    perf = ["options.runner=inline", "operators.map_transform.parallelism=3", "fetch.parallelism=2"]
    materialize(tiny, b, until="map_transform", chunks=12, shard_records=5, overrides=perf, plugins=plugins)
    assert _files(a) == _files(b)
    materialize(tiny, w, until="map_transform", chunks=12, shard_records=5, format="webdataset", plugins=plugins)
    materialize(
        tiny,
        w / "again",
        until="map_transform",
        chunks=12,
        shard_records=5,
        format="webdataset",
        overrides=perf,
        plugins=plugins,
    )
    tars = {k: v for k, v in _files(w).items() if not k.startswith("again")}
    assert tars == _files(w / "again") and any(k.endswith(".tar") for k in tars)


def test_prefix_must_be_one_to_one(workdir: Path, plugins: ZephonPluginManager) -> None:
    with pytest.raises(
        RecipeError, match=r"tiny\.yaml:\d+: operators\[1\]\.shuffle: operator 'shuffle' holds records across a lane"
    ):
        materialize(workdir / "recipes" / "tiny.yaml", workdir / "out", until="shuffle", chunks=4, plugins=plugins)
    with pytest.raises(RecipeError, match=r"--until 'tokenise': no such operator in the recipe"):
        materialize(workdir / "recipes" / "tiny.yaml", workdir / "out", until="tokenise", chunks=4, plugins=plugins)
    with pytest.raises(RecipeError, match=r"mixture\.exhaustion: exhaustion 'repeat' never ends: give --chunks N"):
        materialize(workdir / "recipes" / "tiny.yaml", workdir / "out", until="map_transform", plugins=plugins)


def test_a_folder_of_another_prefix_is_refused(workdir: Path, plugins: ZephonPluginManager) -> None:
    tiny = workdir / "recipes" / "tiny.yaml"
    out = workdir / "out"
    materialize(tiny, out, until="map_transform", chunks=4, shard_records=8, plugins=plugins)
    with pytest.raises(
        RecipeError,
        match=r"holds a materialisation of another prefix or layout \(recipe\.mixture\.seed: 7 in the folder, 8 now",
    ):
        materialize(
            tiny, out, until="map_transform", chunks=4, shard_records=8, overrides=["mixture.seed=8"], plugins=plugins
        )


def test_a_corrupted_shard_is_rewritten(workdir: Path, plugins: ZephonPluginManager) -> None:
    tiny = workdir / "recipes" / "tiny.yaml"
    out = workdir / "out"
    materialize(tiny, out, until="map_transform", chunks=12, shard_records=5, plugins=plugins)
    want = _files(out)
    victim = next(p for p in sorted(out.rglob("*.parquet")) if "lane-0001-part-000001" in p.name)
    victim.write_bytes(b"garbage")
    report = materialize(tiny, out, until="map_transform", chunks=12, shard_records=5, plugins=plugins)
    assert report.written >= 1 and report.kept >= 1
    assert _files(out) == want


def _text_overrides(root: Path) -> list[str]:
    """The text demo's recipe over a small corpus, with small chunks, windows and rows."""
    return [
        f"datasets.plays.path={root / 'plays'}",
        f"datasets.lines.path={root / 'lines'}",
        "mixture.chunk_size=16",
        "options.flush_every_k_chunks=2",
        "operators.pack_sequences.target_length=64",
    ]


def _text_corpus(root: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    (root / "plays").mkdir(parents=True)
    (root / "lines").mkdir(parents=True)
    for s in range(2):
        texts = [f"play {s} speech {i}: " + "and so the word " * (i % 9 + 1) for i in range(40)]
        pq.write_table(pa.table({"text": texts}), root / "plays" / f"part-{s}.parquet")
        with open(root / "lines" / f"part-{s}.jsonl", "w", encoding="utf-8") as f:
            for i in range(60):
                f.write(json.dumps({"text": f"line {s}.{i} " + "x " * (i % 5)}) + "\n")


@pytest.mark.slow
def test_text_demo_tokenized_offline_packed_online(tmp_path: Path, plugins: ZephonPluginManager) -> None:
    """The done-when: the text recipe materialised up to tokenize, the rest run on the written shards."""
    _text_corpus(tmp_path / "corpus")
    overrides = _text_overrides(tmp_path / "corpus")
    out = tmp_path / "tokenized"
    materialize(TEXT, out, until="tokenize", chunks=40, shard_records=30, overrides=overrides, plugins=plugins)
    back = tmp_path / "packed.yaml"
    back.write_text(
        f"datasets:\n  tokenized: {{path: {out}, format: parquet}}\n"
        "operators:\n  - pack_sequences: {target_length: 64}\n  - ensure_mixture: {}\n"
        # flush_every_k_chunks left at "auto": the written folder resolves it to the online window
        "batch: {microbatch_size: 2}\noptions: {lanes: 4, runner: threads}\n"
    )
    want = run_global(
        lambda par: load_recipe(TEXT, overrides, plugins=plugins), lanes=4, runner="threads", steps=10
    ).hashes
    assert len(want) == 10
    for world in (1, 2):
        got = run_global(
            lambda par: load_recipe(back, plugins=plugins), lanes=4, world_size=world, runner="threads", steps=10
        ).hashes
        assert got == want, f"{world} rank(s)"


@pytest.mark.slow
def test_killed_materialisation_restarted_writes_the_same_files(tmp_path: Path, plugins: ZephonPluginManager) -> None:
    """A real ``zephon materialize`` process, SIGKILLed once some shards exist, then run again."""
    _text_corpus(tmp_path / "corpus")
    overrides = _text_overrides(tmp_path / "corpus")
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    materialize(TEXT, whole, until="tokenize", chunks=40, shard_records=10, overrides=overrides, plugins=plugins)
    env = dict(os.environ, TMPDIR=str(tmp_path), ZEPHON_DEMO_DIR=str(tmp_path))
    cmd = [
        sys.executable,
        "-m",
        "zephon_core.cli",
        "materialize",
        TEXT,
        "--until",
        "tokenize",
        "--to",
        str(killed),
        "--chunks",
        "40",
        "--shard-records",
        "10",
    ]
    for o in overrides:
        cmd += ["--set", o]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 120
    shards = 0
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                m = json.loads((killed / MANIFEST).read_text())
                shards = sum(len(v) for v in m["lane_shards"].values())
            except (OSError, ValueError):
                shards = 0
            if shards >= 3:
                proc.send_signal(signal.SIGKILL)
                break
            time.sleep(0.01)
    finally:
        if proc.poll() is None and time.monotonic() >= deadline:
            proc.kill()
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL, f"the run ended before it could be killed (rc {proc.returncode}):\n{out}"
    assert not json.loads((killed / MANIFEST).read_text())["complete"]
    report = materialize(
        TEXT, killed, until="tokenize", chunks=40, shard_records=10, overrides=overrides, plugins=plugins
    )
    assert report.kept >= 3 and report.written >= 1
    assert _files(killed) == _files(whole)


def test_the_materialize_command(
    workdir: Path, plugins: ZephonPluginManager, capsys: pytest.CaptureFixture[str]
) -> None:
    from zephon_core.cli import main

    args = [
        "materialize",
        "recipes/tiny.yaml",
        "--until",
        "map_transform",
        "--to",
        "out",
        "--chunks",
        "8",
        "--shard-records",
        "10",
    ]
    assert main(args, plugins=plugins) == 0
    out = capsys.readouterr().out
    assert "lane 3: shard 0 written" in out and "materialised 32 record(s) into out: 4 shard(s) written" in out
    assert main(args, plugins=plugins) == 0  # a second run finds every shard complete
    assert "0 shard(s) written, 4 complete shard(s) kept" in capsys.readouterr().out
    back = _tiny_back(workdir, workdir / "out")
    assert main(["check", str(back), "--no-tokens"], plugins=plugins) == 0
    plan = capsys.readouterr().out
    assert "mixture (MaterializedSource)" in plan and any(
        line.split()[:3] == ["web", "parquet", "4"] for line in plan.splitlines()
    )
    assert (
        main(
            ["materialize", "recipes/tiny.yaml", "--until", "shuffle", "--to", "out2", "--chunks", "8"], plugins=plugins
        )
        == 2
    )
    assert "operators[1].shuffle: operator 'shuffle' holds records across a lane" in capsys.readouterr().err
