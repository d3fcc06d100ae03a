"""The builder: a work source, the fetch stage, a chain of operators and the batch stage, run for one rank.

``Pipeline(ws).map_transform(...).shuffle(...).batch(...).options(lanes=..., ...)`` only records
the definition; threads and processes start on first iteration. Any registered operator is
available as a builder method by its name, so installing ``zephon-tokenize`` adds ``.tokenize()``.
Fetch (first) and batch (last) are the kernel's own stages, configured with ``.fetch()`` and
``.batch()``; everything in between is an :class:`~zephon_core.ops.contract.Operator`.
"""

from __future__ import annotations

import collections
import copy
import dataclasses
import os
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal

from zephon_core import checkpoint as ckpt
from zephon_core.builder_methods import (
    UNCHANGED,
    OperatorMethods,
    Unchanged,
    bound_method,
    builder_dir,
    checked_options,
)
from zephon_core.errors import CheckpointError, ConfigError, PluginError, ZephonError
from zephon_core.manifest import GROUP_STEPS, ManifestWriter, RecordedIterator, require_pyarrow
from zephon_core.ops.contract import Lineage, Operator, Payload, Records, check_timeout
from zephon_core.ops.mapping import check_seed, rng_base, takes_rng
from zephon_core.plugins import ZephonPluginManager, default_plugin_manager
from zephon_core.runtime.batch import BatchSpec, Collate
from zephon_core.runtime.diagnose import Diagnosis, diagnose
from zephon_core.runtime.engine import Engine, StagePlan
from zephon_core.runtime.fetch import FETCH_TIMEOUT_S, FetchStage
from zephon_core.runtime.fusion import fuse
from zephon_core.runtime.lifecycle import PipelineIterator, started, stopped, weakly
from zephon_core.runtime.metrics import timed, window_over
from zephon_core.runtime.replay import LaneStart
from zephon_core.runtime.reporter import MIN_INTERVAL_S, MetricsReporter, start_reporter
from zephon_core.runtime.runners import Executor, Runner, runner_crosses_processes
from zephon_core.runtime.types import SampleBatch
from zephon_core.work.chunking import DEFAULT_FLUSH_EVERY, LEGACY_DEFAULT, ChunkSizing
from zephon_core.work.contract import (
    LaneBound,
    LaneStateful,
    Pointer,
    ReportsExhaustion,
    Steerable,
    TokenEstimated,
    TokenSized,
    Windowed,
    WorkSource,
    check_work_source,
    pointer_of,
    source_info,
)
from zephon_core.work.ids import CHUNK_BITS, dataset_of, split_sample_id
from zephon_core.work.lanes import LaneLayout
from zephon_core.work.prefetch import stop_prefetch, with_lookahead
from zephon_core.work.source import check_token_estimates
from zephon_core.work.steering import LeadGate, effect_chunks

VALIDATION_MODES = ("off", "warn", "strict")


def _dropped(plan: StagePlan) -> Executor | None:
    raise ZephonError("the pipeline was dropped while it started")


def check_validation_mode(mode: Any) -> str:
    """``options(validate=...)``: probe user-defined steps at start-up (see :mod:`zephon_core.validation`)."""
    if mode not in VALIDATION_MODES:
        raise ConfigError(f"option validate must be one of {list(VALIDATION_MODES)}, got {mode!r}")
    return str(mode)


