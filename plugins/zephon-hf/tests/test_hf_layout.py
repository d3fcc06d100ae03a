"""Which files make up a config and split: the layout rules on file names alone (no data, no I/O)."""

from __future__ import annotations

import json

import pytest
from zephon_hf.detect import detect
from zephon_hf.layout import catalog, glob_regex, resolve

from zephon_core import ConfigError, ReaderError

pytestmark = pytest.mark.timeout(60)


def reader_of(files: dict[str, str]):
    """``read(rel)`` over an in-memory folder of small text files."""

    def read(rel: str) -> bytes:
        if rel not in files:
            raise ReaderError(f"{rel}: not found")
        return files[rel].encode()

    return read


def pick(names, files=None, config=None, split=None):
    return resolve(names, reader_of(files or {}), config=config, split=split, where="/ds")


@pytest.mark.parametrize(
    ("pattern", "matches", "misses"),
    [
        (
            "data/train-*",
            ["data/train-00000-of-00002.parquet"],
            ["data/test-00000-of-00001.parquet", "data/x/train-0.parquet"],
        ),
        ("**/*.parquet", ["a.parquet", "a/b/c.parquet"], ["a.parquet.bak"]),
        ("data/**", ["data/a.parquet", "data/x/y.parquet"], ["other/a.parquet"]),
        ("**/train[-._ 0-9]*", ["train.parquet", "x/train-1.parquet"], ["trainer.parquet", "x/pretrain.parquet"]),
        ("part?.parquet", ["part1.parquet"], ["part12.parquet", "part/.parquet"]),
        ("[!x]*.parquet", ["a.parquet"], ["x.parquet"]),
    ],
)
def test_glob_patterns_follow_fsspec(pattern, matches, misses):
    rx = glob_regex(pattern)
    assert all(rx.match(m) for m in matches), [m for m in matches if not rx.match(m)]
    assert not any(rx.match(m) for m in misses), [m for m in misses if rx.match(m)]


def test_sharded_data_folder_splits_in_datasets_order():
    names = [f"data/test-0000{k}-of-00002.parquet" for k in range(2)] + ["data/train-00000-of-00001.parquet"]
    names.append("data/validation-00000-of-00001.parquet")
    cat = catalog(names, reader_of({}), where="/ds")
    assert cat.choices() == [("default", "train"), ("default", "validation"), ("default", "test")]
    sel = pick(names, split="test")
    assert sel.files == ("data/test-00000-of-00002.parquet", "data/test-00001-of-00002.parquet")
    assert sel.owns("data/test-00002-of-00003.parquet") and not sel.owns("data/train-00000-of-00001.parquet")
    with pytest.raises(
        ConfigError, match=r"has splits \['train', 'validation', 'test'\] in config 'default'; pass split="
    ):
        pick(names)
    with pytest.raises(
        ConfigError, match=r"no split 'dev' in config 'default'; valid splits: \['train', 'validation', 'test'\]"
    ):
        pick(names, split="dev")


def test_readme_configs_with_patterns_lists_and_data_dir():
    card = """---
license: mit
configs:
- config_name: small
  data_files:
  - split: train
    path:
    - small/a-*.parquet
    - small/b-*.parquet
  - split: test
    path: small/test.parquet
- config_name: big
  default: true
  data_dir: big
- config_name: flat
  data_files: flat/*.parquet
---
# A dataset card
"""
    names = [
        "README.md",
        "small/b-0.parquet",
        "small/a-1.parquet",
        "small/a-0.parquet",
        "small/test.parquet",
        "big/train-0.parquet",
        "big/test-0.parquet",
        "flat/x.parquet",
        "flat/y.parquet",
    ]
    files = {"README.md": card}
    small = pick(names, files, config="small", split="train")
    assert small.files == ("small/a-0.parquet", "small/a-1.parquet", "small/b-0.parquet")  # pattern by pattern
    assert small.source == "README.md configs"
    assert pick(names, files, config="flat").files == ("flat/x.parquet", "flat/y.parquet")
    big = pick(names, files, split="test")  # big is the default config; data_dir keeps its own keywords
    assert (big.config, big.files) == ("big", ("big/test-0.parquet",))
    with pytest.raises(ConfigError, match=r"no config 'tiny'; valid configs: \['small', 'big', 'flat'\]"):
        pick(names, files, config="tiny")


def test_several_configs_without_default_need_config():
    card = (
        "---\nconfigs:\n- config_name: a\n  data_files: a/*.parquet\n- config_name: b\n  data_files: b/*.parquet\n---\n"
    )
    names = ["README.md", "a/x.parquet", "b/y.parquet"]
    with pytest.raises(ConfigError, match=r"has configs \['a', 'b'\]; pass config="):
        pick(names, {"README.md": card})
    assert pick(names, {"README.md": card}, config="b").files == ("b/y.parquet",)


def test_readme_pattern_matching_another_format_is_an_error():
    card = "---\nconfigs:\n- config_name: default\n  data_files: data/*\n---\n"
    with pytest.raises(
        ReaderError, match=r"/ds/data/b\.jsonl: config 'default', split 'train' .* reads Parquet data files only"
    ):
        pick(["README.md", "data/a.parquet", "data/b.jsonl"], {"README.md": card})


