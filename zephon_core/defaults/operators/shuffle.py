"""``shuffle``: a per-lane shuffle buffer whose draws are hashes of record identity.

When a record arrives at a full buffer, the slot it replaces (and whose record leaves) is chosen by
``hash(seed, lane, record key)``. Nothing depends on a generator's running state, so the output
is the same whatever grouping, parallelism or restart produced the input. The buffer drains at
every flush sentinel, in an order that is also a hash of the keys.

``algorithm="block"`` instead fills a block of ``buffer_size`` records and lets it out whole, in hash
order (every record waits at most one block; the output is a permutation of each block of input).
``"block_warmup"`` does the same with blocks that start small and double up to ``buffer_size`` after
every flush (1/16, 1/8, ... of it), so the first batches of a run or a resume arrive sooner, at the
price of less mixing in the first blocks.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from zephon_core.errors import ConfigError
from zephon_core.hashing import stable_hash64, uniforms
from zephon_core.ops.contract import Accumulator, Emitted, Operator, Records, Traits


class _ShuffleAccumulator(Accumulator):
    def __init__(self, size: int, key: int, drain_key: int) -> None:
        self._size = size
        self._key = key
        self._drain_key = drain_key
        self._buf = Records.empty()

    def push(self, records: Records) -> list[Emitted]:
        buf, size = self._buf, self._size
        out = Records([], [], [], list(records.dropped))
        draws = (uniforms(self._key, records.keys) * size).astype(np.int64).tolist()
        for p, k, lin, j in zip(records.payloads, records.keys, records.lineage, draws):
            if len(buf.payloads) < size:
                buf.payloads.append(p)
                buf.keys.append(k)
                buf.lineage.append(lin)
                continue
            out.payloads.append(buf.payloads[j])
            out.keys.append(buf.keys[j])
            out.lineage.append(buf.lineage[j])
            buf.payloads[j], buf.keys[j], buf.lineage[j] = p, k, lin
        return [out] if (out.payloads or out.dropped) else []

    def flush(self) -> list[Emitted]:
        buf = self._buf
        if not buf.payloads:
            return []
        order = np.argsort(uniforms(self._drain_key, buf.keys), kind="stable").tolist()
        return [
            Records([buf.payloads[i] for i in order], [buf.keys[i] for i in order], [buf.lineage[i] for i in order])
        ]

    def state(self) -> Any:
        return {"buffered_keys": list(self._buf.keys)}


class _BlockShuffleAccumulator(Accumulator):
    def __init__(self, size: int, drain_key: int, warmup: bool) -> None:
        self._size = size
        self._drain_key = drain_key
        self._warmup = warmup
        self._block = self._first_block()
        self._buf = Records.empty()

    def _first_block(self) -> int:
        return max(1, self._size // 16) if self._warmup else self._size

    def _emit(self) -> Records:
        buf = self._buf
        order = np.argsort(uniforms(self._drain_key, buf.keys), kind="stable").tolist()
        self._buf = Records.empty()
        self._block = min(self._size, 2 * self._block)
        return Records([buf.payloads[i] for i in order], [buf.keys[i] for i in order], [buf.lineage[i] for i in order])

    def push(self, records: Records) -> list[Emitted]:
        out: list[Emitted] = [Records([], [], [], list(records.dropped))] if records.dropped else []
        buf = self._buf
        for p, k, lin in zip(records.payloads, records.keys, records.lineage):
            buf.payloads.append(p)
            buf.keys.append(k)
            buf.lineage.append(lin)
            if len(buf.payloads) >= self._block:
                out.append(self._emit())
                buf = self._buf
        return out

    def flush(self) -> list[Emitted]:
        out: list[Emitted] = [self._emit()] if self._buf.payloads else []
        self._block = self._first_block()
        return out

    def state(self) -> Any:
        return {"buffered_keys": list(self._buf.keys), "block": self._block}


ALGORITHMS = ("reservoir", "block", "block_warmup")


class Shuffle(Operator):
    """Shuffle records within each lane through a buffer of ``buffer_size`` records."""

    kind = "shuffle"
    traits = Traits(has_worker=False, stateful=True)

    def __init__(self, buffer_size: int, seed: int = 0, algorithm: str = "reservoir", **kw: Any) -> None:
        """Args:
        buffer_size: records held per lane (the reach of the shuffle).
        seed: seeds the hash draws.
        algorithm: ``"reservoir"`` (a record leaves when a later one takes its slot), ``"block"``
            (whole blocks of ``buffer_size`` let out permuted) or ``"block_warmup"`` (blocks growing
            to ``buffer_size`` after every flush); see the module docstring.
        """
        if not isinstance(buffer_size, int) or buffer_size < 1:
            raise ConfigError(f"shuffle: buffer_size must be an int >= 1, got {buffer_size!r}")
        if not isinstance(seed, int):
            raise ConfigError(f"shuffle: seed must be an int, got {seed!r}")
        if algorithm not in ALGORITHMS:
            raise ConfigError(f"shuffle: algorithm must be one of {list(ALGORITHMS)}, got {algorithm!r}")
        super().__init__(**kw)
        self.buffer_size = buffer_size
        self.seed = seed
        self.algorithm = algorithm

    def config(self) -> dict[str, Any]:
        extra = {} if self.algorithm == "reservoir" else {"algorithm": self.algorithm}
        return {"buffer_size": self.buffer_size, "seed": self.seed, **extra}

    def new_accumulator(self, lane: int) -> Accumulator:
        if self.algorithm != "reservoir":
            return _BlockShuffleAccumulator(
                self.buffer_size, stable_hash64("shuffle-drain", self.seed, lane), self.algorithm == "block_warmup"
            )
        return _ShuffleAccumulator(
            self.buffer_size,
            stable_hash64("shuffle", self.seed, lane),
            stable_hash64("shuffle-drain", self.seed, lane),
        )
