"""``to_training()`` of packed rows: labels, masks, cu_seqlens, shapes."""

from __future__ import annotations

import numpy as np
from zephon_pack import PackedTrainingView, varlen_cu_seqlens
from zephon_pack.assemble import PackWorker
from zephon_pack.checking import collect, token_documents, token_source

from zephon_core import Pipeline

L = 12


def _batch() -> dict[str, np.ndarray]:
    # row 0: docs of 5 and 4 tokens, 3 padding; row 1: one doc filling the row
    rows = [[np.array([1, 2, 3, 4, 5]), np.array([6, 7, 8, 9])], [np.arange(20, 32)]]
    out = PackWorker(L, pad_id=0)(rows)
    return {k: np.stack([np.asarray(r[k]) for r in out]) for k in out[0]}


def test_labels_masked_at_padding_boundaries_and_row_end():
    view = PackedTrainingView()(_batch())
    ign = -100
    assert view["labels"].dtype == np.int64
    assert list(view["labels"][0]) == [2, 3, 4, 5, ign, 7, 8, 9, ign, ign, ign, ign]
    assert list(view["labels"][1]) == [*range(21, 32), ign]
    assert list(view["num_valid_tokens"]) == [7, 11]
    assert list(view["attention_mask"][0]) == [1] * 9 + [0] * 3
    assert list(view["position_ids"][0]) == [0, 1, 2, 3, 4, 0, 1, 2, 3, 0, 1, 2]


def test_boundary_masking_is_configurable():
    view = PackedTrainingView(ignore_index=-1, mask_document_boundaries=False)(_batch())
    assert list(view["labels"][0]) == [2, 3, 4, 5, 6, 7, 8, 9, -1, -1, -1, -1]
    assert list(view["num_valid_tokens"]) == [8, 11]


def test_cu_seqlens_fixed_shape_and_varlen_form():
    view = PackedTrainingView()(_batch())
    cu = view["cu_seqlens"]
    assert cu.shape == (2, L + 1) and cu.dtype == np.int32
    assert list(cu[0]) == [0, 5, 9, 12] + [12] * 9
    assert list(cu[1]) == [0, 12] + [12] * 11
    flat, longest = varlen_cu_seqlens(cu)
    assert list(flat) == [0, 5, 9, 12, 24] and longest == 12


def test_to_training_shapes_through_a_pipeline():
    docs = token_documents(400, seed=2, mean=60)
    pipe = Pipeline(token_source(docs)).pack_sequences(target_length=128, algorithm="first_fit").batch(microbatch_size=4)
    batches = collect(pipe)
    assert batches
    for b in batches:
        t = b.to_training()
        assert {k: v.shape for k, v in t.items()} == {
            "input_ids": (4, 128),
            "labels": (4, 128),
            "position_ids": (4, 128),
            "document_ids": (4, 128),
            "attention_mask": (4, 128),
            "cu_seqlens": (4, 129),
            "num_valid_tokens": (4,),
        }
        # a label is valid exactly where the next token continues the same segment
        doc = t["document_ids"]
        same = (doc[:, 1:] == doc[:, :-1]) & (doc[:, 1:] >= 0)
        assert np.array_equal(t["labels"][:, :-1] != -100, same)
        assert np.array_equal(t["labels"][:, :-1][same], t["input_ids"][:, 1:][same])
        assert (t["num_valid_tokens"] == same.sum(axis=1)).all()
