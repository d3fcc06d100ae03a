"""A fault-injecting HTTP proxy on loopback, for testing how readers survive a flaky object store.

Retry code tested only against mocks that raise an exception misses what real clients do with a
real fault: a botocore 503 becomes an ``OSError`` in s3fs, a truncated body surfaces as an aiohttp
payload error half-way through a read, a stalled socket blocks a thread until some timeout fires
(or forever). :class:`FaultProxy` sits between a real client (s3fs → aiobotocore → aiohttp) and a
real server (moto's S3 server from :mod:`zephon_testkit.s3`) and breaks the bytes on the wire,
so the whole stack is exercised. Plugin authors can put it in front of any HTTP object store
emulator their reader talks to.

It understands just enough HTTP/1.1 to find where each message ends (``Content-Length``, chunked
transfer coding, ``HEAD``, 1xx/204/304, close-delimited bodies), so it can fault the *N*-th response
on a keep-alive connection, not only whole connections. The faults (:class:`Fault`):

* ``drop`` — the request is read, then the connection is reset (RST) without an answer (aiohttp
  retries an idempotent request once by itself after this; see ``burst`` in :func:`cycle`);
* ``delay`` — the answer is forwarded after ``delay`` seconds (a slow server, below read timeouts);
* ``stall`` — the status line, headers and half the body are sent, then nothing for ``stall``
  seconds (longer than the client's read timeout), then the connection is closed;
* ``truncate`` — the same half answer, then the connection is closed at once;
* ``503`` — an S3-style ``503 ServiceUnavailable`` answer instead of forwarding the request.

Which exchange gets which fault is decided by a *schedule*: a function of the :class:`Exchange`
(its global number, its connection and its place on it, the request line). :func:`cycle`,
:func:`seeded`, :func:`per_connection` and :func:`always` build the usual ones; all are
deterministic functions of the exchange numbers. The proxy counts what it injected
(:attr:`FaultProxy.injected`), so a test can assert that each kind really happened.

Only loopback addresses are accepted, for the proxy and for the upstream server.
"""

from __future__ import annotations

import contextlib
import enum
import hashlib
import socket
import struct
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

_LOOPBACK = ("127.0.0.1", "localhost", "::1")
_MAX_HEAD = 64 * 1024


class Fault(str, enum.Enum):
    """What the proxy does to one exchange instead of forwarding it faithfully."""

    DROP = "drop"
    DELAY = "delay"
    STALL = "stall"
    TRUNCATE = "truncate"
    ERROR_503 = "503"


@dataclass(frozen=True)
class Exchange:
    """One request/response pair as the schedule sees it.

    Attributes:
        number: 1-based, over the proxy's lifetime (all connections).
        connection: 1-based number of the client connection it arrived on.
        index: 1-based place of the request on its connection (keep-alive reuse).
        method: ``GET``, ``HEAD``, ``PUT``, …
        target: the request target (``/bucket/key?query``).
        headers: request headers, names in lower case.
    """

    number: int
    connection: int
    index: int
    method: str
    target: str
    headers: Mapping[str, str]

    @property
    def is_range_read(self) -> bool:
        """A ``GET`` with a ``Range`` header: a block of an object's data."""
        return self.method == "GET" and "range" in self.headers


Schedule = Callable[[Exchange], "Fault | None"]
"""Decides the fault of one exchange (None: forward it faithfully). Called under the proxy's lock."""

Match = Callable[[Exchange], bool]


def _all(ex: Exchange) -> bool:
    return True


