"""The provenance manifest: what every global step held, written as the run goes, and read back by
``zephon manifest show`` and ``zephon manifest diff``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from zephon_observe.manifest import Manifest, diff

from zephon_core import ConfigError, Dataset, Emit, MixtureSpec, Pipeline, StaticMixtureWorkSource
from zephon_core.cli import main as cli_main

LANES, MICRO, STEPS = 2, 4, 200
ROW = 12


def _records(name: str, n: int, changed: int | None = None) -> list[dict[str, Any]]:
    recs = [{"i": i, "x": np.arange(i % 5 + 1, dtype=np.int32).tolist(), "src": name} for i in range(n)]
    if changed is not None:
        recs[changed] = dict(recs[changed], x=[9, 9, 9])  # one record's content differs; its identity does not
    return recs


def _source(changed: tuple[str, int] | None = None, seed: int = 3) -> StaticMixtureWorkSource:
    def records(name: str, n: int) -> list[dict[str, Any]]:
        return _records(name, n, changed[1] if changed and changed[0] == name else None)

    web = Dataset.from_records("web", records("web", 2400), shard_size=300)
    code = Dataset.from_records("code", records("code", 1200), shard_size=200)
    return StaticMixtureWorkSource([web, code], MixtureSpec({"web": 2, "code": 1}), chunk_size=16, seed=seed)


def _pad(payload: dict[str, Any]) -> dict[str, Any]:
    x = np.full(8, -1, dtype=np.int32)
    x[: len(payload["x"])] = payload["x"]
    return {"x": x, "i": payload["i"]}


def _run(path: Path, steps: int = STEPS, **kw: Any) -> list[str]:
    """``steps`` global steps with a manifest at ``path``; returns each microbatch's sha256."""
    p = Pipeline(_source(**kw)).map_transform(_pad).batch(MICRO).options(lanes=LANES, manifest=str(path))
    hashes = []
    with p:
        for b in p:
            hashes.append(b.sha256())
            if len(hashes) == steps * LANES:
                break
    return hashes


def test_a_200_step_run_records_every_step_and_matches_the_batches(tmp_path):
    hashes = _run(tmp_path / "a")
    m = Manifest(tmp_path / "a")
    assert m.steps() == list(range(STEPS)) and m.lanes() == [0, 1]
    b = m.batches()
    assert [b[(s, lane)][0] for s in range(STEPS) for lane in range(LANES)] == hashes
    rows = m.rows(5)
    assert set(rows) == {0, 1} and all(len(r) == MICRO for _, r in rows.values())
    sample = rows[0][1][0].samples[0]
    assert sample.dataset in {"web", "code"} and sample.shard_id.startswith("memory-") and sample.index >= 0


def test_diff_finds_one_changed_record_at_its_step(tmp_path):
    _run(tmp_path / "a")
    a = Manifest(tmp_path / "a")
    target_step, lane = 137, 1
    row = a.rows(target_step)[lane][1][2]
    s = row.samples[0]
    shard_size = {"web": 300, "code": 200}[s.dataset]
    changed = (s.dataset, s.shard * shard_size + s.index)
    _run(tmp_path / "b", changed=changed)
    result = diff(str(tmp_path / "a"), str(tmp_path / "b"))
    assert result.step == target_step, str(result)
    text = str(result)
    assert f"first difference at global step {target_step}" in text
    assert f"lane {lane}:" in text and "row 2: same samples, different content" in text
    assert f"{s.dataset}[shard {s.shard} ({s.shard_id}), index {s.index}]" in text
    assert text.count("    row ") == 1  # only that row differs
    # The CLI prints the same and exits 1 (the runs differ); identical runs exit 0.
    assert cli_main(["manifest", "diff", str(tmp_path / "a"), str(tmp_path / "b")]) == 1
    assert cli_main(["manifest", "diff", str(tmp_path / "a"), str(tmp_path / "a")]) == 0


def test_diff_names_different_samples(tmp_path):
    _run(tmp_path / "a", steps=20)
    _run(tmp_path / "b", steps=20, seed=4)
    result = diff(str(tmp_path / "a"), str(tmp_path / "b"), max_rows=3)
    assert result.step == 0
    text = str(result)
    assert "row 0: A " in text and "B " in text and "more differing rows" in text


