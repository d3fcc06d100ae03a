"""Messages between the processes runner and its workers: pickle-5 frames on a Unix socket, with the
large buffers of a message coalesced into one shared-memory segment.

Why: copying image-sized arrays through a pipe costs two kernel copies per buffer and one system call
per buffer, and allocating fresh memory per message costs a page fault per 4 KiB page (measured at
about 3 ms per MB on the project's machine, more than the copy itself). So a message whose
out-of-band buffers total :data:`SEGMENT_THRESHOLD` or more travels like this:

* the sender copies every buffer, once, into one segment at 64-byte aligned offsets (the pickle
  stream too, when it is large) and sends a small frame with the table of offsets;
* the receiver unpickles with numpy views into its mapping of the segment: no copy. The views hold
  one *lease* (a numpy array over the used part of the segment); when the last view is garbage
  collected the lease's finalizer marks the segment free again in a control page both sides map;
* each sender keeps a small ring (:data:`MAX_SLOTS`) of segments per connection and reuses free ones,
  so pages are faulted in once and the receiver maps each segment once (the file descriptor of a
  segment crosses the socket only the first time a slot is used, or when it is regrown). When every
  slot is leased (a consumer holding many batches), or the ring holds :data:`RING_BYTES` already,
  the message gets a one-off segment that is freed when its last view goes.

Nothing can leak when a process is SIGKILLed: a segment is an anonymous ``memfd`` (no name in
``/dev/shm``, nothing on disk), and every descriptor is closed right after it is mapped or sent. The
memory lives exactly as long as some process maps it (or a descriptor is queued in a socket), and the
kernel drops both when the process dies. Small messages (the common case for text pipelines) keep the
plain path: one ``sendmsg`` with the frame, the pickle stream and the buffers.

Without ``memfd`` (not Linux) every message takes the plain path (and without ``sendmsg``, on Windows,
one ``sendall`` per part).
"""

from __future__ import annotations

import array
import copyreg
import ctypes
import functools
import io
import mmap
import os
import pickle
import socket
import struct
import sys
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, cast

import numpy as np

if TYPE_CHECKING:
    from typing_extensions import Buffer

SEGMENT_THRESHOLD = 64 * 1024
"""Out-of-band bytes per message from which they travel in a shared segment instead of the socket."""

MAX_SLOTS = 16
"""Reusable segments per direction of one worker connection (each holds one message at a time)."""

RING_BYTES = 256 << 20
"""Memory a ring may keep faulted in per direction of one worker connection; past it, messages get
one-off segments (freed with their last view), so a few huge messages do not pin 16 times their size."""

SEGMENTS_AVAILABLE = sys.platform.startswith("linux") and hasattr(os, "memfd_create")
_HAVE_SENDMSG = hasattr(socket.socket, "sendmsg")

_ALIGN = 64  # offsets of buffers in a segment or frame body: cache-line aligned, enough for any dtype
_PICKLE_IN_SEGMENT = 16 * 1024  # a segment message also carries its pickle stream when it is this long
_STRIDED_MIN = 4 * 1024  # non-contiguous arrays from this size go out of band (copied once, straight in)
_MIN_CAPACITY = 64 << 20  # virtual: a slot's pages are allocated when first written, so sizes rarely regrow
_IOV_MAX = 512

# kind, flags, slot, buffers, pickle length, body length, segment size, pickle offset in the segment
_HEADER = struct.Struct("<BBhIQQQq")
_KIND_INLINE = 0
_KIND_SEGMENT = 1
_FLAG_CTL_FD = 1  # the control page's descriptor rides with this frame
_FLAG_SEG_FD = 2  # the segment's descriptor rides with this frame (first use of a slot, or one-off)
_FLAG_PRIVATE = 4  # map copy-on-write: the segment is shared by several receivers (a broadcast)
_ONE_OFF = -1
_PAGE = mmap.PAGESIZE


