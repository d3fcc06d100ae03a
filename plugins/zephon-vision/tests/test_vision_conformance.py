"""The kernel's determinism conformance suite, run on every vision operator.

Inputs are real photographs (scikit-image's sample data) cropped to small sizes so each suite runs in
seconds; ``decode_image`` gets them encoded as JPEG, PNG and WebP (with EXIF orientations,
grayscale, alpha and palette images among them), the other operators get decoded arrays. The whole
module is marked slow: eight operators x the full suite takes minutes on a 2-core machine.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest
from zephon_vision import (
    CenterCrop,
    DecodeImage,
    HorizontalFlip,
    Normalize,
    Patchify,
    RandomResizedCrop,
    Resize,
)
from zephon_vision.testing import array_records, encode, encoded_records, image_arrays

from zephon_core.conformance import OperatorConformance

pytestmark = pytest.mark.slow

N = 96  # 24 global steps over the suite's 4 lanes
_ALT_IMAGE = encode(image_arrays(1, min_side=20, max_side=20, seed=99)[0], "PNG")


def other_image(payload: dict[str, Any]) -> dict[str, Any]:
    """Rule 5's perturbation for encoded input: the same record with another (valid) image."""
    return {**payload, "image": _ALT_IMAGE}


def with_corrupt_images() -> list[dict[str, Any]]:
    """Encoded records of which every seventh is damaged: truncated, garbage, or an empty string."""
    recs = encoded_records(N, min_side=16, max_side=48)
    for i in range(3, N, 7):
        data = recs[i]["image"]
        recs[i] = {**recs[i], "image": [data[: len(data) // 2], b"not an image at all", b""][i % 3]}
    return recs


class _ArrayInput(OperatorConformance):
    __test__ = False

    @pytest.fixture
    def sample_records(self):
        return array_records(N, min_side=16, max_side=48)


class TestDecodeImageConformance(OperatorConformance):
    @pytest.fixture
    def operator_factory(self):
        return DecodeImage

    @pytest.fixture
    def sample_records(self):
        return encoded_records(N, min_side=16, max_side=48)

    @pytest.fixture
    def perturb_payload(self):
        return other_image


@pytest.mark.exhaustive  # a plain map; the decode, random and patchify classes keep the suite in every run
class TestDecodeImageSkipConformance(TestDecodeImageConformance):
    """``on_error="skip"``: the damaged records become tombstones (rule 5 checks they are kept)."""

    @pytest.fixture
    def operator_factory(self):
        return functools.partial(DecodeImage, on_error="skip", backend="pillow")

    @pytest.fixture
    def sample_records(self):
        return with_corrupt_images()


@pytest.mark.exhaustive  # a plain map; the decode, random and patchify classes keep the suite in every run
class TestResizeConformance(_ArrayInput):
    @pytest.fixture
    def operator_factory(self):
        return functools.partial(Resize, 20, interpolation="bicubic")


@pytest.mark.exhaustive  # a plain map; the decode, random and patchify classes keep the suite in every run
class TestCenterCropConformance(_ArrayInput):
    @pytest.fixture
    def operator_factory(self):
        return functools.partial(CenterCrop, (24, 32))


class TestRandomResizedCropConformance(_ArrayInput):
    @pytest.fixture
    def operator_factory(self):
        return functools.partial(RandomResizedCrop, 16, scale=(0.2, 1.0), seed=3)


@pytest.mark.exhaustive  # a plain map; the decode, random and patchify classes keep the suite in every run
class TestHorizontalFlipConformance(_ArrayInput):
    @pytest.fixture
    def operator_factory(self):
        return functools.partial(HorizontalFlip, 0.5, flag="flipped")


@pytest.mark.exhaustive  # a plain map; the decode, random and patchify classes keep the suite in every run
class TestNormalizeConformance(_ArrayInput):
    @pytest.fixture
    def operator_factory(self):
        return functools.partial(Normalize, chw=True)


class TestPatchifyConformance(_ArrayInput):
    @pytest.fixture
    def operator_factory(self):
        return functools.partial(Patchify, 4, merge_size=2, min_pixels=16 * 16, max_pixels=40 * 40, max_patches=64)
