"""Brace patterns and WebDataset's key rule (pure functions, no files)."""

from __future__ import annotations

import pytest
from zephon_webdataset.shards import expand, split_pattern
from zephon_webdataset.tarindex import split_name

from zephon_core import ConfigError


def test_brace_expansion() -> None:
    assert expand("a-{000..002}.tar") == ["a-000.tar", "a-001.tar", "a-002.tar"]
    assert expand("{x,y}/p{1..2}.tar") == ["x/p1.tar", "x/p2.tar", "y/p1.tar", "y/p2.tar"]
    assert expand("p{8..10}.tar") == ["p8.tar", "p9.tar", "p10.tar"]
    assert expand("p{0..6..3}.tar") == ["p0.tar", "p3.tar", "p6.tar"]
    assert expand("plain.tar") == ["plain.tar"]
    with pytest.raises(ConfigError, match="unbalanced"):
        expand("p{0..2.tar")


def test_split_pattern() -> None:
    assert split_pattern("s3://b/ds/train-{0..1}.tar") == ("s3://b/ds", ["train-0.tar", "train-1.tar"])
    assert split_pattern("/data/{a,b}/x.tar") == ("/data", ["a/x.tar", "b/x.tar"])
    assert split_pattern("/data/ds") == ("/data/ds", None)


def test_key_rule() -> None:
    assert split_name("dir/abc.jpg") == ("dir/abc", "jpg")
    assert split_name("dir/abc.seg.PNG") == ("dir/abc", "seg.png")
    assert split_name("d.x/abc.txt") == ("d.x/abc", "txt")  # dots in folders do not count
    assert split_name("dir/README") is None
    assert split_name("a.b/README") is None
    assert split_name("dir/.hidden") == ("dir/", "hidden")  # as webdataset's base_plus_ext has it
