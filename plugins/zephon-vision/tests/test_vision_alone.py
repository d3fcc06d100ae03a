"""zephon-vision installed alone (a regular, non-editable install) with only its declared dependencies:
Pillow and numpy, no simplejpeg (an optional extra), no torch, no scikit-image (a test extra)."""

from __future__ import annotations

import pytest
from zephon_testkit.isolated import check_alone

SCRIPT = r"""
import io, socket
import numpy as np
from PIL import Image, ImageDraw

def refuse(*a, **k):
    raise AssertionError("network access attempted")

socket.socket.connect = refuse
socket.create_connection = refuse

from zephon_core import Dataset, Pipeline, StaticMixtureWorkSource
from zephon_core.errors import ConfigError
from zephon_core.plugins import get_plugin_manager

ops = set(get_plugin_manager().registry.names("operator"))
want = {"decode_image", "resize", "center_crop", "random_resized_crop", "horizontal_flip", "normalize", "patchify"}
assert want <= ops and "tokenize" not in ops, ops

def photo(i, fmt):
    im = Image.radial_gradient("L").resize((40 + 3 * i, 30 + 2 * i)).convert("RGB")
    ImageDraw.Draw(im).rectangle((i, 2, 12 + i, 20), fill=(200, 30 * (i % 8), 90))
    buf = io.BytesIO()
    im.save(buf, fmt)
    return buf.getvalue()

recs = [{"image": photo(i, ("JPEG", "PNG", "WEBP")[i % 3]), "n": i} for i in range(16)]
ws = StaticMixtureWorkSource([Dataset.from_records("d", recs)], chunk_size=4, shuffle=False)

def build():
    return (
        Pipeline(ws)
        .decode_image(parallelism=2)
        .random_resized_crop(24, seed=1)
        .horizontal_flip()
        .patchify(4, min_pixels=16 * 16, max_pixels=32 * 32)
        .batch(1, collate=lambda rows: {"pv": rows[0]["pixel_values"], "grid": rows[0]["image_grid_thw"]})
        .options(runner="threads")
    )

p = build()
assert p.operators[1].config()["backend"] == "pillow"  # simplejpeg is not installed
with p:
    first = [(b.data["pv"].copy(), b.data["grid"].tolist()) for b in p]
with build() as p:
    second = [(b.data["pv"], b.data["grid"].tolist()) for b in p]
assert len(first) == 16 and all(g == [1, 6, 6] and pv.shape == (36, 96) for pv, g in first), [g for _, g in first]
assert all(np.array_equal(a, b) for (a, _), (b, _) in zip(first, second))
try:
    Pipeline(ws).decode_image(backend="simplejpeg")
except ConfigError as exc:
    assert "zephon-vision[fast]" in str(exc), exc
else:
    raise AssertionError("backend='simplejpeg' should need the [fast] extra")
print("ALONE OK")
"""


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_installed_alone(tmp_path):
    check_alone(
        "zephon-vision",
        tmp_path,
        SCRIPT,
        present={"pillow", "numpy"},
        absent={"torch", "simplejpeg", "scikit-image", "zephon-tokenize", "opencv-python"},
        listed_as="operator",
    )
