"""Tests of readers for committed fixture datasets described by an ``index.json`` (LitData, MDS).

Such a plugin commits small datasets written by the format's own library under
``tests/fixtures/data/<variant>/`` with ``<variant>.expected.json`` beside each (see
:mod:`zephon_storage.testing.tagged`). Its ``conftest.py`` then needs only::

    from zephon_storage.testing.fixtures import expected, node_cache, tagger, untagger  # noqa: F401

    @pytest.fixture
    def data_dir() -> Path:
        return Path(__file__).parent / "fixtures" / "data"

and its tests subclass :class:`FixtureConformance` (the kernel's reader conformance suite on one
variant) and :class:`LayoutFaults` (damaged copies of the fixtures must give a ``ReaderError``
naming the shard file).
"""

from __future__ import annotations

import functools
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from zephon_core import ConfigError, Dataset, Pipeline, Reader, ReaderError, StaticMixtureWorkSource, ZephonError
from zephon_core.conformance import ReaderCapabilities
from zephon_storage.testing.conformance import ReaderConformance
from zephon_storage.testing.readers import (
    SharedTests,
    flip_byte,
    manifest_of,
    read_all,
    unknown_option_message,
    zephon_index,
)
from zephon_storage.testing.tagged import load_expected, tag, untag

IndexEdit = Callable[[dict[str, Any]], Any]
"""Changes a parsed ``index.json`` in place."""