class _Libc:
    """``mmap``/``munmap`` through ctypes: Python's :class:`mmap.mmap` duplicates the descriptor and
    keeps it open as long as the mapping lives (one descriptor per segment, for hours), while the
    design is to close every descriptor right after mapping it."""

    def __init__(self) -> None:
        lib = ctypes.CDLL(None, use_errno=True)
        self.mmap = lib.mmap
        self.mmap.restype = ctypes.c_void_p
        self.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
        self.munmap = lib.munmap
        self.munmap.restype = ctypes.c_int
        self.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]


_libc = _Libc() if SEGMENTS_AVAILABLE else None


class _Mapping:
    """A mapping of a segment that numpy can view (``np.asarray(mapping)``); unmapped when the last
    array over it is collected. Each ``np.asarray`` gives a new array whose base is this object, so
    views derived from it keep *that* array alive: this is how a lease follows its views."""

    __slots__ = ("__array_interface__", "__weakref__", "_addr", "_size")

    def __init__(self, fd: int, size: int, private: bool = False) -> None:
        assert _libc is not None
        flags = mmap.MAP_PRIVATE if private else mmap.MAP_SHARED
        addr = _libc.mmap(None, size, mmap.PROT_READ | mmap.PROT_WRITE, flags, fd, 0)
        if addr is None or addr == ctypes.c_void_p(-1).value:
            err = ctypes.get_errno()
            raise OSError(err, f"mmap of a {size}-byte segment failed: {os.strerror(err)}")
        self._addr: int = addr
        self._size = size
        self.__array_interface__ = {"data": (addr, False), "shape": (size,), "typestr": "|u1", "version": 3}

    def __len__(self) -> int:
        return self._size

    def __del__(self) -> None:
        if _libc is not None:
            _libc.munmap(self._addr, self._size)


def _rebuild_array(
    buf: Any, dtype: np.dtype[Any], shape: tuple[int, ...], order: Literal["C", "F"] = "C"
) -> np.ndarray:
    """Unpickles an array from its buffer (a view into the message's segment or frame): no copy."""
    if type(buf) is np.ndarray:  # a uint8 slice of the lease (the receiver's own buffers): cheapest view
        return buf.view(dtype).reshape(shape, order=order)
    return np.frombuffer(buf, dtype=dtype).reshape(shape, order=order)


def _reduce_array(strided: dict[int, np.ndarray], keep: list[pickle.PickleBuffer], arr: np.ndarray) -> Any:
    """Reduce an array to its buffer, out of band; numpy's own reduction for object arrays.

    Unlike numpy's protocol-5 reduction this also sends a non-contiguous array (``img[:, ::-1]``,
    which numpy pickles in band) out of band: it becomes a placeholder buffer, and the sender copies
    the array straight into the segment with ``np.copyto``, with no intermediate contiguous copy.
    It is also leaner per array, which counts with a few hundred arrays per message.
    """
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


class FrameTooLarge(Exception):
    """A message cannot be queued behind a running task: its frame would not fit the socket's buffer."""


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
        return SEGMENTS_AVAILABLE and (self.total >= SEGMENT_THRESHOLD or len(self.stream) >= SEGMENT_THRESHOLD)


def encode(obj: Any) -> Encoded:
    """Pickle ``obj`` with protocol 5, collecting (not copying) its large buffers.

    Raises:
        Exception: whatever pickling raises (an unpicklable object); nothing has been sent yet.
    """
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


