"""``ReaderConformance``: the checks every format reader must pass (rules 8 and 9 of the conformance suite).

It lives in the reader test kit because every reader builds on the storage toolkit; the kernel's
``from zephon_core.conformance import ReaderConformance`` resolves here when zephon-storage is installed.

Subclass it and provide a dataset written by the format's own library::

    class TestMyReader(ReaderConformance):
        @pytest.fixture
        def reader_path(self, tmp_path):
            write_my_format(tmp_path / "ds", records)
            return str(tmp_path / "ds")

        @pytest.fixture
        def reader_format(self):
            return "myformat"

The bad-input checks copy the dataset and delete, truncate or overwrite one shard file, so they
need ``ShardInfo.id`` to be the shard's path relative to the dataset root (declare otherwise in
:class:`ReaderCapabilities`).
"""

from __future__ import annotations

import os
import pickle
import shutil
import threading
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from zephon_core import OperatorError, Reader, ReaderError, ZephonError
from zephon_core.conformance import digest_payload
from zephon_core.conformance.rules import ReaderCapabilities, SuiteBase, rule

if TYPE_CHECKING:
    from zephon_core.plugin_api import ZephonPluginManager

TIMEOUT = 60.0


def _digests(rows: list[dict[str, Any]]) -> list[bytes]:
    return [digest_payload(r) for r in rows]


def _read_in_process(reader_bytes: bytes, shard: int, indices: list[int]) -> list[bytes]:
    reader = pickle.loads(reader_bytes)  # a reader the suite pickled itself in the parent
    return _digests(reader.read(shard, np.asarray(indices, dtype=np.int64)))


