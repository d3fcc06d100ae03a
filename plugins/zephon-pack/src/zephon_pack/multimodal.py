"""Multimodal packing: samples whose ``input_ids`` hold image placeholder tokens, with their patches.

How a sample declares its images (the layout ``patchify`` of zephon-vision produces, Qwen2-VL style):

* ``input_ids`` already contains, for image ``i``, one contiguous run of
  ``t_i * h_i * w_i // merge_size**2`` copies of ``image_token_id`` (images in order; two images
  may be adjacent);
* ``pixel_values`` float ``[n_patches, patch_dim]``: the patches of all the sample's images in
  image order, ``n_patches = sum(t_i * h_i * w_i)``;
* ``image_grid_thw`` int ``[n_images, 3]`` (a single ``[3]`` grid is one image).

A text-only sample has neither field (or both empty). A sample whose placeholder count does not
match its grids, whose runs are not contiguous, or whose patches do not match the grids is an error
naming the sample. Every other field of the record must be declared: ``token_fields`` are
token-aligned and packed with the ids, ``drop_fields`` are discarded; anything else is an error
naming the field (never silently dropped).

**No image is ever split across rows.** A legal cut point is one that is not strictly inside a
placeholder run. Every algorithm cuts only at legal points: when a cut would fall inside an image
(``wrap`` at a row boundary; the bin algorithms when a document is longer than a row or with
``allow_split``), the cut moves back to just before that image, the row leaves with that much
padding, and the image and the rest of its document continue in the next row. An image with more
placeholders than ``target_length`` can never fit: that sample is an error.

**Videos and audio clips** are declared the same way, beside images, each kind with its own
placeholder token (``pack_sequences(video_token_id=..., audio_token_id=...)``), so one sample may
interleave images, videos, audio and text:

* a video is what ``zephon-av``'s ``patchify_video`` writes: ``pixel_values_videos`` ``[n_patches,
  patch_dim]`` and ``video_grid_thw`` ``[n_videos, 3]``, ``t * h * w // merge_size**2``
  placeholders each (the image rule; the same ``merge_size`` and ``patch_dim``);
* an audio clip is a block of log-mel features (``log_mel``'s ``input_features``: ``[n_mels,
  frames]`` for one clip or ``[n_clips, n_mels, frames]``) of the fixed ``audio_feature_shape``
  (Whisper pads every clip to 30 s), with ``audio_tokens_per_clip`` placeholders each (the audio
  encoder's output length for that shape: 750 for Qwen2-Audio's 3000 frames).

Placeholder runs of any kind are never split across rows, and every check above holds per kind.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, cast

import numpy as np

from zephon_core import ConfigError
from zephon_core.plugin_api import default_collate
from zephon_pack.assemble import PackWorker

IMAGE_DOCUMENT_IDS = "image_document_ids"
"""Row field: for each image of the row, the segment (``document_ids`` value) it belongs to."""
VIDEO_DOCUMENT_IDS = "video_document_ids"
"""Row field: for each video of the row, the segment it belongs to."""
AUDIO_DOCUMENT_IDS = "audio_document_ids"
"""Row field: for each audio clip of the row, the segment it belongs to."""


@dataclass(frozen=True, slots=True)
class MediaKind:
    """Videos or audio clips beside the images (module docstring); part of :class:`ImageSpec`.

    ``grid_field`` is set for patch media (videos: ``tokens = t * h * w // merge_size**2``, one
    data row per patch) and None for audio (one data block of ``feature_shape`` per clip, with
    ``tokens_per_clip`` placeholders).
    """

    name: str
    token_id: int
    data_field: str
    grid_field: str | None = None
    feature_shape: tuple[int, ...] = ()
    tokens_per_clip: int = 0

    @property
    def document_ids(self) -> str:
        return VIDEO_DOCUMENT_IDS if self.name == "video" else AUDIO_DOCUMENT_IDS

    def config(self) -> dict[str, Any]:
        if self.grid_field is not None:
            return {"token_id": self.token_id, "pixel_field": self.data_field, "grid_field": self.grid_field}
        return {
            "token_id": self.token_id,
            "field": self.data_field,
            "feature_shape": list(self.feature_shape),
            "tokens_per_clip": self.tokens_per_clip,
        }


@dataclass(frozen=True, slots=True)
class ImageSpec:
    """How samples declare their images (module docstring); part of the operator's configuration."""

    image_token_id: int | None
    """None: the samples hold no images (only videos and/or audio)."""
    merge_size: int = 2
    patch_dim: int = 1176
    pixel_field: str = "pixel_values"
    grid_field: str = "image_grid_thw"
    token_fields: tuple[str, ...] = ()
    drop_fields: tuple[str, ...] = ("num_tokens",)
    video: MediaKind | None = None
    audio: MediaKind | None = None

    @property
    def media(self) -> tuple[MediaKind, ...]:
        """The kinds other than images, in row-field order (videos, then audio)."""
        return tuple(k for k in (self.video, self.audio) if k is not None)

    @property
    def placeholder_ids(self) -> tuple[int, ...]:
        """Every placeholder token id (masked out of the loss)."""
        first = () if self.image_token_id is None else (self.image_token_id,)
        return first + tuple(k.token_id for k in self.media)

    def config(self) -> dict[str, Any]:
        config = self._image_config()
        for kind in self.media:  # only when used: image pipelines keep their fingerprints
            config[kind.name] = kind.config()
        return config

    def _image_config(self) -> dict[str, Any]:
        return {
            "image_token_id": self.image_token_id,
            "merge_size": self.merge_size,
            "patch_dim": self.patch_dim,
            "pixel_field": self.pixel_field,
            "grid_field": self.grid_field,
            "token_fields": list(self.token_fields),
            "drop_fields": list(self.drop_fields),
        }


