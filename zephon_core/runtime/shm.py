"""Messages between the processes runner and its workers: pickle-5 frames on a Unix socket, the large
buffers of a message coalesced into one shared-memory segment from a ring per connection, leased to
the receiver's views (the design: docs/performance.md, "How a message travels"). Segments are made in
:mod:`~zephon_core.runtime.shm_segments`, messages pickled in :mod:`~zephon_core.runtime.shm_encoding`.
"""

from __future__ import annotations

import array
import os
import pickle
import socket
import struct
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from zephon_core.runtime import shm_segments
from zephon_core.runtime.shm_encoding import SEGMENT_THRESHOLD as SEGMENT_THRESHOLD
from zephon_core.runtime.shm_encoding import Encoded as Encoded
from zephon_core.runtime.shm_encoding import copy_into, layout
from zephon_core.runtime.shm_encoding import encode as encode
from zephon_core.runtime.shm_segments import SEGMENTS_AVAILABLE as SEGMENTS_AVAILABLE

MAX_SLOTS = 16
"""Reusable segments per direction of one worker connection (each holds one message at a time)."""

RING_BYTES = 256 << 20
"""Memory a ring may keep faulted in per direction of one worker connection; past it, one-off segments."""

_HAVE_SENDMSG = hasattr(socket.socket, "sendmsg")

_PICKLE_IN_SEGMENT = 16 * 1024  # a segment message also carries its pickle stream when it is this long
_IOV_MAX = 512

# kind, flags, slot, buffers, pickle length, body length, segment size, pickle offset in the segment
_HEADER = struct.Struct("<BBhIQQQq")
_KIND_INLINE = 0
_KIND_SEGMENT = 1
_FLAG_CTL_FD = 1  # the control page's descriptor rides with this frame
_FLAG_SEG_FD = 2  # the segment's descriptor rides with this frame (first use of a slot, or one-off)
_FLAG_PRIVATE = 4  # map copy-on-write: the segment is shared by several receivers (a broadcast)
_ONE_OFF = -1


class FrameTooLarge(Exception):
    """A message cannot be queued behind a running task: its frame would not fit the socket's buffer."""


def _table(offsets: Sequence[int], sizes: Sequence[int]) -> bytes:
    return array.array("Q", [v for pair in zip(offsets, sizes) for v in pair]).tobytes()


@dataclass(slots=True)
class _Placed:
    """Where a segment message's parts went: buffer offsets, and the pickle stream's (-1: in the frame)."""

    offsets: list[int]
    pickle_off: int
    used: int


def _place(enc: Encoded) -> _Placed:
    offsets, end = layout(enc.sizes)
    pickle_off = -1
    if len(enc.stream) >= _PICKLE_IN_SEGMENT:
        (pickle_off,), end = layout([len(enc.stream)], end)
    return _Placed(offsets, pickle_off, max(end, 1))


def _fill(target: np.ndarray, enc: Encoded, placed: _Placed) -> None:
    for src, off, n in zip(enc.sources, placed.offsets, enc.sizes):
        copy_into(target[off : off + n], src)
    if placed.pickle_off >= 0:
        target[placed.pickle_off : placed.pickle_off + len(enc.stream)] = np.frombuffer(enc.stream, np.uint8)


def _segment_frame(enc: Encoded, placed: _Placed, flags: int, slot: int, size: int) -> list[Any]:
    body = [_table(placed.offsets, enc.sizes), *([] if placed.pickle_off >= 0 else [enc.stream])]
    blen = sum(len(b) for b in body)
    header = _HEADER.pack(_KIND_SEGMENT, flags, slot, len(enc.sizes), len(enc.stream), blen, size, placed.pickle_off)
    return [header, *body]