def cycle(
    kinds: Iterable[Fault], every: int = 3, *, match: Match = _all, burst: Mapping[Fault, int] | None = None
) -> Schedule:
    """Fault every ``every``-th matching exchange, taking ``kinds`` in turn.

    With ``every >= 2`` the retry of a faulted request (the next exchange in a sequential client)
    is never faulted again, so a client with a few retries always gets through, and every kind is
    injected once per ``every * len(kinds)`` matching exchanges.

    Args:
        burst: consecutive matching exchanges one fault of a kind spans (default 1). HTTP clients
            retry an idempotent request once by themselves when its connection is reset before an
            answer (aiohttp does), so a single ``drop`` never reaches the code above the client;
            ``burst={Fault.DROP: 2}`` drops that automatic retry too.
    """
    order = list(kinds)
    if not order or every < 1:
        raise ValueError("cycle needs at least one fault kind and every >= 1")
    spans = dict(burst or {})
    seen = 0
    pending: list[Fault] = []

    def schedule(ex: Exchange) -> Fault | None:
        nonlocal seen
        if not match(ex):
            return None
        if pending:
            return pending.pop()
        seen += 1
        if seen % every:
            return None
        kind = order[(seen // every - 1) % len(order)]
        pending.extend([kind] * (spans.get(kind, 1) - 1))
        return kind

    return schedule


def seeded(seed: int, rates: Mapping[Fault, float], *, match: Match = _all) -> Schedule:
    """Fault each matching exchange at random, with ``rates[kind]`` the probability of each kind.

    The draw for exchange *n* is a hash of ``(seed, n)``, so the same seed gives the same faults to
    the same exchange numbers on every run.
    """
    total = sum(rates.values())
    if total > 1 or any(r < 0 for r in rates.values()):
        raise ValueError(f"fault rates must be >= 0 and sum to at most 1, got {dict(rates)}")
    table = list(rates.items())

    def schedule(ex: Exchange) -> Fault | None:
        if not match(ex):
            return None
        digest = hashlib.sha256(f"{seed}:{ex.number}".encode()).digest()
        u = int.from_bytes(digest[:8], "big") / 2**64
        acc = 0.0
        for kind, rate in table:
            acc += rate
            if u < acc:
                return kind
        return None

    return schedule


def per_connection(kinds: Iterable[Fault], every: int = 2) -> Schedule:
    """Fault the first exchange of every ``every``-th connection, taking ``kinds`` in turn."""
    order = list(kinds)

    def schedule(ex: Exchange) -> Fault | None:
        if ex.index != 1 or ex.connection % every:
            return None
        return order[(ex.connection // every - 1) % len(order)]

    return schedule


def always(kind: Fault, *, match: Match = _all) -> Schedule:
    """Fault every matching exchange the same way (a permanent outage)."""
    return lambda ex: kind if match(ex) else None


def never(ex: Exchange) -> Fault | None:
    """Forward everything (a fault-free run through the same proxy)."""
    return None


def via(storage_options: Mapping[str, Any], endpoint: str) -> dict[str, Any]:
    """A copy of s3fs ``storage_options`` whose client talks to ``endpoint`` (the proxy) instead."""
    options = dict(storage_options)
    client = dict(options.get("client_kwargs") or {})
    client["endpoint_url"] = endpoint
    options["client_kwargs"] = client
    return options


class _Closed(Exception):
    """The peer closed the connection before a complete message."""


class _Stream:
    """Buffered reads from a socket: HTTP heads, exact lengths, lines, everything until EOF."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = bytearray()

    def _fill(self) -> bool:
        chunk = self.sock.recv(256 * 1024)
        if not chunk:
            return False
        self.buf += chunk
        return True

    def head(self) -> bytes | None:
        """Bytes up to and including the blank line; None at a clean EOF before any byte."""
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end >= 0:
                out = bytes(self.buf[: end + 4])
                del self.buf[: end + 4]
                return out
            if len(self.buf) > _MAX_HEAD:
                raise _Closed("header too large")
            if not self._fill():
                if self.buf:
                    raise _Closed("EOF inside a message head")
                return None

    def exact(self, n: int) -> bytes:
        while len(self.buf) < n:
            if not self._fill():
                raise _Closed(f"EOF with {n - len(self.buf)} bytes missing")
        out = bytes(self.buf[:n])
        del self.buf[:n]
        return out

    def line(self) -> bytes:
        while True:
            end = self.buf.find(b"\r\n")
            if end >= 0:
                return self.exact(end + 2)
            if not self._fill():
                raise _Closed("EOF inside a line")

    def rest(self) -> bytes:
        while self._fill():
            pass
        out = bytes(self.buf)
        self.buf.clear()
        return out


def _parse_head(head: bytes) -> tuple[str, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    return lines[0], headers


def _body(stream: _Stream, headers: Mapping[str, str], *, until_eof: bool) -> bytes:
    """The raw body of a message (framing kept, so it can be forwarded byte for byte)."""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        out = bytearray()
        while True:
            size_line = stream.line()
            out += size_line
            size = int(size_line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while True:  # trailers, then the blank line
                    trailer = stream.line()
                    out += trailer
                    if trailer == b"\r\n":
                        return bytes(out)
            out += stream.exact(size + 2)
    if "content-length" in headers:
        return stream.exact(int(headers["content-length"]))
    return stream.rest() if until_eof else b""


def _reset(sock: socket.socket) -> None:
    """Close with an RST instead of a FIN: the client sees "connection reset by peer"."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.close()


def _error_503(method: str, number: int) -> bytes:
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>ServiceUnavailable</Code>'
        f"<Message>Service unavailable (injected by FaultProxy)</Message><RequestId>fault-{number}</RequestId></Error>"
    ).encode()
    head = (
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/xml\r\n"
        f"Content-Length: {len(body)}\r\nx-amz-request-id: fault-{number}\r\n\r\n"
    ).encode()
    return head if method == "HEAD" else head + body


def _split_endpoint(endpoint: str | tuple[str, int]) -> tuple[str, int]:
    if isinstance(endpoint, tuple):
        host, port = endpoint
    else:
        rest = endpoint.split("://", 1)[-1].split("/", 1)[0]
        host, _, port_text = rest.rpartition(":")
        host, port = host.strip("[]"), int(port_text)
    if host not in _LOOPBACK:
        raise ValueError(f"FaultProxy only forwards to loopback, not {host!r}")
    return host, int(port)


class FaultProxy:
    """A threaded HTTP/1.1 forwarder on 127.0.0.1 that injects faults by a schedule.

    Args:
        upstream: the real server, ``"http://127.0.0.1:PORT"`` or ``(host, port)`` (loopback only).
        schedule: which fault each exchange gets (default :func:`never`); see :meth:`set_schedule`.
        delay: seconds a ``delay`` fault holds the answer back.
        stall: seconds a ``stall`` fault keeps the connection silent before closing it.
        cut: fraction of the body (of the head, for a body-less answer) sent by ``stall`` and
            ``truncate`` faults.

    Use as a context manager (or :meth:`start` / :meth:`close`); point the client at
    :attr:`endpoint`. Answers are buffered whole before they are forwarded (they are range reads
    of at most a few MiB in Zephon's tests), which is also what lets a fault cut them anywhere.
    """

    def __init__(
        self,
        upstream: str | tuple[str, int],
        schedule: Schedule | None = None,
        *,
        delay: float = 0.3,
        stall: float = 5.0,
        cut: float = 0.5,
    ) -> None:
        self.upstream = _split_endpoint(upstream)
        self.delay = float(delay)
        self.stall = float(stall)
        self.cut = float(cut)
        self._schedule: Schedule = schedule or never
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._sockets: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        self._injected: Counter[Fault] = Counter()
        self._log: list[tuple[int, Fault, str, str]] = []
        self._exchanges = 0
        self._connections = 0
        self._listener: socket.socket | None = None
        self.port = 0

    # -- lifecycle ----------------------------------------------------------------------------------
    def start(self) -> FaultProxy:
        """Listen on a free loopback port and accept connections on a daemon thread."""
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen(128)
        listener.settimeout(0.1)
        self._listener = listener
        self.port = listener.getsockname()[1]
        t = threading.Thread(target=self._accept_loop, name="faultproxy-accept", daemon=True)
        t.start()
        self._threads.append(t)
        return self

    def close(self) -> None:
        """Stop accepting and close every connection (this also ends running stalls)."""
        self._stop.set()
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.close()
        with self._lock:
            socks = list(self._sockets)
        for s in socks:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                s.close()
        for t in list(self._threads):
            t.join(timeout=2)

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def endpoint(self) -> str:
        """The URL to give the client (``http://127.0.0.1:PORT``)."""
        return f"http://127.0.0.1:{self.port}"

    # -- the schedule and its record ----------------------------------------------------------------
    def set_schedule(self, schedule: Schedule) -> None:
        """Replace the schedule (exchange numbers keep counting)."""
        with self._lock:
            self._schedule = schedule

    @property
    def injected(self) -> Counter[Fault]:
        """How many faults of each kind were injected so far."""
        with self._lock:
            return Counter(self._injected)

    @property
    def exchanges(self) -> int:
        """Requests received so far (faulted or not)."""
        with self._lock:
            return self._exchanges

    @property
    def log(self) -> list[tuple[int, Fault, str, str]]:
        """Every injected fault as ``(exchange number, fault, method, target)``."""
        with self._lock:
            return list(self._log)

    def _decide(
        self, connection: int, index: int, method: str, target: str, headers: dict[str, str]
    ) -> tuple[int, Fault | None]:
        with self._lock:
            self._exchanges += 1
            ex = Exchange(self._exchanges, connection, index, method, target, headers)
            fault = self._schedule(ex)
            if fault is not None:
                fault = Fault(fault)
                self._injected[fault] += 1
                self._log.append((ex.number, fault, method, target))
            return ex.number, fault

    # -- forwarding ---------------------------------------------------------------------------------
    def _track(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.add(sock)

    def _untrack(self, sock: socket.socket | None) -> None:
        if sock is None:
            return
        with self._lock:
            self._sockets.discard(sock)
        with contextlib.suppress(OSError):
            sock.close()

    def _accept_loop(self) -> None:
        assert self._listener is not None
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            client.settimeout(None)
            with self._lock:
                self._connections += 1
                number = self._connections
                self._sockets.add(client)
            t = threading.Thread(target=self._serve, args=(client, number), name="faultproxy-conn", daemon=True)
            t.start()
            self._threads = [x for x in self._threads if x.is_alive()] + [t]

    def _connect(self) -> tuple[socket.socket, _Stream]:
        up = socket.create_connection(self.upstream, timeout=10)
        up.settimeout(None)
        self._track(up)
        return up, _Stream(up)

    def _serve(self, client: socket.socket, connection: int) -> None:
        stream = _Stream(client)
        up: socket.socket | None = None
        up_stream: _Stream | None = None
        index = 0
        try:
            while not self._stop.is_set():
                head = stream.head()
                if head is None:
                    return
                request_line, headers = _parse_head(head)
                method, target = ([*request_line.split(" "), "", ""])[:2]
                if headers.get("expect", "").lower() == "100-continue":
                    client.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
                    head = b"\r\n".join(line for line in head.split(b"\r\n") if not line.lower().startswith(b"expect:"))
                body = _body(stream, headers, until_eof=False)
                index += 1
                number, fault = self._decide(connection, index, method, target, headers)
                if fault is Fault.DROP:
                    self._untrack(up)
                    with self._lock:
                        self._sockets.discard(client)
                    _reset(client)
                    return
                if fault is Fault.ERROR_503:
                    client.sendall(_error_503(method, number))
                    continue
                answer = None
                for _ in range(2):  # a kept-alive upstream connection may have been closed meanwhile
                    if up is None:
                        up, up_stream = self._connect()
                    assert up_stream is not None
                    try:
                        up.sendall(head + body)
                        answer = self._response(up_stream, method)
                        break
                    except (_Closed, OSError):
                        self._untrack(up)
                        up, up_stream = None, None
                if answer is None:
                    return
                resp_head, resp_body, close_after = answer
                if close_after:
                    self._untrack(up)
                    up, up_stream = None, None
                if fault is Fault.DELAY:
                    if self._stop.wait(self.delay):
                        return
                if fault in (Fault.STALL, Fault.TRUNCATE):
                    if resp_body:
                        sent = resp_head + resp_body[: int(len(resp_body) * self.cut)]
                    else:
                        sent = resp_head[: int(len(resp_head) * self.cut)]
                    client.sendall(sent)
                    if fault is Fault.STALL:
                        self._stop.wait(self.stall)
                    return
                client.sendall(resp_head + resp_body)
                if close_after or headers.get("connection", "").lower() == "close":
                    return
        except (_Closed, OSError):
            return
        finally:
            self._untrack(up)
            self._untrack(client)

    @staticmethod
    def _response(stream: _Stream, method: str) -> tuple[bytes, bytes, bool]:
        """Read one whole answer: its head, its raw body, and whether the connection ends after it."""
        while True:
            head = stream.head()
            if head is None:
                raise _Closed("upstream closed before answering")
            status_line, headers = _parse_head(head)
            parts = status_line.split(" ")
            status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
            if 100 <= status < 200:
                continue  # an interim answer; the real one follows
            break
        close = headers.get("connection", "").lower() == "close" or status_line.startswith("HTTP/1.0")
        if method == "HEAD" or status in (204, 304):
            return head, b"", close
        framed = "content-length" in headers or "chunked" in headers.get("transfer-encoding", "").lower()
        body = _body(stream, headers, until_eof=True)
        return head, body, close or not framed


@contextlib.contextmanager
def fault_proxy(
    upstream: str | tuple[str, int], schedule: Schedule | None = None, **kwargs: Any
) -> Iterator[FaultProxy]:
    """``with fault_proxy(s3.endpoint, cycle([...])) as proxy:`` — a started :class:`FaultProxy`."""
    proxy = FaultProxy(upstream, schedule, **kwargs).start()
    try:
        yield proxy
    finally:
        proxy.close()
