"""zephon_storage: fsspec roots, the shared node-local shard cache, retries and prefetching.

S3 is exercised against moto's real S3 API server on loopback (see zephon_testkit.s3).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import socket
import threading
import time
from pathlib import Path

import fsspec
import pytest
from zephon_storage import (
    ShardCache,
    Storage,
    cache_key,
    call_with_retry,
    default_cache_bytes,
    default_cache_dir,
    is_permanent_error,
    parse_bytes,
)

from zephon_core import ReaderError

pytest.importorskip("moto.server", reason="S3 tests need moto[server] (pip install 'moto[server]' s3fs boto3)")
pytest.importorskip("s3fs")
from zephon_testkit.s3 import moto_s3

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def s3():
    with moto_s3("storage-tests") as server:
        yield server


# -- configuration ------------------------------------------------------------------------------------
def test_parse_bytes_and_environment(monkeypatch, tmp_path):
    assert parse_bytes(1000) == 1000
    assert parse_bytes("512MiB") == 512 * 1024**2
    assert parse_bytes("20 GB") == 20 * 1000**3
    with pytest.raises(ValueError, match="byte count"):
        parse_bytes("lots")
    monkeypatch.setenv("ZEPHON_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.setenv("ZEPHON_CACHE_BYTES", "3KiB")
    assert default_cache_dir() == str(tmp_path / "c")
    assert default_cache_bytes() == 3072
    st = Storage(str(tmp_path))
    assert st.cache_dir == str(tmp_path / "c") and st.cache_bytes == 3072


# -- local and memory roots ---------------------------------------------------------------------------
def test_local_folder_single_file_and_file_url(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.bin").write_bytes(b"a" * 10)
    (tmp_path / "sub" / "b.bin").write_bytes(b"b" * 20)
    for url in (str(tmp_path), f"file://{tmp_path}"):
        st = Storage(url, cache_dir=str(tmp_path / ".cache"))
        files = st.list_files(lambda r: r.endswith(".bin"))
        assert [(f.rel, f.size) for f in files] == [("a.bin", 10), ("sub/b.bin", 20)]
        local = st.open_local("sub/b.bin")
        assert local.path == str(tmp_path / "sub" / "b.bin")  # local data is read in place
    single = Storage(str(tmp_path / "a.bin"))
    assert [f.rel for f in single.list_files(lambda r: True)] == ["a.bin"]
    assert Path(single.open_local("a.bin").path).read_bytes() == b"a" * 10
    with pytest.raises(ReaderError, match="does not exist"):
        Storage(str(tmp_path / "nope")).list_files(lambda r: True)
    with pytest.raises(ReaderError, match="nope.bin"):
        Storage(str(tmp_path)).open_local("nope.bin")


def test_memory_root_goes_through_cache_and_pickles(tmp_path):
    fs = fsspec.filesystem("memory")
    fs.pipe("/storage-mem/x/a.bin", b"hello" * 100)
    st = Storage("memory://storage-mem/x", cache_dir=str(tmp_path))
    local = st.open_local("a.bin")
    assert local.path.startswith(str(tmp_path)) and Path(local.path).read_bytes() == b"hello" * 100
    clone = pickle.loads(pickle.dumps(st))
    assert clone.open_local("a.bin").path == local.path
    assert st.url_of("a.bin") == "memory:///storage-mem/x/a.bin"


# -- the shard cache ----------------------------------------------------------------------------------
def _writer(data: bytes):
    def produce(tmp: str) -> None:
        Path(tmp).write_bytes(data)

    return produce


def test_cache_lru_eviction_skips_pinned_entries(tmp_path):
    cache = ShardCache(str(tmp_path), max_bytes=250)
    a = cache.acquire("a", _writer(b"a" * 100), what="a")
    cache.acquire("b", _writer(b"b" * 100), what="b").release()
    time.sleep(0.01)
    cache.acquire("c", _writer(b"c" * 100), what="c").release()  # over budget: b is the LRU unpinned entry
    names = sorted(k for k, _ in cache.entries())
    assert names == ["a", "c"], names  # a is pinned although older
    a.release()
    time.sleep(0.01)
    cache.acquire("c", _writer(b"x"), what="c").release()  # a hit refreshes c's recency
    cache.acquire("d", _writer(b"d" * 100), what="d").release()
    assert sorted(k for k, _ in cache.entries()) == ["c", "d"]
    assert cache.usage() <= 250


def test_cache_rejects_truncated_production_and_cleans_orphans(tmp_path):
    cache = ShardCache(str(tmp_path), max_bytes=10_000)
    with pytest.raises(ReaderError, match="truncated"):
        cache.acquire("k", _writer(b"abc"), what="s3://b/k", expected_size=10)
    assert not (tmp_path / "k").exists()
    (tmp_path / "old.tmp-1-2").write_bytes(b"partial")  # left by a crashed producer
    cache.evict()
    assert not (tmp_path / "old.tmp-1-2").exists()


def _acquire_in_process(args: tuple[str, str, dict, str]) -> bool:
    cache_dir, url, options, rel = args
    st = Storage(url, storage_options=options, cache_dir=cache_dir)
    return st.open_local(rel)._entry.produced


@pytest.mark.slow
def test_processes_share_one_download(s3, tmp_path):
    s3.put("shared/big.bin", os.urandom(3 * 1024 * 1024))
    args = (str(tmp_path), s3.url("shared"), s3.storage_options, "big.bin")
    ctx = mp.get_context("spawn")
    with ctx.Pool(4) as pool:
        produced = pool.map(_acquire_in_process, [args] * 4)
    assert sorted(produced) == [False, False, False, True]
    entries = list(ShardCache(str(tmp_path / "shards"), 10**9).entries())
    assert len(entries) == 1 and entries[0][1].st_size == 3 * 1024 * 1024


@pytest.mark.slow
def test_threads_share_one_download(s3, tmp_path):
    s3.put("threads/x.bin", b"x" * 200_000)
    st = Storage(s3.url("threads"), storage_options=s3.storage_options, cache_dir=str(tmp_path))
    results: list[bool] = []
    threads = [
        threading.Thread(target=lambda: results.append(st.open_local("x.bin")._entry.produced)) for _ in range(6)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(results) == [False] * 5 + [True]


# -- S3 behaviour -------------------------------------------------------------------------------------
def test_s3_listing_download_and_prefetch(s3, tmp_path):
    for i in range(4):
        s3.put(f"pf/part-{i}.bin", bytes([i]) * 1000)
    st = Storage(s3.url("pf"), storage_options=s3.storage_options, cache_dir=str(tmp_path))
    files = st.list_files(lambda r: r.endswith(".bin"))
    assert [f.rel for f in files] == [f"part-{i}.bin" for i in range(4)]
    futures = st.prefetch(f.rel for f in files[1:])
    st.wait_prefetch(timeout=30)
    assert all(f.result() is True for f in futures)  # each produced by the prefetcher
    assert st.open_local("part-2.bin")._entry.produced is False  # already warm
    assert Path(st.open_local("part-3.bin").path).read_bytes() == bytes([3]) * 1000
    st.close()


def test_prefetching_a_listed_file_sends_no_metadata_request(s3, tmp_path, monkeypatch):
    """The listing already knows each file's size and version: a prefetch goes straight to the download."""
    for i in range(3):
        s3.put(f"listed/part-{i}.bin", bytes([i]) * 1000)
    st = Storage(s3.url("listed"), storage_options=s3.storage_options, cache_dir=str(tmp_path))
    files = st.list_files(lambda r: r.endswith(".bin"))
    asked: list[str] = []
    info = st.info
    monkeypatch.setattr(st, "info", lambda rel: asked.append(rel) or info(rel))
    futures = st.prefetch(files)
    st.wait_prefetch(timeout=30)
    assert all(f.result() is True for f in futures) and asked == []
    assert st.open_local("part-1.bin", files[1])._entry.produced is False  # the foreground read finds it warm
    st.prefetch(["part-0.bin"])  # by name only it still works (and asks), for callers without a listing
    st.close()


