"""Helpers for tests of ``pack_sequences``: the kernel's conformance suite on the packer, and accumulator probes.

Shipped with the plugin (like :mod:`zephon_core.testing`) so any test can import them, whatever
pytest's import mode; needs the ``testing`` extra (pytest, ``zephon-core[testing]``).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import pytest

from zephon_core import Records, Work
from zephon_core.conformance import OperatorConformance
from zephon_pack.checking import token_documents
from zephon_pack.operator import PackSequences


class PackConformance(OperatorConformance):
    """:class:`~zephon_core.conformance.OperatorConformance` on ``PackSequences``.

    The operator is ``PackSequences(target_length, algorithm=, allow_split=, num_open_bins=,
    **pack_options)``; a ``Test*`` subclass sets those class attributes (and may override the
    ``sample_records`` fixture: by default 480 token documents, as ``tokenize`` would give). Not
    collected itself.
    """

    __test__ = False
    target_length = 128
    algorithm = "wrap"
    allow_split: bool | None = None
    num_open_bins = 4
    pack_options: ClassVar[dict[str, Any]] = {}

    @pytest.fixture
    def operator_factory(self) -> functools.partial[PackSequences]:
        return functools.partial(
            PackSequences,
            self.target_length,
            algorithm=self.algorithm,
            allow_split=self.allow_split,
            num_open_bins=self.num_open_bins,
            **self.pack_options,
        )

    @pytest.fixture
    def sample_records(self) -> list[dict[str, Any]]:
        return token_documents(480, seed=7, mean=40, longest=400)  # token arrays, as tokenize would give


def push_lengths(acc: Any, lengths: Sequence[int], start: int = 0) -> list[Any]:
    """Push documents of the given lengths into a pack accumulator; returns what it emits.

    Document ``start + i`` (its key and its single source) holds ``lengths[i]`` ids counting up
    from ``1000 * (start + i)``, so every id names its document.
    """
    payloads = [{"input_ids": np.arange(n, dtype=np.int32) + 1000 * (start + i)} for i, n in enumerate(lengths)]
    keys = list(range(start, start + len(lengths)))
    return acc.push(Records(payloads, keys, [(k,) for k in keys]))


def row_fills(emitted: Sequence[Any]) -> list[list[int]]:
    """The lengths of the segments in every row of every emitted ``Work`` (other items skipped)."""
    return [[len(s) for s in row] for item in emitted if isinstance(item, Work) for row in item.task]
