"""The sample index of one WebDataset tar shard: built from tar headers alone, kept beside the tar.

A WebDataset shard is a plain tar whose members are grouped into samples by name: ``dir/abc.jpg``
and ``dir/abc.txt`` are the fields ``jpg`` and ``txt`` of sample ``dir/abc`` (the key is the path
up to the first dot of the base name; ``abc.seg.png`` is field ``seg.png``). Scanning walks the
512-byte headers and seeks over every payload, so indexing a remote shard reads its headers only.

File layout (little endian)::

    b"ZWDS" u8 version  3 pad bytes  u64 header_len  header (JSON, padded to 8 bytes)
    int64  sample_first[samples + 1]   first member of each sample (members are contiguous)
    int64  key_offset[samples + 1]     where each key starts in the key blob
    int64  member_data[members]        byte offset of each member's payload in the tar
    int64  member_size[members]        payload size
    int32  member_field[members]       index into the header's ``fields`` list (+ pad to 8 bytes)
    bytes  keys                        the UTF-8 keys, concatenated

The header records the tar's size, version (mtime / ETag) and CRCs of its first and last 64 KiB,
so a changed tar is a stale index, not wrong samples (a copy with a new mtime stays valid).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO

import numpy as np
from zephon_storage import SourceIdentity, check_sidecar_size, read_sidecar_header, write_sidecar

from zephon_core import ReaderError

MAGIC = b"ZWDS"
VERSION = 1
SUFFIX = ".zidx"
BLOCK = 512

_META = re.compile(r"__[^/]*__($|/)")
"""Names WebDataset skips entirely (``__key__``-style metadata members)."""


_KEY = re.compile(r"^((?:.*/|)[^.]+)[.]([^/]*)$")
"""WebDataset's own ``base_plus_ext`` rule: the key ends at the first dot of the base name."""


def split_name(name: str) -> tuple[str, str] | None:
    """``dir/abc.seg.png`` -> ``("dir/abc", "seg.png")`` (WebDataset's rule, extension lower-cased); None without one."""
    m = _KEY.match(name)
    return (m.group(1), m.group(2).lower()) if m else None


Identity = SourceIdentity
"""What an index was built from (the kernel's :class:`~zephon_storage.SourceIdentity`)."""


@dataclass
class TarIndex:
    """Where every sample's members lie in one tar (arrays may be memory-mapped)."""

    sample_first: np.ndarray
    key_offset: np.ndarray
    member_data: np.ndarray
    member_size: np.ndarray
    member_field: np.ndarray
    keys: bytes
    fields: list[str]
    source: SourceIdentity

    def __len__(self) -> int:
        return len(self.sample_first) - 1

    def key(self, i: int) -> str:
        return self.keys[int(self.key_offset[i]) : int(self.key_offset[i + 1])].decode("utf-8")


def scan(f: IO[bytes], size: int, name: str) -> tuple[list[int], list[str], list[int], list[int], list[str]]:
    """Walk the tar headers of ``f`` (seekable, ``size`` bytes): per sample and per member lists.

    Returns ``(sample_first, keys, member_data, member_size, member_fields)``. Members that are
    not regular files, WebDataset metadata (``__*__``) and names without an extension are skipped,
    as WebDataset does.

    Raises:
        ReaderError: naming ``name``: not a tar, a corrupt header, a member running past the end
            (truncated), a key whose members are not contiguous, a field twice in one sample.
    """
    first: list[int] = []
    keys: list[str] = []
    data: list[int] = []
    sizes: list[int] = []
    fields: list[str] = []
    seen: set[str] = set()
    current: str | None = None
    current_fields: set[str] = set()
    for member, offset, length, regular in walk(f, size, name):
        if not regular or _META.match(member):
            continue
        parts = split_name(member)
        if parts is None:
            continue
        key, field = parts
        if key != current:
            if key in seen:
                raise ReaderError(
                    f"{name}: the members of sample {key!r} are not contiguous (it reappears at "
                    f"{member!r} after other samples); WebDataset groups a sample's files together"
                )
            seen.add(key)
            first.append(len(data))
            keys.append(key)
            current, current_fields = key, set()
        if field in current_fields:
            raise ReaderError(f"{name}: sample {key!r} has field {field!r} twice ({member!r})")
        current_fields.add(field)
        data.append(offset)
        sizes.append(length)
        fields.append(field)
    first.append(len(data))
    return first, keys, data, sizes, fields


