"""What ``SampleBatch.to_training()`` returns for packed rows.

Computed in the training process from the collated microbatch (``B`` rows of length ``L``), with
whole-array numpy operations. Every array has the row as its first axis, so microbatches of a
global step can be concatenated whatever the gradient-accumulation split:

* ``input_ids`` int32 ``[B, L]``;
* ``labels`` int64 ``[B, L]``: ``labels[:, i] = input_ids[:, i + 1]`` (the next token), and
  ``ignore_index`` (-100) where the next token is padding, at the last position of a row, and, with
  ``mask_document_boundaries`` (default), where the next token starts another segment. int64
  because PyTorch's ``cross_entropy`` wants int64 targets;
* ``position_ids`` int32 ``[B, L]``: restart at 0 at every segment;
* ``document_ids`` int32 ``[B, L]``: segment index within the row, -1 for padding;
* ``attention_mask`` int32 ``[B, L]``: 1 for tokens, 0 for padding;
* ``cu_seqlens`` int32 ``[B, L + 1]``: per row, the cumulative segment lengths ``0, e1, e2, …, L``
  (the padding run, if any, is the last segment), then repeated ``L`` up to length ``L + 1``
  (a row has at most ``L`` segments, so this fixed shape always fits). Turn it into the 1-D form
  that variable-length attention kernels take with :func:`varlen_cu_seqlens`;
* ``num_valid_tokens`` int32 ``[B]``: labels that are not ``ignore_index``, per row (sum it to
  normalise the loss of a microbatch or a global step).

With ``mask_field`` (``pack_sequences(..., mask_field="loss_mask")`` after ``tokenize_chat``), the
label at position ``i`` is also ``ignore_index`` when the mask of token ``i + 1``, the token it
predicts, is 0: only assistant tokens are trained on. The mask itself is returned too (uint8
``[B, L]``) and ``num_valid_tokens`` counts the labels that remain.

Multimodal rows (``pack_sequences(image_token_id=...)``, batched with
``collate=zephon_pack.collate_multimodal``) add, besides the fields above (their mask field,
``"loss_mask"`` unless ``mask_field`` names another, is 0 on image placeholders, so no label ever
targets a placeholder):

* ``pixel_values`` float32 ``[N, patch_dim]``: every patch of the microbatch, rows in order and
  images in row order (the order of the placeholder runs in ``input_ids`` flattened row-major, so
  ``embeds[input_ids == image_token_id] = vision(pixel_values)`` scatters them back);
* ``image_grid_thw`` int64 ``[I, 3]`` and ``image_document_ids`` int32 ``[I]`` (the segment of its
  row each image belongs to);
* ``num_images``, ``num_patches`` int32 ``[B]``: per row (cumulative sums give each row's offsets);
* ``image_cu_seqlens`` int32 ``[F + 1]``: Qwen2-VL's vision-encoder ``cu_seqlens``, the cumulative
  patch counts of every frame (``h * w`` per frame, ``t`` frames per image; one frame per still
  image), starting at 0. Unlike the other arrays it restarts in every microbatch.

Rows packed with videos (``video_token_id=``) add the same for videos: ``pixel_values_videos``,
``video_grid_thw``, ``video_document_ids``, ``num_videos``, ``num_video_patches`` and
``video_cu_seqlens``; rows with audio clips (``audio_token_id=``) add ``input_features``
``[A, n_mels, frames]``, ``audio_document_ids`` and ``num_audios`` (the placeholders of every kind
are 0 in the mask).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from zephon_core import ConfigError
from zephon_pack.multimodal import AUDIO_DOCUMENT_IDS, IMAGE_DOCUMENT_IDS, VIDEO_DOCUMENT_IDS, image_cu_seqlens

_PACKED_FIELDS = ("input_ids", "position_ids", "document_ids")


@dataclass(frozen=True, slots=True)
class PackedTrainingView:
    """Converts collated packed rows into training arrays (see the module docstring)."""

    ignore_index: int = -100
    mask_document_boundaries: bool = True
    mask_field: str | None = None
    images: tuple[str, str] | None = None
    """``(pixel_field, grid_field)`` for multimodal rows."""
    videos: tuple[str, str] | None = None
    """``(video_pixel_field, video_grid_field)`` for rows packed with videos."""
    audio: str | None = None
    """The features field of rows packed with audio clips."""

    def __call__(self, data: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if not any(k in data for k in _PACKED_FIELDS):
            return data  # a custom collate replaced the packed fields: nothing to convert
        try:
            ids, pos, doc = data["input_ids"], data["position_ids"], data["document_ids"]
        except KeyError as exc:
            raise ConfigError(
                f"pack_sequences training view: microbatch has no {exc.args[0]!r} field "
                f"(fields: {sorted(data)}); did an operator after pack_sequences drop it?"
            ) from None
        B, L = ids.shape
        labels = np.full((B, L), self.ignore_index, dtype=np.int64)
        nxt = doc[:, 1:]
        keep = nxt >= 0
        if self.mask_document_boundaries:
            keep &= nxt == doc[:, :-1]
        else:
            keep &= doc[:, :-1] >= 0
        mask = None
        if self.mask_field is not None:
            mask = data.get(self.mask_field)
            if mask is None:
                raise ConfigError(
                    f"pack_sequences training view: microbatch has no {self.mask_field!r} field "
                    f"(fields: {sorted(data)}); did an operator after pack_sequences drop it?"
                )
            keep &= mask[:, 1:] != 0  # a label is trained on only if the token it predicts is
        labels[:, :-1] = np.where(keep, ids[:, 1:], self.ignore_index)
        out = {
            "input_ids": ids,
            "labels": labels,
            "position_ids": pos,
            "document_ids": doc,
            "attention_mask": (doc >= 0).astype(np.int32),
            "cu_seqlens": row_cu_seqlens(doc),
            "num_valid_tokens": keep.sum(axis=1, dtype=np.int32),
        }
        if mask is not None:
            assert self.mask_field is not None
            out[self.mask_field] = mask
        if self.images is not None:
            self._images(data, out)
        if self.videos is not None:
            v_pixels, v_grid = self.videos
            names = (v_pixels, v_grid, VIDEO_DOCUMENT_IDS, "num_videos", "num_video_patches")
            self._copy(data, out, names, "video_cu_seqlens")
        if self.audio is not None:
            self._copy(data, out, (self.audio, AUDIO_DOCUMENT_IDS, "num_audios"), None)
        return out

    def _copy(
        self, data: dict[str, np.ndarray], out: dict[str, np.ndarray], names: tuple[str, ...], cu: str | None
    ) -> None:
        """Video or audio fields of the microbatch into ``out`` (and the vision ``cu_seqlens`` of a grid)."""
        missing = [k for k in names if k not in data]
        if missing:
            raise ConfigError(
                f"pack_sequences training view: multimodal microbatch has fields {sorted(data)} (no {missing[0]!r}); "
                "batch packed multimodal rows with batch(..., collate=zephon_pack.collate_multimodal)"
            )
        for k in names:
            out[k] = data[k]
        if cu is not None:
            out[cu] = image_cu_seqlens(data[names[1]])

    def _images(self, data: dict[str, np.ndarray], out: dict[str, np.ndarray]) -> None:
        pixel_field, grid_field = self.images  # type: ignore[misc]
        names = (pixel_field, grid_field, IMAGE_DOCUMENT_IDS, "num_images", "num_patches")
        missing = [k for k in names if k not in data]
        pv = data.get(pixel_field)
        if missing or pv is None or pv.ndim != 2:
            raise ConfigError(
                f"pack_sequences training view: multimodal microbatch has fields {sorted(data)}"
                + (f" (no {missing[0]!r})" if missing else f" ({pixel_field!r} of shape {np.shape(pv)})")
                + "; batch packed multimodal rows with batch(..., collate=zephon_pack.collate_multimodal)"
            )
        for k in names:
            out[k] = data[k]
        out["image_cu_seqlens"] = image_cu_seqlens(data[grid_field])


def row_cu_seqlens(document_ids: np.ndarray) -> np.ndarray:
    """Per-row cumulative segment lengths, shape ``[B, L + 1]``, padded with ``L`` (see module docstring)."""
    B, L = document_ids.shape
    starts = np.ones((B, L), dtype=bool)
    starts[:, 1:] = document_ids[:, 1:] != document_ids[:, :-1]
    rows, cols = np.nonzero(starts)
    counts = starts.sum(axis=1)
    first = np.cumsum(counts) - counts
    slot = np.arange(len(rows)) - np.repeat(first, counts)
    out = np.full((B, L + 1), L, dtype=np.int32)
    out[rows, slot] = cols
    return out


def varlen_cu_seqlens(cu_seqlens: np.ndarray) -> tuple[np.ndarray, int]:
    """The 1-D ``cu_seqlens`` over the flattened ``[B * L]`` microbatch, and the longest segment.

    This is what ``flash_attn_varlen_func(q, k, v, cu_seqlens, cu_seqlens, max_seqlen, max_seqlen)``
    takes for ``q`` of shape ``[B * L, heads, dim]``.
    """
    B, L1 = cu_seqlens.shape
    L = L1 - 1
    steps = np.diff(cu_seqlens, axis=1)
    ends = cu_seqlens[:, 1:].astype(np.int64) + (np.arange(B, dtype=np.int64) * L)[:, None]
    flat = np.concatenate([[0], ends[steps > 0]]).astype(np.int32)
    return flat, int(steps.max()) if steps.size else 0
