"""The kernel's determinism conformance suite, run on every audio/video operator.

Inputs are small clips encoded in the test (H.264 with B-frames, FLAC chirps). The whole module is
marked slow: four operators x the full suite takes minutes on a 2-core machine.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest
from zephon_av import DecodeAudio, DecodeVideo, LogMel, PatchifyVideo
from zephon_av.testing import audio_records, chirp, encode_audio, encode_video, moving_frames, video_records

from zephon_core.conformance import OperatorConformance

pytestmark = pytest.mark.slow

N = 64  # 16 global steps over the suite's 4 lanes
_ALT_VIDEO = encode_video(moving_frames(12, seed=99))
_ALT_AUDIO = encode_audio(chirp(0.4, seed=99))


@functools.lru_cache(maxsize=1)
def videos() -> list[dict[str, Any]]:
    return video_records(N, seconds=0.8)


@functools.lru_cache(maxsize=1)
def sounds() -> list[dict[str, Any]]:
    return audio_records(N, seconds=0.3)


class TestDecodeVideoConformance(OperatorConformance):
    @pytest.fixture
    def operator_factory(self):
        return functools.partial(DecodeVideo, num_frames=2, clip_seconds=0.5, seed=1)

    @pytest.fixture
    def sample_records(self):
        return videos()

    @pytest.fixture
    def perturb_payload(self):
        return lambda payload: {**payload, "video": _ALT_VIDEO}


@pytest.mark.exhaustive  # decode_video's class runs the suite on the package's base in every run
class TestDecodeAudioConformance(OperatorConformance):
    @pytest.fixture
    def operator_factory(self):
        return functools.partial(DecodeAudio, sample_rate=8000, clip_seconds=0.2)

    @pytest.fixture
    def sample_records(self):
        return sounds()

    @pytest.fixture
    def perturb_payload(self):
        return lambda payload: {**payload, "audio": _ALT_AUDIO}


@pytest.mark.exhaustive  # decode_video's class runs the suite on the package's base in every run
class TestLogMelConformance(OperatorConformance):
    @pytest.fixture
    def operator_factory(self):
        return functools.partial(LogMel, 80, pad_to_seconds=None)

    @pytest.fixture
    def sample_records(self):
        return [{**r, "audio": chirp(0.2 + 0.01 * (i % 5), seed=i)} for i, r in enumerate(sounds())]


@pytest.mark.exhaustive  # decode_video's class runs the suite on the package's base in every run
class TestPatchifyVideoConformance(OperatorConformance):
    @pytest.fixture
    def operator_factory(self):
        return functools.partial(PatchifyVideo, 8)

    @pytest.fixture
    def sample_records(self):
        return [{"video": moving_frames(1 + i % 3, 16, 32, seed=i), "n": i} for i in range(N)]
