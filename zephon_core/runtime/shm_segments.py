"""Shared-memory segments for the processes runner's messages: anonymous ``memfd`` files, mapped with
``mmap(2)`` so that no descriptor stays open (why: docs/performance.md, "Nothing can leak"). The ring
of :class:`Slot` segments a sender keeps is used in :mod:`zephon_core.runtime.shm`.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import sys

import numpy as np

SEGMENTS_AVAILABLE = sys.platform.startswith("linux") and hasattr(os, "memfd_create")
"""Whether this platform has ``memfd`` segments; without them every message travels inline."""

MIN_CAPACITY = 64 << 20  # virtual: a slot's pages are allocated when first written, so sizes rarely regrow
PAGE = mmap.PAGESIZE

_libc: ctypes.CDLL | None = None
if SEGMENTS_AVAILABLE:  # mmap(2) itself: mmap.mmap would keep a duplicate descriptor open per mapping, for hours
    _libc = ctypes.CDLL(None, use_errno=True)
    _libc.mmap.restype, _libc.munmap.restype = ctypes.c_void_p, ctypes.c_int
    _libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    _libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]


class Mapping:
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

    def __del__(self) -> None:
        if _libc is not None:
            _libc.munmap(self._addr, self._size)


def new_memfd(size: int) -> int:
    fd = os.memfd_create("zephon-shm", os.MFD_CLOEXEC)
    try:
        os.ftruncate(fd, size)
    except BaseException:
        os.close(fd)
        raise
    return fd


def new_segment(size: int) -> tuple[int, np.ndarray]:
    """A new segment, mapped: its descriptor (the caller sends or closes it) and a uint8 array over it."""
    fd = new_memfd(size)
    try:
        return fd, np.asarray(Mapping(fd, size))
    except BaseException:
        os.close(fd)
        raise


def free_slot(ctl: np.ndarray, slot: int, pid: int) -> None:
    """Lease finalizer: the sender may reuse the segment in ``slot``. Only in the process that received
    it: a child forked later inherits the lease as a copy, whose end must not free the slot under the parent."""
    if os.getpid() == pid:
        ctl[slot] = 0


class Slot:
    """One reusable segment of a sender's ring: its mapping and, until first sent, its descriptor."""

    __slots__ = ("array", "capacity", "fd", "touched")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.touched = 0  # bytes written at least once: the pages this slot holds in memory
        self.fd, self.array = new_segment(capacity)  # fd kept until the slot's first frame carries it to the peer

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        self.array = np.empty(0, np.uint8)  # unmapped here (the receiver keeps its own mapping)
