"""Multimodal packing: real photographs decoded and patchified by zephon-vision, captions tokenized
with GPT-2 by zephon-tokenize, image placeholders inserted by a small map, then ``pack_sequences``
with every algorithm. Checked: no image is ever split, every token / patch / grid arrives exactly
once, masks and labels are aligned (never a placeholder as a target), ``cu_seqlens`` for text and
images, clear errors, and identical global batches across runners, parallelism, world sizes and a
resume on another world size."""

from __future__ import annotations

import functools
import itertools
from typing import Any, ClassVar

import numpy as np
import pytest
from zephon_pack import PackSequences, collate_multimodal, image_cu_seqlens, segment_spans
from zephon_pack.testing import PackConformance

from zephon_core import ConfigError, Dataset, OperatorError, Pipeline, Records, StaticMixtureWorkSource
from zephon_core.conformance.harness import run_global

pytest.importorskip("zephon_tokenize")
pytest.importorskip("zephon_vision")
pytest.importorskip("skimage.data")  # the photographs (scikit-image ships them in its wheel)


from zephon_vision.testing import encoded_records

IMG = 50257  # one past GPT-2's vocabulary: an added <|image_pad|> token, as in Qwen2-VL
PS, TPS, M = 8, 2, 2  # small patches keep the test fast; the layout is Qwen2-VL's
PATCH_DIM = 3 * TPS * PS * PS
L = 96
WORDS = (
    "a photograph of the cat rocket astronaut coffee cup moon galaxy sky in morning light seen from above "
    "close up with soft shadows and bright colours under a cloudy grey winter afternoon near old stone wall"
).split()


def captioned(n: int, seed: int) -> list[dict[str, Any]]:
    """``n`` records ``{"image": encoded bytes, "caption": str, "n": i}`` (JPEG/PNG/WebP photographs)."""
    recs = encoded_records(n, min_side=16, max_side=72, seed=seed)
    rng = np.random.default_rng(seed)  # test data only
    for r in recs:
        k = int(rng.integers(3, 40))
        r["caption"] = " ".join(WORDS[int(j)] for j in rng.integers(0, len(WORDS), k)) + "."
    return recs


@functools.lru_cache(maxsize=1)
def corpus() -> StaticMixtureWorkSource:
    return StaticMixtureWorkSource(
        [Dataset.from_records("captions", captioned(120, 3), shard_size=24)], chunk_size=6, seed=2
    )