_EMPTY_SPANS = np.zeros((0, 2), dtype=np.int64)
_EMPTY_GRIDS = np.zeros((0, 3), dtype=np.int64)
_ZERO = np.zeros(1, dtype=np.int64)


class MediaPart(NamedTuple):
    """One non-image kind's part of a :class:`Segment`: the image fields' layout, per kind."""

    spans: np.ndarray
    data: np.ndarray
    grids: np.ndarray
    starts: np.ndarray


def _cut(spans: np.ndarray, start: int, end: int) -> int:
    if not len(spans):
        return end
    j = int(np.searchsorted(spans[:, 1], end, side="right"))  # first run ending after `end`
    if j < len(spans) and spans[j, 0] < end:
        return max(int(spans[j, 0]), start)
    return end


def _slice(part: MediaPart, a: int, b: int) -> MediaPart:
    spans, ps = part.spans, part.starts
    i0 = int(np.searchsorted(spans[:, 0], a, side="left"))
    i1 = int(np.searchsorted(spans[:, 0], b, side="left"))
    return MediaPart(
        spans[i0:i1] - a, part.data[int(ps[i0]) : int(ps[i1])], part.grids[i0:i1], ps[i0 : i1 + 1] - ps[i0]
    )


class Segment:
    """A document (or a piece of one cut at a legal point) with everything aligned to its tokens.

    Slicing keeps the images (and videos, audio clips: ``media``) whose placeholder runs lie in the
    slice, with their data and grids; the accumulators only ever slice at points :meth:`cut`
    allows, so no run is ever split.
    """

    __slots__ = ("extra", "grids", "ids", "mask", "media", "patch_starts", "patches", "spans")

    def __init__(
        self,
        ids: np.ndarray,
        mask: np.ndarray | None,
        extra: tuple[np.ndarray, ...],
        spans: np.ndarray,
        patches: np.ndarray,
        grids: np.ndarray,
        patch_starts: np.ndarray,
        media: tuple[MediaPart, ...] = (),
    ) -> None:
        self.ids = ids
        self.mask = mask
        self.extra = extra
        self.spans = spans  # [k, 2] start/stop of each image's placeholders, relative to this segment
        self.patches = patches  # [n, patch_dim] float32, this segment's images only
        self.grids = grids  # [k, 3] int64
        self.patch_starts = patch_starts  # [k + 1] cumulative patch counts
        self.media = media  # the same per video/audio kind, in ImageSpec.media order

    def __len__(self) -> int:
        return len(self.ids)

    def cut(self, start: int, end: int) -> int:
        """The largest legal cut ``<= end`` (``start`` itself when an image or clip straddles from there).

        Runs of different kinds never overlap, so at most one holds ``end`` and the smallest answer is it.
        """
        point = _cut(self.spans, start, end)
        for part in self.media:
            point = min(point, _cut(part.spans, start, end))
        return point

    def __getitem__(self, s: slice) -> Segment:
        a, b, _ = s.indices(len(self.ids))
        image = _slice(MediaPart(self.spans, self.patches, self.grids, self.patch_starts), a, b)
        return Segment(
            self.ids[a:b],
            None if self.mask is None else self.mask[a:b],
            tuple(x[a:b] for x in self.extra),
            image.spans,
            image.data,
            image.grids,
            image.starts,
            tuple(_slice(part, a, b) for part in self.media),
        )

    def __getstate__(self) -> tuple[Any, ...]:
        return tuple(getattr(self, k) for k in self.__slots__)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        if len(state) == 7:  # a checkpoint written before videos and audio: no media slot
            state = (*state[:4], (), *state[4:])
        for k, v in zip(self.__slots__, state):
            setattr(self, k, v)


