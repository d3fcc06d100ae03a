"""Hook specifications: how plugins tell the kernel what they provide.

The ``zephon_register_*`` hooks receive a ``register`` callback and call it once per thing
provided, with keyword arguments (the llm pattern); :mod:`zephon_core.plugins` validates them. Two
hooks are not registrations: ``zephon_metrics`` receives running pipelines' metric snapshots, and
``zephon_register_commands`` adds subcommands to the ``zephon`` command line (the kernel's too).
The callbacks are typed by keyword-only protocols (:class:`Register`, ...), so an editor catches a
misspelled argument, a registration reads as a record, and new optional fields break no plugin.

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
"""The plugin contract this kernel implements, ``(major, minor)``: these hooks, the ``register``
callbacks and the operator, reader and runner protocols that plugins build on.

A plugin declares the one it was built for next to its hooks, as a literal (not a copy of this):
``ZEPHON_CONTRACT = (1, 0)``. The kernel loads a plugin of its own major and a minor not newer (a
minor only adds), and refuses any other, naming the plugin's distribution and both contracts. A new
major comes with a new ``zephon-core`` minor range, which plugins pin (``zephon-core>=0.1,<0.2``)."""


@runtime_checkable
class DeclaresContract(Protocol):
    """A plugin capability: it says which :data:`PLUGIN_CONTRACT` it was built for. When the kernel uses
    it: registering a plugin (entry point or object given in code) checks it as :data:`PLUGIN_CONTRACT`
    says; ``ZEPHON_CONTRACT = None``, or no attribute, declares nothing."""

    ZEPHON_CONTRACT: tuple[int, int] | None


Kind = Literal["reader", "operator", "runner", "demo", "validator", "observer"]
"""What a ``zephon_register_*`` hook registers (``zephon plugins --kind``); commands are not registry entries."""
KINDS: tuple[Kind, ...] = get_args(Kind)

Factory: TypeAlias = Callable[..., Any] | str
"""A callable, or a lazy ``"module:attr"`` string naming one (imported only when first used)."""

Detect: TypeAlias = Callable[[Any, str, list[str]], bool] | str
"""``detect(fs, root, files) -> bool``: does the dataset at ``root`` (an fsspec filesystem and a
path on it; ``files`` relative to ``root``) look like this format? Or a ``"module:attr"`` string."""

IndexBuilder: TypeAlias = Callable[[str], Any] | str
"""``index(path)``: build the format's index ahead of time (what ``zephon index PATH`` runs)."""

FieldCheck: TypeAlias = Callable[[str, Any], bool] | str
"""``check(field, value) -> bool``: a field validator's test of one field value (or ``"module:attr"``).

``field`` is the field's name (nested: ``"outer.inner"``, list items: ``"name[3]"``); ``value`` is
what the reader returned. The check returns False for a value not of the kind it decodes (it did
not look), True when it decoded it, and raises (``ValueError``, the message being the reason) when
a value of its kind does not decode. It runs on every field of every record, so deciding "not
mine" must cost next to nothing (a type test, a look at the first bytes)."""

Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
"""What :func:`zephon_register_commands` is handed: the ``zephon`` command's subparsers, to ``add_parser`` to."""


class CommandMain(Protocol):
    """What a subcommand runs (``p.set_defaults(fn=...)``, or a ``"module:attr"`` string naming it):
    ``args`` is the parsed command line, ``plugins`` the invocation's one manager. It returns the exit
    status; a :class:`~zephon_core.errors.ZephonError` it raises is printed as one
    ``zephon: error: ...`` line with status 2."""

    def __call__(self, args: argparse.Namespace, plugins: ZephonPluginManager) -> int: ...


class Observer(Protocol):
    """What an observer factory returns: it sees every microbatch one pipeline delivers. The pipeline
    calls :meth:`record` with each microbatch before handing it to the training loop (on that thread, so
    it must be quick: hand slow work to a thread of its own), ``flush()`` when the data runs out,
    ``flush(wait=True)`` in ``state_dict()`` (so what was observed before a checkpoint is safe) and
    :meth:`close` in ``close()``. An exception it raises reaches the training loop: an observer that
    cannot do its job stops the run rather than miss steps."""

    def record(self, batch: SampleBatch) -> None: ...
    def flush(self, wait: bool = False) -> None: ...
    def close(self) -> None: ...


class ObserverFactory(Protocol):
    """``factory(value, options=, source=, lanes_per_rank=)``: start observing one pipeline run.
    ``value`` is the option's value (``options(manifest=PATH)``: the path); ``options`` all the
    pipeline's :class:`~zephon_core.Options` (companions such as ``manifest_every_steps``);
    ``source`` the calibrated work source; ``lanes_per_rank`` the microbatches of a step on this rank."""

    def __call__(self, value: Any, *, options: Options, source: WorkSource, lanes_per_rank: int) -> Observer: ...


class StepProbe(Protocol):
    """The factory of the ``validate`` observer: ``probe(mode, fetch=, steps=, source=, kind_of=)``.
    Called before the engine starts: it probes the steps on the first records ``fetch`` reads from
    ``source`` (``kind_of(step)``: the registered kind it was built by, None for a user's own), warns
    or raises as ``mode`` says, and returns what ``stats()["validation"]`` shows."""

    def __call__(
        self, mode: str, *, fetch: Any, steps: Sequence[Any], source: WorkSource, kind_of: Callable[[Any], str | None]
    ) -> dict[str, Any]: ...


