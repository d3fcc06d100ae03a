"""``pack_sequences``: pack variable-length token sequences into fixed-length rows.

The accumulator (one per lane) decides which document slices form each row from their lengths;
the workers assemble the arrays (:mod:`zephon_pack.assemble`). At a flush sentinel the open rows
leave padded and the lane starts clean, so replay from a sentinel rebuilds the packing exactly.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Literal

from zephon_core import Accumulator, ConfigError, Operator, Traits
from zephon_core.plugin_api import WorkerFn, callable_name
from zephon_pack.accumulator import DATASET, PackAccumulator, PackPlan
from zephon_pack.assemble import PackWorker
from zephon_pack.multimodal import (
    AUDIO_DOCUMENT_IDS,
    IMAGE_DOCUMENT_IDS,
    VIDEO_DOCUMENT_IDS,
    ImageSpec,
    MediaKind,
    MultimodalPackWorker,
    check_names,
)
from zephon_pack.training import PackedTrainingView

ALGORITHMS = ("wrap", "first_fit", "best_fit", "best_fit_wrap")
ORDERS = ("arrival", "length", "random")


def _int(name: str, value: Any, minimum: int | None = None) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or (minimum is not None and value < minimum):
        bound = f" >= {minimum}" if minimum is not None else ""
        raise ConfigError(f"pack_sequences: {name} must be an int{bound}, got {value!r}")
    return value


class PackSequences(Operator):
    """Pack each lane's token sequences into rows of exactly ``target_length`` tokens.

    Args:
        target_length: tokens per row.
        algorithm: ``"wrap"`` concatenates documents and cuts every ``target_length`` tokens
            (no padding except at flushes; documents span rows). ``"first_fit"`` / ``"best_fit"``
            keep up to ``num_open_bins`` rows open and place each document whole into the first /
            tightest one it fits (documents stay whole unless longer than a row, or ``allow_split``).
            ``"best_fit_wrap"`` does best fit over a pool of ``candidate_pool_size`` open rows, and
            a document that fits none tops up the emptiest row and continues in a new one (almost
            no padding, few documents split; :class:`~zephon_pack.algorithms.BestFitWrapPacker`).
        num_open_bins: open rows per lane for the bin algorithms (more: less padding, more memory).
        allow_split: bin algorithms only: top up a row with the head of a document that does not
            fit before the row leaves, instead of padding it. ``wrap`` and ``best_fit_wrap`` always split.
        candidate_pool_size: ``best_fit_wrap`` only: open rows considered (default ``num_open_bins``).
        max_candidate_age: ``best_fit_wrap`` only: a row still open after more than this many further
            documents leaves, padded (bounds how long a document waits). None: no bound.
        group_by: homogeneous packing: only documents of one group share a row. A field name (its
            value, a str, int or bytes, is the group), or ``"dataset"``: the dataset each sample was
            drawn from (read off the record's lineage, so no field is needed). Each group is packed
            independently, with its own open rows, per lane (emission order:
            :mod:`zephon_pack.accumulator`).
        max_sequences_per_bin: at most this many documents (segments) per row; a row that reaches
            it leaves at once, padded. None: no cap.
        drop_oversized: drop a document longer than ``target_length`` (a tombstone keeps its
            lineage) instead of splitting it, which is the default.
        length_fn: a module-level function ``payload -> int`` giving a document's length in tokens,
            used instead of ``len(payload[field])``; it must return 0 .. that length, and a shorter
            length packs only the document's first that-many tokens (with images, cut back so no
            image is cut). In the fingerprint by its qualified name.
        order: the order documents are placed in within each order window: ``"arrival"``
            (default), ``"length"`` (longest first, ties in arrival order) or ``"random"`` (a hash
            of ``seed``, the lane and the record key). Documents never move across a flush.
        order_window: documents per order window (``order`` other than ``"arrival"``).
        seed: seed of ``order="random"``.
        pad_id: token id of padding.
        field: the payload field holding the token ids.
        ignore_index: label value of positions that must not be trained on.
        mask_document_boundaries: also mask the label of a segment's last token (it would be the
            next document's first token).
        mask_field: a token-aligned mask field of the records to pack with the ids (e.g.
            ``"loss_mask"`` from ``tokenize_chat``). Rows then carry it (0 on padding) and
            ``to_training()`` sets ``labels`` to ``ignore_index`` where the predicted token's mask
            is 0. Every record must have it. None (default): only the token field is packed.
        image_token_id: set to pack vision-language samples (``docs/vision-language.md``): the id
            of the image placeholder token. Each record then declares its images with
            ``pixel_field`` / ``grid_field`` (what zephon-vision's ``patchify`` writes), its
            ``input_ids`` hold ``t*h*w // merge_size**2`` placeholders per image, and no image is
            ever split across rows. Rows gain a loss mask (``mask_field``, or ``"loss_mask"``) that
            is 0 on placeholders, the row's patches, grids and ``image_document_ids``; batch them
            with ``collate=zephon_pack.collate_multimodal``. None (default): text only.
        merge_size: patches per side fused into one LLM token (``patchify``'s ``merge_size``).
        patch_dim: values per patch, ``channels * temporal_patch_size * patch_size**2``
            (default Qwen2-VL's ``3 * 2 * 14 * 14``); every sample's patches must have it.
        pixel_field: the records' patches field (``[n_patches, patch_dim]``).
        grid_field: the records' grids field (``[n_images, 3]``, ``(t, h, w)`` in patches).
        video_token_id: set to pack videos beside images and text (``docs/video-and-audio.md``):
            the id of the video placeholder token. Records declare their videos with
            ``video_pixel_field`` / ``video_grid_field`` (what zephon-av's ``patchify_video``
            writes), ``t*h*w // merge_size**2`` placeholders each, with the image rules and the same
            ``merge_size`` and ``patch_dim``; rows gain those fields and ``video_document_ids``.
            Works with or without ``image_token_id``.
        video_pixel_field: the records' video patches field.
        video_grid_field: the records' video grids field.
        audio_token_id: set to pack audio clips beside the other media: the id of the audio
            placeholder token. Records hold ``audio_field`` (log-mel features, one clip of
            ``audio_feature_shape`` or ``[n_clips, *audio_feature_shape]``) and
            ``audio_tokens_per_clip`` placeholders per clip; rows gain ``audio_field`` and
            ``audio_document_ids``.
        audio_field: the records' audio features field (``log_mel``'s ``input_features``).
        audio_feature_shape: the shape of one clip's features (default Whisper large-v3's 128
            mel bins by 3000 frames, 30 s).
        audio_tokens_per_clip: placeholders per clip: the audio encoder's output length for that
            shape (750: Whisper's encoder and Qwen2-Audio's pooling on 3000 frames).
        token_fields: other token-aligned fields to pack with the ids (0 on padding).
        drop_fields: fields to discard (default ``("num_tokens",)``, which ``tokenize`` adds).
            With ``image_token_id``, any other field is an error naming it.
        parallelism: worker count for assembling rows.
        runner: ``"inline"``, ``"threads"`` or ``"processes"`` (default: the pipeline's).
        name: operator name in errors and fingerprints.
    """

    kind = "pack_sequences"
    traits = Traits(fanout="one", stateful=True)

    def __init__(
        self,
        target_length: int,
        algorithm: Literal["wrap", "first_fit", "best_fit", "best_fit_wrap"] = "wrap",
        num_open_bins: int = 16,
        allow_split: bool | None = None,
        pad_id: int = 0,
        *,
        candidate_pool_size: int | None = None,
        max_candidate_age: int | None = None,
        group_by: str | None = None,
        max_sequences_per_bin: int | None = None,
        drop_oversized: bool = False,
        length_fn: Callable[[dict[str, Any]], int] | None = None,
        order: Literal["arrival", "length", "random"] = "arrival",
        order_window: int = 256,
        seed: int = 0,
        field: str = "input_ids",
        ignore_index: int = -100,
        mask_document_boundaries: bool = True,
        mask_field: str | None = None,
        image_token_id: int | None = None,
        merge_size: int = 2,
        patch_dim: int = 1176,
        pixel_field: str = "pixel_values",
        grid_field: str = "image_grid_thw",
        token_fields: tuple[str, ...] = (),
        drop_fields: tuple[str, ...] = ("num_tokens",),
        video_token_id: int | None = None,
        video_pixel_field: str = "pixel_values_videos",
        video_grid_field: str = "video_grid_thw",
        audio_token_id: int | None = None,
        audio_field: str = "input_features",
        audio_feature_shape: tuple[int, ...] = (128, 3000),
        audio_tokens_per_clip: int = 750,
        parallelism: int = 1,
        runner: str | None = None,
        name: str | None = None,
    ) -> None:
        super().__init__(parallelism=parallelism, runner=runner, name=name)
        self.target_length = _int("target_length", target_length, 1)
        if algorithm not in ALGORITHMS:
            raise ConfigError(f"pack_sequences: algorithm must be one of {list(ALGORITHMS)}, got {algorithm!r}")
        self.algorithm = algorithm
        self.num_open_bins = _int("num_open_bins", num_open_bins, 1)
        wraps = algorithm in ("wrap", "best_fit_wrap")
        if allow_split is None:
            allow_split = wraps
        if not isinstance(allow_split, bool):
            raise ConfigError(f"pack_sequences: allow_split must be True, False or None, got {allow_split!r}")
        if wraps and not allow_split:
            raise ConfigError(f"pack_sequences: {algorithm!r} always splits documents; use 'first_fit' or 'best_fit'")
        self.allow_split = allow_split
        self.pad_id = _int("pad_id", pad_id)
        if not -(2**31) <= pad_id < 2**31:
            raise ConfigError(f"pack_sequences: pad_id must fit in int32, got {pad_id}")
        if not isinstance(field, str) or not field:
            raise ConfigError(f"pack_sequences: field must be a non-empty string, got {field!r}")
        self.field = field
        self.ignore_index = _int("ignore_index", ignore_index)
        if not isinstance(mask_document_boundaries, bool):
            raise ConfigError("pack_sequences: mask_document_boundaries must be True or False")
        self.mask_document_boundaries = mask_document_boundaries
        if mask_field is not None and (not isinstance(mask_field, str) or not mask_field):
            raise ConfigError(f"pack_sequences: mask_field must be a non-empty string or None, got {mask_field!r}")
        if mask_field in (field, "position_ids", "document_ids", "num_padding"):
            raise ConfigError(f"pack_sequences: mask_field {mask_field!r} would overwrite a field of the packed rows")
        self.mask_field = mask_field
        self._packing_options(
            candidate_pool_size,
            max_candidate_age,
            group_by,
            max_sequences_per_bin,
            drop_oversized,
            length_fn,
            order,
            order_window,
            seed,
        )
        self.images: ImageSpec | None = None
        if image_token_id is not None or video_token_id is not None or audio_token_id is not None:
            self.images = self._image_spec(
                image_token_id, merge_size, patch_dim, pixel_field, grid_field, token_fields, drop_fields
            )
            self.images = self._media_spec(
                self.images,
                video_token_id,
                video_pixel_field,
                video_grid_field,
                audio_token_id,
                audio_field,
                audio_feature_shape,
                audio_tokens_per_clip,
            )
            if self.group_by not in (None, DATASET) and self.group_by not in self.images.drop_fields:
                # the group field is read by the accumulator, then discarded like a declared drop field
                drop = (*self.images.drop_fields, self.group_by)
                self.images = dataclasses.replace(self.images, drop_fields=drop)

    def _packing_options(
        self,
        candidate_pool_size: Any,
        max_candidate_age: Any,
        group_by: Any,
        max_sequences_per_bin: Any,
        drop_oversized: Any,
        length_fn: Any,
        order: Any,
        order_window: Any,
        seed: Any,
    ) -> None:
        bfw = self.algorithm == "best_fit_wrap"
        for name, value in (("candidate_pool_size", candidate_pool_size), ("max_candidate_age", max_candidate_age)):
            if value is not None and not bfw:
                raise ConfigError(
                    f"pack_sequences: {name} is an option of algorithm='best_fit_wrap', not {self.algorithm!r}"
                )
        self.candidate_pool_size = (
            None
            if not bfw
            else self.num_open_bins
            if candidate_pool_size is None
            else _int("candidate_pool_size", candidate_pool_size, 1)
        )
        self.max_candidate_age = None if max_candidate_age is None else _int("max_candidate_age", max_candidate_age, 1)
        if group_by is not None and (not isinstance(group_by, str) or not group_by):
            raise ConfigError(f"pack_sequences: group_by must be a field name, 'dataset' or None, got {group_by!r}")
        if group_by is not None and group_by == self.field:
            raise ConfigError(f"pack_sequences: group_by={group_by!r} is the token field itself")
        self.group_by: str | None = group_by
        self.max_sequences_per_bin = (
            None if max_sequences_per_bin is None else _int("max_sequences_per_bin", max_sequences_per_bin, 1)
        )
        if not isinstance(drop_oversized, bool):
            raise ConfigError(f"pack_sequences: drop_oversized must be True or False, got {drop_oversized!r}")
        self.drop_oversized = drop_oversized
        if length_fn is not None:
            qual = getattr(length_fn, "__qualname__", "")
            if not callable(length_fn) or not qual or "<" in qual or not getattr(length_fn, "__module__", None):
                raise ConfigError(
                    f"pack_sequences: length_fn must be a module-level function (it is fingerprinted by name "
                    f"and must import in worker processes), got {length_fn!r}"
                )
        self.length_fn: Callable[[dict[str, Any]], int] | None = length_fn
        if order not in ORDERS:
            raise ConfigError(f"pack_sequences: order must be one of {list(ORDERS)}, got {order!r}")
        self.order = order
        self.order_window = _int("order_window", order_window, 1)
        self.seed = _int("seed", seed)

    def _image_spec(
        self,
        image_token_id: int | None,
        merge_size: int,
        patch_dim: int,
        pixel_field: str,
        grid_field: str,
        token_fields: tuple[str, ...],
        drop_fields: tuple[str, ...],
    ) -> ImageSpec:
        if image_token_id is not None:
            image_token_id = _int("image_token_id", image_token_id, 0)
            if image_token_id == self.pad_id:
                raise ConfigError(f"pack_sequences: image_token_id and pad_id are both {image_token_id}")
        for name, value in (("pixel_field", pixel_field), ("grid_field", grid_field)):
            if not isinstance(value, str) or not value:
                raise ConfigError(f"pack_sequences: {name} must be a non-empty string, got {value!r}")
        spec = ImageSpec(
            image_token_id=image_token_id,
            merge_size=_int("merge_size", merge_size, 1),
            patch_dim=_int("patch_dim", patch_dim, 1),
            pixel_field=pixel_field,
            grid_field=grid_field,
            token_fields=check_names(token_fields, "token_fields"),
            drop_fields=check_names(drop_fields, "drop_fields"),
        )
        images = [pixel_field, grid_field] if image_token_id is not None else []
        self._check_names(spec, images)
        return spec

    def _check_names(self, spec: ImageSpec, media_fields: list[str]) -> None:
        names = [self.field, self.mask_field or "loss_mask", *media_fields, *spec.token_fields]
        reserved = {"position_ids", "document_ids", "num_padding", IMAGE_DOCUMENT_IDS, "num_images", "num_patches"}
        reserved |= {VIDEO_DOCUMENT_IDS, "num_videos", "num_video_patches", AUDIO_DOCUMENT_IDS, "num_audios"}
        clash = sorted({n for n in names if names.count(n) > 1 or n in reserved} | (set(spec.drop_fields) & set(names)))
        if clash:
            raise ConfigError(f"pack_sequences: field name(s) {clash} used twice or reserved for the packed rows")

    def _media_spec(
        self,
        spec: ImageSpec,
        video_token_id: int | None,
        video_pixel_field: str,
        video_grid_field: str,
        audio_token_id: int | None,
        audio_field: str,
        audio_feature_shape: tuple[int, ...],
        audio_tokens_per_clip: int,
    ) -> ImageSpec:
        """``spec`` with the video and audio kinds, checked (distinct placeholder ids, no field twice)."""
        video = audio = None
        if video_token_id is not None:
            for name, value in (("video_pixel_field", video_pixel_field), ("video_grid_field", video_grid_field)):
                if not isinstance(value, str) or not value:
                    raise ConfigError(f"pack_sequences: {name} must be a non-empty string, got {value!r}")
            video = MediaKind("video", _int("video_token_id", video_token_id, 0), video_pixel_field, video_grid_field)
        if audio_token_id is not None:
            if not isinstance(audio_field, str) or not audio_field:
                raise ConfigError(f"pack_sequences: audio_field must be a non-empty string, got {audio_field!r}")
            shape = audio_feature_shape
            if (
                not isinstance(shape, (tuple, list))
                or not shape
                or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in shape)
            ):
                raise ConfigError(
                    f"pack_sequences: audio_feature_shape must be a tuple of positive ints (n_mels, frames), got {shape!r}"
                )
            audio = MediaKind(
                "audio",
                _int("audio_token_id", audio_token_id, 0),
                audio_field,
                None,
                tuple(int(d) for d in shape),
                _int("audio_tokens_per_clip", audio_tokens_per_clip, 1),
            )
        spec = dataclasses.replace(spec, video=video, audio=audio)
        ids = [self.pad_id, *spec.placeholder_ids]
        if len(set(ids)) != len(ids):
            raise ConfigError(
                f"pack_sequences: pad_id, image_token_id, video_token_id and audio_token_id must all differ, got {ids}"
            )
        if spec.media:
            fields = [spec.pixel_field, spec.grid_field] if spec.image_token_id is not None else []
            for kind in spec.media:
                fields += [kind.data_field] if kind.grid_field is None else [kind.data_field, kind.grid_field]
            self._check_names(spec, fields)
        return spec

    @property
    def row_mask(self) -> str | None:
        """The packed rows' mask field: ``mask_field``, or ``"loss_mask"`` for multimodal rows."""
        if self.mask_field is not None:
            return self.mask_field
        return "loss_mask" if self.images is not None else None

    def config(self) -> dict[str, Any]:
        config: dict[str, Any] = {
            "target_length": self.target_length,
            "algorithm": self.algorithm,
            "num_open_bins": self.num_open_bins if self.algorithm != "wrap" else None,
            "allow_split": self.allow_split,
            "pad_id": self.pad_id,
            "field": self.field,
            "ignore_index": self.ignore_index,
            "mask_document_boundaries": self.mask_document_boundaries,
        }
        if self.mask_field is not None:  # only when used: existing pipelines keep their fingerprints
            config["mask_field"] = self.mask_field
        if self.images is not None:  # likewise
            config["images"] = self.images.config()
        if self.algorithm == "best_fit_wrap":
            config["num_open_bins"] = None
            config["candidate_pool_size"] = self.candidate_pool_size
        for name, value, default in (
            ("max_candidate_age", self.max_candidate_age, None),
            ("group_by", self.group_by, None),
            ("max_sequences_per_bin", self.max_sequences_per_bin, None),
            ("drop_oversized", self.drop_oversized, False),
            ("length_fn", None if self.length_fn is None else callable_name(self.length_fn), None),
            ("order", self.order, "arrival"),
        ):
            if value != default:  # new options only when used: existing fingerprints stay as they were
                config[name] = value
        if self.order != "arrival":
            config["order_window"] = self.order_window
        if self.order == "random":
            config["seed"] = self.seed
        return config

    def plan(self) -> PackPlan:
        """What each lane's accumulator needs (:mod:`zephon_pack.accumulator`)."""
        return PackPlan(
            target=self.target_length,
            field=self.field,
            algorithm=self.algorithm,
            num_open_bins=self.candidate_pool_size or self.num_open_bins,
            allow_split=self.allow_split,
            mask_field=self.mask_field,
            images=self.images,
            max_candidate_age=self.max_candidate_age,
            max_sequences_per_bin=self.max_sequences_per_bin,
            drop_oversized=self.drop_oversized,
            length_fn=self.length_fn,
            group_by=self.group_by,
            order=self.order,
            order_window=self.order_window,
            seed=self.seed,
        )

    def new_accumulator(self, lane: int) -> Accumulator:
        return PackAccumulator(self.plan(), lane)

    def worker(self) -> WorkerFn:
        if self.images is not None:
            assert self.row_mask is not None
            return MultimodalPackWorker(
                self.target_length, self.pad_id, self.images, self.row_mask, self.mask_field is not None
            )
        return PackWorker(self.target_length, self.pad_id, self.mask_field)

    def training_view(self) -> PackedTrainingView:
        spec = self.images
        if spec is None:
            return PackedTrainingView(self.ignore_index, self.mask_document_boundaries, self.row_mask, None)
        images = None if spec.image_token_id is None else (spec.pixel_field, spec.grid_field)
        video = None if spec.video is None else (spec.video.data_field, spec.video.grid_field or "")
        audio = None if spec.audio is None else spec.audio.data_field
        return PackedTrainingView(
            self.ignore_index, self.mask_document_boundaries, self.row_mask, images, videos=video, audio=audio
        )