def test_s3_permanent_errors_name_the_url(s3, tmp_path):
    st = Storage(s3.url("perm"), storage_options=s3.storage_options, cache_dir=str(tmp_path))
    s3.put("perm/a.bin", b"a")
    st.list_files(lambda r: True)
    t0 = time.monotonic()
    with pytest.raises(ReaderError, match=r"s3://storage-tests/perm/gone\.bin: not found"):
        st.open_local("gone.bin")
    assert time.monotonic() - t0 < 5  # not retried
    with pytest.raises(ReaderError, match="does not exist"):
        Storage("s3://no-such-bucket/x", storage_options=s3.storage_options).list_files(lambda r: True)
    import botocore.exceptions

    try:
        s3.client.head_object(Bucket=s3.bucket, Key="perm/missing")
    except botocore.exceptions.ClientError as exc:
        assert is_permanent_error(exc)
    else:  # pragma: no cover
        pytest.fail("head_object of a missing key succeeded")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_transient_outage_is_retried_with_backoff(tmp_path, monkeypatch):
    """The server goes away and comes back on the same port: reads succeed after retries."""
    from moto.server import ThreadedMotoServer
    from zephon_testkit.s3 import FAKE_ENV

    for k, v in FAKE_ENV.items():
        monkeypatch.setenv(k, v)
    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    import boto3

    endpoint = f"http://127.0.0.1:{port}"
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
    client.create_bucket(Bucket="flaky")
    client.put_object(Bucket="flaky", Key="d/a.bin", Body=b"z" * 5000)
    options = {
        "key": "testing",
        "secret": "testing",
        "client_kwargs": {"endpoint_url": endpoint, "region_name": "us-east-1"},
        "config_kwargs": {"retries": {"max_attempts": 1}, "connect_timeout": 1},
        "skip_instance_cache": True,
        "use_listings_cache": False,
    }
    st = Storage("s3://flaky/d", storage_options=options, cache_dir=str(tmp_path), retries=8, backoff=0.2)
    info = st.list_files(lambda r: True)[0]
    server.stop()
    revived: list[ThreadedMotoServer] = []

    def revive() -> None:
        time.sleep(1.0)
        s = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        s.start()
        revived.append(s)

    t = threading.Thread(target=revive)
    t.start()
    try:
        local = st.open_local("a.bin", info)  # first attempts hit a closed port
        assert Path(local.path).read_bytes() == b"z" * 5000
    finally:
        t.join(10)
        for s in revived:
            s.stop()


def test_call_with_retry_counts_and_classifies():
    waits: list[float] = []
    calls = {"n": 0}

    def flaky() -> str:
        calls["n"] += 1
        if calls["n"] < 3:
            raise ConnectionResetError("peer reset")
        return "ok"

    assert call_with_retry(flaky, what="x", attempts=5, base_delay=0.1, sleep=waits.append) == "ok"
    assert len(waits) == 2 and waits[1] > waits[0] * 1.0  # exponential (with jitter in [0.5, 1))

    def always() -> None:
        raise TimeoutError("slow")

    with pytest.raises(ReaderError, match="u: failed after 3 attempts"):
        call_with_retry(always, what="u", attempts=3, sleep=lambda s: None)

    def missing() -> None:
        raise FileNotFoundError("k")

    n = []
    with pytest.raises(ReaderError, match="v: not found"):
        call_with_retry(missing, what="v", attempts=5, sleep=n.append)
    assert n == []


def test_cache_key_keeps_extension_and_changes_with_version():
    a = cache_key("s3://b/x/part.parquet", 10, "etag1", name="x/part.parquet")
    b = cache_key("s3://b/x/part.parquet", 10, "etag2", name="x/part.parquet")
    assert a.endswith("part.parquet") and a != b