class Tunable(Protocol):
    """What an autotuner is handed: the engine's metrics, and ``resizable()``, the parallelism of each
    step whose workers ``resize`` may change (order-neutral: a reorder window restores sequence)."""

    def metrics(self) -> dict[str, Any]: ...
    def resizable(self) -> dict[str, int]: ...
    def resize(self, stage: str, parallelism: int) -> None: ...


class Tuner(Protocol):
    """What a :class:`TunerFactory` returns: started with the engine, stopped when it closes;
    ``report()`` is what ``metrics()["autotune"]`` shows."""

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
    """The factory of the ``metrics`` observer:
    ``factory(snapshot, stop, done, callback=, hook=, every_s=, labels=)``.

    ``hook`` is the plugin manager's ``zephon_metrics`` hook caller. It returns None when nothing
    listens (no callback and no hook implementation), so a pipeline nobody watches runs no thread."""

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
:class:`~zephon_core.errors.ConfigError` with a one-line reason), before any pipeline runs."""


class DemoMain(Protocol):
    """What a registered demo's factory is: a ``main`` that parses its own arguments. ``plugins`` is the
    ``zephon demo`` invocation's manager; pass it on to ``Pipeline`` and ``Dataset.from_path`` so the
    demo runs with exactly the plugins the command listed."""

    def __call__(self, argv: list[str], *, plugins: ZephonPluginManager) -> int: ...


class Register(Protocol):
    """The ``register`` callback of :func:`zephon_register_operators` and :func:`zephon_register_runners`."""

    def __call__(self, *, name: str, factory: Factory, description: str = "") -> None: ...


class ReaderRegister(Protocol):
    """The ``register`` callback of :func:`zephon_register_readers`. ``detect`` is optional only for
    readers that are never picked by auto-detection (the kernel's in-memory reader); every on-disk
    format should give one."""

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
    """Register format readers: ``register(name=, factory=, detect=, index=, description=)``.
    ``factory(path, **options)`` returns a :class:`~zephon_core.work.readers.Reader`; ``detect`` is a
    :data:`Detect`, ``index`` an :data:`IndexBuilder`. All three may be ``"module:attr"`` strings."""


@hookspec
def zephon_register_operators(register: Register) -> None:
    """Register operators: ``register(name=, factory=, description=)``. ``factory(*args, **kwargs)``
    returns an :class:`~zephon_core.ops.contract.Operator`; the name becomes a builder method,
    ``Pipeline(...).<name>(...)``."""


@hookspec
def zephon_register_runners(register: Register) -> None:
    """Register runners: ``register(name=, factory=, description=)``; ``factory()`` returns a runner."""


@hookspec
def zephon_register_demos(register: DemoRegister) -> None:
    """Register demos for ``zephon demo``: ``register(name=, factory=, description=)``.

    ``factory(argv, plugins=...)`` is a :class:`DemoMain` returning an exit code; ``zephon demo
    --name NAME`` runs it and ``zephon demo --list`` lists it."""


@hookspec
def zephon_register_validators(register: ValidatorRegister) -> None:
    """Register field validators for ``zephon index --validate``: ``register(name=, factory=, description=)``.

    A format reader only checks that records parse; a payload inside a field (an encoded image) is
    decoded later by an operator, so a corrupt one would fail the run hours in. A decoder plugin
    registers a validator that decodes, as cheaply as it can, what its operators would decode;
    ``--validate`` runs each on every field of every record and reports failures by file, shard,
    sample, field and reason. ``name`` is the kind of payload, as the summary says it
    (``"512 image field(s) decoded by zephon-vision"``); ``factory`` a :data:`FieldCheck`, run in
    worker processes (so a ``"module:attr"`` string or a module-level function)."""


@hookspec
def zephon_metrics(snapshot: dict[str, Any]) -> None:
    """Receive a running pipeline's metrics, every ``metrics_every_s`` seconds (option, default 10).

    ``snapshot`` is what ``Pipeline.metrics()`` returns (cumulative counters per step, ``"window"``:
    rates since the previous report), plus ``"rank"``, ``"world_size"`` and ``"final"`` (true for the
    last report, sent when the pipeline stops). It is called from a background thread, never the
    training loop's, so a slow dashboard cannot stall a step; an exception is warned about once and
    otherwise ignored. Nothing runs (no thread) unless a callback (``options(metrics_callback=fn)``)
    or an implementation of this hook exists."""


@hookspec
def zephon_register_observers(register: ObserverRegister) -> None:
    """Register pipeline observers by option name: ``register(name=, factory=, check=, description=)``.

    ``name`` is the :class:`~zephon_core.Options` field that turns the observer on: when set (not
    None), the pipeline calls the :class:`ObserverFactory` as it starts and hands every delivered
    microbatch to the :class:`Observer` it returns. ``check(value)`` (an :data:`OptionCheck`) runs
    when the option is set, so a bad value or a missing dependency fails at ``options()``, not once
    the run is going. Both may be ``"module:attr"`` strings. Three observers are not fed
    microbatches: ``validate`` (a :class:`StepProbe`), ``autotune`` (a :class:`TunerFactory`) and the
    kernel's ``metrics`` (a :class:`ReporterFactory`)."""


@hookspec
def zephon_register_commands(subparsers: Subparsers) -> None:
    """Add ``zephon`` subcommands: ``p = subparsers.add_parser(name, help=...)``, its arguments, then
    ``p.set_defaults(fn=...)`` with a :class:`CommandMain` (or a ``"module:attr"`` string naming one).

    Keep the hook cheap: it runs on every ``zephon`` invocation, so build only the parser here and
    import the command's code in ``fn`` (a lazy string does that). A command name two packages both
    add is an error naming them."""
