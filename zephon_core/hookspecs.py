"""Hook specifications: how plugins tell the kernel what they provide.

The ``zephon_register_*`` hooks call their ``register`` callback (typed by keyword-only protocols such
as :class:`Register`) once per thing provided; ``zephon_metrics`` and ``zephon_register_commands`` are
not registrations.

A plugin module looks like::

    from zephon_core.hookspecs import Register, hookimpl

    @hookimpl
    def zephon_register_operators(register: Register) -> None:
        register(name="dedupe", factory="zephon_dedupe.operator:Dedupe", description="drop repeats")
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias, get_args, runtime_checkable

import pluggy

if TYPE_CHECKING:
    import argparse
    import threading

    from zephon_core.options import Options
    from zephon_core.plugins import ZephonPluginManager
    from zephon_core.runtime.types import SampleBatch
    from zephon_core.work.contract import WorkSource

PROJECT = "zephon"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

PLUGIN_CONTRACT: tuple[int, int] = (1, 0)
"""The plugin contract this kernel implements, ``(major, minor)``: these hooks, the ``register`` callbacks
and the operator, reader and runner protocols. A plugin declares the one it was built for as a literal,
``ZEPHON_CONTRACT = (1, 0)``; the kernel loads one of its own major and a minor not newer (a minor only
adds) and refuses any other. A new major comes with a new ``zephon-core`` minor range, which plugins pin."""


@runtime_checkable
class DeclaresContract(Protocol):
    """A plugin capability: the :data:`PLUGIN_CONTRACT` it was built for, checked when the plugin is
    registered; ``ZEPHON_CONTRACT = None``, or no attribute, declares nothing."""

    ZEPHON_CONTRACT: tuple[int, int] | None


Kind = Literal["reader", "operator", "runner", "demo", "validator", "observer"]
"""What a ``zephon_register_*`` hook registers (``zephon plugins --kind``); commands are not registry entries."""
KINDS: tuple[Kind, ...] = get_args(Kind)

Factory: TypeAlias = Callable[..., Any] | str
"""A callable, or a lazy ``"module:attr"`` string naming one (imported only when first used)."""

Detect: TypeAlias = Callable[[Any, str, list[str]], bool] | str
"""``detect(fs, root, files) -> bool`` (fsspec filesystem, path, files relative to it): is it this format?"""

IndexBuilder: TypeAlias = Callable[[str], Any] | str
"""``index(path)``: build the format's index ahead of time (what ``zephon index PATH`` runs)."""

FieldCheck: TypeAlias = Callable[[str, Any], bool] | str
"""``check(field, value) -> bool``: a field validator's test of one field value (or ``"module:attr"``).
``field`` is its name (``"outer.inner"``, ``"name[3]"``). Return False for a value not of the kind it
decodes (cheaply: it runs on every field), True when it decoded it; raise ``ValueError`` when it fails."""

Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
"""What :func:`zephon_register_commands` is handed: the ``zephon`` command's subparsers, to ``add_parser`` to."""


class CommandMain(Protocol):
    """What a subcommand runs (``p.set_defaults(fn=...)``), returning the exit status; a
    :class:`~zephon_core.errors.ZephonError` it raises is printed as one ``zephon: error: ...`` line (status 2)."""

    def __call__(self, args: argparse.Namespace, plugins: ZephonPluginManager) -> int: ...


class Observer(Protocol):
    """What an observer factory returns: :meth:`record` gets each microbatch on the training loop's thread (be
    quick), ``flush()`` runs at the end of data and (``wait=True``) in ``state_dict()``, :meth:`close` in
    ``close()``. Its exceptions stop the run rather than miss steps."""

    def record(self, batch: SampleBatch) -> None: ...
    def flush(self, wait: bool = False) -> None: ...
    def close(self) -> None: ...


class ObserverFactory(Protocol):
    """``factory(value, options=, source=, lanes_per_rank=)``: start observing one pipeline run; ``value``
    is the option's value (``options(manifest=PATH)``: the path), ``options`` all the pipeline's options,
    ``source`` the calibrated work source, ``lanes_per_rank`` the microbatches of a step on this rank."""

    def __call__(self, value: Any, *, options: Options, source: WorkSource, lanes_per_rank: int) -> Observer: ...


class StepProbe(Protocol):
    """The ``validate`` observer's factory, ``probe(mode, fetch=, steps=, source=, kind_of=)``: it probes the
    steps on the first records before the engine starts and returns what ``stats()["validation"]`` shows."""

    def __call__(
        self, mode: str, *, fetch: Any, steps: Sequence[Any], source: WorkSource, kind_of: Callable[[Any], str | None]
    ) -> dict[str, Any]: ...


class Tunable(Protocol):
    """What an autotuner is handed: the engine's metrics, and the parallelism of each step it may resize."""

    def metrics(self) -> dict[str, Any]: ...
    def resizable(self) -> dict[str, int]: ...
    def resize(self, stage: str, parallelism: int) -> None: ...


class Tuner(Protocol):
    """What a :class:`TunerFactory` returns; ``report()`` is what ``metrics()["autotune"]`` shows."""

    def start(self) -> None: ...
    def stop(self) -> None: ...
    def report(self) -> dict[str, Any]: ...


class TunerFactory(Protocol):
    """The factory of the ``autotune`` observer: ``factory(engine, budget=)``, at most ``budget`` workers in all."""

    def __call__(self, engine: Tunable, *, budget: int) -> Tuner: ...


