"""``resize``, ``center_crop``, ``random_resized_crop``, ``horizontal_flip``, ``normalize`` and
``patchify`` on real photographs: results against independent references, the documented sizes and
layouts, and the per-sample seeds of the random operators."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from PIL import Image
from zephon_vision import CenterCrop, HorizontalFlip, Normalize, Patchify, RandomResizedCrop, Resize
from zephon_vision.geometry import random_crop_box, resized_shape
from zephon_vision.normalize import CLIP_MEAN, CLIP_STD, IMAGENET_MEAN, IMAGENET_STD
from zephon_vision.patchify import QWEN2_VL_MAX_PIXELS, QWEN2_VL_MIN_PIXELS, smart_resize
from zephon_vision.testing import image_arrays, photographs

from zephon_core.defaults.operators.mapping import rng_base, sample_rng
from zephon_core.errors import ConfigError


@pytest.fixture(scope="module")
def images() -> list[np.ndarray]:
    return image_arrays(24, min_side=20, max_side=120, seed=1)


def pil_resize(image: np.ndarray, height: int, width: int, resample: Image.Resampling) -> np.ndarray:
    return np.array(Image.fromarray(image).resize((width, height), resample))


# -- resize ------------------------------------------------------------------------------------------
def test_resize_shorter_side_and_exact_size(images):
    short = Resize(32).fn
    exact = Resize((24, 40), interpolation="bicubic").fn
    for image in images:
        h, w = image.shape[:2]
        out = short({"image": image})["image"]
        assert min(out.shape[:2]) == 32 and out.shape[2] == 3
        expect = (32, w * 32 // h) if h <= w else (h * 32 // w, 32)
        assert out.shape[:2] == expect
        assert np.array_equal(out, pil_resize(image, *expect, Image.Resampling.BILINEAR))
        assert np.array_equal(exact({"image": image})["image"], pil_resize(image, 24, 40, Image.Resampling.BICUBIC))


def test_resize_max_size_and_other_inputs():
    assert resized_shape(100, 400, 64, max_size=128) == (32, 128)
    assert resized_shape(400, 100, 64) == (256, 64)
    assert resized_shape(50, 50, 64) == (64, 64)
    gray = photographs()[6][1][:90, :120]  # camera: HW
    out = Resize(30).fn({"image": gray})["image"]
    assert out.shape == (30, 40) and out.dtype == np.uint8
    floats = np.random.default_rng(0).random((30, 40, 2), dtype=np.float32)
    out = Resize((15, 20)).fn({"image": floats})["image"]
    assert out.shape == (15, 20, 2) and out.dtype == np.float32
    two = (floats * 255).astype(np.uint8)
    assert Resize((15, 20)).fn({"image": two})["image"].dtype == np.uint8
    same = {"image": np.zeros((32, 48, 3), np.uint8)}
    assert Resize(32).fn(same) is same  # nothing to do


# -- center crop ---------------------------------------------------------------------------------------
def test_center_crop_window_and_padding(images):
    fn = CenterCrop((16, 20)).fn
    for image in images:
        h, w = image.shape[:2]
        out = fn({"image": image})["image"]
        assert out.shape == (16, 20, 3)
        if h >= 16 and w >= 20:
            top, left = (h - 16) // 2, (w - 20) // 2
            assert np.array_equal(out, image[top : top + 16, left : left + 20])
    small = np.full((5, 6, 3), 7, np.uint8)
    out = CenterCrop(9, fill=1).fn({"image": small})["image"]
    assert out.shape == (9, 9, 3)
    assert (out[2:7, 1:7] == 7).all() and out.sum() == 7 * 90 + 1 * (81 - 30) * 3


# -- random resized crop ------------------------------------------------------------------------------
def test_random_crop_box_follows_the_rule():
    rng = np.random.default_rng(0)
    fractions = []
    for _ in range(2000):
        h, w = int(rng.integers(32, 300)), int(rng.integers(32, 300))
        top, left, ch, cw = random_crop_box(h, w, (0.08, 1.0), (3 / 4, 4 / 3), rng)
        assert 0 <= top and top + ch <= h and 0 <= left and left + cw <= w and ch > 0 and cw > 0
        if (ch, cw) != (h, w) and 0.8 < h / w < 1.25:  # a drawn box (not the fallback): ratio within range
            assert 3 / 4 - 0.1 < cw / ch < 4 / 3 + 0.1
        fractions.append(ch * cw / (h * w))
    assert min(fractions) < 0.1 and max(fractions) > 0.9 and 0.06 < min(fractions)
    # a strip no crop can fit: the fallback is the largest central box with a clamped ratio
    assert random_crop_box(4, 400, (0.9, 1.0), (3 / 4, 4 / 3), rng) == (0, 197, 4, 5)


def test_random_resized_crop_uses_the_kernel_per_sample_generator(images):
    op = RandomResizedCrop((24, 16), scale=(0.3, 1.0), seed=5)
    fn, base = op.fn, rng_base(5, "random_resized_crop")
    assert op.takes_rng and op.config()["seed"] == 5
    for key, image in enumerate(images):
        out = fn({"image": image}, rng=sample_rng(base, key))["image"]
        assert out.shape == (24, 16, 3)
        top, left, ch, cw = random_crop_box(image.shape[0], image.shape[1], (0.3, 1.0), (3 / 4, 4 / 3), sample_rng(base, key))
        ref = np.array(Image.fromarray(image).resize((16, 24), Image.Resampling.BILINEAR, box=(left, top, left + cw, top + ch)))
        assert np.array_equal(out, ref)
        assert np.array_equal(out, fn({"image": image}, rng=sample_rng(base, key))["image"])


# -- horizontal flip -----------------------------------------------------------------------------------
def test_horizontal_flip(images):
    image = images[0]
    assert np.array_equal(HorizontalFlip(1.0).fn({"image": image}, rng=sample_rng(1, 2))["image"], image[:, ::-1])
    assert HorizontalFlip(0.0).fn({"image": image}, rng=sample_rng(1, 2))["image"] is image
    fn, base = HorizontalFlip(0.5, flag="flipped").fn, rng_base(0, "horizontal_flip")
    flags = [fn({"image": image}, rng=sample_rng(base, key))["flipped"] for key in range(400)]
    assert 160 < sum(flags) < 240
    assert flags == [fn({"image": image}, rng=sample_rng(base, key))["flipped"] for key in range(400)]


# -- normalize -------------------------------------------------------------------------------------------
def test_normalize(images):
    image = images[3]
    out = Normalize().fn({"image": image})["image"]
    expect = (image.astype(np.float64) / 255 - np.asarray(IMAGENET_MEAN)) / np.asarray(IMAGENET_STD)
    assert out.dtype == np.float32 and out.shape == image.shape
    assert np.abs(out - expect).max() < 1e-5
    a = (np.float64(1 / 255) / np.asarray(IMAGENET_STD)).astype(np.float32)
    b = (-np.asarray(IMAGENET_MEAN) / np.asarray(IMAGENET_STD)).astype(np.float32)
    assert np.array_equal(out, image.astype(np.float32) * a + b)  # the documented formula, bit for bit
    chw = Normalize(CLIP_MEAN, CLIP_STD, chw=True, out="pixels").fn({"image": image, "n": 1})
    assert sorted(chw) == ["n", "pixels"] and chw["pixels"].shape == (3, *image.shape[:2])
    gray = Normalize([0.5], [0.25]).fn({"image": image[:, :, 0]})["image"]
    assert gray.shape == (*image.shape[:2], 1)
    with pytest.raises(ValueError, match="3 channels"):
        Normalize([0.5, 0.5], [0.2, 0.2]).fn({"image": image})
    for bad in ({"std": (0.0, 1.0, 1.0)}, {"mean": ()}, {"rescale": "x"}, {"mean": (1, 2), "std": (1, 2, 3)}):
        with pytest.raises(ConfigError):
            Normalize(**bad)


# -- patchify ---------------------------------------------------------------------------------------------
def qwen2_vl_patches(frames_tchw: np.ndarray, patch_size: int, temporal_patch_size: int, merge_size: int) -> np.ndarray:
    """The reshape of ``transformers``' ``Qwen2VLImageProcessor._preprocess``, transcribed."""
    patches = frames_tchw
    if patches.shape[0] % temporal_patch_size != 0:
        repeats = np.repeat(patches[-1][np.newaxis], temporal_patch_size - (patches.shape[0] % temporal_patch_size), axis=0)
        patches = np.concatenate([patches, repeats], axis=0)
    channel = patches.shape[1]
    grid_t = patches.shape[0] // temporal_patch_size
    grid_h, grid_w = patches.shape[2] // patch_size, patches.shape[3] // patch_size
    patches = patches.reshape(
        grid_t, temporal_patch_size, channel,
        grid_h // merge_size, merge_size, patch_size,
        grid_w // merge_size, merge_size, patch_size,
    )  # fmt: skip
    patches = patches.transpose(0, 3, 6, 4, 7, 2, 1, 5, 8)
    return patches.reshape(grid_t * grid_h * grid_w, channel * temporal_patch_size * patch_size * patch_size)


