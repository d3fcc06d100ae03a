"""zephon-av installed alone (a regular, non-editable install) with only its declared dependencies:
PyAV and numpy, no torch, no Pillow, no transformers (a test extra)."""

from __future__ import annotations

import pytest
from zephon_testkit.isolated import check_alone

SCRIPT = r"""
import socket
import numpy as np

def refuse(*a, **k):
    raise AssertionError("network access attempted")

socket.socket.connect = refuse
socket.create_connection = refuse

from zephon_core import Dataset, Pipeline, StaticMixtureWorkSource
from zephon_core.plugins import get_plugin_manager
from zephon_av.testing import audio_records, video_records

ops = set(get_plugin_manager().registry.names("operator"))
want = {"decode_video", "decode_audio", "log_mel", "patchify_video"}
assert want <= ops and "decode_image" not in ops, ops

videos = StaticMixtureWorkSource([Dataset.from_records("v", video_records(8, seconds=1.0))], chunk_size=4, shuffle=False)
speech = StaticMixtureWorkSource([Dataset.from_records("a", audio_records(8, seconds=0.5))], chunk_size=4, shuffle=False)

def build():
    return (
        Pipeline(videos)
        .decode_video(num_frames=4, clip_seconds=0.8, size_factor=16, max_pixels=48 * 64, parallelism=2)
        .patchify_video(8)
        .batch(1, collate=lambda rows: {"pv": rows[0]["pixel_values_videos"], "grid": rows[0]["video_grid_thw"]})
        .options(runner="threads")
    )

with build() as p:
    first = [(b.data["pv"].copy(), b.data["grid"].tolist()) for b in p]
with build() as p:
    second = [(b.data["pv"], b.data["grid"].tolist()) for b in p]
assert len(first) == 8 and all(g[0] == 2 and pv.shape[1] == 3 * 2 * 8 * 8 for pv, g in first), [g for _, g in first]
assert all(np.array_equal(a, b) for (a, _), (b, _) in zip(first, second))
pipe = Pipeline(speech).decode_audio(clip_seconds=0.3).log_mel(128).batch(1, collate=lambda rows: {"f": rows[0]["input_features"]})
with pipe:
    feats = [b.data["f"] for b in pipe]
assert len(feats) == 8 and all(f.shape == (128, 3000) and f.dtype == np.float32 for f in feats)
print("ALONE OK")
"""


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_installed_alone(tmp_path):
    check_alone(
        "zephon-av",
        tmp_path,
        SCRIPT,
        present={"av", "numpy"},
        absent={"torch", "pillow", "transformers", "zephon-vision", "opencv-python"},
        listed_as="operator",
    )