def read_sample(
    payload: dict[str, Any], field: str, mask_field: str | None, spec: ImageSpec, target_length: int
) -> Segment:
    """Validate one record and build its :class:`Segment`; ``ValueError`` says what is wrong."""
    known = {field, *spec.token_fields, *spec.drop_fields}
    if spec.image_token_id is not None:
        known |= {spec.pixel_field, spec.grid_field}
    for kind in spec.media:
        known |= {kind.data_field} if kind.grid_field is None else {kind.data_field, kind.grid_field}
    if mask_field is not None:
        known.add(mask_field)
    ids = np.asarray(payload[field])
    if ids.ndim != 1:
        raise ValueError(f"field {field!r} must be 1-D token ids, got shape {ids.shape}")
    n = len(ids)
    for k in payload:
        if k not in known:
            v = payload[k]
            aligned = np.ndim(v) == 1 and len(v) == n
            hint = "token_fields= to pack it with the ids" if aligned else "drop_fields= to discard it"
            raise ValueError(
                f"field {k!r} is not declared (packed rows would lose it); add it to {hint}, "
                f"or remove it before pack_sequences"
            )
    mask = None
    if mask_field is not None:
        if mask_field not in payload:
            raise ValueError(f"record has no mask field {mask_field!r} (fields: {sorted(payload)})")
        mask = np.asarray(payload[mask_field])
        if mask.shape != (n,):
            raise ValueError(f"mask field {mask_field!r} has shape {mask.shape} for {n} tokens")
    extra = []
    for k in spec.token_fields:
        if k not in payload:
            raise ValueError(f"record has no token field {k!r} (fields: {sorted(payload)})")
        v = np.asarray(payload[k])
        if v.shape != (n,):
            raise ValueError(f"token field {k!r} has shape {v.shape} for {n} tokens; it must hold one value per token")
        extra.append(v)

    if spec.image_token_id is None:
        image = MediaPart(_EMPTY_SPANS, np.zeros((0, spec.patch_dim), np.float32), _EMPTY_GRIDS, _ZERO)
    else:
        kind = MediaKind("image", spec.image_token_id, spec.pixel_field, spec.grid_field)
        image = _read_patches(payload, ids, field, kind, spec, target_length)
    media = tuple(
        _read_patches(payload, ids, field, kind, spec, target_length)
        if kind.grid_field is not None
        else _read_audio(payload, ids, field, kind, target_length)
        for kind in spec.media
    )
    return Segment(ids, mask, tuple(extra), image.spans, image.data, image.grids, image.starts, media)


def _runs(
    ids: np.ndarray, field: str, kind: MediaKind, tokens: np.ndarray, target_length: int, hint: str
) -> np.ndarray:
    """The ``[k, 2]`` placeholder runs of ``kind`` in ``ids``, one contiguous run of ``tokens[i]`` per item."""
    if not len(tokens):
        return _EMPTY_SPANS
    placeholders = np.flatnonzero(ids == kind.token_id)
    first = np.concatenate([_ZERO, np.cumsum(tokens)])
    starts = placeholders[first[:-1]]
    stops = placeholders[first[1:] - 1] + 1
    broken = np.flatnonzero(stops - starts != tokens)
    if broken.size:
        raise ValueError(f"the placeholders of {kind.name} {int(broken[0])} are not one contiguous run in {field!r}")
    too_long = np.flatnonzero(tokens > target_length)
    if too_long.size:
        raise ValueError(
            f"{kind.name} {int(too_long[0])} has {int(tokens[too_long[0]])} placeholder tokens, more than "
            f"target_length={target_length}: it can never fit in a row ({hint})"
        )
    return np.stack([starts, stops], axis=1).astype(np.int64)