def insert_placeholders(p: dict[str, Any]) -> dict[str, Any]:
    """The small map: ``<image placeholders> caption``; every 4th sample shows its image twice
    (before and after the caption), every 5th is text only (its image removed)."""
    n = p["n"]
    ids, pv, grid = p["input_ids"], p["pixel_values"], p["image_grid_thw"]
    run = np.full(int(np.prod(grid)) // (M * M), IMG, dtype=np.int32)
    if n % 5 == 4:
        return {"input_ids": ids, "num_tokens": len(ids)}
    if n % 4 == 1:
        return {
            "input_ids": np.concatenate([run, ids, run]),
            "pixel_values": np.concatenate([pv, pv]),
            "image_grid_thw": np.stack([grid, grid]),
            "num_tokens": len(ids) + 2 * len(run),
        }
    return {"input_ids": np.concatenate([run, ids]), "pixel_values": pv, "image_grid_thw": grid[None], "num_tokens": 0}


def samples(parallelism: int = 1) -> Pipeline:
    """Everything before packing: decode → patchify → tokenize → placeholders."""
    return (
        Pipeline(corpus())
        .decode_image(parallelism=parallelism)
        .patchify(
            PS, temporal_patch_size=TPS, merge_size=M, min_pixels=16 * 16, max_pixels=64 * 64, parallelism=parallelism
        )
        .tokenize(tokenizer_id="gpt2", field="caption", parallelism=parallelism)
        .map_transform(insert_placeholders, parallelism=parallelism)
    )


def packed(parallelism: int = 1, *, algorithm: str = "wrap", allow_split: bool | None = None, mb: int = 2) -> Pipeline:
    return (
        samples(parallelism)
        .pack_sequences(
            L,
            algorithm,
            num_open_bins=3,
            allow_split=allow_split,
            image_token_id=IMG,
            patch_dim=PATCH_DIM,
            parallelism=parallelism,
        )
        .batch(mb, collate=collate_multimodal)
    )


def run(pipe: Pipeline) -> list[Any]:
    with pipe as p:
        return list(p)


@pytest.fixture(scope="module")
def reference() -> dict[int, dict[str, np.ndarray]]:
    """Each sample before packing, by sample id."""
    out = {}
    for b in run(samples().batch(1, collate=lambda rows: rows[0]).options(lanes=1)):
        (sid,) = b.lineage[0]
        out[sid] = b.data
    assert len(out) == 120
    return out


VARIANTS = [("wrap", None), ("first_fit", False), ("best_fit", False), ("best_fit", True), ("best_fit_wrap", True)]


@pytest.mark.parametrize(("algorithm", "allow_split"), VARIANTS)
def test_every_token_and_image_whole_and_once(reference, algorithm, allow_split):
    batches = run(packed(algorithm=algorithm, allow_split=allow_split, mb=1).options(lanes=1, flush_every_k_chunks=3))
    got: dict[int, dict[str, list[np.ndarray]]] = {}
    pieces_per_sample: dict[int, int] = {}
    for b in batches:
        d = b.data
        ids, doc, mask = d["input_ids"][0], d["document_ids"][0], d["loss_mask"][0]
        grids, pv, idoc = d["image_grid_thw"], d["pixel_values"], d["image_document_ids"]
        assert pv.dtype == np.float32 and pv.shape[1] == PATCH_DIM and d["num_patches"][0] == len(pv)
        assert d["num_images"][0] == len(grids) == len(idoc)
        # the loss mask: tokens that are neither placeholders nor padding
        assert np.array_equal(mask, ((ids != IMG) & (doc >= 0)).astype(np.uint8))
        # every image's placeholders are one whole run inside this row, in image order, in its segment
        where = np.flatnonzero(ids == IMG)
        counts = grids.prod(axis=1) // (M * M)
        assert len(where) == counts.sum()
        starts = np.concatenate([[0], np.cumsum(counts)])
        for i in range(len(grids)):
            run_ = where[starts[i] : starts[i + 1]]
            assert run_[-1] - run_[0] + 1 == counts[i], "an image's placeholders are contiguous"
            assert (doc[run_] == idoc[i]).all(), "image_document_ids names the image's segment"
        pstarts = np.concatenate([[0], np.cumsum(grids.prod(axis=1))])
        for j, (sid, a, z) in enumerate(segment_spans(doc, b.lineage[0])):
            g = got.setdefault(sid, {"ids": [], "pv": [], "grid": []})
            g["ids"].append(ids[a:z])
            mine = np.flatnonzero(idoc == j)
            g["grid"].extend(grids[mine])
            g["pv"].extend(pv[pstarts[i] : pstarts[i + 1]] for i in mine)
            pieces_per_sample[sid] = pieces_per_sample.get(sid, 0) + 1
    assert sorted(got) == sorted(reference)
    for sid, ref in reference.items():
        g = got[sid]
        assert np.array_equal(np.concatenate(g["ids"]), ref["input_ids"]), f"sample {sid}: tokens"
        ref_grid = ref.get("image_grid_thw", np.zeros((0, 3), np.int64))
        assert np.array_equal(np.asarray(g["grid"]).reshape(-1, 3), ref_grid), f"sample {sid}: grids"
        ref_pv = ref.get("pixel_values", np.zeros((0, PATCH_DIM), np.float32))
        assert np.array_equal(np.concatenate(g["pv"]) if g["pv"] else ref_pv[:0], ref_pv), f"sample {sid}: patches"
    if algorithm == "wrap":
        assert any(v > 1 for v in pieces_per_sample.values()), "wrap splits documents (between images)"
    elif not allow_split:
        assert all(v == 1 for v in pieces_per_sample.values()), "documents shorter than a row stay whole"


def test_wrap_leaves_a_row_short_only_before_an_image_that_does_not_fit():
    rows = [b.data for b in run(packed(mb=1).options(lanes=1, flush_every_k_chunks=10_000))]  # no flush
    short = 0
    for row, nxt in itertools.pairwise(rows):
        pad = int(row["num_padding"][0])
        if pad:  # the next row starts with an image too long for the padding it left
            short += 1
            assert nxt["input_ids"][0, 0] == IMG
            first = nxt["image_grid_thw"][0]
            assert first.prod() // (M * M) > pad
    assert short >= 3
    total = sum(int(r["num_padding"][0]) for r in rows[:-1])
    assert total / (len(rows) * L) < 0.05


def test_training_view_labels_and_cu_seqlens():
    batches = run(packed(algorithm="best_fit", mb=2).options(lanes=2))
    assert batches
    images = 0
    for b in batches:
        t = b.to_training()
        ids, labels, doc = t["input_ids"], t["labels"], t["document_ids"]
        B = ids.shape[0]
        assert labels.shape == (B, L) and t["cu_seqlens"].shape == (B, L + 1)
        assert not (labels == IMG).any(), "a placeholder is never a target"
        target_is_image = ids[:, 1:] == IMG
        assert (labels[:, :-1][target_is_image] == -100).all()
        same = (doc[:, 1:] == doc[:, :-1]) & (doc[:, 1:] >= 0) & ~target_is_image
        assert np.array_equal(labels[:, :-1] != -100, same)
        assert np.array_equal(t["num_valid_tokens"], same.sum(axis=1))
        # text cu_seqlens: segment boundaries per row
        for r in range(B):
            cu = t["cu_seqlens"][r]
            ends = np.flatnonzero(np.diff(np.concatenate([doc[r], [-2]])) != 0) + 1
            assert np.array_equal(cu[: len(ends) + 1], np.concatenate([[0], ends]))
        # image cu_seqlens: per image (one frame each) h*w patches, cumulative over the microbatch
        g = t["image_grid_thw"]
        assert (g[:, 0] == 1).all()
        assert np.array_equal(t["image_cu_seqlens"], np.concatenate([[0], np.cumsum(g[:, 1] * g[:, 2])]))
        assert t["image_cu_seqlens"][-1] == len(t["pixel_values"]) == t["num_patches"].sum()
        assert len(g) == t["num_images"].sum()
        # flattened row-major, the placeholders are the images' LLM tokens in pixel_values order
        assert (ids == IMG).sum() == (g.prod(axis=1) // (M * M)).sum()
        images += len(g)
    assert images > 50


def test_video_grids_give_one_cu_seqlens_entry_per_frame():
    assert image_cu_seqlens(np.array([[2, 4, 6], [1, 2, 2]])).tolist() == [0, 24, 48, 52]


# -- a mask_field (assistant-only) and other token fields, at the accumulator/worker level -------
def _sample(k: int, text: int, grids: list[list[int]], **extra: Any) -> dict[str, Any]:
    g = np.array(grids, dtype=np.int64).reshape(-1, 3)
    ids = [IMG] * int((g.prod(axis=1) // 4).sum()) + [1000 * k + i for i in range(text)]
    n_patch = int(g.prod(axis=1).sum())
    out = {"input_ids": np.array(ids, np.int32), **extra}
    if len(g):
        out["pixel_values"] = np.full((n_patch, 4), k, np.float32)
        out["image_grid_thw"] = g
    return out


def _pack(op: PackSequences, payloads: list[dict[str, Any]]) -> list[dict[str, Any]]:
    acc = op.new_accumulator(0)
    keys = list(range(len(payloads)))
    out = acc.push(Records(payloads, keys, [(k,) for k in keys])) + acc.flush()
    return [r for w in out for r in op.worker()(w.task)]


def test_assistant_mask_and_token_fields_are_packed_and_placeholders_masked():
    op = PackSequences(16, "first_fit", image_token_id=IMG, patch_dim=4, mask_field="assistant", token_fields=("tt",))
    recs = []
    for k, (text, grids) in enumerate([(4, [[1, 2, 4]]), (3, []), (2, [[1, 2, 2], [1, 2, 2]])]):
        r = _sample(k, text, grids)
        n = len(r["input_ids"])
        r["assistant"] = (np.arange(n) >= n - 2).astype(np.uint8)  # only the last 2 tokens are the answer
        r["tt"] = np.full(n, k + 1, np.int16)
        recs.append(r)
    rows = _pack(op, recs)
    row = rows[0]
    ids, m = row["input_ids"], row["assistant"]
    assert m.dtype == np.uint8 and "loss_mask" not in row
    for j in range(3):
        seg = row["document_ids"] == j
        assert m[seg].sum() == 2 and (m[seg][-2:] == 1).all()
    assert not m[ids == IMG].any() and not m[row["document_ids"] < 0].any()
    assert row["tt"].dtype == np.int16 and np.array_equal(
        row["tt"], np.where(row["document_ids"] >= 0, row["document_ids"] + 1, 0)
    )
    batch = collate_multimodal(rows)
    view = op.training_view()(batch)
    keep = view["labels"][:, :-1] != -100
    assert np.array_equal(
        keep, (batch["assistant"][:, 1:] != 0) & (batch["document_ids"][:, 1:] == batch["document_ids"][:, :-1])
    )


@pytest.mark.parametrize(("algorithm", "allow_split"), VARIANTS)
def test_a_long_document_is_cut_only_between_images(algorithm, allow_split):
    # target 10: text 3, an image of 4 tokens, text 2, an image of 6 tokens, text 5 = 20 tokens
    doc = _sample(0, 0, [])
    doc["input_ids"] = np.array([1, 2, 3] + [IMG] * 4 + [4, 5] + [IMG] * 6 + [6, 7, 8, 9, 10], np.int32)
    doc["pixel_values"] = np.arange(40, dtype=np.float32).repeat(4).reshape(40, 4)
    doc["image_grid_thw"] = np.array([[1, 4, 4], [1, 4, 6]])
    op = PackSequences(10, algorithm, num_open_bins=2, allow_split=allow_split, image_token_id=IMG, patch_dim=4)
    rows = _pack(op, [_sample(1, 7, []), doc])
    got = [r["input_ids"][r["document_ids"] >= 0].tolist() for r in rows]
    assert sorted(x for r in got for x in r if x != IMG and x < 1000) == list(range(1, 11))
    for r in rows:
        counts = (r["image_grid_thw"].prod(axis=1) // 4).sum() if len(r["image_grid_thw"]) else 0
        assert (r["input_ids"] == IMG).sum() == counts
    if algorithm == "wrap":  # 7 text tokens of sample 1, then 1 2 3: the image would straddle, so the row leaves
        assert got[0] == [*range(1000, 1007), 1, 2, 3]
        assert got[1] == [IMG] * 4 + [4, 5]  # the 6-token image does not fit in the 4 left: the row leaves
        assert got[2] == [IMG] * 6 + [6, 7, 8, 9]
    else:  # the long document first gives rows of its own, each cut before the image that would straddle
        assert [1, 2, 3] + [IMG] * 4 + [4, 5] in got
        assert [IMG] * 6 + [6, 7, 8, 9] in got
    assert np.array_equal(np.concatenate([r["pixel_values"] for r in rows])[:, 0], np.arange(40)), (
        "patches whole, in order"
    )


# -- errors ----------------------------------------------------------------------------------------
def _records(payloads: list[dict[str, Any]]) -> StaticMixtureWorkSource:
    return StaticMixtureWorkSource([Dataset.from_records("bad", payloads, shard_size=8)], chunk_size=4, shuffle=False)


@pytest.mark.parametrize(
    ("payload", "match"),
    [
        (
            {**_sample(0, 3, [[1, 2, 4]]), "input_ids": np.array([IMG, 1, 2], np.int32)},
            "1 image placeholder tokens .* need 2",
        ),
        ({**_sample(0, 3, [[1, 2, 4]]), "input_ids": np.array([IMG, 1, IMG], np.int32)}, "not one contiguous run"),
        (
            {**_sample(0, 3, [[1, 2, 4]]), "pixel_values": np.zeros((7, 4), np.float32)},
            r"shape \(7, 4\).* need \(8, 4\)",
        ),
        ({**_sample(0, 3, [[1, 2, 4]]), "caption_id": 7}, "field 'caption_id' is not declared.*drop_fields"),
        ({**_sample(0, 3, [[1, 2, 4]]), "boxes": np.zeros(5)}, "field 'boxes' is not declared.*token_fields"),
        ({"input_ids": np.array([IMG] * 2, np.int32), "image_grid_thw": np.array([1, 2, 4])}, "no 'pixel_values'"),
        ({**_sample(0, 0, [[1, 2, 3]])}, "multiples of merge_size"),
        (_sample(0, 1, [[1, 8, 8]]), "16 placeholder tokens, more than target_length=12"),
    ],
)
def test_bad_samples_are_errors_naming_the_sample(payload, match):
    good = [_sample(1, 3, [[1, 2, 2]]) for _ in range(5)]
    pipe = (
        Pipeline(_records([*good, payload, *good]))
        .pack_sequences(12, image_token_id=IMG, patch_dim=4)
        .batch(1, collate=collate_multimodal)
    )
    with pytest.raises(OperatorError, match=match) as err:
        run(pipe.options(lanes=1))
    assert "samples bad[shard 0 (memory-00000), index 5]:" in str(err.value), "the error names the sample"


def test_default_collate_and_config_errors():
    pipe = Pipeline(_records([_sample(k, 3 + k, [[1, 2, 2 * (k + 1)]]) for k in range(8)]))
    with pytest.raises(OperatorError, match="collate"):
        run(pipe.pack_sequences(12, image_token_id=IMG, patch_dim=4).batch(2).options(lanes=1))
    for kwargs, match in [
        ({"image_token_id": 0}, "pad_id"),
        ({"image_token_id": IMG, "token_fields": ("loss_mask",)}, "twice or reserved"),
        ({"image_token_id": IMG, "token_fields": "abc"}, "token_fields"),
        ({"image_token_id": IMG, "merge_size": 0}, "merge_size"),
    ]:
        with pytest.raises(ConfigError, match=match):
            PackSequences(12, **kwargs)
    plain = PackSequences(12)
    assert "images" not in plain.config()  # text pipelines keep their fingerprints
    assert PackSequences(12, image_token_id=IMG).config()["images"]["image_token_id"] == IMG


# -- determinism -----------------------------------------------------------------------------------
LANES = 4
K = 2


@pytest.fixture(scope="module")
def baseline() -> list[str]:
    hashes = run_global(packed, lanes=LANES, flush_every=K).hashes
    assert len(hashes) >= 4 and len(set(hashes)) == len(hashes)
    return hashes


@pytest.mark.parametrize(
    ("runner", "parallelism", "world_size"),
    [
        ("inline", 2, 2),
        ("threads", 2, 1),
        ("threads", 1, 2),
        pytest.param("processes", 2, 2, marks=pytest.mark.slow),
    ],
)
def test_same_global_batches_everywhere(baseline, runner, parallelism, world_size):
    got = run_global(packed, lanes=LANES, world_size=world_size, runner=runner, parallelism=parallelism, flush_every=K)
    assert got.hashes == baseline


@pytest.mark.parametrize("cut", [1, 3])
def test_resume_on_twice_the_ranks(baseline, cut):
    first = run_global(packed, lanes=LANES, world_size=2, runner="threads", parallelism=2, flush_every=K, steps=cut)
    assert first.state is not None and first.hashes == baseline[:cut]
    # cut inside a window on some lane: replay has to rebuild partly packed rows
    assert any(ls["skip"] > 0 for ls in first.state["lanes"].values())
    rest = run_global(packed, lanes=LANES, world_size=4, runner="threads", flush_every=K, resume=first.state)
    assert first.hashes + rest.hashes == baseline


# -- the kernel's conformance suite on the multimodal packer ----------------------------------------
@functools.lru_cache(maxsize=1)
def conformance_records() -> list[dict[str, Any]]:
    return [r for b in run(samples().batch(1, collate=lambda rows: rows[0]).options(lanes=1)) for r in [b.data]]


class MultimodalPackConformance(PackConformance):
    __test__ = False
    target_length = 64
    num_open_bins = 3
    pack_options: ClassVar[dict[str, Any]] = {"image_token_id": IMG, "patch_dim": PATCH_DIM}

    @pytest.fixture
    def sample_records(self):
        return conformance_records()

    @pytest.fixture
    def perturb_payload(self):
        return perturb_keeping_images


def perturb_keeping_images(p: dict[str, Any]) -> dict[str, Any]:
    """Other text and pixels, same structure: placeholders and grids stay valid."""
    ids = p["input_ids"].copy()
    text = ids != IMG
    ids[text] = (ids[text] + 1) % IMG
    p["input_ids"] = ids
    if "pixel_values" in p:
        p["pixel_values"] = p["pixel_values"] + 1
    return p


@pytest.mark.slow
class TestWrapMultimodalConformance(MultimodalPackConformance):
    algorithm = "wrap"


@pytest.mark.slow
@pytest.mark.exhaustive
class TestBestFitMultimodalConformance(MultimodalPackConformance):
    algorithm = "best_fit"
    allow_split = True