@dataclasses.dataclass(frozen=True)
class Options:
    """Run options. Only ``lanes``, ``flush_every_k_chunks`` and ``lane_assignment``/``lane_seed`` change
    the data (they are in the fingerprint); rank, world size, runner, queue depth and timeouts are free
    to change between runs. ``lane_assignment="permute"`` deals each round of chunks to the lanes by a
    permutation seeded with ``lane_seed`` instead of chunk ``g`` to lane ``g mod lanes`` (see
    :mod:`zephon_core.work.lanes`).

    ``timeout_s`` is the default limit for one task of every step that does not set its own (None:
    no limit); fetch defaults to :data:`~zephon_core.runtime.fetch.FETCH_TIMEOUT_S`.
    ``autotune=True`` lets the pipeline raise the parallelism of whichever step limits throughput
    while it runs, within ``cpu_budget`` workers in all steps together (default: one per step plus one
    per CPU, so that even a small machine has room to move); the data is the same whatever it chooses.
    ``fuse`` (default True) lets consecutive per-record steps on the processes runner (fetch, then
    ``map_transform`` and operators built on it) run as one task in one pool, so records cross between
    processes once (:mod:`zephon_core.runtime.fusion`); ``fuse=False`` keeps each step's own pool
    and metrics. ``max_inflight_bytes`` bounds the bytes waiting in the queues between stages (records are also
    read in groups of at most 1/32 of it), so large records do not multiply memory by queue depths.

    Observability (none of it changes the data): ``trace`` records worker task spans for
    ``trace()``; ``metrics_callback`` receives a metrics snapshot every ``metrics_every_s`` seconds
    from a background thread (so do plugins implementing the ``zephon_metrics`` hook); ``manifest``
    names a folder (path or fsspec URL) where the samples of every delivered microbatch are
    recorded, written every ``manifest_every_steps`` rounds (see :mod:`zephon_core.manifest`; needs
    pyarrow).
    """

    lanes: int = 1
    dp_rank: int = 0
    dp_world_size: int = 1
    runner: str = "threads"
    flush_every_k_chunks: int | Literal["auto"] = "auto"
    queue_depth: int = 4
    timeout_s: float | None = None
    max_inflight_bytes: int | None = 128 * 2**20
    trace: bool = False
    autotune: bool = False
    cpu_budget: int | None = None
    metrics_callback: Callable[[dict[str, Any]], Any] | None = None
    metrics_every_s: float = 10.0
    manifest: str | os.PathLike[str] | None = None
    manifest_every_steps: int = GROUP_STEPS
    lane_assignment: str = "modulo"
    lane_seed: int = 0
    validate: str = "off"
    fuse: bool = True

    def __post_init__(self) -> None:
        check_validation_mode(self.validate)

    def check(self) -> None:
        """Validate every option (called by ``Pipeline.options``)."""
        check_timeout(self.timeout_s, "option")
        if not isinstance(self.fuse, bool):
            raise ConfigError(f"option fuse must be True or False, got {self.fuse!r}")
        self._validate_observability()
        c = self.cpu_budget
        if c is not None and (not isinstance(c, int) or isinstance(c, bool) or c < 1):
            raise ConfigError(f"option cpu_budget must be an int >= 1 (workers the autotuner may use), got {c!r}")
        b = self.max_inflight_bytes
        if b is not None and (not isinstance(b, int) or isinstance(b, bool) or b < 2**20):
            raise ConfigError(f"option max_inflight_bytes must be an int >= 1 MiB (or None: no byte bound), got {b!r}")
        if not isinstance(self.queue_depth, int) or isinstance(self.queue_depth, bool) or self.queue_depth < 1:
            raise ConfigError(f"option queue_depth must be an int >= 1, got {self.queue_depth!r}")
        k = self.flush_every_k_chunks
        if k != "auto" and (not isinstance(k, int) or isinstance(k, bool) or k < 1):
            raise ConfigError(
                f"option flush_every_k_chunks must be an int >= 1 or 'auto', got {k!r}: a checkpoint replays the current "
                "window, so without flushes one window would span the whole run and a resume would replay all of it"
            )
        self.layout()

    def _validate_observability(self) -> None:
        cb = self.metrics_callback
        if cb is not None and not callable(cb):
            raise ConfigError(f"option metrics_callback must be callable (snapshot dict -> None), got {cb!r}")
        every = self.metrics_every_s
        if isinstance(every, bool) or not isinstance(every, (int, float)) or not every >= MIN_INTERVAL_S:
            raise ConfigError(f"option metrics_every_s must be a number of seconds >= {MIN_INTERVAL_S}, got {every!r}")
        if self.manifest is not None:
            if not isinstance(self.manifest, (str, os.PathLike)):
                raise ConfigError(f"option manifest must be a folder path or URL, got {self.manifest!r}")
            require_pyarrow()  # fail when the option is set, not once the pipeline is running
        n = self.manifest_every_steps
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ConfigError(f"option manifest_every_steps must be an int >= 1, got {n!r}")

    def layout(self) -> LaneLayout:
        """The lanes and this rank's share of them (validated)."""
        return LaneLayout(self.lanes, self.dp_world_size, self.dp_rank, self.lane_assignment, self.lane_seed)


Step = FetchStage | Operator | BatchSpec


