"""Hub-style Parquet repositories laid out as ``push_to_hub`` lays them out, checked against ``load_dataset``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from zephon_storage.testing.readers import read_all, unknown_option_message

from zephon_core import ConfigError, Dataset, ReaderError

pytestmark = pytest.mark.timeout(120)


def push_like(
    hf: Any, root: Path, config: str, splits: dict[str, list[dict]], shards: dict[str, int], *, default: bool = False
) -> None:
    """Write ``splits`` as ``push_to_hub(repo, config_name=config)`` would, without a network.

    Files are ``{data_dir}/{split}-{k:05d}-of-{n:05d}.parquet`` (``data_dir`` is ``data`` for the
    default config, else the config's name), written by ``Dataset.to_parquet``; the README's
    ``configs:`` section is made by ``datasets``' own ``MetadataConfigs``, as ``push_to_hub`` does.
    """
    from datasets.utils.metadata import MetadataConfigs
    from huggingface_hub import DatasetCard, DatasetCardData

    data_dir = "data" if config == "default" else config
    for split, split_rows in splits.items():
        ds, n = hf.Dataset.from_list(split_rows), shards[split]
        (root / data_dir).mkdir(parents=True, exist_ok=True)
        for k in range(n):
            ds.shard(num_shards=n, index=k, contiguous=True).to_parquet(
                str(root / data_dir / f"{split}-{k:05d}-of-{n:05d}.parquet")
            )
    readme = root / "README.md"
    card = DatasetCard.load(str(readme)).data if readme.exists() else DatasetCardData()
    entry: dict[str, Any] = {"data_files": [{"split": s, "path": f"{data_dir}/{s}-*"} for s in splits]}
    if default:
        entry["default"] = True
    MetadataConfigs({config: entry}).to_dataset_card_data(card)
    DatasetCard(f"---\n{card}\n---\n").save(str(readme))


def loaded(hf: Any, root: Path, tmp_path: Path, config: str | None, split: str) -> list[dict]:
    """What ``datasets.load_dataset(root, name=config, split=split)`` returns, as rows."""
    return hf.load_dataset(str(root), name=config, split=split, cache_dir=str(tmp_path / "hf-cache")).to_list()


@pytest.fixture(scope="module")
def repo(hf, make_rows, tmp_path_factory) -> Path:
    """Two configs: ``default`` (train 3 files, test 1) and ``fr`` (train 2 files), with a README."""
    root = tmp_path_factory.mktemp("hub") / "repo"
    rows = make_rows(700)
    push_like(hf, root, "default", {"train": rows[:400], "test": rows[400:500]}, {"train": 3, "test": 1})
    push_like(hf, root, "fr", {"train": rows[500:]}, {"train": 2})
    return root


def test_default_config_matches_load_dataset(hf, repo, tmp_path, make_rows):
    rows = make_rows(700)
    train = Dataset.from_path("train", str(repo), format="hf", split="train")
    assert [s.id for s in train.shards] == [f"data/train-0000{k}-of-00003.parquet" for k in range(3)]
    assert read_all(train) == loaded(hf, repo, tmp_path, None, "train") == rows[:400]
    test = Dataset.from_path("test", str(repo), format="hf", split="test")
    assert read_all(test) == loaded(hf, repo, tmp_path, None, "test") == rows[400:500]
    assert test.reader.describe() == {
        "format": "hf",
        "layout": "hub",
        "config": "default",
        "split": "test",
        "columns": None,
    }
    with pytest.raises(ConfigError, match=r"has splits \['train', 'test'\] in config 'default'; pass split="):
        Dataset.from_path("x", str(repo), format="hf")


def test_named_config_matches_load_dataset(hf, repo, tmp_path, make_rows):
    fr = Dataset.from_path("fr", str(repo), format="hf", config="fr")  # one split: no split= needed
    assert [s.id for s in fr.shards] == ["fr/train-00000-of-00002.parquet", "fr/train-00001-of-00002.parquet"]
    assert read_all(fr) == loaded(hf, repo, tmp_path, "fr", "train") == make_rows(700)[500:]
    with pytest.raises(ConfigError, match=r"has no config 'de'; valid configs: \['default', 'fr'\]"):
        Dataset.from_path("x", str(repo), format="hf", config="de")
    with pytest.raises(ConfigError, match=r"has no split 'test' in config 'fr'; valid splits: \['train'\]"):
        Dataset.from_path("x", str(repo), format="hf", config="fr", split="test")


def test_default_flag_and_folders_without_readme(hf, make_rows, tmp_path):
    rows = make_rows(300)
    root = tmp_path / "r"
    push_like(hf, root, "en", {"train": rows[:200]}, {"train": 2}, default=True)
    push_like(hf, root, "de", {"train": rows[200:]}, {"train": 1})
    assert (
        read_all(Dataset.from_path("x", str(root), format="hf"))
        == loaded(hf, root, tmp_path, None, "train")
        == rows[:200]
    )
    (root / "README.md").unlink()  # a download without the card: the folders still name the configs
    with pytest.raises(ConfigError, match=r"has configs \['de', 'en'\]; pass config="):
        Dataset.from_path("x", str(root), format="hf")
    assert read_all(Dataset.from_path("x", str(root), format="hf", config="de")) == rows[200:]


def test_plain_data_folder_without_readme(hf, make_rows, tmp_path):
    rows = make_rows(120)
    root = tmp_path / "r"
    push_like(hf, root, "default", {"train": rows[:100], "validation": rows[100:]}, {"train": 2, "validation": 1})
    (root / "README.md").unlink()
    ds = Dataset.from_path("x", str(root), format="hf", split="validation")
    assert read_all(ds) == loaded(hf, root, tmp_path, None, "validation") == rows[100:]


def test_options_columns_and_detection(repo, make_rows):
    rows = make_rows(700)
    ds = Dataset.from_path("x", str(repo), format="hf", split="test", columns=["words", "meta"])
    assert ds.reader.read(0, np.array([7, 2])) == [
        {"words": r["words"], "meta": r["meta"]} for r in (rows[407], rows[402])
    ]
    with pytest.raises(ConfigError, match=unknown_option_message("hf", "subset")) as info:
        Dataset.from_path("x", str(repo), format="hf", subset="fr")
    assert all(o in str(info.value) for o in ("'config'", "'split'", "'row_group_cache_bytes'", "'columns'"))
    with pytest.raises(ReaderError, match=r"looks like several formats \['hf', 'parquet'\]; pass format="):
        Dataset.from_path("x", str(repo))  # both claim a hub layout; the plain reader would mix the splits


def test_index_and_manifest_cover_every_config(hf, repo, make_rows, tmp_path, capsys):
    from zephon_core.cli import main

    root = tmp_path / "repo"
    shutil.copytree(repo, root)
    assert main(["index", str(root), "--format", "hf"]) == 0
    out = capsys.readouterr().out
    assert "hf: 6 files, rows per split: default/train 400, default/test 100, fr/train 200" in out
    manifest = json.loads((root / "_zephon_manifest.json").read_text())
    assert len(manifest["files"]) == 6 and all("row_groups" in f["extra"] for f in manifest["files"])
    assert Dataset.from_path("x", str(root), format="hf", split="train").num_samples == 400
    hf.Dataset.from_list(make_rows(5)).to_parquet(str(root / "data" / "train-00003-of-00003.parquet"))
    with pytest.raises(ReaderError, match=r"data/train-00003-of-00003\.parquet: not listed in _zephon_manifest\.json"):
        Dataset.from_path("x", str(root), format="hf", split="train")
    assert Dataset.from_path("x", str(root), format="hf", split="test").num_samples == 100  # not this split's
    (root / "data" / "train-00003-of-00003.parquet").unlink()
    (root / "fr" / "train-00001-of-00002.parquet").unlink()
    with pytest.raises(
        ReaderError, match=r"fr/train-00001-of-00002\.parquet: listed in _zephon_manifest\.json but missing"
    ):
        Dataset.from_path("x", str(root), format="hf", config="fr")
    assert Dataset.from_path("x", str(root), format="hf", config="fr", manifest=False).num_samples == 100


def test_unreadable_parquet_names_the_file(hf, repo, tmp_path):
    root = tmp_path / "repo"
    shutil.copytree(repo, root)
    (root / "data" / "test-00000-of-00001.parquet").write_bytes(b"not parquet at all" * 10)
    with pytest.raises(ReaderError, match=r"data/test-00000-of-00001\.parquet: not a readable Parquet file"):
        Dataset.from_path("x", str(root), format="hf", split="test")
    assert Dataset.from_path("x", str(root), format="hf", split="train").num_samples == 400