def _read_patches(
    payload: dict[str, Any], ids: np.ndarray, field: str, kind: MediaKind, spec: ImageSpec, target_length: int
) -> MediaPart:
    """Images or videos: patches ``[n, patch_dim]`` and grids ``[k, 3]``, ``t*h*w // merge_size**2`` tokens each."""
    assert kind.grid_field is not None
    pixel_field, grid_field = kind.data_field, kind.grid_field
    pv, grid = payload.get(pixel_field), payload.get(grid_field)
    if (pv is None) != (grid is None):
        have, missing = (pixel_field, grid_field) if grid is None else (grid_field, pixel_field)
        raise ValueError(f"record has {have!r} but no {missing!r}: give both (or neither, for a text-only sample)")
    grids = _EMPTY_GRIDS if grid is None else np.asarray(grid)
    if grids.ndim == 1 and grids.shape == (3,):
        grids = grids[None]
    if grids.ndim != 2 or grids.shape[1] != 3 or grids.dtype.kind not in "iu":
        raise ValueError(
            f"{grid_field!r} must be integer [n_{kind.name}s, 3] (t, h, w), got {grids.dtype} {grids.shape}"
        )
    grids = grids.astype(np.int64, copy=False)
    m = spec.merge_size
    if len(grids) and ((grids < 1).any() or (grids[:, 1:] % m).any()):
        raise ValueError(f"{grid_field!r} {grids.tolist()}: sides must be positive multiples of merge_size={m}")
    thw = grids.prod(axis=1)
    tokens = thw // (m * m)
    count = int(np.count_nonzero(ids == kind.token_id))
    if count != int(tokens.sum()):
        raise ValueError(
            f"{count} {kind.name} placeholder tokens (id {kind.token_id}) in {field!r}, but the grids "
            f"{grids.tolist()} need {int(tokens.sum())} (t*h*w/merge_size**2 = {tokens.tolist()} per {kind.name})"
        )
    hint = (
        "lower max_pixels/max_patches in patchify"
        if kind.name == "image"
        else "lower max_frames/max_pixels in decode_video"
    )
    spans = _runs(ids, field, kind, tokens, target_length, hint)
    n_patches = int(thw.sum())
    if pv is None:
        patches = np.zeros((0, spec.patch_dim), dtype=np.float32)
    else:
        patches = np.asarray(pv)
        if patches.shape != (n_patches, spec.patch_dim):
            raise ValueError(
                f"{pixel_field!r} has shape {patches.shape}, but the grids {grids.tolist()} and "
                f"patch_dim={spec.patch_dim} need ({n_patches}, {spec.patch_dim})"
            )
        patches = patches.astype(np.float32, copy=False)
    return MediaPart(spans, patches, grids, np.concatenate([_ZERO, np.cumsum(thw)]))


def _read_audio(payload: dict[str, Any], ids: np.ndarray, field: str, kind: MediaKind, target_length: int) -> MediaPart:
    """Audio clips: features ``[k, *feature_shape]``, ``tokens_per_clip`` placeholders each."""
    value = payload.get(kind.data_field)
    shape = kind.feature_shape
    if value is None:
        features = np.zeros((0, *shape), dtype=np.float32)
    else:
        features = np.asarray(value)
        if features.shape == shape:
            features = features[None]
        if features.ndim != len(shape) + 1 or features.shape[1:] != shape or features.dtype.kind != "f":
            raise ValueError(
                f"{kind.data_field!r} must be float {list(shape)} (one clip) or [n_clips, {', '.join(map(str, shape))}] "
                f"(audio_feature_shape), got {features.dtype} {features.shape}"
            )
        features = features.astype(np.float32, copy=False)
    k = len(features)
    tokens = np.full(k, kind.tokens_per_clip, dtype=np.int64)
    count = int(np.count_nonzero(ids == kind.token_id))
    if count != int(tokens.sum()):
        raise ValueError(
            f"{count} audio placeholder tokens (id {kind.token_id}) in {field!r}, but {k} clip(s) of "
            f"audio_tokens_per_clip={kind.tokens_per_clip} need {int(tokens.sum())}"
        )
    spans = _runs(ids, field, kind, tokens, target_length, "lower audio_tokens_per_clip or raise target_length")
    return MediaPart(spans, features, np.zeros((k, 0), np.int64), np.arange(k + 1, dtype=np.int64))


