"""Retrying storage calls: transient faults are retried with backoff under a deadline, permanent ones are not.

Object stores fail in two ways. A dropped connection, a 5xx or throttling reply, a truncated body or
a read that stalls goes away if you try again; "no such key" or "access denied" never does, and
retrying it only delays a clear error. Every storage call in Zephon goes through
:func:`call_with_retry`, which tells the two apart and turns both into a
:class:`~zephon_core.errors.ReaderError` that names the object.

Two clocks bound a call, because a retry count alone cannot bound a read that never returns:

* the **per-read timeout** (``timeout``): each attempt runs on a helper thread and the caller waits
  at most this long for it. A client's own socket timeout is not enough: not every fsspec backend
  has one, some retry internally for minutes, and a proxy or a half-open TCP connection can keep a
  socket "alive" while no byte arrives. A stalled attempt is abandoned (its daemon thread ends when
  the client's own timeout fires; its result is discarded, so it can never write into anything the
  retry uses) and counts as a transient :class:`StallError`.
* the **deadline** (``deadline``): the longest one call may take over all its attempts and waits. A
  permanent outage (the endpoint gone, 503 forever, a black hole) then ends in a ``ReaderError``
  naming the URL within that time, instead of after ``attempts`` times the client's timeouts.

Each retry is logged at INFO on the ``zephon.storage`` logger (URL, attempt, error), so a run that
survives by retrying a lot is visible.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from zephon_core import ReaderError, ZephonError

T = TypeVar("T")

logger = logging.getLogger("zephon.storage")

_PERMANENT_TYPES: tuple[type[BaseException], ...] = (
    FileNotFoundError,
    PermissionError,
    IsADirectoryError,
    NotADirectoryError,
    ValueError,
    TypeError,
    KeyError,
    ZephonError,
)
_PERMANENT_CODES = {
    "NoSuchKey",
    "NoSuchBucket",
    "AccessDenied",
    "AllAccessDisabled",
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "InvalidBucketName",
    "NotFound",
    "403",
    "404",
    "400",
}


class StallError(TimeoutError):
    """A storage read gave no answer within its per-read timeout; it was abandoned (transient)."""


class TruncatedReadError(ConnectionError):
    """A read returned fewer bytes than asked of an object that has not changed (transient)."""


def is_permanent_error(exc: BaseException) -> bool:
    """Whether retrying ``exc`` is pointless (missing object, no permission, bad request).

    Knows the builtin exceptions fsspec implementations raise, plus botocore-style ``response``
    dicts and HTTP status codes (also on the ``__cause__`` of a translated error), without importing
    any cloud SDK. Everything else (connection resets, timeouts, 5xx, 408, 429, truncated bodies)
    is transient.
    """
    if isinstance(exc, _PERMANENT_TYPES):
        return True
    # s3fs turns a botocore ClientError into a plain OSError and keeps the original as the cause:
    # its status tells a 400 (permanent) from a 503 (transient).
    cause = exc.__cause__
    if isinstance(cause, Exception) and getattr(cause, "response", None) is not None:
        exc = cause
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        err = response.get("Error") or {}
        code = str(err.get("Code", ""))
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        if code in _PERMANENT_CODES:
            return True
        if isinstance(status, int) and 400 <= status < 500 and status not in (408, 429):
            return True
    status = getattr(exc, "status", None) or getattr(exc, "status_code", None)
    return isinstance(status, int) and 400 <= status < 500 and status not in (408, 429)


def describe_error(exc: BaseException) -> str:
    """``Type: first line of the message`` (native libraries append whole backtraces)."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def run_with_timeout(fn: Callable[[], T], timeout: float | None) -> T:
    """``fn()``, or :class:`StallError` when it has not returned within ``timeout`` seconds.

    ``fn`` runs on a daemon thread that is abandoned on timeout: Python cannot interrupt a thread
    blocked in a socket read, but it can stop waiting for it, and a daemon thread never keeps the
    process alive. With ``timeout=None`` the call runs in the caller's thread, unguarded.
    """
    if timeout is None:
        return fn()
    outcome: list[tuple[bool, Any]] = []
    done = threading.Event()

    def target() -> None:
        try:
            outcome.append((True, fn()))
        except BaseException as exc:  # handed to the caller, who re-raises it
            outcome.append((False, exc))
        finally:
            done.set()

    threading.Thread(target=target, name="zephon-storage-read", daemon=True).start()
    if not done.wait(max(0.0, timeout)):
        raise StallError(f"no answer within {timeout:.3g}s (read abandoned)")
    ok, value = outcome.pop()
    if ok:
        result: T = value
        return result
    raise value