def qwen2_vl_smart_resize(height: int, width: int, factor: int, min_pixels: int, max_pixels: int) -> tuple[int, int]:
    """Qwen2-VL's ``smart_resize``, transcribed (for sizes where it holds its own bounds)."""
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = math.floor(height / beta / factor) * factor
        w_bar = math.floor(width / beta / factor) * factor
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def test_smart_resize_matches_qwen2_vl_and_keeps_its_bounds():
    for h, w in itertools.product([28, 100, 333, 480, 1080, 2000, 4032], [28, 56, 100, 640, 1920, 3024]):
        got = smart_resize(h, w, factor=28, min_pixels=QWEN2_VL_MIN_PIXELS, max_pixels=QWEN2_VL_MAX_PIXELS)
        assert got == qwen2_vl_smart_resize(h, w, 28, QWEN2_VL_MIN_PIXELS, QWEN2_VL_MAX_PIXELS)
        assert got[0] % 28 == 0 and got[1] % 28 == 0 and QWEN2_VL_MIN_PIXELS <= got[0] * got[1] <= QWEN2_VL_MAX_PIXELS
    # where the reference breaks its own bound (a side held at one factor), ours still holds it
    assert smart_resize(10, 1900, factor=28, min_pixels=784, max_pixels=28 * 28 * 20) == (28, 560)
    with pytest.raises(ValueError, match="aspect ratio"):
        smart_resize(10, 2100, factor=28, min_pixels=784, max_pixels=10**6)


