"""``decode_text``: bytes to text, the first step of most text pipelines, with the choices made explicit.

Readers hand back what the file holds: JSONL gives ``str`` already, Parquet ``binary`` columns,
WebDataset ``.txt`` members and LitData blobs give ``bytes``. ``decode_text`` turns one field into
``str`` with a named encoding and error policy, and optionally normalises newlines (``\\r\\n`` and
``\\r`` to ``\\n``, so Windows-written text tokenizes like the rest) and lower-cases. It is stateless
and runs on the workers, so it never changes which records land in which batch: only ``errors="skip"``
drops a record, deterministically (the record itself decides).
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass
from typing import Any

from zephon_core.defaults.operators.mapping import PassThrough
from zephon_core.errors import ConfigError
from zephon_core.ops.contract import Accumulator, Operator, Payload, Traits, WorkerFn, apply_each

ERRORS = ("strict", "replace", "ignore", "skip")


@dataclass(frozen=True, slots=True)
class _DecodeWorker:
    field: str
    out: str
    encoding: str
    errors: str
    newlines: bool
    lowercase: bool

    def one(self, payload: Payload) -> Payload | None:
        try:
            value = payload[self.field]
        except KeyError:
            raise KeyError(f"record has no field {self.field!r} (fields: {sorted(payload)})") from None
        if isinstance(value, (bytes, bytearray, memoryview)):
            try:
                text = bytes(value).decode(self.encoding, "strict" if self.errors == "skip" else self.errors)
            except UnicodeDecodeError as exc:
                if self.errors == "skip":
                    return None
                raise ValueError(
                    f"field {self.field!r} is not valid {self.encoding} at byte {exc.start} "
                    f"(decode_text errors='replace', 'ignore' or 'skip' accept such records)"
                ) from None
        elif isinstance(value, str):
            text = value
        else:
            raise TypeError(f"field {self.field!r} holds {type(value).__name__}, not bytes or str")
        if self.newlines and "\r" in text:
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        if self.lowercase:
            text = text.lower()
        return {**payload, self.out: text}

    def __call__(self, task: list[Payload]) -> list[Payload | None]:
        return apply_each(self.one, task)


class DecodeText(Operator):
    """Decode ``field`` from bytes to ``str`` (see the module docstring).

    Args:
        field: the field to decode (``str`` values pass through, still normalised).
        encoding: any codec Python knows (``"utf-8"``, ``"latin-1"``, ``"utf-16"``, ...).
        errors: ``"strict"`` (a record that does not decode stops the run, naming it), ``"replace"``
            (U+FFFD for bad bytes), ``"ignore"`` (drop bad bytes) or ``"skip"`` (drop the record).
        normalize_newlines: ``\\r\\n`` and ``\\r`` become ``\\n``.
        lowercase: lower-case the text.
        output_field: where the text goes (default: ``field`` itself).
    """

    kind = "decode_text"
    traits = Traits(fanout="one")

    def __init__(
        self,
        field: str = "text",
        encoding: str = "utf-8",
        errors: str = "strict",
        normalize_newlines: bool = True,
        lowercase: bool = False,
        output_field: str | None = None,
        **kw: Any,
    ) -> None:
        if not isinstance(field, str) or not field:
            raise ConfigError(f"decode_text: field must be a field name, got {field!r}")
        try:
            codecs.lookup(encoding)
        except (LookupError, TypeError):
            raise ConfigError(f"decode_text: unknown encoding {encoding!r}") from None
        if errors not in ERRORS:
            raise ConfigError(f"decode_text: errors must be one of {list(ERRORS)}, got {errors!r}")
        for name, flag in (("normalize_newlines", normalize_newlines), ("lowercase", lowercase)):
            if not isinstance(flag, bool):
                raise ConfigError(f"decode_text: {name} must be True or False, got {flag!r}")
        super().__init__(**kw)
        self.field = field
        self.output_field = output_field or field
        self.encoding = codecs.lookup(encoding).name
        self.errors = errors
        self.normalize_newlines = normalize_newlines
        self.lowercase = lowercase

    def config(self) -> dict[str, Any]:
        return {
            "field": self.field,
            "output_field": self.output_field,
            "encoding": self.encoding,
            "errors": self.errors,
            "normalize_newlines": self.normalize_newlines,
            "lowercase": self.lowercase,
        }

    def new_accumulator(self, lane: int) -> Accumulator:
        return PassThrough()

    def worker(self) -> WorkerFn:
        return _DecodeWorker(
            self.field, self.output_field, self.encoding, self.errors, self.normalize_newlines, self.lowercase
        )
