"""Hook specifications: how plugins tell the kernel what they provide.

Every hook receives a ``register`` callback and calls it once per thing provided, with keyword
arguments (the llm pattern). Registration is validated in one place (:mod:`zephon_core.plugins`).
Factories may be given as lazy ``"module:attr"`` strings so ``import zephon_core`` stays cheap.
"""

from __future__ import annotations

from typing import Any

import pluggy

PROJECT = "zephon"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def zephon_register_readers(register: Any) -> None:
    """Register format readers: ``register(name=, factory=, detect=, description=)``.

    ``factory(path, **options)`` returns a :class:`~zephon_core.work.readers.Reader`.
    ``detect(fs, root, files)`` says whether a dataset folder looks like this format; ``files`` are
    paths relative to ``root``. Both may be ``"module:attr"`` strings.
    """


@hookspec
def zephon_register_operators(register: Any) -> None:
    """Register operators: ``register(name=, factory=, description=)``.

    ``factory(*args, **kwargs)`` returns an :class:`~zephon_core.ops.contract.Operator`; the name
    becomes a builder method, ``Pipeline(...).<name>(...)``.
    """


@hookspec
def zephon_register_runners(register: Any) -> None:
    """Register runners: ``register(name=, factory=, description=)``; ``factory()`` returns a runner."""
