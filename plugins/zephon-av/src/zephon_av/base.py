"""What every audio/video operator shares: a per-record function run by the kernel's ``map_transform``.

As in ``zephon-vision``, each operator is a :class:`~zephon_core.defaults.operators.mapping.MapTransform` over a
small frozen dataclass (picklable, so every runner runs it; its fields are the configuration and so
the fingerprint). The accumulator only passes records through, the worker is a pure function of
the record, and the operators that draw random numbers (a random clip start) declare ``rng`` and
get the kernel's per-sample generator, seeded from (``seed``, operator name, record key): the same
record gets the same clip on every runner, parallelism, rank and resume.

Encoded media arrive as ``bytes`` (a WebDataset ``.mp4``/``.flac``/``.wav`` member, a Parquet
binary column) and are read from memory by FFmpeg (through PyAV), never from a temporary file.
"""

from __future__ import annotations

import hashlib
import io
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import numpy as np

from zephon_core.plugin_api import ConfigError, FunctionOperator, RecordFn

Payload = dict[str, Any]
OnError = Literal["raise", "skip"]
T = TypeVar("T")


class MediaDecodeError(ValueError):
    """Encoded audio or video that does not decode (truncated, no such stream, unknown format, empty)."""


def as_buffer(value: Any) -> bytes:
    """Encoded bytes of a field value (bytes, bytearray, memoryview or a 1-D uint8 array)."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, np.ndarray) and value.dtype == np.uint8 and value.ndim == 1:
        return value.tobytes()
    raise TypeError(f"expected encoded media bytes, got {type(value).__name__}")


def open_input(data: bytes) -> Any:
    """An FFmpeg demuxer on ``data`` in memory (PyAV ``InputContainer``)."""
    import av

    return av.open(io.BytesIO(data), mode="r")


def content_key(data: bytes, *extra: Hashable) -> tuple[Hashable, ...]:
    """A cache key naming the content (BLAKE2b of the bytes), not the record: equal files share it."""
    return (hashlib.blake2b(data, digest_size=16).digest(), *extra)


class LRUCache:
    """A small thread-safe least-recently-used map (per process: each worker keeps its own).

    Caches only derived facts of a file (its frame and keyframe index), so whether an entry is
    present changes how much work a decode does, never its result.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._data: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get_or_build(self, key: Hashable, build: Callable[[], T]) -> T:
        with self._lock:
            if key in self._data:
                self._data.move_to_end(key)
                return self._data[key]  # type: ignore[no-any-return]
        value = build()  # outside the lock: building decodes a container
        with self._lock:
            self._data[key] = value
            while len(self._data) > self.capacity:
                self._data.popitem(last=False)
        return value

    def __len__(self) -> int:
        return len(self._data)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()


def check_field(field: Any, what: str) -> str:
    if not isinstance(field, str) or not field:
        raise ConfigError(f"{what}: field must be a non-empty string, got {field!r}")
    return field


def check_fields(field: str | Sequence[str], what: str) -> tuple[str, ...]:
    """One field name or several candidates (the first present is used, as WebDataset suffixes)."""
    fields = (field,) if isinstance(field, str) else tuple(field)
    if not fields:
        raise ConfigError(f"{what}: field must name at least one field")
    return tuple(check_field(f, what) for f in fields)


def check_on_error(on_error: str, errors: str | None, what: str) -> str:
    """``on_error`` (as ``decode_image`` calls it) or its alias ``errors``; both given must agree."""
    if errors is not None:
        if on_error != "raise" and on_error != errors:
            raise ConfigError(f"{what}: on_error={on_error!r} and errors={errors!r} disagree; give one of them")
        on_error = errors
    if on_error not in ("raise", "skip"):
        raise ConfigError(f"{what}: on_error must be 'raise' or 'skip', got {on_error!r}")
    return on_error


def positive_int(value: Any, what: str, name: str, *, allow_none: bool = False) -> int | None:
    if value is None and allow_none:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"{what}: {name} must be a positive int{' or None' if allow_none else ''}, got {value!r}")
    return value


def positive_number(value: Any, what: str, name: str, *, allow_none: bool = False) -> float | None:
    if value is None and allow_none:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not value > 0
        or value != value
        or value == float("inf")
    ):
        raise ConfigError(
            f"{what}: {name} must be a positive finite number{' or None' if allow_none else ''}, got {value!r}"
        )
    return float(value)


def find_field(payload: Payload, fields: tuple[str, ...], what: str) -> str:
    name = next((f for f in fields if f in payload), None)
    if name is None:
        raise KeyError(f"{what}: the record has none of the fields {list(fields)} (fields: {sorted(payload)})")
    return name


def encoded(payload: Payload, name: str, what: str) -> bytes:
    """The bytes in ``payload[name]``; a wrong type is a schema mistake, never skipped."""
    try:
        return as_buffer(payload[name])
    except TypeError as exc:
        raise TypeError(f"{what}: field {name!r}: {exc}") from None


def describe(data: bytes) -> str:
    return f"{len(data)} bytes, starting {data[:8]!r}"


@dataclass(frozen=True)
class MediaFn(RecordFn):
    """Base of the per-record functions: a frozen dataclass whose fields are the configuration."""


class MediaOperator(FunctionOperator):
    """An audio/video operator: ``map_transform`` over one :class:`MediaFn`, named after its kind.

    The configuration is the function's fields, plus ``seed`` for the operators that draw random
    numbers (only ``clip_start="random"`` does): the kernel's :class:`~zephon_core.plugin_api.FunctionOperator`.
    """
