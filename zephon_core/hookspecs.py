"""Hook specifications: how plugins tell the kernel what they provide.

The ``zephon_register_*`` hooks receive a ``register`` callback and call it once per thing
provided, with keyword arguments (the llm pattern). Registration is validated in one place
(:mod:`zephon_core.plugins`). Factories may be given as lazy ``"module:attr"`` strings so ``import
zephon_core`` stays cheap. One hook is not a registration: ``zephon_metrics`` receives running
pipelines' metric snapshots (for dashboards).

The callbacks are typed by the :class:`Register`, :class:`ReaderRegister`, :class:`DemoRegister`
and :class:`ValidatorRegister` protocols, so a plugin author's editor and type checker catch a misspelled or
missing argument. Their parameters are keyword-only: a registration reads as a record, and the
kernel can add optional fields later without breaking any plugin.

A plugin module looks like::

    from zephon_core.hookspecs import Register, hookimpl

    @hookimpl
    def zephon_register_operators(register: Register) -> None:
        register(name="dedupe", factory="zephon_dedupe.operator:Dedupe", description="drop repeats")
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

import pluggy

if TYPE_CHECKING:
    from zephon_core.plugins import ZephonPluginManager

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
