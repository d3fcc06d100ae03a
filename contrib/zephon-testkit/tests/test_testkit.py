"""The test kit's own parts, each against a real peer on loopback: a stdlib HTTP server behind the
fault proxy, moto's S3 server, and this checkout for the install-alone helpers."""

from __future__ import annotations

import http.client
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from zephon_testkit.faultproxy import Fault, FaultProxy, always, cycle, via
from zephon_testkit.isolated import package_dir, repository_root

import zephon_core

BODY = b"zephon " * 1000


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def upstream() -> Iterator[str]:
    """A real HTTP/1.1 server on a free loopback port."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _get(endpoint: str, conn: http.client.HTTPConnection | None = None) -> tuple[int, bytes]:
    conn = conn or http.client.HTTPConnection(endpoint.removeprefix("http://"), timeout=5)
    conn.request("GET", "/bucket/key")
    answer = conn.getresponse()
    return answer.status, answer.read()


def test_the_proxy_forwards_and_faults_by_its_schedule(upstream: str) -> None:
    with FaultProxy(upstream, cycle([Fault.ERROR_503], every=2)) as proxy:
        conn = http.client.HTTPConnection(proxy.endpoint.removeprefix("http://"), timeout=5)
        assert _get(proxy.endpoint, conn) == (200, BODY)  # exchange 1: forwarded
        status, _ = _get(proxy.endpoint, conn)  # exchange 2 on the same keep-alive connection
        assert status == 503
        assert _get(proxy.endpoint) == (200, BODY)
        assert proxy.injected == {Fault.ERROR_503: 1} and proxy.exchanges == 3
        assert [(n, f) for n, f, _, _ in proxy.log] == [(2, Fault.ERROR_503)]


def test_a_truncated_answer_is_short_on_the_wire(upstream: str) -> None:
    with FaultProxy(upstream, always(Fault.TRUNCATE)) as proxy, pytest.raises(http.client.IncompleteRead):
        _get(proxy.endpoint)


def test_only_loopback_upstreams_are_accepted() -> None:
    with pytest.raises(ValueError, match="loopback"):
        FaultProxy("http://example.com:80")


def test_via_points_s3fs_options_at_the_proxy() -> None:
    client = {"endpoint_url": "http://127.0.0.1:1", "region_name": "us-east-1"}
    options: dict[str, object] = {"key": "k", "client_kwargs": client}
    moved = via(options, "http://127.0.0.1:2")
    assert moved["client_kwargs"] == {"endpoint_url": "http://127.0.0.1:2", "region_name": "us-east-1"}
    assert client["endpoint_url"] == "http://127.0.0.1:1" and options["client_kwargs"] is client  # a copy


def test_moto_s3_serves_a_bucket_on_loopback() -> None:
    pytest.importorskip("moto.server")
    from zephon_testkit.s3 import moto_s3

    with moto_s3("kit") as s3:
        assert s3.endpoint.startswith("http://127.0.0.1:")
        s3.put("d/a.bin", b"abc")
        got = s3.client.get_object(Bucket="kit", Key="d/a.bin")["Body"].read()
        assert got == b"abc" and s3.url("d") == "s3://kit/d"


def test_the_install_alone_helpers_find_this_checkout() -> None:
    """The kernel's checkout, not this package's folder, is the root (they are not the same)."""
    checkout = Path(__file__).resolve().parents[3]
    if not Path(zephon_core.__file__).resolve().is_relative_to(checkout):
        pytest.skip("the kernel is not installed from this checkout")
    root = repository_root()
    assert root == checkout
    assert package_dir("zephon-testkit", root) == root / "contrib" / "zephon-testkit"
    assert package_dir("zephon-testkit", root) == Path(__file__).resolve().parents[1]
    with pytest.raises(FileNotFoundError, match=r"no package 'zephon-nothing' under plugins, contrib of "):
        package_dir("zephon-nothing", root)