def _layout(sizes: Sequence[int], start: int = 0) -> tuple[list[int], int]:
    """Aligned offsets for buffers of ``sizes`` placed from ``start``; returns offsets and the end."""
    offsets = []
    pos = start
    for n in sizes:
        pos = -(-pos // _ALIGN) * _ALIGN
        offsets.append(pos)
        pos += n
    return offsets, pos


def _copy_into(dst: np.ndarray, src: Any) -> None:
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


def _new_memfd(size: int) -> int:
    fd = os.memfd_create("zephon-shm", os.MFD_CLOEXEC)
    try:
        os.ftruncate(fd, size)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _free_slot(ctl: np.ndarray, slot: int, pid: int) -> None:
    """Lease finalizer: the receiver no longer uses the segment in ``slot``; the sender may reuse it.

    Only in the process that received it: a child forked later inherits the lease as a copy, and
    that copy going away must not free the slot under the parent."""
    if os.getpid() == pid:
        ctl[slot] = 0


def _map_fd(fd: int, size: int, private: bool = False) -> _Mapping:
    """Map a received or new segment; the caller closes ``fd`` right after."""
    return _Mapping(fd, size, private)


class _Slot:
    """One reusable segment of a sender's ring: its mapping and, until first sent, its descriptor."""

    __slots__ = ("array", "capacity", "fd", "touched")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.touched = 0  # bytes written at least once: the pages this slot holds in memory
        self.fd = _new_memfd(capacity)  # kept until the slot's first frame carries it to the peer
        try:
            self.array = np.asarray(_map_fd(self.fd, capacity))
        except BaseException:
            os.close(self.fd)
            raise

    def take_fd(self) -> int:
        fd, self.fd = self.fd, -1
        return fd

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        self.array = np.empty(0, np.uint8)  # unmapped here (the receiver keeps its own mapping)


def _table(offsets: Sequence[int], sizes: Sequence[int]) -> bytes:
    return array.array("Q", [v for pair in zip(offsets, sizes) for v in pair]).tobytes()


@dataclass(slots=True)
class _Placed:
    """Where a segment message's parts went: buffer offsets, and the pickle stream's (-1: in the frame)."""

    offsets: list[int]
    pickle_off: int
    used: int


def _place(enc: Encoded) -> _Placed:
    offsets, end = _layout(enc.sizes)
    pickle_off = -1
    if len(enc.stream) >= _PICKLE_IN_SEGMENT:
        (pickle_off,), end = _layout([len(enc.stream)], end)
    return _Placed(offsets, pickle_off, max(end, 1))


def _fill(target: np.ndarray, enc: Encoded, placed: _Placed) -> None:
    for src, off, n in zip(enc.sources, placed.offsets, enc.sizes):
        _copy_into(target[off : off + n], src)
    if placed.pickle_off >= 0:
        stream = np.frombuffer(enc.stream, np.uint8)
        target[placed.pickle_off : placed.pickle_off + stream.size] = stream


def _segment_frame(enc: Encoded, placed: _Placed, flags: int, slot: int, size: int) -> list[Any]:
    table = _table(placed.offsets, enc.sizes)
    in_seg = placed.pickle_off >= 0
    body = [table] if in_seg else [table, enc.stream]
    blen = len(table) + (0 if in_seg else len(enc.stream))
    header = _HEADER.pack(_KIND_SEGMENT, flags, slot, len(enc.sizes), len(enc.stream), blen, size, placed.pickle_off)
    return [header, *body]


class Broadcast:
    """One message for several receivers, its buffers copied once into one segment that each
    receiver maps copy-on-write. Used for the worker function, which may hold data (an in-memory
    reader): every worker of a pool gets it for the price of one copy."""

    def __init__(self, enc: Encoded) -> None:
        self.encoded = enc
        self.fd = -1
        self.placed = _Placed([], -1, 0)
        if enc.large:
            placed = _place(enc)
            try:
                fd = _new_memfd(placed.used)
            except OSError:  # no memfd here (a sandbox refusing it): it goes inline to each receiver
                return
            self.fd, self.placed = fd, placed
            try:
                _fill(np.asarray(_map_fd(fd, placed.used)), enc, placed)
            except BaseException:
                self.close()
                raise
            self.encoded = Encoded(enc.stream, [], enc.sizes, enc.total)  # the data is in the segment now

    def close(self) -> None:
        """Close the sender's descriptor (receivers that mapped the segment keep it alive)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class Channel:
    """One end of a connection between the runner and a worker. Not thread-safe: one thread sends
    and one thread receives (the runner's I/O thread does both; a worker is single-threaded)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        # sender side: the ring of segments this end writes, and the control page whose byte per
        # slot says "leased" (1, set here on send) or "free" (0, set by the receiver's lease finalizer)
        self._slots: list[_Slot] = []
        self._ctl: np.ndarray | None = None
        self._ctl_fd = -1
        # receiver side: the peer's ring as mapped here, and the peer's control page
        self._maps: dict[int, _Mapping] = {}
        self._peer_ctl: np.ndarray | None = None
        self._segments_ok = True  # False once making a segment failed: this end then sends inline

    def fileno(self) -> int:
        return self.sock.fileno()

    # -- sending --------------------------------------------------------------------------------
    def send(self, obj: Any) -> None:
        """Pickle and send ``obj``. A pickling error is raised before anything is written."""
        self.send_encoded(encode(obj))

    def send_encoded(self, enc: Encoded, *, max_frame: int | None = None) -> None:
        """Send a message encoded beforehand.

        With ``max_frame``, the frame written to the socket must not exceed that many bytes (it is
        queued behind a task the peer is still running, so it has to fit the socket's buffer: a
        larger write would block while the peer may be blocked writing to us). Raises
        :class:`FrameTooLarge`, having written nothing, when it would.
        """
        if max_frame is not None and self.frame_bytes(enc) > max_frame:
            raise FrameTooLarge(self.frame_bytes(enc))
        if enc.large and self._segments_ok:
            self._send_segment(enc, fallback=max_frame is None)
        else:
            self._send_inline(enc)

    def frame_bytes(self, enc: Encoded) -> int:
        """Bytes this message would write to the socket (the segment's contents are not among them)."""
        table = 16 * len(enc.sizes)
        if enc.large and self._segments_ok:
            return _HEADER.size + table + (0 if len(enc.stream) >= _PICKLE_IN_SEGMENT else len(enc.stream))
        return _HEADER.size + _layout(enc.sizes, table + len(enc.stream))[1]

    def send_broadcast(self, b: Broadcast) -> None:
        """Send a message prepared once for several receivers."""
        if b.fd < 0:
            self._send_inline(b.encoded)
        else:
            frame = _segment_frame(b.encoded, b.placed, _FLAG_SEG_FD | _FLAG_PRIVATE, _ONE_OFF, b.placed.used)
            self._write(frame, [b.fd])

    def _send_inline(self, enc: Encoded) -> None:
        pos = 16 * len(enc.sizes) + len(enc.stream)  # body: table, pickle stream, aligned buffers
        offsets, end = _layout(enc.sizes, pos)
        parts: list[Any] = [_table(offsets, enc.sizes), enc.stream]
        for src, off, n in zip(enc.sources, offsets, enc.sizes):
            if off > pos:
                parts.append(bytes(off - pos))
            parts.append(
                np.ascontiguousarray(src).reshape(-1).view(np.uint8) if isinstance(src, np.ndarray) else src.raw()
            )
            pos = off + n
        header = _HEADER.pack(_KIND_INLINE, 0, 0, len(enc.sizes), len(enc.stream), end, 0, -1)
        self._write([header, *parts], [])

    def _send_segment(self, enc: Encoded, fallback: bool = True) -> None:
        placed = _place(enc)
        try:
            slot, target, size, fds, flags = self._acquire(placed.used)
        except OSError:  # no memfd here (a sandbox refusing it) or no memory for a segment: send it inline
            self._segments_ok = False
            if not fallback:
                raise
            self._send_inline(enc)
            return
        try:
            _fill(target, enc, placed)
            del target
            self._write(_segment_frame(enc, placed, flags, slot, size), fds)
        except BaseException:
            if slot != _ONE_OFF and self._ctl is not None:
                self._ctl[slot] = 0
            raise
        finally:
            for fd in fds:
                os.close(fd)

    def _acquire(self, used: int) -> tuple[int, np.ndarray, int, list[int], int]:
        """A segment for a message of ``used`` bytes: a free slot of the ring (added or regrown when
        needed), else a one-off segment. Returns the slot, a uint8 view of the segment, the size the
        peer maps, the descriptors to send with the frame and the frame's flags. Raises OSError
        (having taken nothing) when no segment can be made."""
        if self._ctl is None:
            fd = _new_memfd(_PAGE)
            try:
                self._ctl = np.asarray(_map_fd(fd, _PAGE))
            except BaseException:
                os.close(fd)
                raise
            self._ctl_fd = fd  # sent with the first frame that uses the ring
        ctl = self._ctl
        slots = self._slots
        free = [i for i in range(len(slots)) if ctl[i] == 0]
        warm = [i for i in free if slots[i].touched >= used]  # no page to fault in
        fit = warm or [i for i in free if slots[i].capacity >= used]
        capacity = max(_MIN_CAPACITY, 1 << (used - 1).bit_length())
        held = sum(s.touched for s in slots)
        one_off: tuple[int, np.ndarray] | None = None
        if fit and (warm or held + used - slots[fit[0]].touched <= RING_BYTES):
            i = fit[0]  # the lowest free slot: the pages faulted in first are reused first
        elif free and held - max(slots[k].touched for k in free) + used <= RING_BYTES:
            i = max(free, key=lambda k: slots[k].touched)  # regrow a free slot: the ring's length follows leases
            grown = _Slot(capacity)
            slots[i].release()
            slots[i] = grown
        elif not free and len(slots) < MAX_SLOTS and held + used <= RING_BYTES:
            i = len(slots)
            slots.append(_Slot(capacity))
        else:  # every slot is leased, or the ring's memory is spent: a one-off segment, freed with its views
            fd = _new_memfd(used)
            try:
                one_off = (fd, np.asarray(_map_fd(fd, used)))
            except BaseException:
                os.close(fd)
                raise
        flags = 0
        fds: list[int] = []
        if self._ctl_fd >= 0:  # the peer has not mapped the control page yet
            flags |= _FLAG_CTL_FD
            fds.append(self._ctl_fd)
            self._ctl_fd = -1
        if one_off is not None:
            return _ONE_OFF, one_off[1], used, [*fds, one_off[0]], flags | _FLAG_SEG_FD
        slot = slots[i]
        if slot.fd >= 0:
            flags |= _FLAG_SEG_FD
            fds.append(slot.take_fd())
        slot.touched = max(slot.touched, used)
        ctl[i] = 1
        return i, slot.array, slot.capacity, fds, flags

    def _write(self, parts: list[Any], fds: list[int]) -> None:
        views = [v for v in (memoryview(p).cast("B") for p in parts) if v.nbytes]
        if not _HAVE_SENDMSG:  # Windows: no descriptors to pass (no segments either), one part at a time
            for v in views:
                self.sock.sendall(v)
            return
        anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
        while views:
            sent = self.sock.sendmsg(views[:_IOV_MAX], anc)
            anc = []
            # drop what was sent (a blocking socket sends it all unless a signal interrupts it)
            while views and sent >= views[0].nbytes:
                sent -= views[0].nbytes
                views.pop(0)
            if sent:
                views[0] = views[0][sent:]

    # -- receiving ------------------------------------------------------------------------------
    def recv(self) -> Any:
        """The next message. Raises EOFError when the peer has closed the connection (or died)."""
        head, fds = self._recv_head()
        try:
            kind, flags, slot, nbufs, plen, blen, size, pickle_off = _HEADER.unpack(head)
            body = bytearray(blen)
            if blen:
                self._recv_exact(memoryview(body))
            table = memoryview(body)[: 16 * nbufs].cast("Q")
            spans = [(table[2 * k], table[2 * k] + table[2 * k + 1]) for k in range(nbufs)]
            table.release()
            whole = memoryview(body)
            if kind == _KIND_INLINE:
                bufs: list[Any] = [whole[a:b] for a, b in spans]
                return pickle.loads(whole[16 * nbufs : 16 * nbufs + plen], buffers=bufs)
            lease = self._lease(flags, slot, size, fds)
            bufs = [lease[a:b] for a, b in spans]
            data: Any = (
                lease[pickle_off : pickle_off + plen] if pickle_off >= 0 else whole[16 * nbufs : 16 * nbufs + plen]
            )
            del lease  # from here the views alone keep the segment leased
            return pickle.loads(data, buffers=bufs)
        finally:
            for fd in fds:  # mapped (or refused): never kept open
                os.close(fd)

    def _lease(self, flags: int, slot: int, size: int, fds: list[int]) -> np.ndarray:
        """A fresh uint8 array over the message's segment; the arrays unpickled from it are views
        that keep it alive, and when it is collected a ring slot is handed back to the sender."""
        it = iter(fds)
        if flags & _FLAG_CTL_FD:
            self._peer_ctl = np.asarray(_map_fd(next(it), _PAGE))
        if flags & _FLAG_SEG_FD:
            mapping = _map_fd(next(it), size, private=bool(flags & _FLAG_PRIVATE))
            if slot != _ONE_OFF:
                self._maps[slot] = mapping
        elif slot in self._maps:
            mapping = self._maps[slot]
        else:
            raise OSError(f"protocol error: segment {slot} arrived without its descriptor")
        lease = np.asarray(mapping)
        if slot != _ONE_OFF:
            ctl = self._peer_ctl
            if ctl is None:
                raise OSError("protocol error: a ring segment arrived before the control page")
            weakref.finalize(lease, _free_slot, ctl, slot, os.getpid()).atexit = False
        return lease

    def _recv_head(self) -> tuple[bytes, list[int]]:
        if not _HAVE_SENDMSG:
            head = bytearray(_HEADER.size)
            self._recv_exact(memoryview(head), first=True)
            return bytes(head), []
        anc_size = socket.CMSG_SPACE(4 * 2) if SEGMENTS_AVAILABLE else 0
        data, anc, msg_flags, _ = self.sock.recvmsg(_HEADER.size, anc_size, getattr(socket, "MSG_CMSG_CLOEXEC", 0))
        fds: list[int] = []
        for level, kind, cdata in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                a = array.array("i")
                a.frombytes(cdata[: len(cdata) - len(cdata) % a.itemsize])
                fds.extend(a)
        try:
            if msg_flags & getattr(socket, "MSG_CTRUNC", 0):
                raise OSError("protocol error: descriptors truncated")
            if not data:
                raise EOFError("the peer closed the connection")
            if len(data) < _HEADER.size:
                rest = bytearray(_HEADER.size - len(data))
                self._recv_exact(memoryview(rest))
                data += bytes(rest)
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise
        return data, fds

    def _recv_exact(self, view: memoryview, first: bool = False) -> None:
        flags = getattr(socket, "MSG_WAITALL", 0)
        while view.nbytes:
            n = self.sock.recv_into(view, view.nbytes, flags)
            if n == 0:
                raise EOFError("the peer closed the connection" + ("" if first else " mid-message"))
            view = view[n:]
            first = False

    # -- closing --------------------------------------------------------------------------------
    def close(self) -> None:
        """Close the socket and drop this end's segments. A mapping that live arrays still view
        stays valid until they go: nothing is ever unmapped under a view."""
        try:
            self.sock.close()
        finally:
            for s in self._slots:
                s.release()
            self._slots = []
            if self._ctl_fd >= 0:
                os.close(self._ctl_fd)
                self._ctl_fd = -1
            self._ctl = None
            self._maps = {}
            self._peer_ctl = None
