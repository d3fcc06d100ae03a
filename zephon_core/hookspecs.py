"""Hook specifications: how plugins tell the kernel what they provide.

The ``zephon_register_*`` hooks receive a ``register`` callback and call it once per thing
provided, with keyword arguments (the llm pattern). Registration is validated in one place
(:mod:`zephon_core.plugins`). Factories may be given as lazy ``"module:attr"`` strings so ``import
zephon_core`` stays cheap. Two hooks are not registrations: ``zephon_metrics`` receives running
pipelines' metric snapshots (for dashboards), and ``zephon_register_commands`` is handed the
``zephon`` command line's argparse subparsers to add subcommands to (the datasette/llm
``register_commands`` pattern: the kernel's own commands come through it too).

The callbacks are typed by the :class:`Register`, :class:`ReaderRegister`, :class:`DemoRegister`,
:class:`ValidatorRegister` and :class:`ObserverRegister` protocols, so a plugin author's editor and
type checker catch a misspelled or missing argument. Their parameters are keyword-only: a registration reads as a record, and the
kernel can add optional fields later without breaking any plugin.

A plugin module looks like::

    from zephon_core.hookspecs import Register, hookimpl

    @hookimpl
    def zephon_register_operators(register: Register) -> None:
        register(name="dedupe", factory="zephon_dedupe.operator:Dedupe", description="drop repeats")
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias, runtime_checkable

import pluggy

if TYPE_CHECKING:
    import argparse

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

A plugin declares the contract it was built for with a module (or class) attribute next to its
hooks, a literal rather than a copy of this value::

    ZEPHON_CONTRACT = (1, 0)

The kernel loads a plugin whose major equals its own and whose minor is not newer (a minor release
only adds), and refuses any other with an error naming the plugin's distribution and both
contracts. A plugin that declares nothing is loaded as before. The major changes only when a
plugin written for the previous one may break; ``zephon-core`` then moves to a new minor version
range (``0.1`` to ``0.2`` before 1.0), which plugins pin in their dependencies
(``zephon-core>=0.1,<0.2``), so pip rarely lets it come to this error.
"""


@runtime_checkable
class DeclaresContract(Protocol):
    """A plugin capability: it says which :data:`PLUGIN_CONTRACT` it was built for.

    When the kernel uses it: registering a plugin (an entry point's module, or an object given in
    code) that has ``ZEPHON_CONTRACT`` checks the declaration against :data:`PLUGIN_CONTRACT` and
    refuses a malformed one, another major or a newer minor; ``ZEPHON_CONTRACT = None`` or no
    attribute at all declares nothing.
    """

    ZEPHON_CONTRACT: tuple[int, int] | None


Kind = Literal["reader", "operator", "runner", "demo", "validator", "observer"]
"""What a ``zephon_register_*`` hook registers (``zephon plugins --kind``); commands are not registry entries."""
KINDS: tuple[Kind, ...] = ("reader", "operator", "runner", "demo", "validator", "observer")

Factory: TypeAlias = Callable[..., Any] | str
"""A callable, or a lazy ``"module:attr"`` string naming one (imported only when first used)."""

Detect: TypeAlias = Callable[[Any, str, list[str]], bool] | str
"""``detect(fs, root, files) -> bool``: does the dataset at ``root`` (an fsspec filesystem and a
path on it; ``files`` relative to ``root``) look like this format? Or a ``"module:attr"`` string."""

IndexBuilder: TypeAlias = Callable[[str], Any] | str
"""``index(path)``: build the format's index ahead of time (what ``zephon index PATH`` runs)."""


FieldCheck: TypeAlias = Callable[[str, Any], bool] | str
"""``check(field, value) -> bool``: a field validator's test of one field value (or ``"module:attr"``).

``field`` is the field's name (a nested dict's fields are ``"outer.inner"``, a list's items
``"name[3]"``); ``value`` is what the reader returned for it. The check returns False when the value
is not of the kind it decodes (it did not look), True when it decoded it, and raises an exception
whose message is the reason (``ValueError`` for a value that does not decode) when the value is of
its kind but does not decode. It runs on every field of every record, so deciding "not mine" must
cost next to nothing (a type test, a look at the first bytes).
"""


Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
"""What :func:`zephon_register_commands` is handed: the ``zephon`` command's subparsers, to ``add_parser`` to."""