def test_patchify_layout_is_qwen2_vl():
    rng = np.random.default_rng(3)
    image = rng.standard_normal((56, 84, 3)).astype(np.float32)  # float input: taken as normalized, no resize
    out = Patchify(14, min_pixels=28 * 28, max_pixels=10**6).fn({"image": image, "n": 1})
    assert sorted(out) == ["image_grid_thw", "n", "pixel_values"]
    ref = qwen2_vl_patches(image.transpose(2, 0, 1)[None], 14, 2, 2)
    assert out["pixel_values"].dtype == np.float32 and np.array_equal(out["pixel_values"], ref)
    assert out["image_grid_thw"].tolist() == [1, 4, 6] and out["image_grid_thw"].dtype == np.int64
    video = rng.standard_normal((3, 28, 56, 3)).astype(np.float32)
    got = Patchify(14, min_pixels=28 * 28).fn({"image": video})
    assert got["image_grid_thw"].tolist() == [2, 2, 4]
    assert np.array_equal(got["pixel_values"], qwen2_vl_patches(video.transpose(0, 3, 1, 2), 14, 2, 2))


def test_patchify_uint8_photographs_like_the_qwen2_vl_processor(images):
    fn = Patchify().fn  # Qwen2-VL's defaults
    a = (np.float64(1 / 255) / np.asarray(CLIP_STD)).astype(np.float32)
    b = (-np.asarray(CLIP_MEAN) / np.asarray(CLIP_STD)).astype(np.float32)
    for name, photo in photographs()[:4]:
        h, w = photo.shape[:2]
        out = fn({"image": photo})
        rh, rw = qwen2_vl_smart_resize(h, w, 28, QWEN2_VL_MIN_PIXELS, QWEN2_VL_MAX_PIXELS)
        resized = np.array(Image.fromarray(photo).resize((rw, rh), Image.Resampling.BICUBIC))
        values = resized.astype(np.float32) * a + b
        assert np.array_equal(out["pixel_values"], qwen2_vl_patches(values.transpose(2, 0, 1)[None], 14, 2, 2)), name
        assert out["image_grid_thw"].tolist() == [1, rh // 14, rw // 14]


def test_patchify_never_exceeds_max_patches():
    fn = Patchify(4, merge_size=2, min_pixels=8 * 8, max_pixels=10**6, max_patches=60, mean=None, std=None).fn
    rng = np.random.default_rng(1)
    for _ in range(150):
        h, w = int(rng.integers(1, 120)), int(rng.integers(1, 120))
        if max(h, w) / min(h, w) > 200:
            continue
        out = fn({"image": np.zeros((h, w, 3), np.uint8)})
        t, gh, gw = out["image_grid_thw"].tolist()
        assert out["pixel_values"].shape == (t * gh * gw, 3 * 2 * 4 * 4)
        assert t == 1 and gh % 2 == 0 and gw % 2 == 0 and 4 <= gh * gw <= 60


def test_patchify_options():
    image = np.full((40, 40, 3), 255, np.uint8)
    raw = Patchify(4, min_pixels=16, max_pixels=40 * 40, mean=None, std=None, rescale=1.0).fn({"image": image})
    assert (raw["pixel_values"] == 255).all() and raw["image_grid_thw"].tolist() == [1, 10, 10]
    small = {"min_pixels": 16, "max_pixels": 40 * 40}
    kept = Patchify(4, **small, keep_image=True, out_patches="p", out_grid="g").fn({"image": image})
    assert sorted(kept) == ["g", "image", "p"]
    config = Patchify(16, max_patches=256).config()
    assert json.loads(json.dumps(config)) == config and config["max_patches"] == 256 and "seed" not in config
    for bad in (
        {"patch_size": 0},
        {"max_pixels": 27 * 27},
        {"min_pixels": 10**7},
        {"max_patches": 3},
        {"mean": None},
        {"interpolation": "cubic"},
    ):
        with pytest.raises(ConfigError):
            Patchify(**bad)
    with pytest.raises(TypeError, match="HWC image or a THWC video"):
        Patchify().fn({"image": b"encoded"})


def test_random_operators_take_seeds_and_the_others_refuse_them():
    for op in (RandomResizedCrop(8, seed=2), HorizontalFlip(seed=2)):
        assert op.takes_rng and op.config()["seed"] == 2
    for cls in (Resize, CenterCrop):
        with pytest.raises(TypeError):
            cls(8, seed=2)
    with pytest.raises(ConfigError):
        HorizontalFlip(p=1.5)
    with pytest.raises(ConfigError):
        RandomResizedCrop(8, scale=(0.5, 2.0))
