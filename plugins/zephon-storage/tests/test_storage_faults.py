"""Storage faults: reads from S3 survive drops, delays, stalls, truncated bodies and 503s.

A real pipeline (JSON Lines and Parquet through the real ``zephon_jsonl`` / ``zephon_parquet``
readers) reads a dataset from moto's S3 server twice: directly, and through
:class:`~zephon_testkit.faultproxy.FaultProxy`, which breaks every few answers on the wire.
Both runs must give hash-identical global batches, and the proxy must really have injected every
kind of fault. The client's own retries are turned off (botocore ``total_max_attempts=1``, s3fs
``retries=1``) and its socket timeout set far above Zephon's ``read_timeout``, so what is tested is
Zephon's retry layer and its own per-read deadline. Permanent failures (503 forever, the endpoint
gone, a black hole) must end in a ``ReaderError`` naming the URL within the configured deadline.
"""

from __future__ import annotations

import json
import logging
import pickle
import time
from collections import Counter
from pathlib import Path

import pytest
from zephon_storage import Storage, call_with_retry
from zephon_storage.retry import StallError, run_with_timeout
from zephon_storage.testing.readers import split

from zephon_core import Dataset, MixtureSpec, Pipeline, ReaderError, StaticMixtureWorkSource
from zephon_core.conformance.harness import run_global
from zephon_core.testing.corpus import documents

pytest.importorskip("moto.server", reason="S3 tests need moto[server] (pip install 'moto[server]' s3fs boto3)")
s3fs = pytest.importorskip("s3fs")
pytest.importorskip("zephon_jsonl")
pytest.importorskip("zephon_parquet")

from zephon_testkit.faultproxy import Fault, FaultProxy, always, cycle, never, seeded, via  # noqa: E402
from zephon_testkit.s3 import moto_s3  # noqa: E402

pytestmark = pytest.mark.timeout(180)

READ_TIMEOUT = 1.5
"""Zephon's per-read timeout in these tests; proxy stalls last 4 s and the client's own timeout 30 s."""

SIZES = [400, 350, 300, 450, 380]
DOCS = 3760  # two datasets of five files each


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """moto S3 with the same documents as JSON Lines (prefix ``web``) and Parquet (prefix ``books``)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    docs = documents()[:DOCS]
    root = tmp_path_factory.mktemp("faults")
    (root / "web").mkdir()
    (root / "books").mkdir()
    for k, recs in enumerate(split(docs[: DOCS // 2], SIZES)):
        (root / "web" / f"part-{k}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    for k, recs in enumerate(split(docs[DOCS // 2 :], SIZES)):
        pq.write_table(pa.Table.from_pylist(recs), root / "books" / f"part-{k}.parquet", row_group_size=128)
    with moto_s3("fault-tests") as server:
        server.upload_dir(str(root / "web"), "web")
        server.upload_dir(str(root / "books"), "books")
        yield server


@pytest.fixture(autouse=True)
def no_client_retries(monkeypatch):
    """s3fs retries some errors itself (5 times by default): off, so Zephon's layer is what is tested."""
    monkeypatch.setattr(s3fs.S3FileSystem, "retries", 1)


def client_options(s3, endpoint: str | None = None, client_read_timeout: float = 30.0) -> dict:
    """s3fs options without client retries, talking to ``endpoint`` (the proxy) or to moto directly."""
    options = via(s3.storage_options, endpoint) if endpoint else dict(s3.storage_options)
    options["config_kwargs"] = {
        "retries": {"total_max_attempts": 1},  # botocore: no retries of its own
        "connect_timeout": 2,
        "read_timeout": client_read_timeout,
    }
    return options


def open_datasets(options: dict, cache_dir: Path, **storage) -> tuple[Dataset, Dataset]:
    common = {"storage_options": options, "cache_dir": str(cache_dir), **storage}
    web = Dataset.from_path("web", "s3://fault-tests/web", format="jsonl", **common)
    books = Dataset.from_path("books", "s3://fault-tests/books", format="parquet", **common)
    return web, books


def run(web: Dataset, books: Dataset, runner: str) -> list[str]:
    """Global batch hashes of a two-dataset mixture, fetched by ``runner``, on two lanes."""

    def build(parallelism: int) -> Pipeline:
        ws = StaticMixtureWorkSource(
            [web, books], mixture=MixtureSpec({"web": 0.5, "books": 0.5}), chunk_size=64, seed=11
        )
        return Pipeline(ws).fetch(parallelism=parallelism, runner=runner).batch(microbatch_size=32)

    return run_global(build, lanes=2, world_size=1, runner="inline", parallelism=2).hashes