class CommandMain(Protocol):
    """What a subcommand runs: ``p.set_defaults(fn=...)`` with this, or a ``"module:attr"`` string naming one.

    ``args`` is the parsed command line; ``plugins`` is the invocation's one manager (what ``zephon
    plugins`` lists). It returns the exit status; a :class:`~zephon_core.errors.ZephonError` it raises
    is printed as one ``zephon: error: ...`` line with status 2.
    """

    def __call__(self, args: argparse.Namespace, plugins: ZephonPluginManager) -> int: ...


class Observer(Protocol):
    """What an observer factory returns: it sees every microbatch one pipeline delivers.

    The pipeline calls :meth:`record` with each microbatch before handing it to the training loop
    (on the training loop's thread, so it must be quick: hand slow work to a thread of its own),
    ``flush()`` when the data runs out, ``flush(wait=True)`` in ``state_dict()`` (so what was
    observed before a checkpoint is safe when it returns) and :meth:`close` in ``close()``. An
    exception it raises reaches the training loop: an observer that cannot do its job stops the run
    rather than silently missing steps.
    """

    def record(self, batch: SampleBatch) -> None: ...

    def flush(self, wait: bool = False) -> None: ...

    def close(self) -> None: ...


class ObserverFactory(Protocol):
    """``factory(value, options=, source=, lanes_per_rank=)``: start observing one pipeline run.

    ``value`` is the option's value (``options(manifest=PATH)``: the path); ``options`` all the
    pipeline's :class:`~zephon_core.Options` (an observer may read its companion options,
    such as ``manifest_every_steps``, and ``dp_rank``); ``source`` the calibrated work source the run
    reads; ``lanes_per_rank`` the microbatches of one global step on this rank.
    """

    def __call__(self, value: Any, *, options: Options, source: WorkSource, lanes_per_rank: int) -> Observer: ...


class StepProbe(Protocol):
    """The factory of the ``validate`` observer: ``probe(mode, fetch=, steps=, source=, kind_of=)``.

    Called as the pipeline starts, before its engine: it probes the steps on the first records
    ``fetch`` reads from ``source`` (``kind_of(step)``: the registered kind it was built by, None for
    a user's own), warns or raises as ``mode`` says, and returns what ``stats()["validation"]`` shows.
    """

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


OptionCheck: TypeAlias = Callable[[Any], None] | str
"""``check(value)``: validate an observer option's value when it is set (raise
:class:`~zephon_core.errors.ConfigError` with a one-line reason), before any pipeline runs."""


class DemoMain(Protocol):
    """What a registered demo's factory is: a ``main`` that parses its own arguments.

    ``plugins`` is the manager of the ``zephon demo`` invocation; pass it on to ``Pipeline`` and
    ``Dataset.from_path`` so the demo runs with exactly the plugins the command listed.
    """

    def __call__(self, argv: list[str], *, plugins: ZephonPluginManager) -> int: ...


class Register(Protocol):
    """The ``register`` callback of :func:`zephon_register_operators` and :func:`zephon_register_runners`."""

    def __call__(self, *, name: str, factory: Factory, description: str = "") -> None: ...


