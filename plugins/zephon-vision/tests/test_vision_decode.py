"""``decode_image``: pixels equal to Pillow's reference decoding, both backends bit-identical, EXIF
orientation, modes, alpha, 16-bit input, and bad images (an error naming the sample, or a tombstone)."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pytest
from PIL import Image, ImageOps
from zephon_vision import DecodeImage, ImageDecodeError, decode_bytes
from zephon_vision.decode import jpeg_orientation, resolve_backend
from zephon_vision.testing import encode, encoded_records, image_arrays, photographs

from zephon_core import Dataset, Pipeline, StaticMixtureWorkSource
from zephon_core.errors import ConfigError, OperatorError, PluginError
from zephon_core.work.ids import split_sample_id

try:
    import simplejpeg
except ImportError:  # the fast backend is an optional extra
    simplejpeg = None

needs_simplejpeg = pytest.mark.skipif(simplejpeg is None, reason="simplejpeg is not installed (zephon-vision[fast])")
BACKENDS = ["pillow", pytest.param("simplejpeg", marks=needs_simplejpeg)]


def reference(data: bytes) -> np.ndarray:
    """What a careful user would write with Pillow alone: orientation applied, converted to RGB."""
    with Image.open(io.BytesIO(data)) as im:
        return np.array(ImageOps.exif_transpose(im).convert("RGB"))


def has_alpha(data: bytes) -> bool:
    with Image.open(io.BytesIO(data)) as im:
        return im.mode in ("RGBA", "LA", "PA") or "transparency" in im.info


def source(records: list[dict[str, Any]], name: str = "photos") -> StaticMixtureWorkSource:
    return StaticMixtureWorkSource([Dataset.from_records(name, records, shard_size=16)], chunk_size=8, shuffle=False)


def rows(rows: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """Collate to the sample numbers only (images differ in size)."""
    return {"n": np.asarray([r["n"] for r in rows])}


# -- pixels ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_pixels_equal_pillow_reference(backend):
    recs = encoded_records(48)
    opaque = alpha = 0
    for r in recs:
        got = decode_bytes(r["image"], backend=backend)
        ref = reference(r["image"])
        assert got.dtype == np.uint8 and got.shape == ref.shape and got.flags.writeable
        if has_alpha(r["image"]):  # ours composites over white; Pillow's convert drops alpha
            alpha += 1
            assert not np.array_equal(got, ref)
        else:
            opaque += 1
            assert np.array_equal(got, ref), r["n"]
    assert opaque > 30 and alpha >= 2


@needs_simplejpeg
@pytest.mark.parametrize(
    ("quality", "subsampling", "progressive"),
    [
        (90, 2, False),  # 4:2:0, the common case
        (75, 0, True),  # 4:4:4, progressive
        pytest.param(60, 1, False, marks=pytest.mark.slow),  # 4:2:2
        pytest.param(95, 2, True, marks=pytest.mark.slow),
        pytest.param(95, 0, False, marks=pytest.mark.slow),
    ],
)
def test_simplejpeg_is_bit_identical_to_pillow(quality, subsampling, progressive):
    for name, photo in photographs():
        buf = io.BytesIO()
        Image.fromarray(photo).save(buf, "JPEG", quality=quality, subsampling=subsampling, progressive=progressive)
        data = buf.getvalue()
        fast, ref = decode_bytes(data, backend="simplejpeg"), decode_bytes(data, backend="pillow")
        assert np.array_equal(fast, ref), name


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fmt", ["JPEG", "WEBP", "PNG"])
def test_exif_orientation(backend, fmt):
    image = image_arrays(1, min_side=37, max_side=53, seed=4)[0]  # not square: a transposition shows
    for orientation in range(1, 9):
        data = encode(image, fmt, orientation=orientation)
        if fmt == "JPEG":
            assert jpeg_orientation(data) == orientation
        got = decode_bytes(data, backend=backend)
        assert np.array_equal(got, reference(data)), orientation
        assert got.shape[:2] == (image.shape[:2] if orientation <= 4 else image.shape[1::-1])
        raw = decode_bytes(data, backend=backend, exif_transpose=False)
        assert raw.shape == image.shape


def test_modes_and_alpha():
    photo = image_arrays(1, min_side=30, max_side=40, seed=2)[0]
    rgba = np.dstack([photo, np.zeros(photo.shape[:2], np.uint8)])
    rgba[:, : photo.shape[1] // 2, 3] = 255  # left half opaque, right half fully transparent
    data = encode(rgba, "PNG")
    half = photo.shape[1] // 2
    rgb = decode_bytes(data)
    assert np.array_equal(rgb[:, :half], photo[:, :half]) and (rgb[:, half:] == 255).all()
    red = decode_bytes(data, background=(255, 0, 0))
    assert (red[:, half:] == [255, 0, 0]).all()
    assert np.array_equal(decode_bytes(data, mode="RGBA"), rgba)
    gray = decode_bytes(encode(photo, "PNG"), mode="L")
    assert gray.shape == (*photo.shape[:2], 1)
    assert np.array_equal(gray[:, :, 0], np.array(Image.fromarray(photo).convert("L")))
    gray_jpeg = encode(photo, "JPEG", mode="L")
    assert decode_bytes(gray_jpeg).shape == (*photo.shape[:2], 3)


def test_sixteen_bit_png_keeps_the_high_byte():
    wide = (np.arange(40 * 30, dtype=np.uint32).reshape(30, 40) * 54).astype(np.uint16)
    buf = io.BytesIO()
    Image.fromarray(wide).save(buf, "PNG")
    got = decode_bytes(buf.getvalue(), mode="L")
    assert np.array_equal(got[:, :, 0], (wide >> 8).astype(np.uint8))


def test_buffers_other_than_bytes():
    data = encode(image_arrays(1)[0], "PNG")
    ref = decode_bytes(data)
    for buf in (bytearray(data), memoryview(data), np.frombuffer(data, dtype=np.uint8)):
        assert np.array_equal(decode_bytes(buf), ref)


# -- bad images ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_damaged_images_raise(backend):
    jpeg = encode(image_arrays(1, min_side=64, max_side=64)[0], "JPEG")
    png = encode(image_arrays(1, min_side=64, max_side=64)[0], "PNG")
    for bad in (jpeg[: len(jpeg) // 2], png[: len(png) // 2], b"", b"GIF89a broken", jpeg[:2] + b"\x00" * 200):
        with pytest.raises(ImageDecodeError):
            decode_bytes(bad, backend=backend)
    with pytest.raises(ImageDecodeError, match="max_pixels"):
        decode_bytes(jpeg, backend=backend, max_pixels=64 * 63)
    with pytest.raises(ImageDecodeError):
        decode_bytes(jpeg, backend="pillow", formats=("PNG",))


def _with_damage() -> list[dict[str, Any]]:
    recs = encoded_records(32, min_side=16, max_side=40)
    recs[5] = {**recs[5], "image": recs[5]["image"][:40]}
    recs[11] = {**recs[11], "image": b"<html>not found</html>"}
    return recs


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_corrupt_image_is_an_error_naming_the_sample(backend):
    pipe = Pipeline(source(_with_damage())).decode_image(backend=backend, parallelism=2).batch(4, collate=rows)
    with pipe.options(runner="threads") as p, pytest.raises(OperatorError) as err:
        list(p)
    msg = str(err.value)
    assert "operator 'decode_image'" in msg and "photos[shard 0" in msg and "index 5]" in msg, msg
    assert "not a decodable image" in msg and "on_error='skip'" in msg, msg


def test_skip_drops_bad_images_as_tombstones():
    pipe = Pipeline(source(_with_damage())).decode_image(on_error="skip").batch(2, collate=rows)
    with pipe as p:
        batches = list(p)
    kept = sorted(int(n) for b in batches for n in b.data["n"])
    dropped = sorted(
        chunk * 8 + offset for b in batches for lin in b.dropped for chunk, offset in map(split_sample_id, lin)
    )
    assert kept == [i for i in range(32) if i not in (5, 11)]
    assert dropped == [5, 11]


# -- fields and configuration -----------------------------------------------------------------------
def test_field_candidates_like_webdataset_samples():
    images = image_arrays(2, seed=7)
    recs = [{"jpg": encode(images[0], "JPEG"), "txt": "a"}, {"png": encode(images[1], "PNG"), "txt": "b"}]
    fn = DecodeImage(("jpg", "png"), out="pixels").fn
    a, b = fn(recs[0]), fn(recs[1])
    assert sorted(a) == ["pixels", "txt"] and sorted(b) == ["pixels", "txt"]
    assert np.array_equal(b["pixels"], images[1])
    kept = DecodeImage(("jpg", "png"), keep_encoded=True).fn(recs[0])
    assert sorted(kept) == ["image", "jpg", "txt"]
    with pytest.raises(KeyError, match="none of the fields"):
        fn({"txt": "no image"})
    skipping = DecodeImage("txt", on_error="skip").fn
    with pytest.raises(TypeError, match="expected encoded image bytes, got str"):
        skipping({"txt": "a caption, not an image"})  # a wrong field is never silently skipped


def test_configuration():
    op = DecodeImage(backend="pillow")
    assert op.name == "decode_image" and not op.takes_rng
    assert op.config()["backend"] == "pillow" and op.config()["field"] == ["image"]
    assert DecodeImage().config()["backend"] == resolve_backend("auto")
    for bad in (
        {"mode": "CMYK"},
        {"backend": "turbo"},
        {"on_error": "ignore"},
        {"formats": ("JPEG", "HEIC-ish")},
        {"background": (0, 0)},
        {"max_pixels": 0},
        {"field": ()},
    ):
        with pytest.raises(ConfigError):
            DecodeImage(**bad)
    with pytest.raises(TypeError):
        DecodeImage(seed=1)  # nothing random to seed


def test_registered_and_named_in_missing_plugin_hint():
    p = Pipeline(source(encoded_records(8))).decode_image()
    assert [s.name for s in p.operators] == ["fetch", "decode_image"]
    from zephon_core.plugins import KNOWN_PROVIDERS, ZephonPluginManager

    assert KNOWN_PROVIDERS[("operator", "patchify")] == "zephon-vision"
    with pytest.raises(PluginError, match="pip install zephon-vision"):
        ZephonPluginManager(load_entrypoints=False).registry.get("operator", "decode_image")
