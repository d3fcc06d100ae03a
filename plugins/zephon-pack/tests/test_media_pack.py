"""Videos and audio clips packed beside images and text (``video_token_id=``, ``audio_token_id=``).

Small synthetic samples at the accumulator/worker level (fast): every placeholder run of every
kind arrives whole, once, in one row, with its data; masks are 0 on every kind of placeholder;
the collate and the training view carry each kind's fields; bad samples and options are clear
errors; and a pipeline with images only keeps its configuration (so its fingerprint).
"""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import pytest
from zephon_pack import PackSequences, collate_multimodal

from zephon_core import ConfigError, Dataset, OperatorError, Pipeline, Records, StaticMixtureWorkSource

IMG, VID, AUD = 900, 901, 902
PATCH_DIM = 4
FEAT = (2, 6)  # (n_mels, frames) of one audio clip: tiny, the layout is log_mel's
TOK_PER_CLIP = 3
L = 24


def sample(k: int, parts: list[tuple[str, Any]]) -> dict[str, Any]:
    """A record interleaving text runs (``("t", n)``), images/videos (``("i"|"v", [t, h, w])``) and
    audio clips (``("a", None)``), in that order; data values carry the sample id ``k``."""
    ids: list[int] = []
    out: dict[str, Any] = {}
    grids: dict[str, list[list[int]]] = {"i": [], "v": []}
    clips = 0
    for what, arg in parts:
        if what == "t":
            ids += [1000 * k + len(ids) + j for j in range(arg)]
        elif what in "iv":
            grids[what].append(arg)
            ids += [IMG if what == "i" else VID] * (int(np.prod(arg)) // 4)
        else:
            clips += 1
            ids += [AUD] * TOK_PER_CLIP
    for what, pix, grid in (("i", "pixel_values", "image_grid_thw"), ("v", "pixel_values_videos", "video_grid_thw")):
        if grids[what]:
            g = np.array(grids[what], np.int64)
            out[pix] = np.full((int(g.prod(axis=1).sum()), PATCH_DIM), k, np.float32)
            out[grid] = g
    if clips:
        out["input_features"] = np.full((clips, *FEAT), k, np.float32)
    return {"input_ids": np.array(ids, np.int32), **out}


def op(**kw: Any) -> PackSequences:
    opts: dict[str, Any] = {
        "image_token_id": IMG,
        "video_token_id": VID,
        "audio_token_id": AUD,
        "patch_dim": PATCH_DIM,
        "audio_feature_shape": FEAT,
        "audio_tokens_per_clip": TOK_PER_CLIP,
    }
    opts.update(kw)
    return PackSequences(L, opts.pop("algorithm", "wrap"), num_open_bins=2, **opts)


def pack(o: PackSequences, payloads: list[dict[str, Any]]) -> list[dict[str, Any]]:
    acc = o.new_accumulator(0)
    keys = list(range(len(payloads)))
    out = acc.push(Records(payloads, keys, [(k,) for k in keys])) + acc.flush()
    rows = [r for w in out for r in o.worker()(pickle.loads(pickle.dumps(w.task)))]  # as a process worker gets it
    return rows


MIXED = [
    sample(0, [("t", 3), ("v", [2, 2, 4]), ("t", 2), ("a", None)]),  # video + audio + text
    sample(1, [("t", 4)]),  # text only
    sample(2, [("i", [1, 2, 2]), ("t", 2), ("v", [1, 2, 2]), ("a", None), ("a", None), ("t", 3)]),
    sample(3, [("a", None), ("t", 5), ("i", [1, 2, 4])]),
    sample(4, [("t", 2), ("v", [4, 2, 2]), ("t", 9)]),
    sample(5, [("t", 20), ("v", [2, 2, 2]), ("t", 1)]),  # a cut in the long text, never in the video
]


@pytest.mark.parametrize(("algorithm", "allow_split"), [("wrap", None), ("first_fit", False), ("best_fit", True)])
def test_every_kind_arrives_whole_and_once(algorithm, allow_split):
    rows = pack(op(algorithm=algorithm, allow_split=allow_split), [dict(s) for s in MIXED])
    runs = {"i": 0, "v": 0, "a": 0}
    patches = {"i": 0, "v": 0}
    clips_seen = 0
    for r in rows:
        ids, mask = r["input_ids"], r["loss_mask"]
        assert len(ids) == L
        for tok in (IMG, VID, AUD):
            assert not mask[ids == tok].any(), "no label ever targets a placeholder"
        # each kind's runs in the row match its grids / clips, in order, whole
        for tok, grid_field, pix, key in (
            (IMG, "image_grid_thw", "pixel_values", "i"),
            (VID, "video_grid_thw", "pixel_values_videos", "v"),
        ):
            need = (r[grid_field].prod(axis=1) // 4).tolist()
            got = _run_lengths(ids == tok)
            assert got == need, f"{key}: runs {got} vs grids {need}"
            assert len(r[pix]) == int(r[grid_field].prod(axis=1).sum())
            runs[key] += len(need)
            patches[key] += len(r[pix])
        clips = r["input_features"]
        audio_runs = _run_lengths(ids == AUD)  # adjacent clips make one longer run
        assert clips.shape[1:] == FEAT and sum(audio_runs) == TOK_PER_CLIP * len(clips)
        assert all(n % TOK_PER_CLIP == 0 for n in audio_runs), "an audio clip was split"
        assert len(r["audio_document_ids"]) == len(clips) == len(r["input_features"])
        # a clip's data carries its sample id: the segment its document id names holds that sample's text
        for clip, doc in zip(clips, r["audio_document_ids"]):
            seg = ids[r["document_ids"] == doc]
            text = seg[(seg < IMG) | (seg >= 1000)]
            assert clip.min() == clip.max() and (not len(text) or (text // 1000 == clip.min()).all())
        clips_seen += len(clips)
        runs["a"] += len(clips)
    assert runs == {"i": 2, "v": 4, "a": 4} and clips_seen == 4
    assert patches == {"i": 4 + 8, "v": 16 + 4 + 16 + 8}


def _run_lengths(flags: np.ndarray) -> list[int]:
    edges = np.flatnonzero(np.diff(np.concatenate([[0], flags.astype(np.int8), [0]])))
    return (edges[1::2] - edges[::2]).tolist()


def test_collate_and_training_view_carry_each_kind():
    o = op(algorithm="first_fit", allow_split=False)
    rows = pack(o, [dict(s) for s in MIXED])
    batch = collate_multimodal(rows[:2])
    t = o.training_view()(batch)
    for name in ("pixel_values_videos", "video_grid_thw", "video_document_ids", "num_videos", "num_video_patches"):
        assert name in t, name
    assert t["num_videos"].sum() == len(t["video_grid_thw"]) and t["num_audios"].sum() == len(t["input_features"])
    assert t["num_video_patches"].sum() == len(t["pixel_values_videos"])
    g = t["video_grid_thw"]
    assert (
        t["video_cu_seqlens"].tolist()
        == np.concatenate([[0], np.cumsum(np.repeat(g[:, 1] * g[:, 2], g[:, 0]))]).tolist()
    )
    assert "image_cu_seqlens" in t and t["input_features"].shape[1:] == FEAT
    labels, ids = t["labels"], t["input_ids"]
    for tok in (IMG, VID, AUD):
        assert not (labels == tok).any()
    assert (ids == VID).sum() == (t["video_grid_thw"].prod(axis=1) // 4).sum()


def test_video_only_rows_have_no_image_fields():
    o = PackSequences(16, "first_fit", video_token_id=VID, patch_dim=PATCH_DIM)
    recs = [sample(0, [("t", 2), ("v", [1, 2, 4])]), sample(1, [("t", 3)])]
    rows = pack(o, recs)
    assert all("pixel_values" not in r and "image_grid_thw" not in r for r in rows)
    t = o.training_view()(collate_multimodal(rows))
    assert "pixel_values" not in t and len(t["video_grid_thw"]) == 1 and t["num_videos"].tolist() == [1]
    assert o.config()["images"]["video"] == {
        "token_id": VID,
        "pixel_field": "pixel_values_videos",
        "grid_field": "video_grid_thw",
    }


def test_image_only_configuration_is_unchanged():
    cfg = PackSequences(12, image_token_id=IMG).config()["images"]
    assert set(cfg) == {
        "image_token_id",
        "merge_size",
        "patch_dim",
        "pixel_field",
        "grid_field",
        "token_fields",
        "drop_fields",
    }


def test_an_old_checkpoint_segment_still_loads():
    seg = op().new_accumulator(0).tokens(sample(0, [("t", 2), ("i", [1, 2, 2])]))
    old = (seg.extra, seg.grids, seg.ids, seg.mask, seg.patch_starts, seg.patches, seg.spans)  # before `media`
    restored = type(seg).__new__(type(seg))
    restored.__setstate__(old)
    assert restored.media == () and np.array_equal(restored.patches, seg.patches)


def _records(payloads: list[dict[str, Any]]) -> StaticMixtureWorkSource:
    return StaticMixtureWorkSource([Dataset.from_records("bad", payloads, shard_size=8)], chunk_size=4, shuffle=False)


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        ({"input_ids": np.array([1, VID, 2], np.int32)}, r"1 video placeholder tokens .* need 0"),
        (
            {
                "input_ids": np.array([AUD] * TOK_PER_CLIP + [1], np.int32),
                "input_features": np.zeros((3, 3), np.float32),
            },
            r"'input_features' must be float \[2, 6\]",
        ),
        (
            {
                "input_ids": np.array([AUD, 1] + [AUD] * (TOK_PER_CLIP - 1), np.int32),
                "input_features": np.zeros(FEAT, np.float32),
            },
            "the placeholders of audio 0 are not one contiguous run",
        ),
        (
            {"input_ids": np.array([1, 2], np.int32), "video_grid_thw": np.array([1, 2, 2])},
            "but no 'pixel_values_videos'",
        ),
    ],
)
def test_bad_samples_are_errors_naming_the_sample(bad, match):
    payloads = [sample(k, [("t", 3)]) for k in range(5)] + [bad]
    pipe = Pipeline(_records(payloads)).pack_sequences(L, **_opts()).batch(1, collate=collate_multimodal)
    with pytest.raises(OperatorError, match=match) as err:
        with pipe.options(lanes=1) as p:
            list(p)
    assert "samples bad[shard 0 (memory-00000), index 5]:" in str(err.value)


def _opts() -> dict[str, Any]:
    return {
        "video_token_id": VID,
        "audio_token_id": AUD,
        "patch_dim": PATCH_DIM,
        "audio_feature_shape": FEAT,
        "audio_tokens_per_clip": TOK_PER_CLIP,
    }


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"image_token_id": IMG, "video_token_id": IMG}, "must all differ"),
        ({"audio_token_id": 0}, "must all differ"),
        ({"video_token_id": VID, "video_grid_field": ""}, "video_grid_field"),
        ({"audio_token_id": AUD, "audio_feature_shape": (128, 0)}, "audio_feature_shape"),
        ({"audio_token_id": AUD, "audio_tokens_per_clip": 0}, "audio_tokens_per_clip"),
        ({"video_token_id": VID, "token_fields": ("video_document_ids",)}, "twice or reserved"),
        ({"image_token_id": IMG, "video_token_id": VID, "video_pixel_field": "pixel_values"}, "twice or reserved"),
    ],
)
def test_option_errors(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        PackSequences(12, **kwargs)


def test_collate_names_the_missing_video_field():
    rows = pack(PackSequences(16, video_token_id=VID, patch_dim=PATCH_DIM), [sample(0, [("t", 2), ("v", [1, 2, 2])])])
    del rows[0]["video_grid_thw"]
    with pytest.raises(ConfigError, match=r"row 0 has no 'video_grid_thw' field .*video_token_id"):
        collate_multimodal(rows)
