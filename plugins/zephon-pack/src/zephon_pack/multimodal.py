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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from zephon_core import ConfigError
from zephon_core.plugin_api import default_collate
from zephon_pack.assemble import PackWorker

IMAGE_DOCUMENT_IDS = "image_document_ids"
"""Row field: for each image of the row, the segment (``document_ids`` value) it belongs to."""


@dataclass(frozen=True, slots=True)
class ImageSpec:
    """How samples declare their images (module docstring); part of the operator's configuration."""

    image_token_id: int
    merge_size: int = 2
    patch_dim: int = 1176
    pixel_field: str = "pixel_values"
    grid_field: str = "image_grid_thw"
    token_fields: tuple[str, ...] = ()
    drop_fields: tuple[str, ...] = ("num_tokens",)

    def config(self) -> dict[str, Any]:
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


class Segment:
    """A document (or a piece of one cut at a legal point) with everything aligned to its tokens.

    Slicing keeps the images whose placeholder runs lie in the slice, with their patches and grids;
    the accumulators only ever slice at points :meth:`cut` allows, so no run is ever split.
    """

    __slots__ = ("extra", "grids", "ids", "mask", "patch_starts", "patches", "spans")

    def __init__(
        self,
        ids: np.ndarray,
        mask: np.ndarray | None,
        extra: tuple[np.ndarray, ...],
        spans: np.ndarray,
        patches: np.ndarray,
        grids: np.ndarray,
        patch_starts: np.ndarray,
    ) -> None:
        self.ids = ids
        self.mask = mask
        self.extra = extra
        self.spans = spans  # [k, 2] start/stop of each image's placeholders, relative to this segment
        self.patches = patches  # [n, patch_dim] float32, this segment's images only
        self.grids = grids  # [k, 3] int64
        self.patch_starts = patch_starts  # [k + 1] cumulative patch counts

    def __len__(self) -> int:
        return len(self.ids)

    def cut(self, start: int, end: int) -> int:
        """The largest legal cut ``<= end`` (``start`` itself when an image straddles from there)."""
        spans = self.spans
        if not len(spans):
            return end
        j = int(np.searchsorted(spans[:, 1], end, side="right"))  # first image ending after `end`
        if j < len(spans) and spans[j, 0] < end:
            return max(int(spans[j, 0]), start)
        return end

    def __getitem__(self, s: slice) -> Segment:
        a, b, _ = s.indices(len(self.ids))
        spans = self.spans
        i0 = int(np.searchsorted(spans[:, 0], a, side="left"))
        i1 = int(np.searchsorted(spans[:, 0], b, side="left"))
        ps = self.patch_starts
        return Segment(
            self.ids[a:b],
            None if self.mask is None else self.mask[a:b],
            tuple(x[a:b] for x in self.extra),
            spans[i0:i1] - a,
            self.patches[int(ps[i0]) : int(ps[i1])],
            self.grids[i0:i1],
            ps[i0 : i1 + 1] - ps[i0],
        )

    def __getstate__(self) -> tuple[Any, ...]:
        return tuple(getattr(self, k) for k in self.__slots__)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        for k, v in zip(self.__slots__, state):
            setattr(self, k, v)


def read_sample(
    payload: dict[str, Any], field: str, mask_field: str | None, spec: ImageSpec, target_length: int
) -> Segment:
    """Validate one record and build its :class:`Segment`; ``ValueError`` says what is wrong."""
    known = {field, spec.pixel_field, spec.grid_field, *spec.token_fields, *spec.drop_fields}
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

    pv, grid = payload.get(spec.pixel_field), payload.get(spec.grid_field)
    if (pv is None) != (grid is None):
        have, missing = (spec.pixel_field, spec.grid_field) if grid is None else (spec.grid_field, spec.pixel_field)
        raise ValueError(f"record has {have!r} but no {missing!r}: give both (or neither, for a text-only sample)")
    grids = _EMPTY_GRIDS if grid is None else np.asarray(grid)
    if grids.ndim == 1 and grids.shape == (3,):
        grids = grids[None]
    if grids.ndim != 2 or grids.shape[1] != 3 or grids.dtype.kind not in "iu":
        raise ValueError(
            f"{spec.grid_field!r} must be integer [n_images, 3] (t, h, w), got {grids.dtype} {grids.shape}"
        )
    grids = grids.astype(np.int64, copy=False)
    m = spec.merge_size
    if len(grids) and ((grids < 1).any() or (grids[:, 1:] % m).any()):
        raise ValueError(f"{spec.grid_field!r} {grids.tolist()}: sides must be positive multiples of merge_size={m}")
    thw = grids.prod(axis=1)
    tokens = thw // (m * m)
    placeholders = np.flatnonzero(ids == spec.image_token_id)
    if len(placeholders) != int(tokens.sum()):
        raise ValueError(
            f"{len(placeholders)} image placeholder tokens (id {spec.image_token_id}) in {field!r}, but the grids "
            f"{grids.tolist()} need {int(tokens.sum())} (t*h*w/merge_size**2 = {tokens.tolist()} per image)"
        )
    first = np.concatenate([_ZERO, np.cumsum(tokens)])
    if len(grids):
        starts = placeholders[first[:-1]]
        stops = placeholders[first[1:] - 1] + 1
        broken = np.flatnonzero(stops - starts != tokens)
        if broken.size:
            raise ValueError(f"the placeholders of image {int(broken[0])} are not one contiguous run in {field!r}")
        too_long = np.flatnonzero(tokens > target_length)
        if too_long.size:
            raise ValueError(
                f"image {int(too_long[0])} has {int(tokens[too_long[0]])} placeholder tokens, more than "
                f"target_length={target_length}: it can never fit in a row (lower max_pixels/max_patches in patchify)"
            )
        spans = np.stack([starts, stops], axis=1).astype(np.int64)
    else:
        spans = _EMPTY_SPANS
    n_patches = int(thw.sum())
    if pv is None:
        patches = np.zeros((0, spec.patch_dim), dtype=np.float32)
    else:
        patches = np.asarray(pv)
        if patches.shape != (n_patches, spec.patch_dim):
            raise ValueError(
                f"{spec.pixel_field!r} has shape {patches.shape}, but the grids {grids.tolist()} and "
                f"patch_dim={spec.patch_dim} need ({n_patches}, {spec.patch_dim})"
            )
        patches = patches.astype(np.float32, copy=False)
    patch_starts = np.concatenate([_ZERO, np.cumsum(thw)])
    return Segment(ids, mask, tuple(extra), spans, patches, grids, patch_starts)