_ZERO = bytes(BLOCK)
_REGULAR = (b"0", b"\0", b"7")
"""Type flags of regular files (``7`` is a contiguous file), as :mod:`tarfile` counts them."""


def walk(f: IO[bytes], size: int, name: str) -> Iterator[tuple[str, int, int, bool]]:
    """``(member name, payload offset, payload size, is a regular file)`` for every member, from headers only.

    Handles ustar (with its name prefix), PAX extended headers (``path``, ``size``) and GNU long
    names; every header's checksum is verified. Payloads are seeked over, never read. Tar writers
    (``tarfile``, GNU tar, WebDataset's ``TarWriter``) end an archive with zero blocks, so a file
    that ends without one was cut short, even exactly between two members.

    Raises:
        ReaderError: naming ``name``: not a tar, a corrupt header, or truncated.
    """
    pos = 0
    long_name: str | None = None
    pax: dict[str, str] = {}
    while True:
        f.seek(pos)
        block = f.read(BLOCK)
        if len(block) < BLOCK:
            if pos == 0:
                raise ReaderError(f"{name}: not a readable tar file ({size} bytes, no complete header)")
            raise ReaderError(
                f"{name}: ends at byte {size} without the tar end-of-archive block (after byte {pos}): truncated"
            )
        if block == _ZERO:
            return
        if not checksum_ok(block):
            if pos == 0:
                raise ReaderError(f"{name}: not a readable tar file (bad header checksum at byte 0)")
            raise ReaderError(f"{name}: corrupt tar header at byte {pos} (the samples behind it cannot be read)")
        try:
            length = number(block[124:136])
        except ValueError:
            raise ReaderError(f"{name}: corrupt tar header at byte {pos} (bad size field)") from None
        kind = block[156:157]
        start = pos + BLOCK
        if kind in (b"x", b"g", b"L", b"K"):  # extended headers: their payload is header data
            if start + length > size:
                raise ReaderError(f"{name}: extended tar header at byte {pos} runs past the end: truncated")
            f.seek(start)
            ext = f.read(length)
            if kind == b"x":
                pax = _pax_records(ext, name, pos)
            elif kind == b"L":
                long_name = ext.split(b"\0", 1)[0].decode("utf-8", "replace")
        else:
            member = pax.get("path") or long_name or _ustar_name(block)
            if "size" in pax:
                length = int(pax["size"])
            if start + length > size:
                raise ReaderError(
                    f"{name}: member {member!r} needs bytes up to {start + length} but the file has {size}: truncated"
                )
            yield member, start, length, kind in _REGULAR
            pax, long_name = {}, None
        pos = start + -(-length // BLOCK) * BLOCK


def checksum_ok(block: bytes) -> bool:
    """The header checksum: the sum of its bytes with the checksum field counted as spaces."""
    try:
        stored = int(block[148:156].split(b"\0", 1)[0].strip() or b"0", 8)
    except ValueError:
        return False
    unsigned = sum(block) - sum(block[148:156]) + 256
    if stored == unsigned:
        return True
    signed = unsigned - 2 * sum(b for b in block if b > 127)  # some old writers summed signed chars
    return stored == signed


def number(field: bytes) -> int:
    """A tar numeric field: NUL/space-terminated octal, or GNU base-256 (high bit of the first byte set)."""
    if field[:1] in (b"\x80", b"\xff"):
        n = int.from_bytes(field[1:], "big")
        return n if field[0] == 0x80 else n - 256 ** (len(field) - 1)
    text = field.split(b"\0", 1)[0].strip()
    return int(text, 8) if text else 0


def _ustar_name(block: bytes) -> str:
    raw = block[:100].split(b"\0", 1)[0]
    if block[257:262] == b"ustar":
        prefix = block[345:500].split(b"\0", 1)[0]
        if prefix:
            raw = prefix + b"/" + raw
    return raw.decode("utf-8", "replace")


def _pax_records(data: bytes, name: str, pos: int) -> dict[str, str]:
    """``"<len> key=value\\n"`` records of a PAX header."""
    out: dict[str, str] = {}
    i = 0
    try:
        while i < len(data) and data[i : i + 1] != b"\0":
            space = data.index(b" ", i)
            n = int(data[i:space])
            record = data[space + 1 : i + n]
            if n <= 0 or not record.endswith(b"\n"):
                raise ValueError("bad record")
            key, _, value = record[:-1].partition(b"=")
            out[key.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
            i += n
    except ValueError:
        raise ReaderError(f"{name}: corrupt PAX header at byte {pos}") from None
    return out


def build(f: IO[bytes], source: SourceIdentity, name: str) -> TarIndex:
    """Scan ``f`` and return its index (see :func:`scan`)."""
    first, keys, data, sizes, fields = scan(f, source.size, name)
    names = sorted(set(fields))
    ids = {n: k for k, n in enumerate(names)}
    encoded = [k.encode("utf-8") for k in keys]
    offsets = np.zeros(len(keys) + 1, dtype=np.int64)
    if encoded:
        offsets[1:] = np.cumsum([len(k) for k in encoded])
    return TarIndex(
        np.asarray(first, dtype=np.int64),
        offsets,
        np.asarray(data, dtype=np.int64),
        np.asarray(sizes, dtype=np.int64),
        np.asarray([ids[x] for x in fields], dtype=np.int32),
        b"".join(encoded),
        names,
        source,
    )


def write(path: str, idx: TarIndex, like: str | None = None) -> None:
    """Write ``idx`` atomically (:func:`~zephon_storage.write_sidecar`): readers never see half an index.

    ``like``: the tar file the index describes; the index takes its permission bits, so whoever may
    read the shard may read its index (as for JSON Lines indexes).
    """
    header = {
        "samples": len(idx),
        "members": len(idx.member_data),
        "key_bytes": len(idx.keys),
        "fields": idx.fields,
        "source": idx.source.to_json(),
    }

    def body() -> Iterator[bytes]:
        for arr, dt in (
            (idx.sample_first, "<i8"),
            (idx.key_offset, "<i8"),
            (idx.member_data, "<i8"),
            (idx.member_size, "<i8"),
            (idx.member_field, "<i4"),
        ):
            yield np.asarray(arr).astype(dt).tobytes()
        yield b"\0" * (4 * (len(idx.member_field) % 2))
        yield idx.keys

    write_sidecar(path, MAGIC, VERSION, header, body(), like=like)


def read(path: str, name: str) -> TarIndex:
    """Load an index; the member arrays are memory-mapped (worker processes share the page cache)."""
    try:
        header, base = read_sidecar_header(path, name, MAGIC, VERSION, "zephon-webdataset")
        n, m, kb = int(header["samples"]), int(header["members"]), int(header["key_bytes"])
        arrays_end = base + 8 * (2 * (n + 1) + 2 * m) + 4 * (m + m % 2)
        check_sidecar_size(path, name, arrays_end + kb)

        def arr(dt: str, offset: int, count: int) -> np.ndarray:
            if count == 0:
                return np.zeros(0, dtype=dt)
            return np.memmap(path, dtype=dt, mode="r", offset=offset, shape=(count,))

        first = np.array(arr("<i8", base, n + 1))
        key_offset = np.array(arr("<i8", base + 8 * (n + 1), n + 1))
        pos = base + 16 * (n + 1)
        member_data = arr("<i8", pos, m)
        member_size = arr("<i8", pos + 8 * m, m)
        member_field = arr("<i4", pos + 16 * m, m)
        with open(path, "rb") as f:
            f.seek(arrays_end)
            keys = f.read(kb)
        ident = SourceIdentity.from_json(header["source"])
        return TarIndex(first, key_offset, member_data, member_size, member_field, keys, list(header["fields"]), ident)
    except ReaderError:
        raise
    except (OSError, ValueError, KeyError, TypeError, struct.error) as exc:
        raise ReaderError(f"{name}: cannot read index {path}: {type(exc).__name__}: {exc}") from None
