"""Entry point of the ``zephon`` plugin group: registers the audio/video operators and ``zephon demo video``.

Factories are lazy ``"module:attr"`` strings so that ``import zephon_core`` (and listing plugins)
never imports PyAV.
"""

from __future__ import annotations

from typing import Any

from zephon_core.hookspecs import DemoRegister, hookimpl

ZEPHON_CONTRACT = (1, 0)
"""The zephon plugin contract this plugin is built for (the kernel refuses an incompatible one)."""


OPERATORS = {
    "decode_video": (
        "zephon_av.video:DecodeVideo",
        "MP4/WebM/... bytes -> sampled (T, H, W, 3) uint8 frames + timestamps (fps/num_frames/clip policies, keyframe seeking)",
    ),
    "decode_audio": (
        "zephon_av.audio:DecodeAudio",
        "audio bytes -> float32 PCM (channels, samples) at a sample rate/layout, clip policies",
    ),
    "log_mel": (
        "zephon_av.mel:LogMel",
        "mono PCM -> Whisper log-mel features (80/128 bins, 25 ms window, 10 ms hop, 30 s padding)",
    ),
    "patchify_video": (
        "zephon_av.patchify:PatchifyVideo",
        "frames -> pixel_values_videos + video_grid_thw (temporal pairs, Qwen2-VL layout)",
    ),
}


@hookimpl
def zephon_register_operators(register: Any) -> None:
    for name, (factory, description) in OPERATORS.items():
        register(name=name, factory=factory, description=description)


@hookimpl
def zephon_register_demos(register: DemoRegister) -> None:
    register(
        name="video",
        factory="zephon_av.demo:main",
        description="clips made offline from photographs (pans, zooms, crossfades) + speech-like audio: "
        "decode_video, decode_audio, log_mel, patchify_video, determinism self-check",
    )