def retried_errors(caplog) -> Counter[str]:
    """Zephon's retries by error type, from the ``zephon.storage`` log."""
    out: Counter[str] = Counter()
    for rec in caplog.records:
        if rec.name == "zephon.storage" and "retry" in rec.getMessage():
            out[str(rec.args[1]).split(":", 1)[0]] += 1
    return out


@pytest.fixture(scope="module")
def clean_hashes(s3, tmp_path_factory) -> list[str]:
    """The fault-free run, straight to moto."""
    web, books = open_datasets(client_options(s3), tmp_path_factory.mktemp("clean-cache"))
    hashes = run(web, books, "inline")
    assert len(hashes) >= DOCS // 64 - 2
    return hashes


# -- surviving transient faults ----------------------------------------------------------------------
@pytest.mark.slow
def test_faults_are_survived_with_identical_batches(s3, clean_hashes, tmp_path, caplog):
    """Every 2nd request is faulted (each kind in turn); batches are identical to the fault-free run.

    Fetch runs on two threads, so requests of two shards interleave and a retry may be faulted again.
    """
    caplog.set_level(logging.INFO, logger="zephon.storage")
    kinds = [Fault.DROP, Fault.DELAY, Fault.STALL, Fault.TRUNCATE, Fault.ERROR_503]
    schedule = cycle(kinds, every=2, burst={Fault.DROP: 2})
    with FaultProxy(s3.endpoint, schedule, delay=0.2, stall=4.0) as proxy:
        opts = client_options(s3, proxy.endpoint)
        t0 = time.monotonic()
        web, books = open_datasets(
            opts, tmp_path / "cache", retries=8, backoff=0.05, read_timeout=READ_TIMEOUT, deadline=30
        )
        hashes = run(web, books, "threads")
        elapsed = time.monotonic() - t0
        injected, exchanges = proxy.injected, proxy.exchanges
    assert hashes == clean_hashes
    for kind in kinds:
        assert injected[kind] >= 2, (kind, injected)
    retried = retried_errors(caplog)
    # What reached Zephon's retry layer: every 503 (as s3fs's OSError: neither client retries), a
    # stall as Zephon's own StallError (the client would have waited 30 s; a stall inside a listing,
    # which only the deadline bounds, ends when the proxy closes the connection and aiohttp retries),
    # a truncated body as aiohttp's payload error, a double drop as a connection error. A truncated
    # or dropped answer that aiohttp retries by itself (idempotent requests, once) never shows here.
    # A read abandoned at its deadline goes on in the background and its answer is dropped: a 503
    # given to one of its requests reaches no one, so each stall may hide one.
    assert retried["OSError"] >= injected[Fault.ERROR_503] - retried["StallError"], (retried, injected)
    assert retried["StallError"] >= 2, retried
    assert retried["ClientPayloadError"] + retried["ConnectionClosedError"] >= 1, retried
    assert retried["EndpointConnectionError"] >= 1, retried
    print(
        f"\n{exchanges} requests, injected {dict(sorted((k.value, v) for k, v in injected.items()))}, "
        f"Zephon retries {dict(retried)}, {elapsed:.1f}s"
    )


@pytest.mark.slow
def test_seeded_random_faults_with_prefetch(s3, clean_hashes, tmp_path, caplog):
    """Random faults (a fixed seed) on data reads only, fetched inline while prefetch threads warm the cache."""
    caplog.set_level(logging.INFO, logger="zephon.storage")
    rates = {Fault.STALL: 0.1, Fault.TRUNCATE: 0.15, Fault.ERROR_503: 0.15, Fault.DELAY: 0.1}
    with FaultProxy(s3.endpoint, never, delay=0.2, stall=4.0) as proxy:
        opts = client_options(s3, proxy.endpoint)
        web, books = open_datasets(
            opts, tmp_path / "cache", retries=10, backoff=0.05, read_timeout=READ_TIMEOUT, deadline=30, prefetch=2
        )
        proxy.set_schedule(seeded(7, rates, match=lambda ex: ex.is_range_read))
        hashes = run(web, books, "inline")
        injected = proxy.injected
    assert hashes == clean_hashes
    assert sum(injected.values()) >= 2, injected


