"""zephon-pack: online sequence packing with training views for variable-length attention."""

from __future__ import annotations

from zephon_pack.algorithms import segment_spans
from zephon_pack.multimodal import ImageSpec, MultimodalCollate, collate_multimodal, image_cu_seqlens
from zephon_pack.operator import PackSequences
from zephon_pack.training import PackedTrainingView, row_cu_seqlens, varlen_cu_seqlens

__version__ = "0.1.0"

__all__ = [
    "ImageSpec",
    "MultimodalCollate",
    "PackSequences",
    "PackedTrainingView",
    "collate_multimodal",
    "image_cu_seqlens",
    "row_cu_seqlens",
    "segment_spans",
    "varlen_cu_seqlens",
]