@dataclass(frozen=True, slots=True)
class MultimodalPackWorker:
    """Assembles rows of :class:`Segment` pieces: the text fields as :class:`PackWorker` does, plus

    * ``mask_name`` (uint8 ``[L]``): 1 where the token may be a training target: not a placeholder,
      not padding, and (with ``mask_field``) where the sample's own mask is non-zero;
    * each of ``token_fields`` (``[L]``, the field's dtype, 0 on padding);
    * ``pixel_field`` (float32 ``[n, patch_dim]``): the row's patches, images in row order;
    * ``grid_field`` (int64 ``[k, 3]``) and ``image_document_ids`` (int32 ``[k]``, the segment each
      image belongs to);
    * likewise for videos (their pixel and grid fields, ``video_document_ids``) and audio clips
      (their features field ``[k, *feature_shape]``, ``audio_document_ids``) when the spec has them.
    Image fields are written only when the spec has images, so video-only rows hold no empty image fields.
    """

    target_length: int
    pad_id: int
    spec: ImageSpec
    mask_name: str
    use_mask: bool

    def __call__(self, rows: list[list[Segment]]) -> list[dict[str, Any]]:
        L, spec = self.target_length, self.spec
        out = PackWorker(L, self.pad_id)([[s.ids for s in row] for row in rows])
        placeholders = spec.placeholder_ids
        for row, res in zip(rows, out):
            pad = int(res["num_padding"])
            ids = res["input_ids"]
            mask = ids != placeholders[0] if len(placeholders) == 1 else ~np.isin(ids, placeholders)
            if self.use_mask:
                own = np.concatenate([cast(np.ndarray, s.mask) for s in row] + [np.zeros(pad, dtype=np.uint8)]) != 0
                mask &= own
            if pad:
                mask[L - pad :] = False
            res[self.mask_name] = mask.view(np.uint8)
            for k, name in enumerate(spec.token_fields):
                parts = [s.extra[k] for s in row]
                res[name] = np.concatenate([*parts, np.zeros(pad, dtype=parts[0].dtype)])
            if spec.image_token_id is not None:
                res[spec.pixel_field] = (
                    np.concatenate([s.patches for s in row]) if row else np.zeros((0, spec.patch_dim), np.float32)
                )
                res[spec.grid_field] = np.concatenate([s.grids for s in row]) if row else _EMPTY_GRIDS
                res[IMAGE_DOCUMENT_IDS] = np.repeat(np.arange(len(row), dtype=np.int32), [len(s.grids) for s in row])
            for j, kind in enumerate(spec.media):
                pieces = [s.media[j] for s in row]
                empty = (0, spec.patch_dim) if kind.grid_field is not None else (0, *kind.feature_shape)
                res[kind.data_field] = np.concatenate([p.data for p in pieces]) if row else np.zeros(empty, np.float32)
                if kind.grid_field is not None:
                    res[kind.grid_field] = np.concatenate([p.grids for p in pieces]) if row else _EMPTY_GRIDS
                res[kind.document_ids] = np.repeat(np.arange(len(row), dtype=np.int32), [len(p.spans) for p in pieces])
        return out