def test_bad_readme_is_an_error_naming_it():
    with pytest.raises(ReaderError, match=r"/ds/README\.md: the YAML header is not valid"):
        pick(["README.md", "data/train-00000-of-00001.parquet"], {"README.md": "---\nconfigs: [\n---\n"})
    with pytest.raises(ReaderError, match=r"README\.md: 'configs' must be a list"):
        pick(["README.md", "data/train-00000-of-00001.parquet"], {"README.md": "---\nconfigs: 3\n---\n"})
    # a card without configs (or without a YAML header) falls back to the file names
    sel = pick(["README.md", "data/train-00000-of-00001.parquet"], {"README.md": "# hello\n"})
    assert sel.files == ("data/train-00000-of-00001.parquet",)


def test_config_folders_and_the_parquet_export():
    names = [
        "README.md",
        "en/train-00000-of-00001.parquet",
        "en/test-00000-of-00001.parquet",
        "fr/train-00000-of-00002.parquet",
    ]
    names.append("fr/train-00001-of-00002.parquet")
    card = {"README.md": "# a card without configs\n"}
    with pytest.raises(ConfigError, match=r"has configs \['en', 'fr'\]"):
        pick(names, card)
    assert pick(names, card, config="fr").files == (
        "fr/train-00000-of-00002.parquet",
        "fr/train-00001-of-00002.parquet",
    )
    assert pick(names, card, config="en", split="test").files == ("en/test-00000-of-00001.parquet",)
    export = ["default/train/0000.parquet", "default/train/0001.parquet", "default/validation/0000.parquet"]
    sel = pick(export, split="train")
    assert (sel.config, sel.files, sel.source) == (
        "default",
        ("default/train/0000.parquet", "default/train/0001.parquet"),
        "config folders",
    )


def test_split_keywords_then_everything_is_train():
    assert pick(["train.parquet", "test.parquet"], split="test").files == ("test.parquet",)
    assert pick(["x/training/a.parquet", "x/eval/b.parquet"], split="train").files == ("x/training/a.parquet",)
    mixed = pick(["test/a.parquet", "test/notes.txt", "test/b.arrow", "train/c.parquet"], split="test")
    assert mixed.files == (
        "test/a.parquet",
    )  # inferred splits keep their Parquet files, as datasets keeps its format's
    only = pick(["a.parquet", "b/c.parquet"])
    assert (only.split, only.files) == ("train", ("a.parquet", "b/c.parquet"))
    with pytest.raises(ReaderError, match=r"/ds: not a Hugging Face dataset folder"):
        pick(["notes.txt"])


def test_arrow_folders():
    state = json.dumps(
        {
            "_data_files": [{"filename": "data-00000-of-00002.arrow"}, {"filename": "data-00001-of-00002.arrow"}],
            "_split": "train",
        }
    )
    names = ["state.json", "dataset_info.json", "data-00000-of-00002.arrow", "data-00001-of-00002.arrow"]
    sel = pick(names, {"state.json": state})
    assert (sel.layout, sel.split, sel.files) == ("save_to_disk", "train", tuple(names[2:]))
    assert pick(names, {"state.json": state}, split="train").files == sel.files
    with pytest.raises(ConfigError, match=r"one saved Dataset with split 'train', not split 'test'"):
        pick(names, {"state.json": state}, split="test")
    with pytest.raises(ConfigError, match=r"save_to_disk/Arrow folder, which has no configs"):
        pick(names, {"state.json": state}, config="default")
    dd = {
        "dataset_dict.json": json.dumps({"splits": ["train", "test"]}),
        "train/state.json": state,
        "test/state.json": state,
    }
    names = ["dataset_dict.json", "train/state.json", "test/state.json", "train/data-00000-of-00002.arrow"]
    assert pick(names, dd, split="test").files == ("test/data-00000-of-00002.arrow", "test/data-00001-of-00002.arrow")
    with pytest.raises(ConfigError, match=r"has splits \['train', 'test'\]; pass split="):
        pick(names, dd)
    with pytest.raises(ReaderError, match=r"/ds/train/state\.json: not valid JSON"):
        pick(names, {**dd, "train/state.json": "{"}, split="train")


def test_builder_cache_folder():
    info = {
        "builder_name": "parquet",
        "dataset_name": "hub",
        "splits": {"train": {"num_examples": 30}, "test": {"num_examples": 5}},
    }
    names = ["dataset_info.json", "hub-train-00000-of-00002.arrow", "hub-train-00001-of-00002.arrow", "hub-test.arrow"]
    sel = pick(names, {"dataset_info.json": json.dumps(info)}, split="train")
    assert (sel.layout, sel.files, sel.expected_rows) == ("cache", tuple(names[1:3]), 30)


def test_detection_uses_names_only():
    assert detect(None, "/x", ["state.json", "data-00000-of-00001.arrow", "dataset_info.json"])
    assert detect(None, "/x", ["dataset_dict.json", "train/state.json"])
    assert detect(None, "/x", ["dataset_info.json", "hub-train.arrow"])
    assert detect(None, "/x", ["data/train-00000-of-00001.parquet"])
    assert detect(None, "/x", ["README.md", "en/train-00000-of-00001.parquet"])
    assert not detect(None, "/x", ["en/train-00000-of-00001.parquet"])  # config folders need the README
    assert not detect(None, "/x", ["part-0.parquet", "part-1.parquet"])  # plain Parquet: zephon-parquet's
    assert not detect(None, "/x", ["dataset_info.json"])