# -- fixtures a plugin's conftest imports (it defines ``data_dir``) -------------------------------------
@pytest.fixture(autouse=True)
def node_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Decompressed shard copies go to a per-session cache, not the user's ~/.cache."""
    monkeypatch.setenv("ZEPHON_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "zephon-cache"))


@pytest.fixture
def tagger() -> Callable[[Any], Any]:
    """:func:`~zephon_storage.testing.tagged.tag`: compare decoded samples with the expected JSON."""
    return tag


@pytest.fixture
def untagger() -> Callable[[Any], Any]:
    """:func:`~zephon_storage.testing.tagged.untag`: expected JSON back to Python values."""
    return untag


@pytest.fixture
def expected(data_dir: Path) -> Callable[[str], dict[str, Any]]:
    """``expected(variant)``: the committed ``<variant>.expected.json`` of ``data_dir``."""
    return functools.partial(load_expected, data_dir)


# -- helpers ------------------------------------------------------------------------------------------
def copy_variant(data_dir: Path, variant: str, tmp_path: Path) -> Path:
    """A copy of fixture ``variant`` under ``tmp_path`` (tests damage copies, never the committed data)."""
    return Path(shutil.copytree(data_dir / variant, tmp_path / variant))


def edit_index(folder: Path, edit: IndexEdit) -> None:
    """Apply ``edit`` to ``folder/index.json`` and write it back."""
    index = json.loads((folder / "index.json").read_text())
    edit(index)
    (folder / "index.json").write_text(json.dumps(index))


def read_path(path: Path, **options: Any) -> list[dict[str, Any]]:
    """Open the dataset at ``path`` and read every sample (where a fault must surface)."""
    return read_all(Dataset.from_path("x", str(path), **options))


class KeepId:
    """A picklable transform keeping only ``id`` (so any sample layout batches)."""

    def __call__(self, row: dict[str, Any]) -> dict[str, Any]:
        return {"id": row["id"]}


# -- shared test classes ------------------------------------------------------------------------------
class FixtureConformance(ReaderConformance):
    """The reader conformance suite on one committed fixture variant, checked against its expected samples.

    Subclass with ``dataset_format`` and ``variant`` set (``options`` for the reader, and
    ``corruption=True`` when that variant lets the reader detect flipped bytes).
    """

    __test__ = False
    dataset_format: ClassVar[str] = ""
    variant: ClassVar[str] = ""
    options: ClassVar[dict[str, Any]] = {}
    corruption: ClassVar[bool] = False

    @pytest.fixture
    def reader_path(self, data_dir: Path) -> str:
        return str(data_dir / self.variant)

    @pytest.fixture
    def reader_format(self) -> str:
        return self.dataset_format

    @pytest.fixture
    def reader_options(self) -> dict[str, Any]:
        return dict(self.options)

    @pytest.fixture
    def reader_capabilities(self) -> ReaderCapabilities:
        return ReaderCapabilities(detects_corruption=self.corruption)

    @pytest.fixture
    def expected_samples(
        self,
        reader_path: str,
        make_reader: Callable[[str], Reader],
        expected: Callable[[str], dict[str, Any]],
    ) -> list[list[dict[str, Any]]]:
        flat = [untag(s) for s in expected(self.variant)["samples"]]
        out, start = [], 0
        for info in make_reader(reader_path).shards():
            out.append(flat[start : start + info.num_samples])
            start += info.num_samples
        assert start == len(flat)
        return out


class LayoutFaults(SharedTests):
    """Damaged copies of committed fixtures: each fault is a ``ReaderError`` naming the shard file.

    Subclass with:

    * ``dataset_format``, ``variant`` (an uncompressed variant with at least three shards),
      ``shards_key`` (the list of shards in ``index.json``) and ``count_key`` (the key of a
      shard's sample count in it);
    * ``variants``: test name -> the variants it runs on (default: ``variant``);
    * ``index_edits``: ``(edit, message)`` pairs, index changes the reader must refuse up front;
    * :meth:`shard_file` (a shard's file name in ``index.json``) and, if some variant needs reader
      options, :meth:`variant_options`.
    """

    __test__ = False
    dataset_format: ClassVar[str] = ""
    variant: ClassVar[str] = ""
    shards_key: ClassVar[str] = ""
    count_key: ClassVar[str] = ""
    variants: ClassVar[dict[str, tuple[str, ...]]] = {}
    index_edits: ClassVar[list[tuple[IndexEdit, str]]] = []

    def shard_file(self, index: dict[str, Any], k: int) -> str:
        """The file of shard ``k`` as ``index.json`` names it."""
        raise NotImplementedError

    def variant_options(self, variant: str) -> dict[str, Any]:
        """Reader options a variant needs (e.g. a block size)."""
        return {}

    def pytest_generate_tests(self, metafunc: pytest.Metafunc) -> None:
        """Run each test on the variants ``variants`` lists for it, and every index edit."""
        if "variant" in metafunc.fixturenames:
            metafunc.parametrize("variant", self.variants.get(metafunc.function.__name__, (self.variant,)))
        if "edit" in metafunc.fixturenames:
            metafunc.parametrize(("edit", "message"), self.index_edits, ids=[m for _, m in self.index_edits])

    def _victim(self, folder: Path, k: int) -> str:
        return self.shard_file(json.loads((folder / "index.json").read_text()), k)

    def test_missing_shard(self, variant: str, data_dir: Path, tmp_path: Path) -> None:
        folder = copy_variant(data_dir, variant, tmp_path)
        victim = self._victim(folder, 1)
        (folder / victim).unlink()
        with pytest.raises(ReaderError, match=re.escape(victim)):
            read_path(folder, **self.variant_options(variant))

    def test_truncated_shard(self, variant: str, data_dir: Path, tmp_path: Path) -> None:
        folder = copy_variant(data_dir, variant, tmp_path)
        victim = self._victim(folder, 0)
        data = (folder / victim).read_bytes()
        (folder / victim).write_bytes(data[: len(data) * 2 // 3])
        with pytest.raises(ReaderError, match=re.escape(victim)):
            read_path(folder, **self.variant_options(variant))

    def test_sample_count_disagrees_with_index(self, variant: str, data_dir: Path, tmp_path: Path) -> None:
        folder = copy_variant(data_dir, variant, tmp_path)
        victim = self._victim(folder, 1)
        key = self.count_key
        edit_index(folder, lambda idx: idx[self.shards_key][1].update({key: idx[self.shards_key][1][key] - 1}))
        with pytest.raises(ReaderError, match=rf"{re.escape(victim)}.*index\.json says"):
            read_path(folder, **self.variant_options(variant))

    def test_unsupported_index_is_refused_up_front(
        self, edit: IndexEdit, message: str, data_dir: Path, tmp_path: Path
    ) -> None:
        folder = copy_variant(data_dir, self.variant, tmp_path)
        edit_index(folder, edit)
        with pytest.raises(ReaderError, match=message):
            Dataset.from_path("x", str(folder), format=self.dataset_format)

    def test_broken_index_json(self, data_dir: Path, tmp_path: Path) -> None:
        folder = copy_variant(data_dir, self.variant, tmp_path)
        (folder / "index.json").write_text(f'{{"{self.shards_key}": [')
        with pytest.raises(ReaderError, match=r"index\.json is not valid JSON"):
            Dataset.from_path("x", str(folder), format=self.dataset_format)

    def test_unknown_option_is_a_config_error(self, data_dir: Path) -> None:
        with pytest.raises(ConfigError, match=unknown_option_message(self.dataset_format, "colour")):
            Dataset.from_path("x", str(data_dir / self.variant), colour="blue")

    def test_out_of_range_index(self, data_dir: Path) -> None:
        ds = Dataset.from_path("x", str(data_dir / self.variant))
        n = ds.shards[0].num_samples
        with pytest.raises(ReaderError, match=f"sample index {n} out of range"):
            ds.reader.read(0, np.array([0, n]))

    def test_manifest_catches_missing_short_and_dropped_shards(
        self, variant: str, data_dir: Path, tmp_path: Path
    ) -> None:
        """With the manifest of ``zephon index``, a damaged dataset fails when opened, not hours into a run."""
        folder = copy_variant(data_dir, variant, tmp_path)
        opts = self.variant_options(variant)
        zephon_index(folder)
        files = manifest_of(folder)["files"]
        assert files[0]["path"] == "index.json" and re.fullmatch(r"sha256:[0-9a-f]{64}", files[0]["checksum"])
        total = Dataset.from_path("x", str(folder), **opts).num_samples
        missing, short = self._victim(folder, 1), self._victim(folder, 0)
        kept = (folder / missing).read_bytes()
        (folder / missing).unlink()
        with pytest.raises(ReaderError, match=rf"{re.escape(missing)}: listed in _zephon_manifest\.json but missing"):
            Dataset.from_path("x", str(folder), **opts)
        (folder / missing).write_bytes(kept)
        data = (folder / short).read_bytes()
        (folder / short).write_bytes(data[: len(data) // 2])
        with pytest.raises(ReaderError, match=rf"{re.escape(short)}: has \d+ bytes, _zephon_manifest\.json says"):
            Dataset.from_path("x", str(folder), **opts)
        (folder / short).write_bytes(data)
        # A shard deleted together with its entry: index.json alone would describe a smaller dataset.
        dropped = self._victim(folder, 2)
        (folder / dropped).unlink()
        edit_index(folder, lambda idx: idx[self.shards_key].pop(2))
        with pytest.raises(ReaderError, match=r"index\.json: is not the index\.json that was indexed"):
            Dataset.from_path("x", str(folder), **opts)
        assert Dataset.from_path("x", str(folder), manifest=False, **opts).num_samples < total

    def test_verify_checksum_catches_a_flipped_byte(self, variant: str, data_dir: Path, tmp_path: Path) -> None:
        folder = copy_variant(data_dir, variant, tmp_path)
        opts = self.variant_options(variant)
        with pytest.raises(ReaderError, match=r"verify='checksum' but there is no _zephon_manifest\.json"):
            Dataset.from_path("x", str(folder), verify="checksum", **opts)
        zephon_index(folder)
        victim, first = self._victim(folder, 1), self._victim(folder, 0)
        with pytest.raises(ReaderError, match=rf"{re.escape(first)}: verify='checksum' but _zephon_manifest\.json has no checksum"):
            Dataset.from_path("x", str(folder), verify="checksum", **opts)
        zephon_index(folder, "--checksum")
        ds = Dataset.from_path("x", str(folder), verify="checksum", **opts)
        assert len(ds.reader.read(0, np.arange(2))) == 2  # shard 0 checked and good
        flip_byte(folder / victim)
        ds = Dataset.from_path("x", str(folder), verify="checksum", **opts)  # sizes agree: opening is fine
        with pytest.raises(ReaderError, match=rf"{re.escape(victim)}.*content checksum mismatch: expected sha256:[0-9a-f]{{64}} .*actual sha256:"):
            read_all(ds)

    def test_pipeline_error_names_the_shard(self, data_dir: Path, tmp_path: Path) -> None:
        folder = copy_variant(data_dir, self.variant, tmp_path)
        victim = self._victim(folder, 2)
        (folder / victim).unlink()
        ds = Dataset.from_path("x", str(folder))
        pipe = Pipeline(StaticMixtureWorkSource([ds], chunk_size=16)).map_transform(KeepId()).batch(4)
        with pytest.raises(ZephonError, match=re.escape(victim)), pipe:
            for _ in pipe:
                pass
