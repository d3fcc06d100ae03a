"""zephon-av: video and audio decoding on PyAV for Zephon pipelines (frame sampling, PCM, log-mel, patchify).

Importing this package is cheap; PyAV is imported with the first operator that decodes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "DecodeVideo": "zephon_av.video",
    "VideoIndex": "zephon_av.video",
    "video_index": "zephon_av.video",
    "decode_frames": "zephon_av.video",
    "DecodeAudio": "zephon_av.audio",
    "decode_pcm": "zephon_av.audio",
    "LogMel": "zephon_av.mel",
    "log_mel_spectrogram": "zephon_av.mel",
    "mel_filters": "zephon_av.mel",
    "PatchifyVideo": "zephon_av.patchify",
    "temporal_patches": "zephon_av.patchify",
    "FramePolicy": "zephon_av.sampling",
    "select": "zephon_av.sampling",
    "MediaDecodeError": "zephon_av.base",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    mod = _EXPORTS.get(name)
    if mod is None:
        raise AttributeError(f"module 'zephon_av' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(mod), name)


if TYPE_CHECKING:
    from zephon_av.audio import DecodeAudio, decode_pcm
    from zephon_av.base import MediaDecodeError
    from zephon_av.mel import LogMel, log_mel_spectrogram, mel_filters
    from zephon_av.patchify import PatchifyVideo, temporal_patches
    from zephon_av.sampling import FramePolicy, select
    from zephon_av.video import DecodeVideo, VideoIndex, decode_frames, video_index
