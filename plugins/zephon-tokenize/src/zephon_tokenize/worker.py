"""The tokenize worker: one ``encode_batch`` call per group of records.

The worker is what runs on threads or spawned processes, so it carries the tokenizer as its JSON
string (``Tokenizer.to_str()``) and rebuilds the Rust object lazily on first use in each process.
Encoding a whole group in one call lets ``tokenizers`` spread the group over its native threads
with the GIL released, instead of paying a Python round trip per document.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from zephon_core import ConfigError

Payload = dict[str, Any]


class TokenizeWorker:
    """Turns payloads with a text field into payloads with ``input_ids`` (int32) and ``num_tokens``.

    Args:
        tokenizer_json: the tokenizer, serialised with ``Tokenizer.to_str()``.
        field: the payload field that holds the text.
        bos_id: prepended to every document when not None.
        eos_id: appended to every document when not None.
        max_length: longest output in tokens (specials included); None for no limit.
        split_long_samples: cut a long document into several outputs of at most ``max_length``
            tokens instead of truncating it. The pieces come out consecutively, in order, each
            with the document's lineage. They carry no part-index field on purpose: without a
            packer after ``tokenize`` every payload field is stacked into the batch arrays that
            ``to_training()`` returns and the global batch hash covers, so a new field would change
            existing pipelines' data (``pack_sequences`` keeps only the token field, so it would be
            harmless there). An opt-in option naming such a field is the way to add one.
        keep_text: keep the text field in the output (it is dropped by default: it is usually the
            largest thing in the record and nothing after tokenization needs it).
        tokenizer: an already built tokenizer to use in this process (never pickled).
    """

    def __init__(
        self,
        tokenizer_json: str,
        field: str,
        bos_id: int | None,
        eos_id: int | None,
        max_length: int | None,
        split_long_samples: bool,
        keep_text: bool = False,
        tokenizer: Any = None,
    ) -> None:
        self.tokenizer_json = tokenizer_json
        self.field = field
        self.bos_id = bos_id
        self.eos_id = eos_id
        self.max_length = max_length
        self.split_long_samples = split_long_samples
        self.keep_text = keep_text
        self._tok = tokenizer
        self._lock = threading.Lock()

    # -- pickling: the JSON string travels, the Rust object is rebuilt on first use ---------------
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_tok"] = None
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def tokenizer(self) -> Any:
        """The tokenizer object, built from its JSON once per process."""
        tok = self._tok
        if tok is None:
            with self._lock:
                if self._tok is None:
                    from tokenizers import Tokenizer

                    self._tok = Tokenizer.from_str(self.tokenizer_json)
                tok = self._tok
        return tok

    # -- work ---------------------------------------------------------------------------------------
    def texts(self, payloads: list[Payload]) -> list[str]:
        """The text of every payload, with a clear error for a missing or non-string field."""
        field = self.field
        try:
            texts = [p[field] for p in payloads]
        except KeyError:
            bad = next(p for p in payloads if field not in p)
            raise ConfigError(f"tokenize: record has no field {field!r} (fields: {sorted(bad)}); pass field=") from None
        for t in texts:
            if not isinstance(t, str):
                raise ConfigError(f"tokenize: field {field!r} must hold str, got {type(t).__name__}")
        return texts

    def encode(self, texts: list[str]) -> list[np.ndarray]:
        """Token ids of each text, with BOS/EOS added and ``max_length`` truncation applied."""
        tok = self.tokenizer()
        encode_batch = getattr(tok, "encode_batch_fast", None) or tok.encode_batch
        encodings = encode_batch(texts, add_special_tokens=False)
        bos, eos = self.bos_id, self.eos_id
        head = 0 if bos is None else 1
        tail = 0 if eos is None else 1
        limit = None
        if self.max_length is not None and not self.split_long_samples:
            limit = self.max_length - head - tail
        out: list[np.ndarray] = []
        for enc in encodings:
            ids = enc.ids
            if limit is not None and len(ids) > limit:
                ids = ids[:limit]
            n = len(ids)
            arr = np.empty(n + head + tail, dtype=np.int32)
            if head:
                arr[0] = bos
            arr[head : head + n] = ids
            if tail:
                arr[-1] = eos
            out.append(arr)
        return out

    def __call__(self, payloads: list[Payload]) -> list[Any]:
        arrays = self.encode(self.texts(payloads))
        field, keep = self.field, self.keep_text
        if not self.split_long_samples:
            results: list[Any] = []
            for p, arr in zip(payloads, arrays):
                if not len(arr):
                    results.append(None)  # nothing to train on: dropped, lineage kept as a tombstone
                    continue
                out = dict(p) if keep else {k: v for k, v in p.items() if k != field}
                out["input_ids"] = arr
                out["num_tokens"] = len(arr)
                results.append(out)
            return results
        step = self.max_length
        assert step is not None
        many: list[list[Payload]] = []
        for p, arr in zip(payloads, arrays):
            base = dict(p) if keep else {k: v for k, v in p.items() if k != field}
            pieces = []
            for start in range(0, len(arr), step):
                piece = arr[start : start + step]
                out = dict(base)
                out["input_ids"] = piece
                out["num_tokens"] = len(piece)
                pieces.append(out)
            many.append(pieces)
        return many

    def count_tokens(self, payloads: list[Payload]) -> list[int]:
        """Tokens each payload turns into (all pieces together): what mixing in tokens counts."""
        return [len(a) for a in self.encode(self.texts(payloads))]