# -- permanent failures ------------------------------------------------------------------------------
def _books_reader(s3, proxy: FaultProxy, tmp_path: Path, *, read_timeout: float, deadline: float):
    """The Parquet dataset, listed (footers read) through the proxy while it forwards faithfully.

    Listing runs with generous limits (a loaded machine can make moto slow); the tight ones under
    test apply from then on. Its data files are not downloaded yet: the next ``read`` goes to the server.
    """
    opts = client_options(s3, proxy.endpoint, client_read_timeout=60)
    _, books = open_datasets(opts, tmp_path / "cache", retries=1000, backoff=0.05, read_timeout=30, deadline=60)
    books.reader.storage.read_timeout = read_timeout
    books.reader.storage.deadline = deadline
    return books.reader


@pytest.mark.parametrize("fault", [Fault.ERROR_503, Fault.STALL])
def test_permanent_fault_names_the_url_within_the_deadline(s3, tmp_path, fault):
    """503 forever, or every answer stalling: a ReaderError naming the file, at the deadline."""
    with FaultProxy(s3.endpoint, never, stall=60.0) as proxy:
        reader = _books_reader(s3, proxy, tmp_path, read_timeout=0.5, deadline=2.5)
        proxy.set_schedule(always(fault))
        t0 = time.monotonic()
        with pytest.raises(
            ReaderError, match=r"s3://fault-tests/books/part-0\.parquet: failed after \d+ attempts"
        ) as err:
            reader.read(0, [0, 1])
        elapsed = time.monotonic() - t0
    assert elapsed < 2.5 + 2, elapsed
    assert "deadline" in str(err.value)
    assert ("StallError" if fault is Fault.STALL else "Service unavailable") in str(err.value)


def test_endpoint_gone_names_the_url_within_the_deadline(s3, tmp_path):
    proxy = FaultProxy(s3.endpoint).start()
    reader = _books_reader(s3, proxy, tmp_path, read_timeout=1.0, deadline=2.0)
    proxy.close()  # nothing listens on the port any more
    t0 = time.monotonic()
    with pytest.raises(
        ReaderError, match=r"s3://fault-tests/books/part-0\.parquet: failed after \d+ attempts.*deadline"
    ):
        reader.read(0, [0])
    assert time.monotonic() - t0 < 2.0 + 2


def test_missing_object_is_not_retried(s3, tmp_path):
    with FaultProxy(s3.endpoint) as proxy:
        st = Storage(
            s3.url("web"), storage_options=client_options(s3, proxy.endpoint), cache_dir=str(tmp_path), deadline=30
        )
        st.url_of("x")  # resolve the root first
        before = proxy.exchanges
        with pytest.raises(ReaderError, match=r"s3://fault-tests/web/nope\.jsonl: not found"):
            st.read_bytes("nope.jsonl")
        assert proxy.exchanges - before <= 2  # s3fs's HEAD and its directory probe: no retries


# -- the pieces ----------------------------------------------------------------------------------------
def test_run_with_timeout_abandons_a_stalled_call():
    t0 = time.monotonic()
    with pytest.raises(StallError, match="no answer within 0.2s"):
        run_with_timeout(lambda: time.sleep(5), 0.2)
    assert time.monotonic() - t0 < 1
    assert run_with_timeout(lambda: 7, 1.0) == 7
    with pytest.raises(KeyError):
        run_with_timeout(lambda: {}["x"], 1.0)  # the call's own error, unchanged


def test_translated_client_errors_are_classified_by_their_status():
    from zephon_storage import is_permanent_error

    class ClientError(Exception):
        def __init__(self, status: int) -> None:
            super().__init__(f"HTTP {status}")
            self.response = {"Error": {"Code": str(status)}, "ResponseMetadata": {"HTTPStatusCode": status}}

    def translated(status: int) -> OSError:
        exc = OSError(5, "translated by s3fs")
        exc.__cause__ = ClientError(status)
        return exc

    assert is_permanent_error(translated(400)) and is_permanent_error(translated(403))
    assert not is_permanent_error(translated(503)) and not is_permanent_error(translated(429))
    assert not is_permanent_error(OSError(5, "no cause")) and not is_permanent_error(StallError("slow"))


