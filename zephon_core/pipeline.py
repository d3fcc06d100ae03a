"""The builder: a work source plus a chain of operators, run for one data-parallel rank.

``Pipeline(ws).map_transform(...).shuffle(...).batch(...).options(lanes=..., ...)`` only records
the definition; threads and processes start on first iteration. Any registered operator is
available as a builder method by its name, so installing ``zephon-tokenize`` adds ``.tokenize()``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from zephon_core import checkpoint as ckpt
from zephon_core.errors import CheckpointError, ConfigError, PluginError
from zephon_core.ops.batch import Batch
from zephon_core.ops.contract import Lineage, Operator, Payload
from zephon_core.ops.fetch import Fetch
from zephon_core.plugins import ZephonPluginManager, get_plugin_manager
from zephon_core.runtime.engine import Engine, LaneStart, StagePlan
from zephon_core.runtime.runners import Executor
from zephon_core.runtime.types import SampleBatch
from zephon_core.work.source import Pointer, StaticMixtureWorkSource, split_sample_id


@dataclasses.dataclass(frozen=True)
class Options:
    """Run options. Only ``lanes`` and ``flush_every_k_chunks`` change the data (they are in the
    fingerprint); rank, world size, runner and queue depth are free to change between runs."""

    lanes: int = 1
    dp_rank: int = 0
    dp_world_size: int = 1
    runner: str = "threads"
    flush_every_k_chunks: int = 8
    queue_depth: int = 4

    def validate(self) -> None:
        for f in ("lanes", "dp_world_size", "queue_depth"):
            v = getattr(self, f)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ConfigError(f"option {f} must be an int >= 1, got {v!r}")
        if not isinstance(self.flush_every_k_chunks, int) or self.flush_every_k_chunks < 0:
            raise ConfigError(
                f"option flush_every_k_chunks must be an int >= 0 (0 = never), got {self.flush_every_k_chunks!r}"
            )
        if self.lanes % self.dp_world_size:
            raise ConfigError(
                f"lanes={self.lanes} cannot be split evenly over dp_world_size={self.dp_world_size}: "
                "choose lanes as a multiple of every data-parallel size you will run on"
            )
        if not isinstance(self.dp_rank, int) or not 0 <= self.dp_rank < self.dp_world_size:
            raise ConfigError(f"dp_rank={self.dp_rank!r} is out of range for dp_world_size={self.dp_world_size}")

    def owned_lanes(self) -> list[int]:
        per = self.lanes // self.dp_world_size
        return list(range(self.dp_rank * per, (self.dp_rank + 1) * per))


class Pipeline:
    """Turns a work source into microbatches for one rank (see the module docstring).

    Args:
        source: what to train on.
        plugins: a plugin manager; default is the process-wide one (entry points loaded once).
    """

    def __init__(self, source: StaticMixtureWorkSource, *, plugins: ZephonPluginManager | None = None) -> None:
        if not isinstance(source, StaticMixtureWorkSource):
            raise ConfigError(f"Pipeline needs a work source, got {type(source).__name__}")
        self.source = source
        self._plugins = plugins
        self._fetch: Operator = self._make("fetch")
        self._ops: list[Operator] = []
        self._opts = Options()
        self._engine: Engine | None = None
        self._starts: dict[int, LaneStart] = {}

    # -- building -------------------------------------------------------------------------------
    @property
    def plugins(self) -> ZephonPluginManager:
        if self._plugins is None:
            self._plugins = get_plugin_manager()
        return self._plugins

    def _make(self, kind: str, *args: Any, **kwargs: Any) -> Operator:
        factory = self.plugins.registry.get("operator", kind).load()
        op = factory(*args, **kwargs)
        if not isinstance(op, Operator):
            raise PluginError(f"operator factory {kind!r} returned {type(op).__name__}, not an Operator")
        return op

    def _check_mutable(self) -> None:
        if self._engine is not None:
            raise ConfigError("the pipeline is already running; build a new Pipeline to change it")

    def add(self, op: Operator) -> Pipeline:
        """Append an operator instance (for operators you construct yourself)."""
        self._check_mutable()
        if not isinstance(op, Operator):
            raise ConfigError(f"add() needs an Operator, got {type(op).__name__}")
        if self._ops and isinstance(self._ops[-1], Batch):
            raise ConfigError(f"cannot add {op.name!r} after batch: batch must be the last operator")
        if isinstance(op, Fetch):
            raise ConfigError("fetch is implicit; configure it with .fetch(parallelism=..., runner=...)")
        self._ops.append(op)
        return self

    def apply(self, kind: str, *args: Any, **kwargs: Any) -> Pipeline:
        """Append the registered operator ``kind`` built with these arguments."""
        return self.add(self._make(kind, *args, **kwargs))

    def fetch(self, parallelism: int = 1, runner: str | None = None) -> Pipeline:
        """Configure the implicit fetch stage (reading is often I/O bound: threads suit it)."""
        self._check_mutable()
        self._fetch = self._make("fetch", parallelism=parallelism, runner=runner)
        return self

    def map_transform(
        self, fn: Callable[[Payload], Payload | None], parallelism: int = 1, runner: str | None = None
    ) -> Pipeline:
        """``fn(payload) -> dict | None`` on every record; ``None`` drops it."""
        return self.apply("map_transform", fn, parallelism=parallelism, runner=runner)

    def flat_map(
        self, fn: Callable[[Payload], Iterable[Payload]], parallelism: int = 1, runner: str | None = None
    ) -> Pipeline:
        """``fn(payload) -> iterable of dicts``: one record becomes zero or more."""
        return self.apply("flat_map", fn, parallelism=parallelism, runner=runner)

    def stateful_transform(self, name: str, **kwargs: Any) -> Pipeline:
        """A custom n-to-m operator: ``init_state``, ``push``, ``flush``, ``transform``, ``parallelism``."""
        return self.apply("stateful_transform", name, **kwargs)

    def shuffle(self, buffer_size: int, seed: int = 0) -> Pipeline:
        """Shuffle each lane through a buffer; draws are hashes of record identity."""
        return self.apply("shuffle", buffer_size, seed)

    def batch(
        self,
        microbatch_size: int,
        collate: Callable[..., Any] | None = None,
        parallelism: int = 1,
        runner: str | None = None,
    ) -> Pipeline:
        """End the pipeline with microbatches of ``microbatch_size`` rows from one lane each."""
        return self.apply("batch", microbatch_size, collate, parallelism=parallelism, runner=runner)

    def options(self, **kwargs: Any) -> Pipeline:
        """Set run options (see :class:`Options`); invalid values fail here."""
        self._check_mutable()
        valid = {f.name for f in dataclasses.fields(Options)}
        unknown = set(kwargs) - valid
        if unknown:
            raise ConfigError(f"unknown option(s) {sorted(unknown)}; valid options: {sorted(valid)}")
        opts = dataclasses.replace(self._opts, **kwargs)
        opts.validate()
        self.plugins.registry.get("runner", opts.runner)
        self._opts = opts
        return self

    def __getattr__(self, name: str) -> Callable[..., Pipeline]:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            self.plugins.registry.get("operator", name)
        except PluginError as exc:
            raise AttributeError(f"Pipeline has no method {name!r}: {exc}") from None
        return lambda *args, **kwargs: self.apply(name, *args, **kwargs)

    @property
    def operators(self) -> list[Operator]:
        return [self._fetch, *self._ops]

    @property
    def run_options(self) -> Options:
        return self._opts

    def definition(self) -> dict[str, Any]:
        """Everything that determines the data, as JSON (hashed into the checkpoint fingerprint)."""
        return {
            "source": self.source.describe(),
            "operators": [op.describe() for op in self.operators],
            "lanes": self._opts.lanes,
            "flush_every_k_chunks": self._opts.flush_every_k_chunks,
        }

    def _validate(self) -> None:
        self._opts.validate()
        if not self._ops or not isinstance(self._ops[-1], Batch):
            raise ConfigError("the pipeline must end with .batch(microbatch_size=...)")
        for op in self.operators:
            runner = op.runner or self._opts.runner
            self.plugins.registry.get("runner", runner)

    # -- running --------------------------------------------------------------------------------
    def _executor(self, plan: StagePlan) -> Executor | None:
        if not plan.op.traits.has_worker:
            return None
        fn = plan.op.worker()
        if fn is None:
            raise PluginError(f"operator {plan.op.name!r} declares a worker but worker() returned None")
        runner = self.plugins.registry.get("runner", plan.runner).load()()
        return runner.start(fn, plan.parallelism, plan.op.name)

    def describe_samples(self, lineage: list[Lineage]) -> str:
        ids = [sid for lin in lineage for sid in lin]
        shown = []
        for sid in ids[:3]:
            try:
                p = self.source.pointer(sid)
                shard = self.source.datasets[[d.name for d in self.source.datasets].index(p.dataset)].shards[p.shard].id
                shown.append(f"{p.dataset}[shard {p.shard} ({shard}), index {p.index}]")
            except Exception:
                shown.append(f"chunk {split_sample_id(sid)[0]} offset {split_sample_id(sid)[1]}")
        more = f" and {len(ids) - 3} more" if len(ids) > 3 else ""
        return (", ".join(shown) + more) if shown else "(none)"

    def _start(self) -> Engine:
        self._validate()
        lanes = self._opts.owned_lanes()
        for op in self.operators:
            op.prepare(self.source)
        fetch = self._fetch
        assert isinstance(fetch, Fetch)
        fetch.bind([d.name for d in self.source.datasets], [d.reader for d in self.source.datasets])
        plans = [StagePlan(op, op.runner or self._opts.runner, op.parallelism) for op in self.operators]
        view = next((v for op in reversed(self._ops) if (v := op.training_view()) is not None), None)
        starts = {lane: self._starts.get(lane, LaneStart()) for lane in lanes}
        self._engine = Engine(
            self.source,
            plans,
            lanes,
            self._opts.lanes,
            self._opts.flush_every_k_chunks,
            starts,
            self._executor,
            self.describe_samples,
            view,
            queue_depth=self._opts.queue_depth,
        )
        return self._engine

    def __iter__(self) -> Iterator[SampleBatch]:
        return self._engine if self._engine is not None else self._start()

    def close(self) -> None:
        """Stop every thread and worker process of this pipeline."""
        if self._engine is not None:
            self._engine.close()

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    # -- checkpointing --------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """This rank's lanes as plain JSON-compatible data (see :mod:`zephon_core.checkpoint`)."""
        opts = self._opts
        lanes = opts.owned_lanes()
        if self._engine is not None:
            lane_states = self._engine.lane_states()
            next_lane = self._engine.lanes[self._engine.pos]
        else:
            lane_states = {}
            for lane in lanes:
                s = self._starts.get(lane, LaneStart())
                lane_states[lane] = {"window": s.window, "skip": s.skip, "delivered": s.delivered}
            next_lane = min(lanes, key=lambda x: (lane_states[x]["delivered"], x))
        definition = self.definition()
        return {
            "schema": ckpt.SCHEMA,
            "version": ckpt.SCHEMA_VERSION,
            "fingerprint": ckpt.fingerprint(definition),
            "definition": definition,
            "num_lanes": opts.lanes,
            "rank": opts.dp_rank,
            "world_size": opts.dp_world_size,
            "source": self.source.state_dict(),
            "multiplexer": {"next_lane": next_lane},
            "lanes": {str(lane): lane_states[lane] for lane in lanes},
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume from a checkpoint taken on any world size (merge ranks with ``merge_checkpoints``)."""
        if self._engine is not None:
            raise CheckpointError("load_state_dict must be called before iterating the pipeline")
        state = ckpt.validate(state)
        self.source.load_state_dict(state.get("source") or {})
        definition = self.definition()
        if state["fingerprint"] != ckpt.fingerprint(definition):
            diffs = ckpt.diff_definitions(state["definition"], definition) or ["(definitions differ)"]
            raise CheckpointError("checkpoint belongs to a different pipeline: " + "; ".join(diffs[:8]))
        owned = self._opts.owned_lanes()
        missing = [lane for lane in owned if str(lane) not in state["lanes"]]
        if missing:
            raise CheckpointError(
                f"checkpoint has no state for lanes {missing} owned by rank {self._opts.dp_rank}: "
                "merge every rank's state_dict() with merge_checkpoints() first"
            )
        self._starts = {
            lane: LaneStart(ls["window"], ls["skip"], ls["delivered"])
            for lane, ls in ((int(k), v) for k, v in state["lanes"].items())
        }

    # -- answers ----------------------------------------------------------------------------------
    def explain(self, batch: SampleBatch) -> list[list[Pointer]]:
        """Which source samples each row of ``batch`` was made from."""
        return [[self.source.pointer(sid) for sid in lin] for lin in batch.lineage]

    def stats(self) -> dict[str, Any]:
        """Run facts: records left over in partial microbatches per lane when the data ended."""
        eng = self._engine
        return {"leftover_records": dict(eng.leftover) if eng else {}, "finished": bool(eng and eng.finished)}
