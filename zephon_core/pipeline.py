"""The builder: a work source, the fetch stage, a chain of operators and the batch stage, run for one rank.

``Pipeline(ws).map_transform(...).shuffle(...).batch(...).options(lanes=..., ...)`` only records the definition;
threads and processes start on first iteration. Every registered operator is a builder method by its name."""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import importlib
import itertools
import os
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from zephon_core.answers import Answers
from zephon_core.binding import Binding
from zephon_core.builder_methods import (
    UNCHANGED,
    OperatorMethods,
    Unchanged,
    bound_method,
    builder_dir,
    checked_options,
)
from zephon_core.checkpoint.replay import LaneStart
from zephon_core.checkpointing import Checkpointing
from zephon_core.defaults.operators.mapping import check_seed, rng_base, takes_rng
from zephon_core.definition import Definition
from zephon_core.errors import ConfigError, PluginError, ZephonError
from zephon_core.hookspecs import Observer, Reporter
from zephon_core.ops.contract import Lineage, Operator, Payload
from zephon_core.options import VALIDATION_MODES, Options, check_validation_mode
from zephon_core.plugins import ZephonPluginManager, default_plugin_manager, install_hint
from zephon_core.runtime.batch import BatchSpec, Collate
from zephon_core.runtime.engine import Engine
from zephon_core.runtime.fetch import FetchStage
from zephon_core.runtime.lifecycle import PipelineIterator, started, stopped
from zephon_core.runtime.types import SampleBatch
from zephon_core.starting import Starting
from zephon_core.steering import Steering
from zephon_core.work.chunking import DEFAULT_FLUSH_EVERY
from zephon_core.work.contract import WorkSource, check_work_source
from zephon_core.work.lanes import LaneLayout
from zephon_core.work.prefetch import stop_prefetch

__all__ = ["VALIDATION_MODES", "Options", "Pipeline", "Step", "check_validation_mode"]

_T = TypeVar("_T")
Step = FetchStage | Operator | BatchSpec

PARTS: tuple[type, ...] = (Definition, Binding, Starting, Answers, Steering, Checkpointing)
"""The classes the rest of ``Pipeline`` is written in, one idea each, copied into it by :func:`_assembled`."""

if TYPE_CHECKING:  # the type checker sees the parts as bases, which is what they amount to

    class Shared:
        """What each part may use of the pipeline: its state (set in ``Pipeline.__init__``) and methods."""

        source: WorkSource
        _plugins: ZephonPluginManager | None
        _fetch: FetchStage
        _ops: list[Operator]
        _batch: BatchSpec | None
        _opts: Options
        _engine: Engine | None
        _registered: dict[int, str]  # id(operator) -> registered kind, for steps built by name
        _validation: dict[str, Any]
        _active: WorkSource | None
        _active_key: tuple[int, int | str] | None
        _window_chunks: int  # flush_every_k_chunks resolved with the active source
        _legacy_window: int | None  # K adopted from a release-0.1 checkpoint (see load_state_dict)
        _starts: dict[int, LaneStart]
        _token_estimates: dict[str, float] | None
        _skips: list[dict[str, int]]  # skip_global_steps log: {"step", "steps"}
        _pending_skip: int  # global steps still to discard when iteration starts
        _closed: bool
        _metric_history: collections.deque[dict[str, Any]]
        _metrics_lock: threading.Lock  # metrics() may be called from a dashboard's thread
        _reporter: Reporter | None
        _manifest: Observer | None
        _delivered: Iterator[SampleBatch] | None
        _labels: dict[str, Any]  # identity labels (see label())

        @property
        def plugins(self) -> ZephonPluginManager: ...
        @property
        def operators(self) -> list[Step]: ...
        def _check_mutable(self) -> None: ...
        def definition(self) -> dict[str, Any]: ...
        def _describe_window(self) -> dict[str, Any]: ...
        def _active_source(self) -> WorkSource: ...
        def _configure(self, source: WorkSource, estimates: dict[str, float] | None) -> WorkSource: ...
        def _resolve_window(self, configured: WorkSource) -> int: ...
        def _feed_source(self, source: WorkSource, layout: LaneLayout) -> WorkSource: ...
        def _resume_window(self, lane: int) -> int: ...
        def _adopt_release_0_1_sizing(self, state: Mapping[str, Any]) -> Callable[[], None]: ...
        def _crosses_processes(self, runner: str) -> bool: ...
        def describe_samples(self, lineage: list[Lineage]) -> str: ...

    class _Parts(Definition, Binding, Starting, Answers, Steering, Checkpointing): ...