def test_deadline_bounds_retries_and_waits():
    now = [0.0]
    waits: list[float] = []

    def sleep(s: float) -> None:
        waits.append(s)
        now[0] += s

    def failing() -> None:
        now[0] += 1.0
        raise ConnectionResetError("reset")

    with pytest.raises(ReaderError, match=r"u: failed after (\d+) attempts in .*the 10s deadline") as err:
        call_with_retry(failing, what="u", attempts=100, base_delay=1, sleep=sleep, clock=lambda: now[0], deadline=10)
    # no wait and no new attempt starts past the deadline; the last attempt may end up to its own
    # duration (1 s here, the per-read timeout in real use) after it
    assert now[0] <= 10 + 1.0 and len(waits) < 10, (now, waits)
    assert isinstance(err.value.__cause__, ConnectionResetError)


def test_stall_in_the_deadline_is_cut_to_what_is_left():
    t0 = time.monotonic()
    with pytest.raises(ReaderError, match="StallError"):
        call_with_retry(lambda: time.sleep(10), what="u", attempts=50, base_delay=0.01, timeout=5, deadline=0.5)
    assert time.monotonic() - t0 < 1.5


def test_short_range_read_is_retried_and_a_changed_object_is_an_error(tmp_path):
    import fsspec

    fs = fsspec.filesystem("memory")
    fs.pipe("/faults-mem/d/a.bin", bytes(range(256)) * 100)
    st = Storage("memory://faults-mem/d", cache_dir=str(tmp_path), retries=3, backoff=0.01)
    info = st.info("a.bin")
    real = st.fs.cat_file
    calls = {"n": 0}

    def flaky(path, start=None, end=None, **kw):
        calls["n"] += 1
        data = real(path, start=start, end=end, **kw)
        return data[: len(data) // 2] if calls["n"] == 1 else data  # one silently truncated answer

    st.fs.cat_file = flaky
    try:
        assert Path(st.open_local("a.bin", info).path).read_bytes() == bytes(range(256)) * 100
        assert calls["n"] == 2
        fs.pipe("/faults-mem/d/a.bin", b"short now")
        st2 = Storage("memory://faults-mem/d", cache_dir=str(tmp_path / "2"), retries=3, backoff=0.01)
        with pytest.raises(ReaderError, match="changed since the dataset was listed"):
            st2.open_local("a.bin", info)
    finally:
        st.fs.cat_file = real


def test_remote_file_reads_ranges_and_survives_a_fault(tmp_path):
    import fsspec

    payload = bytes(range(256)) * 1000
    fsspec.filesystem("memory").pipe("/faults-mem/r/x.bin", payload)
    st = Storage("memory://faults-mem/r", cache_dir=str(tmp_path), retries=3, backoff=0.01)
    real = st.fs.cat_file
    calls = {"n": 0}

    def flaky(path, start=None, end=None, **kw):
        calls["n"] += 1
        if calls["n"] == 2:
            raise ConnectionResetError("reset by peer")
        return real(path, start=start, end=end, **kw)

    st.fs.cat_file = flaky
    try:
        with st.open_remote("x.bin") as f:
            assert f.seek(-10, 2) == len(payload) - 10 and f.read() == payload[-10:]
            f.seek(1000)
            assert f.read(5) == payload[1000:1005] and f.tell() == 1005
            buf = bytearray(300)
            assert f.readinto(buf) == 300 and bytes(buf) == payload[1005:1305]
            f.seek(0)
            assert f.read() == payload
    finally:
        st.fs.cat_file = real


def test_timeouts_reach_the_client_and_survive_pickling(tmp_path):
    st = Storage("s3://fault-tests/web", storage_options={"anon": True}, read_timeout=7, deadline=42)
    assert st._client_options()["config_kwargs"]["read_timeout"] == 7
    own = Storage("s3://b/x", storage_options={"config_kwargs": {"read_timeout": 3}}, read_timeout=7)
    assert own._client_options()["config_kwargs"]["read_timeout"] == 3  # the user's own setting wins
    clone = pickle.loads(pickle.dumps(st))
    assert (clone.read_timeout, clone.deadline) == (7, 42)
    assert Storage(str(tmp_path), read_timeout=None, deadline=None).policy.read_timeout is None
    with pytest.raises(ReaderError, match="read_timeout must be a positive"):
        Storage(str(tmp_path), read_timeout=0)
