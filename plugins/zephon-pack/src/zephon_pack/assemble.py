"""The pack worker: build the row arrays for a group of rows with a few vectorised numpy calls.

A task is a list of rows, each a list of token slices. All rows of a task are assembled at once:
one concatenation (documents and padding), one ``repeat`` for segment ids and one for position
offsets, then a reshape to ``(rows, target_length)``. Output fields per row:

* ``input_ids`` (int32, ``target_length``): the documents in order, then ``pad_id``;
* ``position_ids`` (int32): restart at 0 at the start of every segment (each document slice in the
  row, and the padding run);
* ``document_ids`` (int32): segment index within the row, 0, 1, 2, … in order; **-1 marks padding**;
* ``num_padding`` (int32 scalar): padding tokens at the end of the row;
* with ``mask_field`` set, that field too (uint8, ``target_length``): the documents' token-aligned
  mask (e.g. ``tokenize_chat``'s ``loss_mask``) as 0/1, and 0 on padding. Without it rows have
  exactly the four fields above, so existing pipelines' batches (and their hashes) are unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True, slots=True)
class PackWorker:
    """Pure function from a list of rows (lists of token slices) to row payloads."""

    target_length: int
    pad_id: int
    mask_field: str | None = None
    """Set when the rows' slices are :class:`~zephon_pack.algorithms.Masked` pairs (ids and mask)."""

    def __call__(self, rows: list[list[Any]]) -> list[dict[str, Any]]:
        L = self.target_length
        masked = self.mask_field is not None
        parts: list[Any] = []
        masks: list[Any] = []
        lens: list[int] = []
        seg: list[int] = []
        padding: list[int] = []
        for row in rows:
            fill = 0
            for j, s in enumerate(row):
                n = len(s)
                if masked:
                    parts.append(s.ids)
                    masks.append(s.mask)
                else:
                    parts.append(s)
                lens.append(n)
                seg.append(j)
                fill += n
            pad = L - fill
            if pad < 0:
                raise ValueError(f"pack_sequences: a row holds {fill} tokens, more than target_length={L}")
            if pad:
                parts.append(np.full(pad, self.pad_id, dtype=np.int32))
                if masked:
                    masks.append(np.zeros(pad, dtype=np.uint8))
                lens.append(pad)
                seg.append(-1)
            padding.append(pad)
        n_rows = len(rows)
        ids = np.concatenate(parts).astype(np.int32, copy=False).reshape(n_rows, L)
        lengths = np.asarray(lens, dtype=np.int64)
        starts = np.cumsum(lengths) - lengths
        pos = (np.arange(n_rows * L, dtype=np.int64) - np.repeat(starts, lengths)).astype(np.int32).reshape(n_rows, L)
        doc = np.repeat(np.asarray(seg, dtype=np.int32), lengths).reshape(n_rows, L)
        out = [
            {
                "input_ids": ids[i],
                "position_ids": pos[i],
                "document_ids": doc[i],
                "num_padding": np.int32(padding[i]),
            }
            for i in range(n_rows)
        ]
        if masked:
            assert self.mask_field is not None
            mask = (np.concatenate(masks) != 0).view(np.uint8).reshape(n_rows, L)
            for i, row_out in enumerate(out):
                row_out[self.mask_field] = mask[i]
        return out