class Broadcast:
    """One message for several receivers (the worker function, which may hold data), its buffers copied
    once into one segment that each receiver maps copy-on-write."""

    def __init__(self, enc: Encoded) -> None:
        self.encoded, self.fd, self.placed = enc, -1, _Placed([], -1, 0)
        if enc.large:
            placed = _place(enc)
            try:
                fd = shm_segments.new_memfd(placed.used)
            except OSError:  # no memfd here (a sandbox refusing it): it goes inline to each receiver
                return
            self.fd, self.placed = fd, placed
            try:
                _fill(np.asarray(shm_segments.Mapping(fd, placed.used)), enc, placed)
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
        # sending: the ring this end writes, and the control page whose byte per slot says leased (1,
        # set on send) or free (0, set by the receiver's lease finalizer); receiving: the peer's, mapped
        self._slots: list[shm_segments.Slot] = []
        self._ctl: np.ndarray | None = None
        self._ctl_fd = -1
        self._maps: dict[int, shm_segments.Mapping] = {}
        self._peer_ctl: np.ndarray | None = None
        self._segments_ok = True  # False once making a segment failed: this end then sends inline

    def fileno(self) -> int:
        return self.sock.fileno()

    # -- sending --------------------------------------------------------------------------------
    def send(self, obj: Any) -> None:
        """Pickle and send ``obj``. A pickling error is raised before anything is written."""
        self.send_encoded(encode(obj))

    def send_encoded(self, enc: Encoded, *, max_frame: int | None = None) -> None:
        """Send a message encoded beforehand; with ``max_frame``, raise :class:`FrameTooLarge` (having
        written nothing) rather than write a longer frame (a frame queued behind a running task must fit
        the socket's buffer, or the write would block while the peer may be blocked writing to us)."""
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
        return _HEADER.size + layout(enc.sizes, table + len(enc.stream))[1]

    def send_broadcast(self, b: Broadcast) -> None:
        """Send a message prepared once for several receivers."""
        if b.fd < 0:
            self._send_inline(b.encoded)
        else:
            frame = _segment_frame(b.encoded, b.placed, _FLAG_SEG_FD | _FLAG_PRIVATE, _ONE_OFF, b.placed.used)
            self._write(frame, [b.fd])

    def _send_inline(self, enc: Encoded) -> None:
        pos = 16 * len(enc.sizes) + len(enc.stream)  # body: table, pickle stream, aligned buffers
        offsets, end = layout(enc.sizes, pos)
        parts: list[Any] = [_table(offsets, enc.sizes), enc.stream]
        for src, off, n in zip(enc.sources, offsets, enc.sizes):
            if off > pos:
                parts.append(bytes(off - pos))
            raw = np.ascontiguousarray(src).reshape(-1).view(np.uint8) if isinstance(src, np.ndarray) else src.raw()
            parts.append(raw)
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
        """A segment for ``used`` bytes: a free slot of the ring (added or regrown), else a one-off one.
        Returns the slot, a uint8 view of it, the size the peer maps, the descriptors to send and the
        frame's flags; raises OSError (having taken nothing) when no segment can be made."""
        if self._ctl is None:  # its descriptor is sent with the first frame that uses the ring
            self._ctl_fd, self._ctl = shm_segments.new_segment(shm_segments.PAGE)
        ctl = self._ctl
        slots = self._slots
        free = [i for i in range(len(slots)) if ctl[i] == 0]
        warm = [i for i in free if slots[i].touched >= used]  # no page to fault in
        fit = warm or [i for i in free if slots[i].capacity >= used]
        capacity = max(shm_segments.MIN_CAPACITY, 1 << (used - 1).bit_length())
        held = sum(s.touched for s in slots)
        one_off: tuple[int, np.ndarray] | None = None
        if fit and (warm or held + used - slots[fit[0]].touched <= RING_BYTES):
            i = fit[0]  # the lowest free slot: the pages faulted in first are reused first
        elif free and held - max(slots[k].touched for k in free) + used <= RING_BYTES:
            i = max(free, key=lambda k: slots[k].touched)  # regrow a free slot: the ring's length follows leases
            grown = shm_segments.Slot(capacity)
            slots[i].release()
            slots[i] = grown
        elif not free and len(slots) < MAX_SLOTS and held + used <= RING_BYTES:
            i = len(slots)
            slots.append(shm_segments.Slot(capacity))
        else:  # every slot is leased, or the ring's memory is spent: a one-off segment, freed with its views
            one_off = shm_segments.new_segment(used)
        fds = [self._ctl_fd] if self._ctl_fd >= 0 else []  # the peer has not mapped the control page yet
        flags = _FLAG_CTL_FD if fds else 0
        self._ctl_fd = -1
        if one_off is not None:
            return _ONE_OFF, one_off[1], used, [*fds, one_off[0]], flags | _FLAG_SEG_FD
        slot = slots[i]
        if slot.fd >= 0:
            flags |= _FLAG_SEG_FD
            fds.append(slot.fd)
            slot.fd = -1
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
        fds: list[int] = []
        try:
            head = self._recv_head(fds)
            kind, flags, slot, nbufs, plen, blen, size, pickle_off = _HEADER.unpack(head)
            whole = memoryview(bytearray(blen))
            self._recv_exact(whole)
            table = whole[: 16 * nbufs].cast("Q")
            spans = [(table[2 * k], table[2 * k] + table[2 * k + 1]) for k in range(nbufs)]
            table.release()
            stream: Any = whole[16 * nbufs : 16 * nbufs + plen]
            if kind == _KIND_INLINE:
                return pickle.loads(stream, buffers=[whole[a:b] for a, b in spans])
            lease = self._lease(flags, slot, size, fds)
            bufs = [lease[a:b] for a, b in spans]
            if pickle_off >= 0:
                stream = lease[pickle_off : pickle_off + plen]
            del lease  # from here the views alone keep the segment leased
            return pickle.loads(stream, buffers=bufs)
        finally:
            for fd in fds:  # mapped (or refused): never kept open
                os.close(fd)

    def _lease(self, flags: int, slot: int, size: int, fds: list[int]) -> np.ndarray:
        """A fresh uint8 array over the message's segment; the arrays unpickled from it are views
        that keep it alive, and when it is collected a ring slot is handed back to the sender."""
        it = iter(fds)
        if flags & _FLAG_CTL_FD:
            self._peer_ctl = np.asarray(shm_segments.Mapping(next(it), shm_segments.PAGE))
        if flags & _FLAG_SEG_FD:
            mapping = shm_segments.Mapping(next(it), size, private=bool(flags & _FLAG_PRIVATE))
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
            weakref.finalize(lease, shm_segments.free_slot, ctl, slot, os.getpid()).atexit = False
        return lease

    def _recv_head(self, fds: list[int]) -> bytes:
        """The next frame's header; the descriptors that came with it are appended to ``fds``."""
        if _HAVE_SENDMSG:
            anc_size = socket.CMSG_SPACE(4 * 2) if shm_segments.SEGMENTS_AVAILABLE else 0
            data, anc, flags, _ = self.sock.recvmsg(_HEADER.size, anc_size, getattr(socket, "MSG_CMSG_CLOEXEC", 0))
            for level, kind, cdata in anc:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:  # whole 4-byte descriptors
                    fds.extend(array.array("i", cdata[: len(cdata) - len(cdata) % 4]))
            if flags & getattr(socket, "MSG_CTRUNC", 0):
                raise OSError("protocol error: descriptors truncated")
        else:
            data = self.sock.recv(_HEADER.size)
        if not data:
            raise EOFError("the peer closed the connection")
        if len(data) < _HEADER.size:
            rest = bytearray(_HEADER.size - len(data))
            self._recv_exact(memoryview(rest))
            data += bytes(rest)
        return data

    def _recv_exact(self, view: memoryview) -> None:
        flags = getattr(socket, "MSG_WAITALL", 0)
        while view.nbytes:
            n = self.sock.recv_into(view, view.nbytes, flags)
            if n == 0:
                raise EOFError("the peer closed the connection mid-message")
            view = view[n:]

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
            self._ctl, self._maps, self._peer_ctl = None, {}, None