class ReaderRegister(Protocol):
    """The ``register`` callback of :func:`zephon_register_readers`.

    ``detect`` is optional only for readers that are never picked by auto-detection (the kernel's
    in-memory reader); every on-disk format should give one.
    """

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

    ``factory(path, **options)`` returns a :class:`~zephon_core.work.readers.Reader`.
    ``detect(fs, root, files)`` says whether a dataset folder looks like this format; ``files`` are
    paths relative to ``root``. ``index(path)`` builds the format's index ahead of time. All three
    may be ``"module:attr"`` strings.
    """


@hookspec
def zephon_register_operators(register: Register) -> None:
    """Register operators: ``register(name=, factory=, description=)``.

    ``factory(*args, **kwargs)`` returns an :class:`~zephon_core.ops.contract.Operator`; the name
    becomes a builder method, ``Pipeline(...).<name>(...)``.
    """


@hookspec
def zephon_register_runners(register: Register) -> None:
    """Register runners: ``register(name=, factory=, description=)``; ``factory()`` returns a runner."""


@hookspec
def zephon_register_demos(register: DemoRegister) -> None:
    """Register demos for ``zephon demo``: ``register(name=, factory=, description=)``.

    ``factory(argv, plugins=...)`` is a :class:`DemoMain` returning an exit code; ``zephon demo
    --name NAME`` runs it and ``zephon demo --list`` lists it. A demo is registered like any other
    plugin, so one entry point group and one manager cover everything a package provides.
    """


@hookspec
def zephon_register_validators(register: ValidatorRegister) -> None:
    """Register field validators for ``zephon index --validate``: ``register(name=, factory=, description=)``.

    A format reader only checks that records parse; the payload inside a field (an encoded image,
    a video, audio) is decoded later by an operator, so a corrupt one would otherwise pass
    validation and fail the run hours in. A decoder plugin registers a validator that decodes, as
    cheaply as it can, the values its operators would decode. ``--validate`` runs every installed
    validator on every field of every record, reports each failure by file, shard, sample, field
    and reason, and counts what each one decoded: ``name`` is the kind of payload, as the summary
    line says it (``"512 image field(s) decoded by zephon-vision"``). ``factory`` is a
    :data:`FieldCheck`, called in the validation worker processes (so give a ``"module:attr"``
    string or a module-level function).
    """


@hookspec
def zephon_metrics(snapshot: dict[str, Any]) -> None:
    """Receive a running pipeline's metrics, every ``metrics_every_s`` seconds (option, default 10).

    ``snapshot`` is what ``Pipeline.metrics()`` returns (cumulative counters per step, ``"window"``:
    rates and fractions since the previous report), plus ``"rank"``, ``"world_size"`` and ``"final"``
    (true for the last report, sent when the pipeline stops). It is called from a background thread
    of the pipeline, never from the training loop, so a slow dashboard cannot stall a step; an
    exception is reported once as a warning and otherwise ignored. Implement it in a plugin to send
    every pipeline's figures to a dashboard; for one pipeline, ``options(metrics_callback=fn)`` is
    simpler. Nothing runs (no thread) unless a callback or an implementation of this hook exists.
    """


@hookspec
def zephon_register_observers(register: ObserverRegister) -> None:
    """Register pipeline observers by option name: ``register(name=, factory=, check=, description=)``.

    ``name`` is the :class:`~zephon_core.Options` field that turns the observer on: when
    ``options(<name>=value)`` is set (not None), the pipeline calls ``factory(value, options=,
    source=, lanes_per_rank=)`` as it starts and hands every delivered microbatch to the
    :class:`Observer` it returns. ``check(value)`` runs when the option is set, so a bad value, or a
    missing dependency of the observer, fails at ``options()`` rather than once the run is going.
    zephon-observe registers ``manifest`` this way (the provenance manifest); without it installed,
    ``options(manifest=...)`` is an error naming the package. Both may be ``"module:attr"`` strings.
    Two options are not read per microbatch and are called otherwise: ``validate``, a
    :class:`StepProbe` run before the engine starts, and ``autotune``, a :class:`TunerFactory`.
    """


@hookspec
def zephon_register_commands(subparsers: Subparsers) -> None:
    """Add ``zephon`` subcommands: ``p = subparsers.add_parser(name, help=...)``, its arguments, then
    ``p.set_defaults(fn=...)`` with a :class:`CommandMain` (or a ``"module:attr"`` string naming one).

    Every subcommand, the kernel's own too, comes through this hook, so ``zephon --help`` lists
    exactly what the installed packages bring. Keep the hook itself cheap: it runs on every ``zephon``
    invocation, so build only the parser here and import the command's code in ``fn`` (a lazy string
    does that). A command name two packages both add is an error naming them.
    """