def test_show_prints_a_step_and_a_summary(tmp_path, capsys):
    _run(tmp_path / "a", steps=30)
    assert cli_main(["manifest", "show", str(tmp_path / "a"), "--step", "7"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("global step 7: lanes 0-1") and out.count("    row ") == LANES * MICRO
    assert cli_main(["manifest", "show", str(tmp_path / "a"), "--step", "7", "--lane", "1", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [x["lane"] for x in data["lanes"]] == [1] and len(data["lanes"][0]["rows"]) == MICRO
    assert cli_main(["manifest", "show", str(tmp_path / "a")]) == 0
    assert "global steps 0-29 (60 microbatches)" in capsys.readouterr().out
    assert cli_main(["manifest", "show", str(tmp_path / "a"), "--step", "999"]) == 2
    assert "not in the manifest" in capsys.readouterr().err


def test_parts_are_written_while_running_and_a_resumed_run_adds_its_own(tmp_path):
    path = tmp_path / "m"
    opts = {"lanes": LANES, "manifest": str(path), "manifest_every_steps": 10}
    p = Pipeline(_source()).map_transform(_pad).batch(MICRO).options(**opts)
    it = iter(p)
    for _ in range(35 * LANES):
        next(it)
    # Not closed (as after a crash): the first 30 steps are on disk, complete and readable (once the
    # writer thread has written the parts handed to it).
    p._manifest._queue.join()
    assert Manifest(path).steps() == list(range(30))
    assert not list(path.rglob("*.tmp"))
    state = p.state_dict()  # a checkpoint at step 35 writes steps 30-34 too
    assert Manifest(path).steps() == list(range(35))
    for _ in range(12 * LANES):  # steps 35-46 are trained on (35-44 written in a part), then the process dies
        next(it)
    p._manifest._queue.join()
    assert Manifest(path).steps() == list(range(45))
    p._manifest = None  # nothing flushes at close: what a killed process leaves
    p.close()
    resumed = Pipeline(_source()).map_transform(_pad).batch(MICRO).options(**opts)
    resumed.load_state_dict(state)
    with resumed:
        it = iter(resumed)
        for _ in range(25 * LANES):
            next(it)
    m = Manifest(path)  # steps 35-44 are recorded twice, identically; the resumed run's copy is read
    assert m.steps() == list(range(60)) and len({f.split("part-")[1][:27] for f in m.files}) == 2
    _run(tmp_path / "straight", steps=60)
    assert diff(str(path), str(tmp_path / "straight")).step is None


def _pair_push(state: dict[str, Any], payload: dict[str, Any]) -> list[Emit]:
    state["held"].append(payload["x"])
    if len(state["held"]) < 2:
        return []
    a, b = state["held"]
    state["held"] = []
    return [Emit(_packed(a, b), [-2, -1])]


def _pair_flush(state: dict[str, Any]) -> list[Emit]:
    held, state["held"] = state["held"], []
    return [Emit(_packed(held[0], []), [-1])] if held else []


def _packed(a: list[int], b: list[int]) -> dict[str, Any]:
    doc = np.full(ROW, -1, dtype=np.int32)
    doc[: len(a)] = 0
    doc[len(a) : len(a) + len(b)] = 1 if b else -1
    tokens = np.zeros(ROW, dtype=np.int32)
    tokens[: len(a) + len(b)] = [*a, *b]
    return {"input_ids": tokens, "document_ids": doc}


def test_packed_rows_record_each_documents_token_span(tmp_path):
    p = (
        Pipeline(_source())
        .stateful_transform("pairs", init_state=lambda: {"held": []}, push=_pair_push, flush=_pair_flush)
        .batch(MICRO)
        .options(lanes=LANES, manifest=str(tmp_path / "m"))
    )
    with p:
        batches = [b for b, _ in zip(p, range(20))]
    m = Manifest(tmp_path / "m")
    first = next(b for b in batches if b.lane == 0 and b.lane_index == 3)
    rows = m.rows(3)[0][1]
    for r, lineage, doc in zip(rows, first.lineage, first.data["document_ids"]):
        assert len(r.samples) == len(lineage) == int(doc.max()) + 1
        for j, s in enumerate(r.samples):
            where = np.flatnonzero(doc == j)
            assert (s.token_start, s.token_stop) == (int(where[0]), int(where[-1]) + 1)


def test_options_check_the_manifest(tmp_path):
    with pytest.raises(ConfigError, match="manifest must be a folder path"):
        Pipeline(_source()).options(manifest=3)
    with pytest.raises(ConfigError, match="manifest_every_steps"):
        Pipeline(_source()).options(manifest=str(tmp_path), manifest_every_steps=0)


def test_a_missing_pyarrow_names_the_extra(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(ConfigError, match=r"needs pyarrow.*pip install zephon-observe"):
        Pipeline(_source()).options(manifest="/tmp/nowhere")
