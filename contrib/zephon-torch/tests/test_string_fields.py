"""String and other non-numeric fields through the torch adapters: lists beside zero-copy tensors.

Real batches carry document ids, captions and source names next to their tokens. The adapters
hand those out as lists (as torch's ``default_collate`` does), keep numeric fields as tensors
sharing the pipeline's memory, resume exactly through ``StatefulDataLoader``, and refuse a field
that is neither with its name.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
import torch
from zephon_torch import ZephonLoader, merge_dataloader_states, to_tensors, to_torch_dataset
from zephon_torch.testing.records import LANES, MICROBATCH, build

from zephon_core import ConfigError, Dataset, Pipeline, StaticMixtureWorkSource

StatefulDataLoader = pytest.importorskip("torchdata.stateful_dataloader").StatefulDataLoader

DOCS = 96  # 12 rounds of 4 lanes x 2 rows


def plain(mb: dict[str, Any]) -> dict[str, Any]:
    """A microbatch with tensors as arrays (copied) and lists as they are, for comparison."""
    return {k: v.numpy().copy() if isinstance(v, torch.Tensor) else list(v) for k, v in mb.items()}


def same(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> bool:
    return len(a) == len(b) and all(
        x.keys() == y.keys() and all(np.array_equal(x[k], y[k]) if isinstance(x[k], np.ndarray) else x[k] == y[k] for k in x)
        for x, y in zip(a, b)
    )


def workers() -> Pipeline:
    return build(DOCS, parallelism=2)  # two map_transform workers make the rows


def test_to_tensors_lists_strings_and_shares_numeric_memory():
    arrays = {
        "input_ids": np.arange(6, dtype=np.int64).reshape(2, 3),
        "id": np.array(["doc-1", "doc-22"]),
        "raw": np.array([b"ab", b"c"]),
        "caption": np.array(["a", "bc"], dtype=object),
    }
    out = to_tensors(arrays)
    assert out["id"] == ["doc-1", "doc-22"] and out["raw"] == [b"ab", b"c"] and out["caption"] == ["a", "bc"]
    assert isinstance(out["input_ids"], torch.Tensor)
    assert out["input_ids"].data_ptr() == arrays["input_ids"].ctypes.data  # zero-copy


@pytest.mark.parametrize(
    ("value", "what"),
    [
        (np.array([{"a": 1}, {"a": 2}], dtype=object), r"Python objects \(dict\)"),
        (np.array(["2024-01-01", "2024-01-02"], dtype="datetime64[D]"), r"dtype datetime64\[D\]"),
    ],
)
def test_a_field_neither_numeric_nor_text_is_refused_by_name(value, what):
    with pytest.raises(ConfigError, match=rf"microbatch field 'meta' holds {what}, which is neither numeric"):
        to_tensors({"input_ids": np.zeros(2, dtype=np.int64), "meta": value})


def test_a_dataloader_batch_with_an_object_field_names_it():
    def collate(rows: list[dict[str, Any]]) -> dict[str, np.ndarray]:
        meta = np.empty(len(rows), dtype=object)
        meta[:] = [{"i": r["i"]} for r in rows]
        return {"x": np.array([r["i"] for r in rows]), "meta": meta}

    ws = StaticMixtureWorkSource([Dataset.from_records("d", [{"i": i} for i in range(16)])], chunk_size=8, seed=0)
    with to_torch_dataset(Pipeline(ws).batch(microbatch_size=2, collate=collate).options(lanes=2)) as ds:
        with pytest.raises(ConfigError, match="field 'meta' holds Python objects"):
            next(iter(StatefulDataLoader(ds, batch_size=None)))


def test_stateful_dataloader_hands_out_lists_and_resumes_exactly():
    """Through StatefulDataLoader with pipeline workers: lists of ids, tensors, exact resume mid-round."""
    full_dl = StatefulDataLoader(to_torch_dataset(workers), batch_size=None)
    full = []
    for mb in full_dl:
        assert isinstance(mb["input_ids"], torch.Tensor) and mb["input_ids"].dtype == torch.int64
        assert isinstance(mb["id"], list) and all(isinstance(s, str) for s in mb["id"]) and len(mb["id"]) == MICROBATCH
        full.append(plain(mb))
    ids = [i for mb in full for i in mb["id"]]
    assert len(ids) == len(set(ids)) == len(full) * MICROBATCH > 0  # no document twice

    dl = StatefulDataLoader(to_torch_dataset(workers), batch_size=None)
    head = [plain(mb) for _, mb in zip(range(5 * LANES + 1), dl)]  # stop mid-round
    state = json.loads(json.dumps(dl.state_dict()))
    dl.dataset.close()
    again = StatefulDataLoader(to_torch_dataset(workers), batch_size=None)
    again.load_state_dict(state)
    assert same(head + [plain(mb) for mb in again], full)


def test_two_rank_states_with_strings_resume_on_one_rank():
    full = [plain(mb) for mb in StatefulDataLoader(to_torch_dataset(workers), batch_size=None)]
    states, heads = [], []
    for rank in range(2):
        dl = StatefulDataLoader(to_torch_dataset(workers, dp_rank=rank, dp_world_size=2), batch_size=None)
        heads.append([plain(mb) for _, mb in zip(range(4 * 2), dl)])  # 4 rounds of this rank's 2 lanes
        states.append(dl.state_dict())
        dl.dataset.close()
    one = StatefulDataLoader(to_torch_dataset(workers), batch_size=None)
    one.load_state_dict(merge_dataloader_states(states))
    rounds = [mb for t in range(4) for r in range(2) for mb in heads[r][2 * t : 2 * t + 2]]
    assert same(rounds + [plain(mb) for mb in one], full)


def test_zephon_loader_steps_carry_string_lists():
    with ZephonLoader(workers(), global_batch_size=LANES * MICROBATCH, token_key=None) as loader:
        ids = []
        for step in loader:
            for mb in step:
                assert isinstance(mb["labels"], torch.Tensor) and isinstance(mb["text"], list)
                ids += mb["id"]
        assert len(ids) == len(set(ids)) > 0
