"""``pack_sequences(mask_field=...)``: a token-aligned mask (e.g. ``tokenize_chat``'s ``loss_mask``)
travels with the ids through every packing algorithm, and the training view masks labels with it.
Without ``mask_field`` nothing changes: same row fields, same config (so same fingerprints)."""

from __future__ import annotations

import pickle
from typing import Any, ClassVar

import numpy as np
import pytest
from zephon_pack import PackedTrainingView, PackSequences, segment_spans
from zephon_pack.algorithms import Masked
from zephon_pack.assemble import PackWorker
from zephon_pack.checking import collect, token_documents, token_source
from zephon_pack.testing import PackConformance

from zephon_core import ConfigError, OperatorError, Pipeline


def with_masks(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each document gets a mask that differs from token to token (1 where the id is odd)."""
    return [{**d, "loss_mask": (np.asarray(d["input_ids"]) % 2).astype(np.uint8)} for d in docs]


DOCS = with_masks(token_documents(300, seed=4, mean=50, longest=300))


@pytest.mark.parametrize(("algorithm", "allow_split"), [("wrap", None), ("first_fit", False), ("best_fit", True)])
def test_mask_stays_aligned_with_the_ids(algorithm, allow_split):
    pipe = (
        Pipeline(token_source(DOCS))
        .pack_sequences(target_length=128, algorithm=algorithm, allow_split=allow_split, mask_field="loss_mask")
        .batch(microbatch_size=1)
        .options(lanes=2)
    )
    rows = 0
    for b in collect(pipe):
        ids, mask, doc = b.data["input_ids"][0], b.data["loss_mask"][0], b.data["document_ids"][0]
        assert mask.dtype == np.uint8 and mask.shape == ids.shape
        assert not mask[doc < 0].any()  # padding is 0
        for _, a, z in segment_spans(doc, b.lineage[0]):
            assert np.array_equal(mask[a:z], ids[a:z] % 2)  # the same cut as the ids
        rows += 1
    assert rows > 10


def test_without_mask_field_rows_and_config_are_unchanged():
    op = PackSequences(64)
    assert "mask_field" not in op.config()  # the fingerprint of existing pipelines stays the same
    rows = op.worker()([[np.arange(5, dtype=np.int32)]])
    assert set(rows[0]) == {"input_ids", "position_ids", "document_ids", "num_padding"}
    assert PackSequences(64, mask_field="loss_mask").config()["mask_field"] == "loss_mask"


def test_training_view_masks_labels_whose_target_is_masked():
    # one row: doc A = [1 2 3 4] with mask [0 0 1 1], doc B = [5 6 7] with mask [0 1 1], 1 padding
    rows = [[Masked(np.array([1, 2, 3, 4]), np.array([0, 0, 1, 1])), Masked(np.array([5, 6, 7]), np.array([0, 1, 1]))]]
    out = PackWorker(8, pad_id=0, mask_field="loss_mask")(rows)
    batch = {k: np.stack([np.asarray(r[k]) for r in out]) for k in out[0]}
    assert batch["loss_mask"][0].tolist() == [0, 0, 1, 1, 0, 1, 1, 0]
    view = PackedTrainingView(mask_field="loss_mask")(batch)
    ign = -100
    # label i predicts token i + 1: kept only where that token's mask is 1 (and in the same document)
    assert view["labels"][0].tolist() == [ign, 3, 4, ign, 6, 7, ign, ign]
    assert view["num_valid_tokens"].tolist() == [4]
    assert view["loss_mask"][0].tolist() == [0, 0, 1, 1, 0, 1, 1, 0]
    plain = PackedTrainingView()(batch)  # the same rows without asking for the mask: every label
    assert plain["labels"][0].tolist() == [2, 3, 4, ign, 6, 7, ign, ign] and "loss_mask" not in plain


def test_masked_pickles_and_slices_together():
    m = Masked(np.arange(6), np.array([0, 1, 0, 1, 1, 0]))
    part = pickle.loads(pickle.dumps(m))[2:5]
    assert len(part) == 3 and part.ids.tolist() == [2, 3, 4] and part.mask.tolist() == [0, 1, 1]


@pytest.mark.parametrize(
    ("docs", "match"),
    [
        ([{"input_ids": np.arange(5)}] * 20, "has no mask field 'loss_mask'"),
        ([{"input_ids": np.arange(5), "loss_mask": np.ones(4)}] * 20, "shape \\(4,\\) for 5 tokens"),
    ],
)
def test_bad_masks_are_clear_errors(docs, match):
    pipe = Pipeline(token_source(docs)).pack_sequences(target_length=16, mask_field="loss_mask").batch(2)
    with pytest.raises((OperatorError, ConfigError), match=match):
        collect(pipe)


@pytest.mark.parametrize("bad", ["", "input_ids", "document_ids", 3])
def test_mask_field_validation(bad):
    with pytest.raises(ConfigError, match="mask_field"):
        PackSequences(16, mask_field=bad)


class MaskedPackConformance(PackConformance):
    __test__ = False
    pack_options: ClassVar[dict[str, Any]] = {"mask_field": "loss_mask"}

    @pytest.fixture
    def sample_records(self):
        return with_masks(token_documents(480, seed=7, mean=40, longest=400))


@pytest.mark.slow
class TestWrapMaskConformance(MaskedPackConformance):
    algorithm = "wrap"


@pytest.mark.slow
@pytest.mark.exhaustive  # wrap's class covers the mask in every run
class TestBestFitSplitMaskConformance(MaskedPackConformance):
    algorithm = "best_fit"
    allow_split = True