class Pipeline(metaclass=OperatorMethods):
    """Turns a work source into microbatches for one rank (see the module docstring).

    Args:
        source: what to train on: any :class:`~zephon_core.WorkSource`.
        plugins: the plugin manager to take operators and runners from; default
            :func:`~zephon_core.plugins.default_plugin_manager` (a fresh one with every installed plugin).
    """

    def __init__(self, source: WorkSource, *, plugins: ZephonPluginManager | None = None) -> None:
        self.source = check_work_source(source)
        self._plugins = plugins
        self._fetch = FetchStage()
        self._ops: list[Operator] = []
        self._batch: BatchSpec | None = None
        self._opts = Options()
        self._engine: Engine | None = None
        self._registered: dict[int, str] = {}  # id(operator) -> registered kind, for steps built by name
        self._validation: dict[str, Any] = {}
        self._active: WorkSource | None = None
        self._active_key: tuple[int, int | str] | None = None
        self._window_chunks = DEFAULT_FLUSH_EVERY  # flush_every_k_chunks resolved with the active source
        self._legacy_window: int | None = None  # K adopted from a release-0.1 checkpoint (see load_state_dict)
        self._starts: dict[int, LaneStart] = {}
        self._token_estimates: dict[str, float] | None = None
        self._skips: list[dict[str, int]] = []  # skip_global_steps log: {"step", "steps"}
        self._pending_skip = 0  # global steps still to discard when iteration starts
        self._closed = False
        self._metric_history: collections.deque[dict[str, Any]] = collections.deque()
        self._metrics_lock = threading.Lock()  # metrics() may be called from a dashboard's thread
        self._reporter: MetricsReporter | None = None
        self._manifest: ManifestWriter | None = None
        self._delivered: Iterator[SampleBatch] | None = None

    # -- building -------------------------------------------------------------------------------
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
        if name not in taken:
            return name
        k = 2
        while f"{name}_{k}" in taken:
            k += 1
        return f"{name}_{k}"

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

        Args:
            fn: the function (module-level, so process workers can import it). A parameter named
                ``rng`` receives a per-record ``numpy.random.Generator`` seeded from (``seed``, the
                step's name, the record's identity): augmentations stay deterministic everywhere.
            parallelism: workers.
            runner: where the workers run (default: the pipeline's runner).
            timeout_s: limit for one task (default: the pipeline's ``timeout_s`` option).
            name: the step's name in metrics and errors (default: the function's name).
            seed: seeds ``rng`` (only for functions that take one).
        """
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
        """Shuffle each lane through a buffer; draws are hashes of record identity.

        ``algorithm``: ``"reservoir"`` (default), ``"block"`` or ``"block_warmup"``
        (see :mod:`zephon_core.ops.shuffle`).
        """
        if algorithm == "reservoir":  # the fingerprint of a default shuffle stays what it was
            return self.apply("shuffle", buffer_size, seed)
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
        """End the pipeline with microbatches of ``microbatch_size`` rows from one lane each.

        ``drop_last=False`` delivers each lane's last rows as a final, smaller microbatch (see
        :class:`~zephon_core.runtime.batch.BatchSpec`).
        """
        self._check_mutable()
        if self._batch is not None:
            raise ConfigError("the pipeline already ends with batch(); call it once")
        self._batch = BatchSpec(
            microbatch_size, collate, parallelism=parallelism, runner=runner, timeout_s=timeout_s, drop_last=drop_last
        )
        return self

    def map_batch(self, fn: Callable[..., dict[str, Any]], *, name: str | None = None, seed: int = 0) -> Pipeline:
        """Apply ``fn`` to every collated microbatch (a dict of arrays in, a dict of arrays out).

        It runs in the batch stage's workers right after collation, on the batch stage's runner, so
        batch-level work (masking, mixing rows, casting) costs the training loop nothing. A function
        that declares ``rng`` gets a generator seeded from ``seed``, its name and the microbatch's
        identity: the same batch gets the same draws on any runner, world size or resume.
        """
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
        """Set run options: each keyword is the :class:`Options` field of that name; the ones not given
        keep their value. Invalid values fail here.

        The options are spelled out (rather than ``**kwargs``) so that editors complete them and type
        checkers flag ``options(lanse=4)`` or ``options(lanes="4")``; at run time a misspelled option
        is a :class:`~zephon_core.errors.ConfigError` naming the closest one.
        """
        # the first statement, so that locals() holds exactly the parameters
        given = {k: v for k, v in locals().items() if k != "self" and v is not UNCHANGED}
        self._check_mutable()
        opts = dataclasses.replace(self._opts, **given)
        opts.check()
        self.plugins.registry.get("runner", opts.runner)
        self._opts = opts
        return self

    def __getattr__(self, name: str) -> Callable[..., Pipeline]:
        """A builder method for each operator of this pipeline's plugin manager, with the operator's own
        signature and docstring (operators of the default manager are also class attributes, see
        :mod:`zephon_core.builder_methods`; this serves the others, e.g. of ``plugins=pm``)."""
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

    def definition(self) -> dict[str, Any]:
        """Everything that determines the data, as JSON (hashed into the checkpoint fingerprint)."""
        return {
            "source": self.source.describe(),
            "operators": [step.describe() for step in self.operators],
            "lanes": self._opts.lanes,
            **self._describe_window(),
            **({"lane_assignment": d} if (d := self._opts.layout().describe()) is not None else {}),
        }

    def _validate(self) -> BatchSpec:
        self._opts.check()
        if self._batch is None:
            raise ConfigError("the pipeline must end with .batch(microbatch_size=...)")
        for step in self.operators:
            self.plugins.registry.get("runner", step.runner or self._opts.runner)
        return self._batch

    # -- calibration ------------------------------------------------------------------------------
    def calibrate(self) -> dict[str, float] | None:
        """Freeze per-dataset tokens-per-sample estimates when the source mixes by tokens.

        Runs once, before the first chunk: the first operator that can count tokens
        (``Operator.estimate_tokens``) measures each dataset; the result is kept by the pipeline,
        used to turn token weights into sample weights, and stored in every checkpoint so a resumed
        run, on any world size, draws exactly the same samples. Estimates restored from a checkpoint
        or given to the source are kept as they are. Returns None when the source mixes by samples.

        Sources that size chunks in tokens (``token_estimates_use``: ``"required"`` for
        ``chunk_size="auto"``, ``"optional"`` for the default chunk size) are calibrated too; for
        ``"optional"`` a pipeline without a tokenizer simply gets None.
        """
        tokens = self.source.mixing_unit == "tokens"
        sized = self.source.token_estimates_use if isinstance(self.source, TokenSized) else None
        use = "required" if tokens else sized
        if use is None:
            return None
        if self._token_estimates is None:
            given = self.source.tokens_per_sample if isinstance(self.source, TokenEstimated) else None
            names = [d.name for d in self.source.datasets]
            if given is not None:
                self._token_estimates = check_token_estimates(given, names)
            else:
                for op in self._ops:
                    est = op.estimate_tokens(self.source.datasets)
                    if est is not None:
                        try:
                            self._token_estimates = check_token_estimates(est, names)
                        except ConfigError as exc:
                            raise PluginError(f"operator {op.name!r} gave bad token estimates: {exc}") from exc
                        break
                else:
                    if use != "required":
                        return None
                    need = "mixes by tokens" if tokens else "sizes chunks in tokens (chunk_size='auto')"
                    raise ConfigError(
                        f"the work source {need} but no operator can estimate tokens per sample: add a "
                        "tokenizer operator (e.g. .tokenize(...)) or give the source tokens_per_sample="
                    )
        return dict(self._token_estimates)

    def _window_setting(self) -> int | str:
        """``flush_every_k_chunks`` as set (or as adopted from a release-0.1 checkpoint)."""
        return self._legacy_window if self._legacy_window is not None else self._opts.flush_every_k_chunks

    def _describe_window(self) -> dict[str, Any]:
        """Definition entries for the window: the setting, and for ``"auto"`` the tokens it holds."""
        setting = self._window_setting()
        if setting != "auto":
            return {"flush_every_k_chunks": setting}
        return {"flush_every_k_chunks": "auto", "window_tokens": getattr(self.source, "window_tokens", None)}

    @property
    def flush_every(self) -> int:
        """Chunks per window, resolved (``flush_every_k_chunks="auto"`` sized from the token estimates:
        see :mod:`zephon_core.work.chunking`). Calibrates the pipeline if it was not yet."""
        self._active_source()
        return self._window_chunks

    def _resolve_window(self, configured: WorkSource) -> int:
        """``flush_every_k_chunks`` for ``configured`` (a source bound to its token estimates)."""
        setting = self._window_setting()
        if isinstance(setting, int):
            return setting
        return configured.flush_every_for_window() if isinstance(configured, ChunkSizing) else DEFAULT_FLUSH_EVERY

    def _active_source(self) -> WorkSource:
        key = (self._opts.lanes, self._window_setting())
        if self._active is None or self._active_key != key:
            self._active = self._configure(self.source, self.calibrate())
            self._active_key = key
        return self._active

    def _configure(self, source: WorkSource, estimates: dict[str, float] | None) -> WorkSource:
        """``source`` as this pipeline runs it: with the frozen token estimates when it uses them, and
        bound to the pipeline's lanes (``with_lanes``) and window (``with_window``) when it asks for
        them. Lanes and window are in the fingerprint already."""
        sized = isinstance(source, TokenSized) and source.token_estimates_use is not None
        if estimates is not None and (source.mixing_unit == "tokens" or sized):
            source = source.with_token_estimates(estimates)
        if isinstance(source, LaneBound):
            if self._opts.lane_assignment != "modulo":
                raise ConfigError(
                    f"option lane_assignment={self._opts.lane_assignment!r}: {type(source).__name__} draws each "
                    "lane's data from the lane's own stream, so there is no chunk order to deal out; use it "
                    "with StaticMixtureWorkSource"
                )
            source = source.with_lanes(self._opts.lanes)
        self._window_chunks = self._resolve_window(source)
        if isinstance(source, Windowed):
            source = source.with_window(self._window_chunks)
        return source

    def _feed_source(self, source: WorkSource, layout: LaneLayout) -> WorkSource:
        """What the feeder reads: ``source`` with reader prefetch, paced by the update lead if steerable."""
        fed = with_lookahead(source, layout.num_lanes)  # readers prefetch what the next chunks read
        lead = source.update_lead_windows if isinstance(source, Steerable) else None
        k = self._window_chunks
        if isinstance(lead, int) and k:
            fed = LeadGate(
                fed, layout, k, lead, weakly(self._resume_window, lambda lane: 0), weakly(self._stopping, lambda: True)
            )
        return fed

    def _resume_window(self, lane: int) -> int:
        """The window ``lane`` resumes from after its last delivered microbatch (the update anchor)."""
        eng = self._engine
        if eng is None:
            return self._starts.get(lane, LaneStart()).window
        return eng.mux.resume[lane].window

    def _stopping(self) -> bool:
        return self._closed or (self._engine is not None and self._engine.ctx.stop.is_set())

    # -- running --------------------------------------------------------------------------------
    def _executor(self, plan: StagePlan) -> Executor | None:
        if not plan.spec.traits.has_worker:
            return None
        fn = plan.spec.worker()
        if fn is None:
            raise PluginError(f"operator {plan.spec.name!r} declares a worker but worker() returned None")
        runner: Runner = self.plugins.registry.get("runner", plan.runner).load()()
        return runner.start(timed(fn), plan.parallelism, plan.spec.name)

    def describe_samples(self, lineage: list[Lineage]) -> str:
        """Names the source samples behind some lineage, for error messages."""
        ids = [sid for lin in lineage for sid in lin]
        source = self._active or self.source
        shown = []
        for sid in ids[:3]:
            try:
                p = pointer_of(source, sid)
                shard = source.datasets[dataset_of(sid)].shards[p.shard].id
                shown.append(f"{p.dataset}[shard {p.shard} ({shard}), index {p.index}]")
            except Exception:
                chunk, offset = split_sample_id(sid)
                shown.append(f"chunk {chunk} offset {offset}")
        more = f" and {len(ids) - 3} more" if len(ids) > 3 else ""
        return (", ".join(shown) + more) if shown else "(none)"

    def _crosses_processes(self, runner: str) -> bool:
        """Whether this pipeline's runner ``runner`` runs its workers in other processes (fusion, collation, diagnose)."""
        return runner_crosses_processes(runner, self.plugins)

    def _start(self) -> Engine:
        batch = self._validate()
        layout = self._opts.layout()
        source = self._active_source()
        info = source_info(source)
        for op in self._ops:
            op.setup(info)
        self._fetch.bind([d.name for d in source.datasets], [d.reader for d in source.datasets])
        if self._opts.validate != "off":
            self._validate_steps(source)
        runner, default_timeout = self._opts.runner, self._opts.timeout_s
        fetch_timeout = self._fetch.timeout_s or default_timeout or FETCH_TIMEOUT_S
        plans = [StagePlan(self._fetch, self._fetch.runner or runner, self._fetch.parallelism, fetch_timeout)]
        plans += [StagePlan(op, op.runner or runner, op.parallelism, op.timeout_s or default_timeout) for op in self._ops]
        if self._opts.fuse:
            plans = fuse(plans, StagePlan, self._crosses_processes)
        batch_runner = batch.runner or batch.default_runner(runner, self._crosses_processes)
        batch_plan = StagePlan(batch, batch_runner, batch.parallelism, batch.timeout_s or default_timeout)
        view = next((v for op in reversed(self._ops) if (v := op.training_view()) is not None), None)
        starts = {lane: self._starts.get(lane, LaneStart()) for lane in layout.owned}
        self._engine = Engine(
            self._feed_source(source, layout),
            self._fetch,
            plans,
            batch,
            batch_plan,
            layout,
            self._window_chunks,
            starts,
            weakly(self._executor, _dropped),
            weakly(self.describe_samples, lambda lineage: "(unknown: the pipeline was dropped)"),
            view,
            queue_depth=self._opts.queue_depth,
            max_inflight_bytes=self._opts.max_inflight_bytes,
            autotune_budget=(self._opts.cpu_budget or len(plans) + 1 + (os.cpu_count() or 1)) if self._opts.autotune else None,
        )
        if self._opts.trace:
            self._engine.record_trace()
        self._start_observers(self._engine, source, layout)
        return self._engine

    def _start_observers(self, engine: Engine, source: WorkSource, layout: LaneLayout) -> None:
        """The metrics reporter (when a callback or a ``zephon_metrics`` hook listens) and the manifest writer."""
        opts = self._opts
        self._delivered = engine
        if opts.manifest is not None:
            try:
                self._manifest = ManifestWriter(
                    opts.manifest, source, opts.dp_rank, opts.manifest_every_steps, layout.lanes_per_rank
                )
            except BaseException:
                engine.close()
                raise
            self._delivered = RecordedIterator(engine, self._manifest)
        self._reporter = start_reporter(
            engine.metrics,
            engine.ctx.stop,
            lambda: engine.finished,
            callback=opts.metrics_callback,
            hook=getattr(self.plugins.pm.hook, "zephon_metrics", None),
            every_s=opts.metrics_every_s,
            labels={"rank": opts.dp_rank, "world_size": opts.dp_world_size},
        )

    def __iter__(self) -> Iterator[SampleBatch]:
        if self._closed:
            raise ZephonError("the pipeline was closed; build a new Pipeline to iterate again")
        if self._engine is None:
            engine = self._start()
            started(self)
            self._discard(self._pending_skip)
            return PipelineIterator(self, engine if self._delivered is None else self._delivered)
        if self._engine.finished:
            raise ZephonError(
                "the pipeline has delivered all its data; build a new Pipeline (and load_state_dict() to resume) "
                "to iterate again"
            )
        return PipelineIterator(self, self._engine if self._delivered is None else self._delivered)

    def close(self) -> None:
        """Stop every thread and worker process of this pipeline; iterating it afterwards is an error.

        A pipeline that is dropped (with every iterator of it), or still running at interpreter exit,
        is closed too (:mod:`zephon_core.runtime.lifecycle`); the ``with`` block says when.
        """
        self._closed = True
        stopped(self)
        if self._engine is not None:
            self._engine.close()
        if self._reporter is not None:
            self._reporter.close()
        if self._manifest is not None:
            self._manifest.close()
        stop_prefetch(self._active or self.source)

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
        """This rank's lanes as plain JSON-compatible data (see :mod:`zephon_core.checkpoint`).

        With a manifest, what it has gathered is written first: every step before a checkpoint is on
        disk, and a run resumed from it delivers (and records) the later steps again.
        """
        if self._manifest is not None:
            self._manifest.flush(wait=True)
        opts = self._opts
        layout = opts.layout()
        if self._engine is not None:
            lane_states = self._engine.lane_states()
            next_lane = self._engine.next_lane
        else:
            lane_states = {}
            for lane in layout.owned:
                s = self._starts.get(lane, LaneStart())
                lane_states[lane] = {"window": s.window, "skip": s.skip, "delivered": s.delivered}
            next_lane = min(layout.owned, key=lambda x: (lane_states[x]["delivered"], x))
        definition = self.definition()
        delivered = [lane_states[lane]["delivered"] for lane in layout.owned]
        return {
            "schema": ckpt.SCHEMA,
            "version": ckpt.SCHEMA_VERSION,
            "fingerprint": ckpt.fingerprint(definition),
            "definition": definition,
            "num_lanes": opts.lanes,
            "rank": opts.dp_rank,
            "world_size": opts.dp_world_size,
            "step": min(delivered),
            "mid_round": max(delivered) != min(delivered),
            "source": (self._active or self.source).state_dict(),
            "calibration": {"tokens_per_sample": self._token_estimates},
            "multiplexer": {"next_lane": next_lane},
            "lanes": {str(lane): self._with_lane_source(lane, lane_states[lane]) for lane in layout.owned},
            "skipped_steps": {"log": [dict(s) for s in self._skips], "pending": self._pending_skip},
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Resume from a checkpoint taken on any world size (merge ranks with ``merge_checkpoints``).

        Everything is validated before anything changes: a rejected checkpoint leaves the pipeline
        as it was.
        """
        if self._engine is not None:
            raise CheckpointError("load_state_dict must be called before iterating the pipeline")
        state = ckpt.validate(state)
        undo = self._adopt_release_0_1_sizing(state)
        try:
            self._load_validated(state)
        except BaseException:
            undo()
            raise

    def _adopt_release_0_1_sizing(self, state: Mapping[str, Any]) -> Callable[[], None]:
        """Size chunks and windows as release 0.1 did when the checkpoint is of such a run and this
        pipeline leaves those settings at their defaults (which release 0.1 resolved differently).

        Only adopted when it makes the fingerprints equal, so a pipeline that differs in anything
        else is still refused with its differences. Returns what undoes it.
        """
        definition = state["definition"]
        if state["fingerprint"] == ckpt.fingerprint(self.definition()) or not isinstance(definition, Mapping):
            return lambda: None
        saved = (self.source, self._legacy_window, self._active, self._active_key)

        def undo() -> None:
            self.source, self._legacy_window, self._active, self._active_key = saved

        old_source = definition.get("source")
        changed = False
        if (
            isinstance(self.source, ChunkSizing)
            and self.source.chunk_setting is None
            and isinstance(old_source, Mapping)
            and old_source.get("chunk_size") == LEGACY_DEFAULT
        ):
            legacy = copy.copy(self.source)  # the caller's source is left as it was
            legacy.use_release_0_1_default()
            self.source = legacy
            changed = True
        if (
            self._opts.flush_every_k_chunks == "auto"
            and definition.get("flush_every_k_chunks") == DEFAULT_FLUSH_EVERY
            and "window_tokens" not in definition
        ):
            self._legacy_window = DEFAULT_FLUSH_EVERY
            changed = True
        if not changed or state["fingerprint"] != ckpt.fingerprint(self.definition()):
            undo()
            return lambda: None
        self._active = None
        return undo

    def _load_validated(self, state: Mapping[str, Any]) -> None:
        definition = self.definition()
        if state["fingerprint"] != ckpt.fingerprint(definition):
            diffs = ckpt.diff_definitions(state["definition"], definition) or ["(definitions differ)"]
            raise CheckpointError("checkpoint belongs to a different pipeline: " + "; ".join(diffs[:8]))
        if state.get("mid_round") and (state.get("world_size"), state.get("rank")) != (
            self._opts.dp_world_size,
            self._opts.dp_rank,
        ):
            raise CheckpointError(
                f"this checkpoint was taken in the middle of a round (rank {state.get('rank')} of "
                f"{state.get('world_size')}, after {state.get('step')} whole rounds): it can only resume the same rank "
                "of the same world size; take checkpoints at global-step boundaries to change world size"
            )
        layout = self._opts.layout()
        missing = [lane for lane in layout.owned if str(lane) not in state["lanes"]]
        if missing:
            raise CheckpointError(
                f"checkpoint has no state for lanes {missing} owned by rank {self._opts.dp_rank}: "
                "merge every rank's state_dict() with merge_checkpoints() first"
            )
        starts = {int(k): LaneStart.from_state(k, v) for k, v in state["lanes"].items()}
        estimates = self._checkpoint_estimates(state)
        skips = self._checkpoint_skips(state)
        probe = self._restored_source(state, estimates)
        self._check_positions(starts, layout, estimates, probe)
        source_state = dict(state.get("source") or {})
        source_state.pop("tokens_per_sample", None)
        self.source.load_state_dict(source_state)
        self._load_lane_sources(self.source, state)
        self._starts = starts
        self._token_estimates = estimates
        self._active = None
        self._skips, self._pending_skip = skips

    def _check_positions(
        self,
        starts: Mapping[int, LaneStart],
        layout: LaneLayout,
        estimates: dict[str, float] | None,
        restored: WorkSource | None = None,
    ) -> None:
        """Every lane's replay window must exist in this source (a window past the end would end the
        lane at once and silently lose its data). ``restored``: the source as the checkpoint leaves it."""
        source = self.source
        if estimates is not None and self.source.mixing_unit == "tokens":
            source = self.source.with_token_estimates(estimates)
        if restored is not None:
            source = restored
        k = self._resolve_window(source)
        for lane in layout.owned:
            s = starts[lane]
            if s.window == 0 and s.skip == 0:
                continue
            if s.window and not k:
                raise CheckpointError(f"checkpoint lane {lane}: window={s.window}, but this pipeline never flushes")
            first = layout.chunk(lane, s.first_chunk(k))
            if first >> CHUNK_BITS or source.chunk(first) is None:
                raise CheckpointError(
                    f"checkpoint lane {lane}: window {s.window} starts at chunk {first}, which is past the end of the "
                    "data: the checkpoint does not belong to this data (or was edited)"
                )

    def _checkpoint_estimates(self, state: Mapping[str, Any]) -> dict[str, float] | None:
        cal = state.get("calibration")
        est = cal.get("tokens_per_sample") if isinstance(cal, Mapping) else None
        if est is None:  # checkpoints of zephon-core 0.1 kept them with the source
            est = (state.get("source") or {}).get("tokens_per_sample")
        if est is None:
            return None
        try:
            return check_token_estimates(est, [d.name for d in self.source.datasets])
        except ConfigError as exc:
            raise CheckpointError(f"checkpoint calibration: {exc}") from exc

    # -- answers ----------------------------------------------------------------------------------
    def explain(self, batch: SampleBatch) -> list[list[Pointer]]:
        """Which source samples each row of ``batch`` was made from."""
        source = self._active_source()
        return [[pointer_of(source, sid) for sid in lin] for lin in batch.lineage]

    def datasets_of(self, batch: SampleBatch) -> list[list[str]]:
        """The dataset of every source sample behind each row of ``batch`` (read from the ids)."""
        names: Sequence[str] = [d.name for d in self.source.datasets]
        return [[names[dataset_of(sid)] for sid in lin] for lin in batch.lineage]

    def metrics(self, window_s: float = 10.0) -> dict[str, Any]:
        """A JSON-compatible snapshot of live metrics: cumulative counters per step, plus rates and
        fractions (worker busy, input wait, output blocked, consumer wait) over at least the last
        ``window_s`` seconds (since the start when the pipeline is younger or was not read that long
        ago: :func:`~zephon_core.runtime.metrics.window_over`). Reads do not reset one another: a
        ``diagnose()`` right after, or a dashboard's scrape, still sees its whole window.

        Returns an empty structure before the pipeline starts.
        """
        eng = self._engine
        if eng is None:
            return {"elapsed_s": 0.0, "stages": [], "source": {"chunks": 0}, "consumer": {}, "window": {}}
        with self._metrics_lock:
            snap = eng.metrics()
            window = window_over(self._metric_history, snap, window_s)
        return snap | {"window": window}

    def trace(self) -> dict[str, Any]:
        """Worker task spans recorded since the pipeline started, as a Chrome/Perfetto trace (JSON data).

        Recording is switched on by ``options(trace=True)``; it keeps the last 200,000 tasks per step.
        """
        if self._engine is None:
            raise ZephonError("trace() needs a running pipeline: iterate it first")
        return self._engine.trace()

    def diagnose(self, window_s: float = 10.0) -> Diagnosis:
        """Which step limits throughput, the evidence, and what to change (``str()`` is the sentence)."""
        if self._engine is None:
            raise ZephonError("diagnose() needs a running pipeline: iterate it first")
        return diagnose(self.metrics(window_s)["window"], self._crosses_processes)

    def _validate_steps(self, source: WorkSource) -> None:
        """``options(validate=...)``: probe the user-defined steps on the first records (see :mod:`zephon_core.validation`)."""
        from zephon_core import validation as v

        t0 = time.perf_counter()
        chunk = source.chunk(0)
        records = v.first_records(self._fetch, chunk) if chunk is not None else Records.empty()

        def user_defined(op: Operator) -> bool:
            kind = self._registered.get(id(op))
            return kind is None or kind in v.USER_FUNCTION_KINDS

        found = v.probe_pipeline(self._ops, records, user_defined)
        self._validation = {
            "mode": self._opts.validate,
            "records": len(records),
            "seconds": round(time.perf_counter() - t0, 4),
            "findings": [str(f) for f in found],
        }
        if found and self._opts.validate == "strict":
            raise ConfigError(
                "validate='strict': " + "; ".join(str(f) for f in found) + " (the conformance suite's rules, "
                "probed on the first records; see zephon_core.validation)"
            )
        for f in found:
            warnings.warn(str(f), v.ValidationWarning, stacklevel=3)

    def stats(self) -> dict[str, Any]:
        """Run facts: records left over in partial microbatches per lane when the data ended, and which
        dataset ran out at which draw in this rank's lanes (sources with an ``exhaustion_report``)."""
        eng = self._engine
        source = self._active or self.source
        report = source.exhaustion_report if isinstance(source, ReportsExhaustion) else None
        return {
            "leftover_records": dict(eng.leftover) if eng else {},
            "finished": bool(eng and eng.finished),
            "chunks_fed": eng.chunks_fed() if eng else 0,
            "exhausted": [str(e) for e in report(self._opts.layout().owned)] if report is not None else [],
            "skipped_records": self._skipped_records(),
            "validation": dict(self._validation),
        }

    def _skipped_records(self) -> dict[str, int]:
        """Records the readers skipped (``on_error="skip"``), per dataset, as read by this rank.

        A record of a window replayed after a resume is read (and counted) again.
        """
        eng = self._engine
        if eng is None or not eng.stages:
            return {}
        names = [d.name for d in self.source.datasets]
        dropped = eng.stages[0].metrics.dropped  # the fetch stage: a reader's skip is its only drop
        return {names[d] if 0 <= d < len(names) else "?": n for d, n in sorted(dropped.items())}

    # -- trainer-steered mixtures -------------------------------------------------------------------
    def update_mixture(self, weights: Mapping[str, float]) -> None:
        """Change the mixture from now on; call it at the same global step on every rank.

        Each lane applies the weights from the window ``update_lead_windows`` after the one it resumes
        from (see :mod:`zephon_core.work.steering`): a function of the global step only, so every
        runner, parallelism and world size sees the same batches. The update is recorded in the
        checkpoint. Needs a source with ``update_mixture`` (``ScheduledMixtureWorkSource``), a call
        between rounds (every lane of this rank has delivered as many microbatches), and windows
        (``flush_every_k_chunks > 0``).
        """
        source = self._active_source()
        if not isinstance(source, Steerable):
            raise ConfigError(
                f"{type(source).__name__} has a fixed mixture; use ScheduledMixtureWorkSource to change the mixture "
                "during a run (update_mixture)"
            )
        k = self._window_chunks
        if not k:
            raise ConfigError("update_mixture needs windows (flush_every_k_chunks > 0): updates take effect at windows")
        step = self._round_step("update_mixture")
        windows = {lane: self._resume_window(lane) for lane in self._opts.layout().owned}
        source.update_mixture(weights, effects=effect_chunks(windows, int(source.update_lead_windows), k), step=step)

    # -- deterministic skips ------------------------------------------------------------------------
    def skip_global_steps(self, n: int) -> None:
        """Discard the next ``n`` global steps' data, e.g. after restoring past a loss spike.

        Every rank calls it with the same ``n`` (at a global-step boundary): each lane drops its next
        ``n`` microbatches, which depends on the lane's data only, so the run continues exactly like
        an uninterrupted run from ``n`` steps later, whatever the world size. The skip is recorded in
        the checkpoint (``skipped_steps``); one taken before the discarding happened carries it as
        pending, and the resumed run discards those steps.
        """
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise ConfigError(f"skip_global_steps needs an int >= 0, got {n!r}")
        step = self._round_step("skip_global_steps")
        self._skips.append({"step": step, "steps": n})
        if self._engine is None:
            self._pending_skip += n
        else:
            self._discard(n)

    def _round_step(self, what: str) -> int:
        """The number of whole global steps this rank delivered; an error mid-round."""
        owned = self._opts.layout().owned
        if self._engine is not None:
            states = self._engine.lane_states()
            delivered = {int(states[lane]["delivered"]) for lane in owned}
        else:
            delivered = {self._starts.get(lane, LaneStart()).delivered for lane in owned}
        if len(delivered) > 1:
            raise ConfigError(
                f"{what} must be called between rounds (after a whole global step): this rank's lanes have "
                f"delivered {sorted(delivered)} microbatches"
            )
        return delivered.pop()

    def _discard(self, steps: int) -> None:
        """Consume ``steps`` whole rounds from the engine without handing them out."""
        engine = self._engine
        if engine is not None:
            for _ in range(steps * self._opts.layout().lanes_per_rank):
                if next(engine, None) is None:
                    break
        self._pending_skip = 0

    def _checkpoint_skips(self, state: Mapping[str, Any]) -> tuple[list[dict[str, int]], int]:
        """The skip log and pending skip of a checkpoint (checkpoints before issue 12 have neither)."""
        raw = state.get("skipped_steps") or {"log": [], "pending": 0}
        # JSON from the checkpoint: any shape until the checks below
        log: Any = raw.get("log") if isinstance(raw, Mapping) else None
        pending: Any = raw.get("pending") if isinstance(raw, Mapping) else None

        def count(v: Any) -> bool:
            return isinstance(v, int) and not isinstance(v, bool) and v >= 0

        entries_ok = isinstance(log, list) and all(
            isinstance(s, Mapping) and set(s) == {"step", "steps"} and all(count(v) for v in s.values()) for s in log
        )
        if not entries_ok or not count(pending):
            raise CheckpointError(
                f"checkpoint 'skipped_steps' must be {{'log': [{{'step', 'steps'}}, ...], 'pending': int}}, got {raw!r}"
            )
        return [dict(s) for s in log], pending

    # -- lane-scoped source state ---------------------------------------------------------------------
    def _with_lane_source(self, lane: int, entry: dict[str, Any]) -> dict[str, Any]:
        """A lane's checkpoint entry plus the source's part for that lane (merged by lane across ranks)."""
        source = self._active or self.source
        return dict(entry, source=source.lane_state_dict(lane)) if isinstance(source, LaneStateful) else entry

    def _load_lane_sources(self, source: WorkSource, state: Mapping[str, Any]) -> None:
        if isinstance(source, LaneStateful):
            source.load_lane_state_dicts({int(k): v.get("source") or {} for k, v in state["lanes"].items()})

    def _restored_source(self, state: Mapping[str, Any], estimates: dict[str, float] | None) -> WorkSource | None:
        """A configured copy of the source as the checkpoint leaves it (validating its state on the copy), or
        None when configuring gives the source itself (nothing to bind: the caller checks the source)."""
        probe = self._configure(self.source, estimates)
        if probe is self.source:
            return None
        source_state = dict(state.get("source") or {})
        source_state.pop("tokens_per_sample", None)
        probe.load_state_dict(source_state)
        self._load_lane_sources(probe, state)
        return probe
