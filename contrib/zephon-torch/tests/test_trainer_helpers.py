"""The trainer packages' elastic tests compare global steps through ``global_step_hashes``: it must
give the same hashes for the same microbatches on any process count, and differ when one moves."""

from __future__ import annotations

import json
from pathlib import Path

from zephon_torch.testing.trainers import global_step_hashes

LANES = 4


def _write(folder: Path, per_rank: list[list[str]]) -> Path:
    folder.mkdir()
    for r, hashes in enumerate(per_rank):
        (folder / f"rank{r}.json").write_text(json.dumps({"hashes": hashes}))
    return folder


def test_the_same_microbatches_hash_the_same_on_1_2_and_4_processes(tmp_path):
    # two global steps; microbatch "s<step>l<lane>"
    one = [[f"s{s}l{lane}" for s in range(2) for lane in range(LANES)]]
    two = [[f"s{s}l{lane}" for s in range(2) for lane in lanes] for lanes in ([0, 1], [2, 3])]
    four = [[f"s{s}l{lane}" for s in range(2)] for lane in range(LANES)]
    got = [global_step_hashes(_write(tmp_path / name, recs), LANES) for name, recs in [("a", one), ("b", two), ("c", four)]]
    assert got[0] == got[1] == got[2] and sorted(got[0]) == [0, 1]
    assert global_step_hashes(tmp_path / "b", LANES, first_step=12).keys() == {12, 13}


def test_a_microbatch_in_another_lane_changes_its_step(tmp_path):
    good = [[f"s{s}l{lane}" for s in range(2) for lane in lanes] for lanes in ([0, 1], [2, 3])]
    swapped = [good[0], [good[1][1], good[1][0], *good[1][2:]]]  # lanes 2 and 3 of step 0 exchanged
    a = global_step_hashes(_write(tmp_path / "good", good), LANES)
    b = global_step_hashes(_write(tmp_path / "bad", swapped), LANES)
    assert a[0] != b[0] and a[1] == b[1]