def _bounded(fn: Callable[[], Any], what: str) -> Any:
    """Run ``fn`` in a thread and fail (rather than hang) when it takes longer than TIMEOUT."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:
            box["error"] = exc

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(TIMEOUT)
    if t.is_alive():
        pytest.fail(f"{rule(9)} {what} did not finish within {TIMEOUT:.0f} s (a hang)")
    if "error" in box:
        raise box["error"]
    return box.get("value")


class ReaderConformance(SuiteBase):
    """Base class of reader conformance tests; not collected until subclassed."""

    __test__ = False  # only subclasses are collected

    # -- extension points ---------------------------------------------------------------------
    @pytest.fixture
    def reader_path(self) -> str:
        """A local dataset written by the format's own library (several shards, ≥ 50 samples)."""
        raise NotImplementedError("override the reader_path fixture")

    @pytest.fixture
    def reader_format(self) -> str | None:
        """The registered format name; None tests auto-detection too."""
        return None

    @pytest.fixture
    def reader_options(self) -> dict[str, Any]:
        return {}

    @pytest.fixture
    def expected_samples(self) -> list[list[dict[str, Any]]] | None:
        """Optionally, every sample per shard as the writer wrote it; compared field by field."""
        return None

    @pytest.fixture
    def reader_capabilities(self) -> ReaderCapabilities:
        return ReaderCapabilities()

    # -- helpers ------------------------------------------------------------------------------
    @pytest.fixture
    def make_reader(
        self, reader_format: str | None, reader_options: dict[str, Any], zephon_plugins: ZephonPluginManager
    ) -> Callable[[str], Reader]:
        registry = zephon_plugins.registry

        def make(path: str) -> Reader:
            fmt = reader_format or registry.detect_format(path)
            return registry.make_reader(fmt, path, **reader_options)

        return make

    @staticmethod
    def _all(reader: Reader) -> list[list[bytes]]:
        return [
            _digests(reader.read(i, np.arange(s.num_samples, dtype=np.int64))) for i, s in enumerate(reader.shards())
        ]

    # -- rule 8: deterministic and safe -------------------------------------------------------
    def test_detected_format_is_this_one(
        self, reader_path: str, reader_format: str | None, zephon_plugins: ZephonPluginManager
    ) -> None:
        if reader_format is None:
            pytest.skip("no reader_format given")
        assert zephon_plugins.registry.detect_format(reader_path) == reader_format, (
            f"{rule(8)} auto-detection does not pick {reader_format!r} for its own dataset"
        )

    def test_listing_is_deterministic(self, reader_path: str, make_reader: Callable[[str], Reader]) -> None:
        a, b = make_reader(reader_path).shards(), make_reader(reader_path).shards()
        assert a == b, f"{rule(8)} two readers list different shards or counts"
        assert len(a) >= 2 and sum(s.num_samples for s in a) >= 50, "give the suite ≥ 2 shards and ≥ 50 samples"
        clone = pickle.loads(pickle.dumps(make_reader(reader_path)))
        assert clone.shards() == a, f"{rule(8)} a pickled reader lists different shards"

    def test_expected_samples(
        self,
        reader_path: str,
        make_reader: Callable[[str], Reader],
        expected_samples: list[list[dict[str, Any]]] | None,
    ) -> None:
        if expected_samples is None:
            pytest.skip("no expected_samples given")
        reader = make_reader(reader_path)
        assert self._all(reader) == [_digests(s) for s in expected_samples], (
            f"{rule(8)} samples read back differ from what the writer wrote"
        )

    def test_batched_read_equals_single_reads_in_any_order(
        self, reader_path: str, make_reader: Callable[[str], Reader]
    ) -> None:
        reader = make_reader(reader_path)
        rng = np.random.default_rng(0)
        for shard, info in enumerate(reader.shards()):
            one_by_one = [reader.read(shard, np.array([i]))[0] for i in range(info.num_samples)]
            ref = _digests(one_by_one)
            order = rng.permutation(info.num_samples)
            order = np.concatenate([order, order[: max(1, len(order) // 4)]])  # with repeats
            got = _digests(make_reader(reader_path).read(shard, order))
            assert got == [ref[i] for i in order.tolist()], (
                f"{rule(8)} shard {shard}: a batched read in shuffled order with repeats differs from single reads"
            )

    def test_concurrent_reads(
        self, reader_path: str, make_reader: Callable[[str], Reader], reader_capabilities: ReaderCapabilities
    ) -> None:
        reader = make_reader(reader_path)
        ref = self._all(reader)
        jobs = [(s, np.random.default_rng(s).permutation(len(ref[s]))) for s in range(len(ref)) for _ in range(4)]
        with ThreadPoolExecutor(8) as pool:
            got = list(pool.map(lambda j: _digests(reader.read(j[0], j[1])), jobs))
        for (s, order), g in zip(jobs, got):
            assert g == [ref[s][i] for i in order.tolist()], f"{rule(8)} concurrent reads from threads disagree"
        if not reader_capabilities.processes:
            return
        blob = pickle.dumps(reader)
        import multiprocessing as mp

        with ProcessPoolExecutor(2, mp_context=mp.get_context("spawn")) as pool:
            futs = [pool.submit(_read_in_process, blob, s, order.tolist()) for s, order in jobs]
            for (s, order), f in zip(jobs, futs):
                assert f.result(timeout=TIMEOUT) == [ref[s][i] for i in order.tolist()], (
                    f"{rule(8)} reads from another process disagree"
                )

    def test_fsspec_urls_match_local_path(
        self, reader_path: str, make_reader: Callable[[str], Reader], reader_capabilities: ReaderCapabilities
    ) -> None:
        ref = self._all(make_reader(reader_path))
        url = "file://" + os.path.abspath(reader_path)
        assert self._all(make_reader(url)) == ref, f"{rule(8)} {url} reads differently from the local path"
        if not reader_capabilities.memory_fs:
            pytest.skip("reader does not claim memory:// support")
        import fsspec

        mem = fsspec.filesystem("memory")
        root = f"/zephon-conformance-{os.getpid()}-{id(self)}"
        if os.path.isdir(reader_path):
            for dirpath, _, files in os.walk(reader_path):
                for name in files:
                    src = os.path.join(dirpath, name)
                    mem.pipe(root + "/" + os.path.relpath(src, reader_path), open(src, "rb").read())
        else:
            root = root + "/" + os.path.basename(reader_path)
            mem.pipe(root, open(reader_path, "rb").read())
        try:
            assert self._all(make_reader("memory://" + root)) == ref, f"{rule(8)} memory:// reads differently"
        finally:
            mem.rm(root, recursive=True)

    # -- rule 9: bad input is a clear error ----------------------------------------------------
    @pytest.fixture
    def damaged(
        self,
        reader_path: str,
        make_reader: Callable[[str], Reader],
        reader_capabilities: ReaderCapabilities,
        tmp_path: Path,
    ) -> Callable[[str], tuple[str, str]]:
        if not reader_capabilities.shard_files:
            pytest.skip("ShardInfo.id is not a file path (ReaderCapabilities.shard_files=False)")

        def damage(kind: str) -> tuple[str, str]:
            copy = tmp_path / f"damaged-{kind}"
            if os.path.isdir(reader_path):
                shutil.copytree(reader_path, copy)
            else:
                copy.mkdir()
                shutil.copy(reader_path, copy / os.path.basename(reader_path))
                copy = copy / os.path.basename(reader_path)
            shards = make_reader(str(copy)).shards()
            victim = shards[len(shards) // 2].id
            target = (copy / victim) if os.path.isdir(copy) else copy
            data = target.read_bytes()
            if kind == "missing":
                target.unlink()
            elif kind == "truncated":
                target.write_bytes(data[: len(data) // 2])
            else:
                mid = len(data) // 2
                span = max(16, len(data) // 8)
                junk = np.random.default_rng(7).integers(0, 256, span, dtype=np.uint8).tobytes()
                target.write_bytes(data[:mid] + junk + data[mid + span :])
            return str(copy), victim

        return damage

    @pytest.mark.parametrize("kind", ["missing", "truncated", "corrupt"])
    def test_damaged_shard_is_a_clear_error(
        self,
        kind: str,
        damaged: Callable[[str], tuple[str, str]],
        make_reader: Callable[[str], Reader],
        reader_path: str,
        reader_capabilities: ReaderCapabilities,
    ) -> None:
        if kind == "corrupt" and not reader_capabilities.detects_corruption:
            pytest.skip("reader does not claim to detect corrupt bytes")
        path, victim = damaged(kind)
        ref = self._all(make_reader(reader_path))

        def read_all() -> list[list[bytes]]:
            reader = make_reader(path)
            return self._all(reader)

        try:
            got = _bounded(read_all, f"reading a dataset with a {kind} shard")
        except ZephonError as exc:
            name = os.path.basename(victim)
            assert name in str(exc), f"{rule(9)} the error for a {kind} shard does not name it ({name}): {exc}"
            assert isinstance(exc, (ReaderError, OperatorError)), f"{rule(9)} expected a ReaderError, got {type(exc)}"
            return
        except Exception as exc:
            pytest.fail(
                f"{rule(9)} a {kind} shard raised {type(exc).__name__} from inside a library, not a ReaderError naming the shard: {exc}"
            )
        assert got == ref, (
            f"{rule(9)} a {kind} shard ({victim}) was read without an error but the data differs (silently wrong data)"
        )
