"""A text-only + image-caption mixture in one VLM pipeline, as every VLM data mixture is built.

Two datasets in one ``StaticMixtureWorkSource``: captioned photographs (real JPEG bytes encoded with
Pillow) and text-only documents, some of which carry ``image: None`` as a nullable Parquet column
stores a row without an image. With ``missing="pass"`` every vision operator lets the text-only
records through, and ``pack_sequences(image_token_id=...)`` packs both kinds into the same rows.
Checked: rows really mix the two datasets, every image arrives whole with its placeholders, and
the global batches are the same on every runner (inline, threads, processes) and world size
(1, 2, 4 ranks). Without ``missing="pass"`` the first text-only record is an error naming it.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest

from zephon_core import ConfigError, Dataset, MixtureSpec, OperatorError, Pipeline, StaticMixtureWorkSource
from zephon_core.conformance.harness import run_global

pytest.importorskip("skimage.data")  # the photographs (scikit-image ships them in its wheel)
pytest.importorskip("zephon_tokenize")
zephon_pack = pytest.importorskip("zephon_pack")

from zephon_vision.base import Missing  # noqa: E402
from zephon_vision.decode import DecodeImage  # noqa: E402
from zephon_vision.geometry import CenterCrop, HorizontalFlip, RandomResizedCrop, Resize  # noqa: E402
from zephon_vision.normalize import Normalize  # noqa: E402
from zephon_vision.patchify import Patchify  # noqa: E402
from zephon_vision.testing import encoded_records  # noqa: E402

IMG = 50257  # one past GPT-2's vocabulary: the image placeholder (Qwen2-VL's <|image_pad|>)
PS, TPS, M = 8, 2, 2  # small patches keep the test fast; the layout is Qwen2-VL's
PATCH_DIM = 3 * TPS * PS * PS
L = 48
LANES = 4
K = 2
WORDS = (
    "the river runs past an old mill where children play in summer and the miller tells stories of "
    "storms winters and harvests long ago while swallows circle above a quiet green valley at dusk"
).split()


def _sentence(rng: np.random.Generator) -> str:
    return " ".join(WORDS[int(j)] for j in rng.integers(0, len(WORDS), int(rng.integers(4, 30)))) + "."


@functools.lru_cache(maxsize=1)
def corpus() -> StaticMixtureWorkSource:
    """Captioned JPEGs (``{"image": bytes, "text": caption}``) mixed 1:1 with text-only documents
    (``{"text": ...}``, every third also ``"image": None``)."""
    rng = np.random.default_rng(5)  # test data only
    captions = [
        {"image": r["image"], "text": _sentence(rng)}
        for r in encoded_records(48, formats=("JPEG",), min_side=16, max_side=48, seed=7)
    ]
    texts: list[dict[str, Any]] = [{"text": _sentence(rng)} for _ in range(48)]
    for i in range(0, len(texts), 3):
        texts[i]["image"] = None
    return StaticMixtureWorkSource(
        [Dataset.from_records("captions", captions, shard_size=12), Dataset.from_records("text", texts, shard_size=12)],
        mixture=MixtureSpec({"captions": 0.5, "text": 0.5}),
        chunk_size=4,
        seed=11,
    )


def add_placeholders(p: dict[str, Any]) -> dict[str, Any]:
    """One run of placeholders before the caption; a text-only record keeps its ids alone."""
    if "image_grid_thw" not in p:
        return {"input_ids": p["input_ids"]}
    grid = p["image_grid_thw"]
    run = np.full(int(np.prod(grid)) // (M * M), IMG, dtype=np.int32)
    return {"input_ids": np.concatenate([run, p["input_ids"]]), "pixel_values": p["pixel_values"], "image_grid_thw": grid[None]}


def vlm(parallelism: int, missing: Missing = "pass") -> Pipeline:
    """decode → random crop → flip → patchify → tokenize → placeholders → multimodal pack → batch."""
    return (
        Pipeline(corpus())
        .decode_image(missing=missing, parallelism=parallelism)
        .random_resized_crop((32, 40), scale=(0.5, 1.0), missing=missing)
        .horizontal_flip(seed=1, missing=missing)
        .patchify(
            PS, temporal_patch_size=TPS, merge_size=M, min_pixels=16 * 16, max_pixels=48 * 48,
            missing=missing, parallelism=parallelism,
        )
        .tokenize(tokenizer_id="gpt2", field="text", parallelism=parallelism)
        .map_transform(add_placeholders, parallelism=parallelism)
        .pack_sequences(L, "best_fit", image_token_id=IMG, patch_dim=PATCH_DIM, parallelism=parallelism)
        .batch(2, collate=zephon_pack.collate_multimodal)
    )


@pytest.fixture(scope="module")
def baseline() -> list[str]:
    hashes = run_global(vlm, lanes=LANES, runner="inline", flush_every=K).hashes
    assert len(hashes) >= 4
    return hashes


def test_text_only_and_image_samples_share_rows() -> None:
    pipe = vlm(1).options(lanes=2, flush_every_k_chunks=K)
    mixed = images = rows = 0
    seen: dict[str, set[int]] = {"captions": set(), "text": set()}
    with pipe as p:
        for b in p:
            d = b.data
            for names, lineage in zip(pipe.datasets_of(b), b.lineage):
                rows += 1
                mixed += {"captions", "text"} <= set(names)
                for name, sid in zip(names, lineage):
                    seen[name].add(sid)
            # every image of the batch is whole: its placeholders match its grid, row by row
            assert int((d["input_ids"] == IMG).sum()) == int((d["image_grid_thw"].prod(axis=1) // (M * M)).sum())
            assert len(d["pixel_values"]) == int(d["image_grid_thw"].prod(axis=1).sum()) == int(d["num_patches"].sum())
            images += len(d["image_grid_thw"])
    assert len(seen["text"]) >= 20 and images == len(seen["captions"]) >= 20, "each captioned photograph once"
    assert mixed >= rows // 3, f"only {mixed} of {rows} rows hold both text-only and image samples"


@pytest.mark.parametrize(
    ("runner", "parallelism", "world_size"),
    [
        ("threads", 2, 1),
        ("threads", 1, 2),
        ("threads", 2, 4),
        ("inline", 1, 4),
        pytest.param("processes", 2, 1, marks=pytest.mark.slow),
        pytest.param("processes", 2, 2, marks=pytest.mark.slow),
    ],
)
def test_same_global_batches(baseline: list[str], runner: str, parallelism: int, world_size: int) -> None:
    got = run_global(vlm, lanes=LANES, world_size=world_size, runner=runner, parallelism=parallelism, flush_every=K)
    assert got.hashes == baseline


def test_without_the_option_a_text_only_record_is_an_error_naming_it() -> None:
    with vlm(1, missing="error").options(lanes=1) as p, pytest.raises(OperatorError) as err:
        list(p)
    msg = str(err.value)
    assert "decode_image" in msg and "missing='pass'" in msg and "samples text[shard" in msg, msg


@pytest.mark.parametrize("op", [DecodeImage, Resize, CenterCrop, RandomResizedCrop, HorizontalFlip, Normalize, Patchify])
def test_missing_must_be_error_or_pass(op: Any) -> None:  # an operator class
    args = (8,) if op in (Resize, CenterCrop, RandomResizedCrop) else ()
    with pytest.raises(ConfigError, match=rf"^{op.kind}: missing must be 'error' or 'pass', got 'skip'$"):
        op(*args, missing="skip")


def test_each_operator_passes_a_record_without_an_image() -> None:
    """Unchanged, or less a None input field the operator consumes; the default stays an error."""
    text = {"text": "no picture here", "image": None}
    assert DecodeImage(missing="pass").fn(text) == {"text": "no picture here"}
    assert DecodeImage(missing="pass", keep_encoded=True).fn(text) == text
    assert Resize(8, missing="pass").fn(text) == text
    assert CenterCrop(8, missing="pass").fn(text) == text
    assert RandomResizedCrop(8, missing="pass").fn({"text": "t"}, np.random.default_rng(0)) == {"text": "t"}
    assert HorizontalFlip(flag="flipped", missing="pass").fn({"text": "t"}, np.random.default_rng(0)) == {
        "text": "t",
        "flipped": False,
    }
    assert Normalize(out="pixels", missing="pass").fn(text) == {"text": "no picture here"}
    assert Patchify(missing="pass").fn(text) == {"text": "no picture here"}
    assert Patchify(missing="pass", keep_image=True).fn(text) == text
    for op in (DecodeImage(), Resize(8), CenterCrop(8), Normalize(), Patchify()):
        with pytest.raises(KeyError, match="missing='pass'"):
            op.fn(text)


def test_the_default_keeps_existing_fingerprints() -> None:
    """``missing`` enters the configuration only when set, so older checkpoints still resume."""
    assert "missing" not in DecodeImage().config() and "missing" not in Patchify().config()
    assert DecodeImage(missing="pass").config()["missing"] == "pass"
    assert DecodeImage(missing="pass").config() != DecodeImage().config()