class Reporter(Protocol):
    """What a :class:`ReporterFactory` returns: reporting until the engine stops; ``close()`` waits for its end."""

    def close(self, timeout: float = 2.0) -> None: ...


class ReporterFactory(Protocol):
    """The ``metrics`` observer's factory, ``factory(snapshot, stop, done, callback=, hook=, every_s=, labels=)``
    (``hook``: the ``zephon_metrics`` hook caller); None when nothing listens, so no thread runs."""

    def __call__(
        self,
        snapshot: Callable[[], dict[str, Any]],
        stop: threading.Event,
        done: Callable[[], bool],
        *,
        callback: Callable[[dict[str, Any]], Any] | None,
        hook: Any,
        every_s: float,
        labels: dict[str, Any],
    ) -> Reporter | None: ...


OptionCheck: TypeAlias = Callable[[Any], None] | str
"""``check(value)``: validate an observer option's value when it is set (raise
:class:`~zephon_core.errors.ConfigError` with a one-line reason)."""


class DemoMain(Protocol):
    """A registered demo's factory: a ``main`` that parses its own arguments; pass ``plugins`` (the
    ``zephon demo`` invocation's manager) on to ``Pipeline`` and ``Dataset.from_path``."""

    def __call__(self, argv: list[str], *, plugins: ZephonPluginManager) -> int: ...


class Register(Protocol):
    """The ``register`` callback of :func:`zephon_register_operators` and :func:`zephon_register_runners`."""

    def __call__(self, *, name: str, factory: Factory, description: str = "") -> None: ...


class ReaderRegister(Protocol):
    """The ``register`` callback of :func:`zephon_register_readers`; every on-disk format should give
    ``detect`` (only readers never auto-detected, such as the in-memory one, may omit it)."""

    def __call__(
        self,
        *,
        name: str,
        factory: Factory,
        detect: Detect | None = None,
        index: IndexBuilder | None = None,
        description: str = "",
    ) -> None: ...


class DemoRegister(Protocol):
    """The ``register`` callback of :func:`zephon_register_demos`; ``factory`` is a :class:`DemoMain`."""

    def __call__(self, *, name: str, factory: DemoMain | str, description: str = "") -> None: ...


class ValidatorRegister(Protocol):
    """The ``register`` callback of :func:`zephon_register_validators`; ``factory`` is a :data:`FieldCheck`."""

    def __call__(self, *, name: str, factory: FieldCheck, description: str = "") -> None: ...


class ObserverRegister(Protocol):
    """The ``register`` callback of :func:`zephon_register_observers`; ``factory`` is an :class:`ObserverFactory`."""

    def __call__(
        self, *, name: str, factory: ObserverFactory | str, check: OptionCheck | None = None, description: str = ""
    ) -> None: ...


@hookspec
def zephon_register_readers(register: ReaderRegister) -> None:
    """Register format readers: ``register(name=, factory=, detect=, index=, description=)``, ``factory(path,
    **options)`` returning a :class:`~zephon_core.work.readers.Reader`, ``detect`` a :data:`Detect`."""


@hookspec
def zephon_register_operators(register: Register) -> None:
    """Register operators: ``register(name=, factory=, description=)``; ``factory(*args, **kwargs)`` returns
    an :class:`~zephon_core.ops.contract.Operator` and the name becomes ``Pipeline(...).<name>(...)``."""


@hookspec
def zephon_register_runners(register: Register) -> None:
    """Register runners: ``register(name=, factory=, description=)``; ``factory()`` returns a runner."""


@hookspec
def zephon_register_demos(register: DemoRegister) -> None:
    """Register demos for ``zephon demo``: ``register(name=, factory=, description=)``, factory a :class:`DemoMain`."""


@hookspec
def zephon_register_validators(register: ValidatorRegister) -> None:
    """Register field validators for ``zephon index --validate``: ``register(name=, factory=, description=)``.

    A reader only checks that records parse, so a decoder plugin registers a validator that cheaply decodes
    its payloads (a corrupt image would fail the run hours in). ``name`` is the payload kind, as the summary
    says it (``"512 image field(s) decoded by zephon-vision"``); ``factory`` a picklable :data:`FieldCheck`."""


@hookspec
def zephon_metrics(snapshot: dict[str, Any]) -> None:
    """Receive a running pipeline's metrics every ``metrics_every_s`` seconds (default 10): ``snapshot`` is
    ``Pipeline.metrics()`` plus ``"rank"``, ``"world_size"`` and ``"final"``. Called from a background
    thread, so a slow dashboard cannot stall a step; an exception is warned about once, then ignored."""


@hookspec
def zephon_register_observers(register: ObserverRegister) -> None:
    """Register pipeline observers by option name: ``register(name=, factory=, check=, description=)``.

    When the :class:`~zephon_core.Options` field ``name`` is set, the pipeline feeds every microbatch to the
    :class:`Observer` its :class:`ObserverFactory` returns; ``check`` is an :data:`OptionCheck`. Not fed:
    ``validate`` (:class:`StepProbe`), ``autotune`` (:class:`TunerFactory`), ``metrics`` (:class:`ReporterFactory`)."""


@hookspec
def zephon_register_commands(subparsers: Subparsers) -> None:
    """Add ``zephon`` subcommands: ``p = subparsers.add_parser(name, help=...)``, its arguments, then
    ``p.set_defaults(fn=...)`` with a :class:`CommandMain` or a ``"module:attr"`` string (keep the hook
    cheap: it runs on every invocation). A command name two packages add is an error naming them."""