@dataclass(frozen=True, slots=True)
class MultimodalCollate:
    """Collates packed multimodal rows: token fields stacked ``[B, ...]``, image fields concatenated.

    The image fields vary in length per row, so they are concatenated along axis 0 in row order
    (``pixel_values [N, patch_dim]``, ``image_grid_thw [I, 3]``, ``image_document_ids [I]``), and two
    per-row counts say where each row's part starts: ``num_images`` and ``num_patches`` (int32
    ``[B]``; their cumulative sums are the row offsets). Counts rather than offsets, so the arrays of
    consecutive microbatches concatenate into those of the union, like every other field.

    Rows packed with videos (they hold ``video_document_ids``) get the same for ``video_pixel_field``,
    ``video_grid_field`` and ``video_document_ids``, with ``num_videos`` and ``num_video_patches``;
    rows with audio clips (``audio_document_ids``) get ``audio_field`` ``[A, *feature_shape]``,
    ``audio_document_ids`` and ``num_audios``. Rows without images (video or audio only) need no
    image fields.
    """

    pixel_field: str = "pixel_values"
    grid_field: str = "image_grid_thw"
    video_pixel_field: str = "pixel_values_videos"
    video_grid_field: str = "video_grid_thw"
    audio_field: str = "input_features"

    def __call__(self, rows: list[dict[str, Any]]) -> dict[str, np.ndarray]:
        first = rows[0] if rows else {}
        videos, audio = VIDEO_DOCUMENT_IDS in first, AUDIO_DOCUMENT_IDS in first
        images = IMAGE_DOCUMENT_IDS in first or not (videos or audio)
        groups: list[tuple[tuple[str, ...], str]] = []
        if images:
            groups.append(((self.pixel_field, self.grid_field, IMAGE_DOCUMENT_IDS), "image_token_id"))
        if videos:
            groups.append(((self.video_pixel_field, self.video_grid_field, VIDEO_DOCUMENT_IDS), "video_token_id"))
        if audio:
            groups.append(((self.audio_field, AUDIO_DOCUMENT_IDS), "audio_token_id"))
        for i, r in enumerate(rows):
            for names, option in groups:
                missing = [k for k in names if k not in r]
                if missing:
                    fields = "pixel_field/grid_field" if option != "audio_token_id" else "audio_field"
                    if option == "video_token_id":
                        fields = "video_pixel_field/video_grid_field"
                    raise ConfigError(
                        f"collate_multimodal: row {i} has no {missing[0]!r} field (fields: {sorted(r)}); "
                        f"use it after pack_sequences({option}=...) with the same {fields}"
                    )
        ragged = {k for names, _ in groups for k in names}
        out = default_collate([{k: v for k, v in r.items() if k not in ragged} for r in rows])
        if images:
            for k in (self.pixel_field, self.grid_field, IMAGE_DOCUMENT_IDS):
                out[k] = np.concatenate([np.asarray(r[k]) for r in rows])
            out["num_images"] = np.asarray([len(r[self.grid_field]) for r in rows], dtype=np.int32)
            out["num_patches"] = np.asarray([len(r[self.pixel_field]) for r in rows], dtype=np.int32)
        if videos:
            for k in (self.video_pixel_field, self.video_grid_field, VIDEO_DOCUMENT_IDS):
                out[k] = np.concatenate([np.asarray(r[k]) for r in rows])
            out["num_videos"] = np.asarray([len(r[self.video_grid_field]) for r in rows], dtype=np.int32)
            out["num_video_patches"] = np.asarray([len(r[self.video_pixel_field]) for r in rows], dtype=np.int32)
        if audio:
            for k in (self.audio_field, AUDIO_DOCUMENT_IDS):
                out[k] = np.concatenate([np.asarray(r[k]) for r in rows])
            out["num_audios"] = np.asarray([len(r[AUDIO_DOCUMENT_IDS]) for r in rows], dtype=np.int32)
        return out


collate_multimodal = MultimodalCollate()
"""``batch(microbatch_size, collate=zephon_pack.collate_multimodal)`` for the default field names."""


def image_cu_seqlens(grids: np.ndarray) -> np.ndarray:
    """Qwen2-VL's vision ``cu_seqlens`` for ``grids`` ``[I, 3]``: patches per frame (``h * w``,
    repeated ``t`` times), cumulative, with a leading 0; int32 ``[sum(t) + 1]``."""
    g = np.asarray(grids, dtype=np.int64).reshape(-1, 3)
    per_frame = np.repeat(g[:, 1] * g[:, 2], g[:, 0])
    return np.concatenate([_ZERO, np.cumsum(per_frame)]).astype(np.int32)


def check_names(names: Sequence[Any], what: str) -> tuple[str, ...]:
    if isinstance(names, str) or not all(isinstance(n, str) and n for n in names):
        raise ConfigError(f"pack_sequences: {what} must be a list of non-empty field names, got {names!r}")
    return tuple(names)
