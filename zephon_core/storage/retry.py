"""Retrying storage calls: transient faults are retried with exponential backoff, permanent ones are not.

Object stores fail in two ways. A dropped connection, a throttling reply or a timeout goes away if
you wait; "no such key" or "access denied" never does, and retrying it only delays a clear error.
Every storage call in Zephon goes through :func:`call_with_retry`, which tells the two apart and turns
both into a :class:`~zephon_core.errors.ReaderError` that names the object.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

from zephon_core.errors import ReaderError, ZephonError

T = TypeVar("T")

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


def is_permanent_error(exc: BaseException) -> bool:
    """Whether retrying ``exc`` is pointless (missing object, no permission, bad request).

    Knows the builtin exceptions fsspec implementations raise, plus botocore-style ``response``
    dicts and HTTP status codes, without importing any cloud SDK.
    """
    if isinstance(exc, _PERMANENT_TYPES):
        return True
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


def call_with_retry(
    fn: Callable[[], T],
    *,
    what: str,
    attempts: int = 5,
    base_delay: float = 0.2,
    max_delay: float = 10.0,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Call ``fn()``; retry transient failures with exponential backoff and jitter.

    Args:
        fn: the storage call.
        what: the object it concerns (a URL), named in every error.
        attempts: total tries (>= 1) before a transient fault becomes an error.
        base_delay: first wait in seconds; doubles each retry, capped at ``max_delay``.
        sleep: injectable for tests that count waits.

    Raises:
        ReaderError: at once for a permanent fault, or after the last attempt for a transient one.
    """
    attempts = max(1, int(attempts))
    last: BaseException | None = None
    for attempt in range(attempts):
        try:
            return fn()
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
                delay = min(max_delay, base_delay * (2**attempt))
                sleep(delay * (0.5 + random.random() / 2))
    assert last is not None
    raise ReaderError(f"{what}: failed after {attempts} attempts ({describe_error(last)})") from last
