"""Default decoding of WebDataset's text fields: ``txt`` -> str, ``json`` -> object, ``cls`` -> int.

The default set is WebDataset's own basic one (``txt``/``text``/``transcript``, ``json``/``jsn``,
``cls``/``cls2``/``class``/``count``/``index``/``inx``/``id``).

Which decoder applies is decided by the field's last extension, as WebDataset's own decoders do
(``caption.txt`` is text, ``seg.png`` is an image). Images and everything else stay bytes: image
decoding is the expensive, parallel part of a pipeline and belongs in an operator
(``zephon-vision``'s ``decode_image``), not in the fetch stage. A field that does not decode is a
:class:`~zephon_core.RecordError`, so ``on_error="skip"`` can drop that sample.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from zephon_core import ConfigError

_TEXT = ("txt", "text", "transcript")
_JSON = ("json", "jsn")
_INT = ("cls", "cls2", "class", "count", "index", "inx", "id")

DEFAULT_DECODE = (*_TEXT, *_JSON, *_INT)
"""What WebDataset's own basic decoders decode (its ``"txt text transcript"``, ``"json jsn"`` and
``"cls cls2 class count index inx id"`` groups), so a sample reads the same as through webdataset."""


def _text(b: bytes) -> str:
    return b.decode("utf-8")


def _json(b: bytes) -> Any:
    return json.loads(b)


def _int(b: bytes) -> int:
    return int(b.decode("ascii").strip())


KINDS: dict[str, Callable[[bytes], Any]] = {
    **dict.fromkeys(_TEXT, _text),
    **dict.fromkeys(_JSON, _json),
    **dict.fromkeys(_INT, _int),
}
"""Extensions that can be decoded, and how (WebDataset's names for the same decoders)."""


def decoders(names: Iterable[str] | None) -> dict[str, Callable[[bytes], Any]]:
    """The decoders for the ``decode_text`` option (None, False or ``()``: keep every field as bytes)."""
    if names is None or names is False:
        return {}
    if isinstance(names, str):
        raise ConfigError(f"webdataset reader: decode_text must be a list of extensions, got {names!r}")
    out = {}
    for n in names:
        key = str(n).lower()
        if key not in KINDS:
            raise ConfigError(
                f"webdataset reader: decode_text cannot decode {n!r} (known: {sorted(KINDS)}); "
                "other fields stay bytes, decode them in an operator"
            )
        out[key] = KINDS[key]
    return out


def decoder_for(field: str, table: dict[str, Callable[[bytes], Any]]) -> Callable[[bytes], Any] | None:
    """The decoder of ``field`` by its last extension (``a.txt`` -> text), or None to keep bytes."""
    return table.get(field.rsplit(".", 1)[-1]) if table else None