else:
    _Parts = object


def _assembled(cls: type[_T]) -> type[_T]:
    """``cls`` with the methods and properties of :data:`PARTS` as its own attributes (its own win); copied, not
    inherited, so that ``help(Pipeline)``, ``inspect`` and the metaclass see one class based on ``object`` only."""
    for part in PARTS:
        for name, value in vars(part).items():
            if not (name.startswith("__") and name.endswith("__")) and name not in vars(cls):
                setattr(cls, name, value)
    return cls


@_assembled
class Pipeline(_Parts, metaclass=OperatorMethods):
    """Turns a work source into microbatches for one rank (see the module docstring).

    Args:
        source: what to train on: any :class:`~zephon_core.WorkSource`.
        plugins: the plugin manager to take operators and runners from (default: a fresh one with every plugin).
    """

    def __init__(self, source: WorkSource, *, plugins: ZephonPluginManager | None = None) -> None:
        self.source = check_work_source(source)
        self._plugins = plugins
        self._fetch = FetchStage()
        self._ops = []
        self._batch = None
        self._opts = Options()
        self._engine = None
        self._registered = {}
        self._validation = {}
        self._active, self._active_key = None, None
        self._window_chunks, self._legacy_window = DEFAULT_FLUSH_EVERY, None
        self._starts = {}
        self._token_estimates = None
        self._skips, self._pending_skip = [], 0
        self._closed = False
        self._metric_history, self._metrics_lock = collections.deque(), threading.Lock()
        self._reporter, self._manifest, self._delivered = None, None, None
        self._labels = {}

    @classmethod
    def from_recipe(
        cls,
        path: str | os.PathLike[str],
        overrides: Iterable[str] | dict[str, Any] = (),
        *,
        plugins: ZephonPluginManager | None = None,
    ) -> Pipeline:
        """The pipeline a recipe file (YAML or TOML) describes, validated first; ``overrides`` are
        ``"dotted.key=value"`` strings as ``zephon run --set`` takes them. Needs zephon-recipes."""
        try:
            recipes = importlib.import_module("zephon_recipes")  # by name: the kernel does not depend on it
        except ImportError:
            raise ConfigError(f"Pipeline.from_recipe needs zephon-recipes; {install_hint('zephon-recipes')}") from None
        pipeline: Pipeline = recipes.load_recipe(path, overrides, plugins=plugins)
        return pipeline

    @property
    def plugins(self) -> ZephonPluginManager:
        """The manager this pipeline builds from: the one passed in, else a fresh default (made once)."""
        if self._plugins is None:
            self._plugins = default_plugin_manager()
        return self._plugins

    def _make(self, kind: str, *args: Any, **kwargs: Any) -> Operator:
        factory = self.plugins.registry.get("operator", kind).load()
        op = factory(*args, **kwargs)
        if not isinstance(op, Operator):
            raise PluginError(f"operator factory {kind!r} returned {type(op).__name__}, not an Operator")
        self._registered[id(op)] = kind
        return op

    def _check_mutable(self) -> None:
        if self._engine is not None:
            raise ConfigError("the pipeline is already running; build a new Pipeline to change it")

    def add(self, op: Operator) -> Pipeline:
        """Append an operator instance (for operators you construct yourself)."""
        self._check_mutable()
        if not isinstance(op, Operator):
            raise ConfigError(f"add() needs an Operator, got {type(op).__name__}")
        if self._batch is not None:
            raise ConfigError(f"cannot add {op.name!r} after batch: batch must be the last step")
        if any(o is op for o in self._ops):
            raise ConfigError(f"operator {op.name!r} is already in this pipeline; build a new instance")
        op.name = self._unique_name(op.name)
        self._ops.append(op)
        return self

    def _unique_name(self, name: str) -> str:
        """``name``, numbered if another step already has it: metrics, errors and traces need one name per step."""
        taken = {"fetch", "batch", *(o.name for o in self._ops)}
        return next(n for n in itertools.chain([name], (f"{name}_{k}" for k in itertools.count(2))) if n not in taken)

    def apply(self, kind: str, *args: Any, **kwargs: Any) -> Pipeline:
        """Append the registered operator ``kind`` built with these arguments."""
        return self.add(self._make(kind, *args, **kwargs))

    def fetch(self, parallelism: int = 1, runner: str | None = None, timeout_s: float | None = None) -> Pipeline:
        """Configure the fetch stage (reading is often I/O bound: threads suit it)."""
        self._check_mutable()
        self._fetch = FetchStage(parallelism=parallelism, runner=runner, timeout_s=timeout_s)
        return self

    def map_transform(
        self,
        fn: Callable[[Payload], Payload | None],
        parallelism: int = 1,
        runner: str | None = None,
        timeout_s: float | None = None,
        name: str | None = None,
        seed: int = 0,
    ) -> Pipeline:
        """``fn(payload) -> dict | None`` on every record; ``None`` drops it.

        ``fn`` is module-level (process workers import it); a parameter named ``rng`` receives a per-record
        ``numpy.random.Generator`` seeded from (``seed``, the step's name, the record's identity), so augmentations
        stay deterministic everywhere. ``parallelism`` workers run on ``runner``, each task within ``timeout_s``
        (defaults: the pipeline's options); ``name`` names the step in metrics and errors (default: ``fn``'s name)."""
        kw: dict[str, Any] = {"seed": seed} if seed else {}
        return self.apply(
            "map_transform", fn, parallelism=parallelism, runner=runner, timeout_s=timeout_s, name=name, **kw
        )

    def flat_map(
        self,
        fn: Callable[[Payload], Iterable[Payload]],
        parallelism: int = 1,
        runner: str | None = None,
        timeout_s: float | None = None,
        name: str | None = None,
        seed: int = 0,
    ) -> Pipeline:
        """``fn(payload) -> iterable of dicts``: one record becomes zero or more (arguments as for map_transform)."""
        kw: dict[str, Any] = {"seed": seed} if seed else {}
        return self.apply("flat_map", fn, parallelism=parallelism, runner=runner, timeout_s=timeout_s, name=name, **kw)

    def stateful_transform(self, name: str, **kwargs: Any) -> Pipeline:
        """A custom n-to-m operator: ``init_state``, ``push``, ``flush``, ``transform``, ``parallelism``."""
        return self.apply("stateful_transform", name, **kwargs)

    def shuffle(self, buffer_size: int, seed: int = 0, algorithm: str = "reservoir") -> Pipeline:
        """Shuffle each lane through a buffer; draws are hashes of record identity. ``algorithm``: ``"reservoir"``
        (default), ``"block"`` or ``"block_warmup"`` (see :mod:`zephon_core.defaults.operators.shuffle`)."""
        return self.apply("shuffle", buffer_size, seed, algorithm=algorithm)

    def batch(
        self,
        microbatch_size: int,
        collate: Collate | None = None,
        parallelism: int = 1,
        runner: str | None = None,
        timeout_s: float | None = None,
        drop_last: bool = True,
    ) -> Pipeline:
        """End the pipeline with microbatches of ``microbatch_size`` rows from one lane each; ``drop_last=False``
        delivers each lane's last rows as a final, smaller one (:class:`~zephon_core.runtime.batch.BatchSpec`)."""
        self._check_mutable()
        if self._batch is not None:
            raise ConfigError("the pipeline already ends with batch(); call it once")
        self._batch = BatchSpec(
            microbatch_size, collate, parallelism=parallelism, runner=runner, timeout_s=timeout_s, drop_last=drop_last
        )
        return self

    def map_batch(self, fn: Callable[..., dict[str, Any]], *, name: str | None = None, seed: int = 0) -> Pipeline:
        """Apply ``fn`` to every collated microbatch (dict of arrays in and out) in the batch stage's workers, so
        batch-level work (masking, mixing rows, casting) costs the training loop nothing. A function that declares
        ``rng`` gets a generator seeded from ``seed``, its name and the microbatch's identity: the same draws on any
        runner, world size or resume."""
        self._check_mutable()
        if self._batch is None:
            raise ConfigError("map_batch works on collated microbatches: call batch(...) first")
        if not callable(fn):
            raise ConfigError(f"map_batch: fn must be callable, got {type(fn).__name__}")
        label: str = name or str(getattr(fn, "__name__", "map_batch"))
        seed = check_seed(seed, f"map_batch {label!r}")
        base = rng_base(seed, label) if takes_rng(fn, f"map_batch {label!r}") else None
        self._batch.add_map(fn, label, base)
        return self

    @checked_options
    def options(
        self,
        *,
        lanes: int | Unchanged = UNCHANGED,
        dp_rank: int | Unchanged = UNCHANGED,
        dp_world_size: int | Unchanged = UNCHANGED,
        runner: str | Unchanged = UNCHANGED,
        flush_every_k_chunks: int | Literal["auto"] | Unchanged = UNCHANGED,
        queue_depth: int | Unchanged = UNCHANGED,
        timeout_s: float | Unchanged | None = UNCHANGED,
        max_inflight_bytes: int | Unchanged | None = UNCHANGED,
        trace: bool | Unchanged = UNCHANGED,
        autotune: bool | Unchanged = UNCHANGED,
        cpu_budget: int | Unchanged | None = UNCHANGED,
        metrics_callback: Callable[[dict[str, Any]], Any] | Unchanged | None = UNCHANGED,
        metrics_every_s: float | Unchanged = UNCHANGED,
        manifest: str | os.PathLike[str] | Unchanged | None = UNCHANGED,
        manifest_every_steps: int | Unchanged = UNCHANGED,
        lane_assignment: str | Unchanged = UNCHANGED,
        lane_seed: int | Unchanged = UNCHANGED,
        validate: str | Unchanged = UNCHANGED,
        fuse: bool | Unchanged = UNCHANGED,
    ) -> Pipeline:
        """Set run options: each keyword is the :class:`Options` field of that name; the ones not given keep their
        value. Invalid values fail here. Spelled out (not ``**kwargs``) so that editors complete them and type
        checkers flag ``options(lanse=4)``; at run time a misspelled option is a ``ConfigError`` naming the closest."""
        given = {k: v for k, v in locals().items() if k != "self" and v is not UNCHANGED}  # first: only the parameters
        self._check_mutable()
        opts = dataclasses.replace(self._opts, **given)
        opts.check()
        self.plugins.registry.get("runner", opts.runner)
        self._opts = opts
        return self

    def __getattr__(self, name: str) -> Callable[..., Pipeline]:
        """A builder method for each operator of this pipeline's plugin manager (``zephon_core.builder_methods``)."""
        if name.startswith("_"):
            raise AttributeError(name)
        return bound_method(self, name)

    def __dir__(self) -> list[str]:
        return builder_dir(self, super().__dir__())

    @property
    def operators(self) -> list[Step]:
        """Every step in order: the fetch stage, the operators, and the batch stage once set."""
        return [self._fetch, *self._ops, *([self._batch] if self._batch is not None else [])]

    @property
    def batch_spec(self) -> BatchSpec | None:
        """The batch stage's configuration (None until ``.batch()`` is called)."""
        return self._batch

    @property
    def run_options(self) -> Options:
        return self._opts

    @property
    def token_estimates(self) -> dict[str, float] | None:
        """Tokens per sample per dataset, frozen at calibration (or restored from a checkpoint)."""
        return dict(self._token_estimates) if self._token_estimates is not None else None

    def __iter__(self) -> Iterator[SampleBatch]:
        if self._closed:
            raise ZephonError("the pipeline was closed; build a new Pipeline to iterate again")
        engine = self._engine
        if engine is None:
            engine = self._start()
            started(self)
            self._discard(self._pending_skip)
        elif engine.finished:
            raise ZephonError(
                "the pipeline has delivered all its data; build a new Pipeline (and load_state_dict() to resume) "
                "to iterate again"
            )
        return PipelineIterator(self, engine if self._delivered is None else self._delivered)

    def close(self) -> None:
        """Stop every thread and worker process of this pipeline; iterating it afterwards is an error. A pipeline
        dropped (with its iterators) or running at exit is closed too; the ``with`` block says when."""
        self._closed = True
        stopped(self)
        for running in (self._engine, self._reporter, self._manifest):
            if running is not None:
                running.close()
        stop_prefetch(self._active or self.source)

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()
