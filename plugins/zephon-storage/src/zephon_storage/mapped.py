"""Memory-mapped dataset files, local or cached, kept open in a small per-process LRU.

A shuffled fetch touches many shards, each a few times, so opening a shard once and slicing it
many times is what makes random reads cheap. Files come through :class:`Storage`: local data is
mapped in place, remote data from the node-local shard cache (downloaded once per node), and
whole-file compressed shards from a decompressed copy that the same cache shares between
processes (the reader supplies the codec function). Mappings are dropped, never closed, on eviction: another thread may still
be slicing one, and the mapping closes itself when the last view goes away.
"""

from __future__ import annotations

import mmap
import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from zephon_core import ReaderError
from zephon_storage.integrity import open_verified
from zephon_storage.location import FileInfo, LocalFile, Storage

Decompress = Callable[[str, str, str], None]
"""``decompress(codec, src_path, dst_path, what=...)`` writes the decompressed file."""


class MappedFiles:
    """Read-only views of a dataset's files, opened lazily and shared by the threads of one process.

    Args:
        storage: the dataset root.
        max_open: mappings kept open at once (least recently used ones are dropped).
        decompress: how to inflate a compressed file (``codec`` names come from the reader).
    """

    def __init__(self, storage: Storage, max_open: int = 64, decompress: Callable[..., None] | None = None) -> None:
        self.storage = storage
        self.decompress = decompress
        self.max_open = max(1, int(max_open))
        self._open: OrderedDict[tuple[str, str | None], tuple[memoryview, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def view(self, rel: str, codec: str | None = None, *, expected: str | None = None) -> memoryview:
        """The bytes of ``rel`` (decompressed with ``codec`` first, if given) as a read-only view.

        ``expected``: the file's recorded checksum (``verify="checksum"``), checked before the file
        (or its decompressed copy) is first used; see :func:`~zephon_storage.integrity.open_verified`.
        """
        key = (rel, codec)
        with self._lock:
            hit = self._open.get(key)
            if hit is not None:
                self._open.move_to_end(key)
                return hit[0]
        view, pin = self._map(rel, codec, expected)
        with self._lock:
            self._open[key] = (view, pin)
            self._open.move_to_end(key)
            while len(self._open) > self.max_open:
                _, (_, old_pin) = self._open.popitem(last=False)
                _release(old_pin)
        return view

    def _map(self, rel: str, codec: str | None, expected: str | None) -> tuple[memoryview, Any]:
        st = self.storage

        def open_local(info: FileInfo | None) -> LocalFile:
            if expected is None:
                return st.open_local(rel, info)
            return open_verified(st, info or st.info(rel), expected)

        if codec is None:
            local = open_local(None)
            return _mmap_path(local.path, st.url_of(rel)), local
        if self.decompress is None:
            raise ReaderError(f"{st.url_of(rel)}: compressed with {codec!r} but no decompressor was given")
        decompress = self.decompress
        info = st.info(rel)

        def produce(tmp: str) -> None:
            src = open_local(info)
            try:
                decompress(codec, src.path, tmp, what=st.url_of(rel))
            finally:
                src.release()

        # A copy decompressed from a checked source is a cache entry of its own: one made earlier
        # from an unchecked source must not pass for it.
        extra = ("decompressed", codec, "checked") if expected else ("decompressed", codec)
        entry = st.materialize(st.key_of(info, *extra), produce, what=st.url_of(rel))
        return _mmap_path(entry.path, st.url_of(rel)), entry

    def clear(self) -> None:
        """Drop every mapping (they close once no view of them is left)."""
        with self._lock:
            pins = [pin for _, pin in self._open.values()]
            self._open.clear()
        for pin in pins:
            _release(pin)


def _release(pin: Any) -> None:
    release = getattr(pin, "release", None)
    if release is not None:
        release()


def _mmap_path(path: str, what: str) -> memoryview:
    try:
        with open(path, "rb") as f:
            if os.fstat(f.fileno()).st_size == 0:
                return memoryview(b"")
            return memoryview(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))
    except FileNotFoundError:
        raise ReaderError(f"{what}: file is missing") from None
    except OSError as exc:
        raise ReaderError(f"{what}: cannot open: {exc}") from exc