def call_with_retry(
    fn: Callable[[], T],
    *,
    what: str,
    attempts: int = 5,
    base_delay: float = 0.2,
    max_delay: float = 10.0,
    timeout: float | None = None,
    deadline: float | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """Call ``fn()``; retry transient failures with exponential backoff and jitter.

    Args:
        fn: the storage call. It must be safe to run again after an abandoned attempt (a
            stateless request: a range read, a listing, a metadata call).
        what: the object it concerns (a URL), named in every error.
        attempts: total tries (>= 1) before a transient fault becomes an error.
        base_delay: first wait in seconds; doubles each retry, capped at ``max_delay``.
        timeout: per-attempt limit in seconds (see :func:`run_with_timeout`); None: unguarded.
        deadline: limit in seconds for the whole call, attempts and waits included; no attempt
            starts, and none is waited for, past it. None: only ``attempts`` bounds the call.
        sleep, clock: injectable for tests that count waits.

    Raises:
        ReaderError: at once for a permanent fault; after the last attempt or at the deadline for
            a transient one. The message names ``what``, the attempts, the time spent and the last
            error.
    """
    attempts = max(1, int(attempts))
    start = clock()
    last: BaseException | None = None
    tried = 0
    out_of_time = False
    for attempt in range(attempts):
        limit = timeout
        if deadline is not None:
            remaining = deadline - (clock() - start)
            if remaining <= 0 and tried:
                out_of_time = True
                break
            limit = remaining if limit is None else min(limit, remaining)
        tried += 1
        try:
            return run_with_timeout(fn, limit)
        except ReaderError:
            raise
        except Exception as exc:
            if is_permanent_error(exc):
                kind = "not found" if isinstance(exc, FileNotFoundError) else "cannot be read"
                if isinstance(exc, PermissionError):
                    kind = "access denied"
                raise ReaderError(f"{what}: {kind} ({describe_error(exc)})") from exc
            last = exc
            if attempt + 1 < attempts:
                delay = min(max_delay, base_delay * (2**attempt)) * (0.5 + random.random() / 2)
                if deadline is not None:
                    left = deadline - (clock() - start)
                    if left <= delay:
                        out_of_time = True
                        break
                logger.info(
                    "%s: %s; retry %d of %d in %.2fs", what, describe_error(exc), attempt + 1, attempts - 1, delay
                )
                sleep(delay)
    assert last is not None
    elapsed = clock() - start
    why = f"; gave up at the {deadline:g}s deadline" if out_of_time else ""
    raise ReaderError(
        f"{what}: failed after {tried} attempt{'s' if tried != 1 else ''} in {elapsed:.1f}s{why} ({describe_error(last)})"
    ) from last


@dataclass(frozen=True)
class RetryPolicy:
    """How one storage root retries: attempts, backoff, the per-read timeout and the deadline.

    Attributes:
        attempts: total tries of one call before a transient fault becomes an error.
        backoff: first wait in seconds, doubling per retry up to ``max_delay``.
        read_timeout: longest wait for one attempt of a read (one request: a metadata call or one
            block of a download); None disables the guard.
        deadline: longest time one call may take over all its attempts; None: ``attempts`` only.
        max_delay: cap of one wait.
    """

    attempts: int = 5
    backoff: float = 0.2
    read_timeout: float | None = 60.0
    deadline: float | None = 300.0
    max_delay: float = 10.0

    def call(self, fn: Callable[[], T], what: str, *, per_read: bool = True) -> T:
        """``fn()`` under this policy.

        Args:
            per_read: guard each attempt with :attr:`read_timeout`. Listings pass False: one
                ``find`` over a large prefix is many requests, so only the deadline bounds it (the
                client's socket timeout still catches each stalled page).
        """
        return call_with_retry(
            fn,
            what=what,
            attempts=self.attempts,
            base_delay=self.backoff,
            max_delay=self.max_delay,
            timeout=self.read_timeout if per_read else None,
            deadline=self.deadline,
        )
