"""Shared-memory segments for the processes runner's messages: anonymous ``memfd`` files, mapped.

A segment is an anonymous ``memfd`` (no name in ``/dev/shm``, nothing on disk) mapped through ctypes,
so its descriptor can be closed right after mapping: nothing is left behind when a process is killed.
:class:`Slot` is one reusable segment of a sender's ring; how the ring is used, and the frames that
name segments, are in :mod:`zephon_core.runtime.shm`.
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

    def __len__(self) -> int:
        return self._size

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


def free_slot(ctl: np.ndarray, slot: int, pid: int) -> None:
    """Lease finalizer: the receiver no longer uses the segment in ``slot``; the sender may reuse it.

    Only in the process that received it: a child forked later inherits the lease as a copy, and
    that copy going away must not free the slot under the parent."""
    if os.getpid() == pid:
        ctl[slot] = 0


def map_fd(fd: int, size: int, private: bool = False) -> Mapping:
    """Map a received or new segment; the caller closes ``fd`` right after."""
    return Mapping(fd, size, private)


class Slot:
    """One reusable segment of a sender's ring: its mapping and, until first sent, its descriptor."""

    __slots__ = ("array", "capacity", "fd", "touched")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.touched = 0  # bytes written at least once: the pages this slot holds in memory
        self.fd = new_memfd(capacity)  # kept until the slot's first frame carries it to the peer
        try:
            self.array = np.asarray(map_fd(self.fd, capacity))
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
