"""Encoding the processes runner's messages: pickle protocol 5 with every large buffer out of band,
collected without a copy, so that the channel (:mod:`zephon_core.runtime.shm`) copies each one once."""

from __future__ import annotations

import copyreg
import functools
import io
import pickle
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, cast

import numpy as np

from zephon_core.runtime import shm_segments

if TYPE_CHECKING:
    from typing_extensions import Buffer

SEGMENT_THRESHOLD = 64 * 1024
"""Out-of-band bytes per message from which they travel in a shared segment instead of the socket."""

_ALIGN = 64  # offsets of buffers in a segment or frame body: cache-line aligned, enough for any dtype
_STRIDED_MIN = 4 * 1024  # non-contiguous arrays from this size go out of band (copied once, straight in)


def _rebuild_array(
    buf: Any, dtype: np.dtype[Any], shape: tuple[int, ...], order: Literal["C", "F"] = "C"
) -> np.ndarray:
    """Unpickles an array from its buffer (a view into the message's segment or frame): no copy."""
    if type(buf) is np.ndarray:  # a uint8 slice of the lease (the receiver's own buffers): cheapest view
        return buf.view(dtype).reshape(shape, order=order)
    return np.frombuffer(buf, dtype=dtype).reshape(shape, order=order)


def _reduce_array(strided: dict[int, np.ndarray], keep: list[pickle.PickleBuffer], arr: np.ndarray) -> Any:
    """Reduce an array to its buffer, out of band (numpy's own reduction for object arrays). Unlike numpy's,
    this sends a non-contiguous array (``img[:, ::-1]``) out of band too, as a placeholder the sender copies
    straight into the segment, and it is leaner per array, which counts with hundreds per message."""
    dtype = arr.dtype
    if dtype.hasobject:
        return arr.__reduce_ex__(5)
    flags = arr.flags
    if flags.c_contiguous or flags.f_contiguous:
        try:
            # an ndarray is a buffer; numpy's stubs declare __buffer__ only for Python >= 3.12
            buf = pickle.PickleBuffer(cast("Buffer", arr))
        except (TypeError, ValueError, BufferError):  # no buffer protocol (datetime64): copy it like a strided one
            pass
        else:
            return _rebuild_array, (buf, dtype, arr.shape, "C" if flags.c_contiguous else "F")
    elif arr.nbytes < _STRIDED_MIN:
        return arr.__reduce_ex__(5)
    placeholder = pickle.PickleBuffer(bytearray())
    keep.append(placeholder)  # alive until dumped, so ids stay unique
    strided[id(placeholder)] = arr  # copied into the segment in C order
    return _rebuild_array, (placeholder, dtype, arr.shape)


@dataclass(slots=True)
class Encoded:
    """A pickled message before it is written: the stream and its out-of-band buffer sources."""

    stream: bytes
    sources: list[Any]  # PickleBuffer (contiguous) or np.ndarray (strided)
    sizes: list[int] = field(default_factory=list)
    total: int = 0

    @property
    def large(self) -> bool:
        """Whether this message goes through a shared segment."""
        return shm_segments.SEGMENTS_AVAILABLE and max(self.total, len(self.stream)) >= SEGMENT_THRESHOLD


def encode(obj: Any) -> Encoded:
    """Pickle ``obj`` with protocol 5, collecting (not copying) its large buffers; whatever pickling
    raises (an unpicklable object) is raised before anything is sent."""
    sources: list[Any] = []
    strided: dict[int, np.ndarray] = {}
    keep: list[pickle.PickleBuffer] = []

    def take(buf: pickle.PickleBuffer) -> bool:
        sources.append(strided.pop(id(buf), buf))
        return False  # every buffer out of band

    # A dispatch table and a closure, not a Pickler subclass with reducer_override: that makes a
    # reference cycle (pickler -> bound method -> pickler) whose memo would keep every pickled
    # array, and so its segment lease, alive until the cyclic garbage collector runs.
    f = io.BytesIO()
    pickler = pickle.Pickler(f, protocol=5, buffer_callback=take)
    pickler.dispatch_table = {**copyreg.dispatch_table, np.ndarray: functools.partial(_reduce_array, strided, keep)}
    pickler.dump(obj)
    del pickler
    sizes = [s.nbytes if isinstance(s, np.ndarray) else s.raw().nbytes for s in sources]
    return Encoded(f.getvalue(), sources, sizes, sum(sizes))


def layout(sizes: Sequence[int], start: int = 0) -> tuple[list[int], int]:
    """Aligned offsets for buffers of ``sizes`` placed from ``start``; returns offsets and the end."""
    offsets, pos = [], start
    for n in sizes:
        pos = -(-pos // _ALIGN) * _ALIGN
        offsets.append(pos)
        pos += n
    return offsets, pos


def copy_into(dst: np.ndarray, src: Any) -> None:
    """Copy one buffer source into ``dst`` (a uint8 view of a segment); numpy releases the GIL."""
    if not isinstance(src, np.ndarray):
        dst[...] = np.frombuffer(src.raw(), np.uint8)
        return
    if src.ndim > 1 and src.shape[-1] > 1 and src.strides[-1] == src.itemsize and src.dtype.fields is None:
        # A strided array whose last axis is contiguous (an image flipped left-right: 3-byte pixels in
        # reverse order) copies almost twice as fast as opaque items of the last axis's size.
        unit = np.dtype(f"V{src.shape[-1] * src.itemsize}")
        np.copyto(dst.view(unit).reshape(src.shape[:-1]), src.view(unit)[..., 0])
    else:
        np.copyto(dst.view(src.dtype).reshape(src.shape), src)
