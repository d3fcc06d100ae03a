"""Observers: what a pipeline attaches, through the ``zephon_register_observers`` hook, to watch its run.

The kernel writes no observability data itself: it finds an option's observer (or says what to install),
starts it and hands it every delivered microbatch; an observer's code is imported once its option is set."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from zephon_core.errors import ConfigError
from zephon_core.plugins import KNOWN_PROVIDERS, ZephonPluginManager, default_plugin_manager, install_hint, load_object

if TYPE_CHECKING:
    from zephon_core.hookspecs import Observer
    from zephon_core.plugins import Registration
    from zephon_core.runtime.types import SampleBatch
    from zephon_core.work.contract import WorkSource

GROUP_STEPS = 256
"""Default rounds per manifest part file (``options(manifest_every_steps=...)``): a kernel option's default."""


def observer_for(option: str, plugins: ZephonPluginManager | None = None) -> Registration:
    """The observer registered for ``option``, in ``plugins`` (default: the installed plugins); a
    :class:`ConfigError` if no installed package registers it (naming the package if first-party)."""
    registry = (plugins if plugins is not None else default_plugin_manager()).registry
    if option in registry.names("observer"):
        return registry.get("observer", option)
    package = KNOWN_PROVIDERS.get(("observer", option))
    where = install_hint(package) if package else "install the package that provides it"
    raise ConfigError(f"option {option}= needs an observer that no installed package registers; {where}")


def check_observer(option: str, value: Any) -> None:
    """Fail now, when ``options(<option>=value)`` is set, if no observer is installed or it rejects ``value``:
    among the installed plugins (an ``Options`` has none of its own; the pipeline looks in its own too)."""
    check = observer_for(option).extra.get("check")
    if check is not None:
        load_object(check)(value)


def start_observer(
    plugins: ZephonPluginManager, option: str, value: Any, *, options: Any, source: WorkSource, lanes_per_rank: int
) -> Observer:
    """Start the observer of ``option`` for one run (``factory(value, options=, source=, lanes_per_rank=)``)."""
    factory: Callable[..., Observer] = observer_for(option, plugins).load()
    return factory(value, options=options, source=source, lanes_per_rank=lanes_per_rank)


class RecordedIterator:
    """What iterating a pipeline with an observer returns: the engine's batches, each recorded first."""

    def __init__(self, batches: Iterator[SampleBatch], writer: Observer) -> None:
        self._batches, self.writer = batches, writer

    def __iter__(self) -> RecordedIterator:
        return self

    def __next__(self) -> SampleBatch:
        try:
            batch = next(self._batches)
        except StopIteration:
            self.writer.flush()
            raise
        self.writer.record(batch)
        return batch