@dataclass(frozen=True, slots=True)
class MultimodalPackWorker:
    """Assembles rows of :class:`Segment` pieces: the text fields as :class:`PackWorker` does, plus

    * ``mask_name`` (uint8 ``[L]``): 1 where the token may be a training target: not a placeholder,
      not padding, and (with ``mask_field``) where the sample's own mask is non-zero;
    * each of ``token_fields`` (``[L]``, the field's dtype, 0 on padding);
    * ``pixel_field`` (float32 ``[n, patch_dim]``): the row's patches, images in row order;
    * ``grid_field`` (int64 ``[k, 3]``) and ``image_document_ids`` (int32 ``[k]``, the segment each
      image belongs to).
    """

    target_length: int
    pad_id: int
    spec: ImageSpec
    mask_name: str
    use_mask: bool

    def __call__(self, rows: list[list[Segment]]) -> list[dict[str, Any]]:
        L, spec = self.target_length, self.spec
        out = PackWorker(L, self.pad_id)([[s.ids for s in row] for row in rows])
        for row, res in zip(rows, out):
            pad = int(res["num_padding"])
            ids = res["input_ids"]
            mask = ids != spec.image_token_id
            if self.use_mask:
                own = np.concatenate([s.mask for s in row] + [np.zeros(pad, dtype=np.uint8)]) != 0
                mask &= own
            if pad:
                mask[L - pad :] = False
            res[self.mask_name] = mask.view(np.uint8)
            for k, name in enumerate(spec.token_fields):
                parts = [s.extra[k] for s in row]
                res[name] = np.concatenate([*parts, np.zeros(pad, dtype=parts[0].dtype)])
            res[spec.pixel_field] = (
                np.concatenate([s.patches for s in row]) if row else np.zeros((0, spec.patch_dim), np.float32)
            )
            res[spec.grid_field] = np.concatenate([s.grids for s in row]) if row else _EMPTY_GRIDS
            res[IMAGE_DOCUMENT_IDS] = np.repeat(np.arange(len(row), dtype=np.int32), [len(s.grids) for s in row])
        return out


@dataclass(frozen=True, slots=True)
class MultimodalCollate:
    """Collates packed multimodal rows: token fields stacked ``[B, ...]``, image fields concatenated.

    The image fields vary in length per row, so they are concatenated along axis 0 in row order
    (``pixel_values [N, patch_dim]``, ``image_grid_thw [I, 3]``, ``image_document_ids [I]``), and two
    per-row counts say where each row's part starts: ``num_images`` and ``num_patches`` (int32
    ``[B]``; their cumulative sums are the row offsets). Counts rather than offsets, so the arrays of
    consecutive microbatches concatenate into those of the union, like every other field.
    """

    pixel_field: str = "pixel_values"
    grid_field: str = "image_grid_thw"

    def __call__(self, rows: list[dict[str, Any]]) -> dict[str, np.ndarray]:
        ragged = (self.pixel_field, self.grid_field, IMAGE_DOCUMENT_IDS)
        for i, r in enumerate(rows):
            missing = [k for k in ragged if k not in r]
            if missing:
                raise ConfigError(
                    f"collate_multimodal: row {i} has no {missing[0]!r} field (fields: {sorted(r)}); "
                    "use it after pack_sequences(image_token_id=...) with the same pixel_field/grid_field"
                )
        out = default_collate([{k: v for k, v in r.items() if k not in ragged} for r in rows])
        for k in ragged:
            out[k] = np.concatenate([np.asarray(r[k]) for r in rows])
        out["num_images"] = np.asarray([len(r[self.grid_field]) for r in rows], dtype=np.int32)
        out["num_patches"] = np.asarray([len(r[self.pixel_field]) for r in rows], dtype=np.int32)
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
