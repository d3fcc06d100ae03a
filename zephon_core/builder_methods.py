"""Builder methods for registered operators, with the factory's real signature and docstring.

Operators are plugins, so the class cannot spell them out: each operator of the default plugin manager becomes an
:class:`OperatorMethod` class attribute on first need (``help(Pipeline.tokenize)`` works, ``import zephon_core``
loads no plugin); on an instance, the method comes from the pipeline's own plugin manager. A misspelled keyword,
option or operator is an error naming the closest match, not a ``TypeError`` from deep inside the plugin."""

from __future__ import annotations

import difflib
import enum
import functools
import inspect
import threading
from collections.abc import Callable, Iterable
from typing import Any, ParamSpec, Protocol, TypeVar

from zephon_core.errors import ConfigError, PluginError
from zephon_core.plugins import Registration, ZephonPluginManager, default_plugin_manager

P = ParamSpec("P")
R = TypeVar("R")


class Unchanged(enum.Enum):
    """The type of :data:`UNCHANGED`, the default of every ``Pipeline.options`` parameter: a sentinel, because
    ``None`` is a meaningful value of several options (``timeout_s=None``: no limit)."""

    UNCHANGED = "unchanged"

    def __repr__(self) -> str:
        return "UNCHANGED"


UNCHANGED = Unchanged.UNCHANGED
"""``options(x=UNCHANGED)``, the default: keep the option's current value."""


class Builder(Protocol):
    """What an operator method needs from the pipeline it belongs to."""

    @property
    def plugins(self) -> ZephonPluginManager: ...

    def apply(self, kind: str, *args: Any, **kwargs: Any) -> Any: ...


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest candidate, or ``""`` when none is close."""
    close = difflib.get_close_matches(word, sorted(set(candidates)), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def factory_signature(factory: Any) -> inspect.Signature:
    """The parameters a caller passes to ``factory`` (a class's ``__init__`` without ``self``)."""
    try:
        return inspect.signature(factory)
    except (TypeError, ValueError):
        return inspect.Signature([inspect.Parameter("args", inspect.Parameter.VAR_POSITIONAL)])


def checked_options(fn: Callable[P, R]) -> Callable[P, R]:
    """Make a misspelled keyword of ``Pipeline.options`` a :class:`ConfigError` naming the closest option, where
    Python's own ``TypeError`` would not say which was meant; ``inspect.signature`` still shows the parameters."""
    sig = inspect.signature(fn)
    valid = [p.name for p in sig.parameters.values() if p.kind is p.KEYWORD_ONLY]

    @functools.wraps(fn)
    def options(*args: P.args, **kwargs: P.kwargs) -> R:
        if unknown := sorted(set(kwargs) - set(valid)):
            raise ConfigError(
                f"unknown option(s) {unknown}{did_you_mean(unknown[0], valid)}; valid options: {sorted(valid)}"
            )
        if len(args) > 1:
            raise ConfigError(f"options() takes keyword arguments only (e.g. options(lanes=4)), got {args[1:]!r}")
        return fn(*args, **kwargs)

    return options


def _operator_doc(reg: Registration, factory: Any) -> str:
    """What ``help()`` shows for an operator method: the class's and ``__init__``'s docstrings, and its origin."""
    init_doc = inspect.getdoc(getattr(factory, "__init__", None)) if inspect.isclass(factory) else None
    origin = f"Operator {reg.name!r}, registered by {reg.package} {reg.version}."
    docs = (inspect.getdoc(factory), init_doc, origin)
    return "\n\n".join(d for d in docs if d and d != inspect.getdoc(object.__init__))


def unknown_operator(builder: Builder, name: str, exc: PluginError) -> AttributeError:
    """The error for ``pipeline.NAME`` when no operator ``NAME`` is installed (with the closest name)."""
    try:
        registered = builder.plugins.registry.names("operator")
    except PluginError:
        registered = []
    names = set(builder_names(type(builder), operators=False)) | set(registered)
    return AttributeError(f"Pipeline has no method {name!r}{did_you_mean(name, names - {name})}: {exc}")


def builder_names(cls: type, *, operators: bool = True) -> list[str]:
    """The public names of a builder class, for suggestions (with ``operators``, its :class:`OperatorMethod` too)."""
    names = {n for k in cls.__mro__ for n, v in vars(k).items() if operators or not isinstance(v, OperatorMethod)}
    return sorted(n for n in names if not n.startswith("_"))


def builder_dir(builder: Builder, names: Iterable[str]) -> list[str]:
    """``dir(pipeline)``: ``names`` plus its own manager's operators, minus class-level ones that manager lacks."""
    registered = set(builder.plugins.registry.names("operator"))
    on_class = {n for n in names if isinstance(inspect.getattr_static(type(builder), n, None), OperatorMethod)}
    return sorted((set(names) - on_class) | registered)


def bound_method(builder: Builder, name: str) -> Callable[..., Any]:
    """``builder.NAME`` for operator ``NAME`` of the builder's own plugin manager, its arguments checked against the
    factory's signature first: a misspelled keyword or operator is an error naming the closest name."""
    try:
        reg = builder.plugins.registry.get("operator", name)
    except PluginError as exc:
        raise unknown_operator(builder, name, exc) from None
    factory = reg.load()
    sig = factory_signature(factory)

    @functools.wraps(builder.apply)
    def method(*args: Any, **kwargs: Any) -> Any:
        try:
            sig.bind(*args, **kwargs)
        except TypeError as exc:
            valid = [p.name for p in sig.parameters.values() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
            unknown = [k for k in kwargs if k not in sig.parameters]
            hint = did_you_mean(unknown[0], valid) if unknown else ""
            raise ConfigError(f"{name}(): {exc}{hint}; its parameters are: {', '.join(valid)}") from None
        return builder.apply(name, *args, **kwargs)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = _operator_doc(reg, factory)
    # functions take any attribute; inspect.signature() reads this one
    method.__signature__ = sig.replace(return_annotation="Pipeline")  # type: ignore[attr-defined]
    method.__wrapped__ = factory
    return method


def unbound_method(reg: Registration) -> Callable[..., Any]:
    """``Pipeline.NAME`` (class access): the operator's parameters after ``self``, for ``help()`` and editors;
    ``Pipeline.NAME(pipeline, ...)`` goes through ``pipeline``'s own plugin manager."""
    factory = reg.load()
    sig = factory_signature(factory)
    params = list(sig.parameters.values())
    # ``self`` first; positional-only when the operator has positional-only parameters (order rules)
    positional_only = any(p.kind is p.POSITIONAL_ONLY for p in params)
    kind = inspect.Parameter.POSITIONAL_ONLY if positional_only else inspect.Parameter.POSITIONAL_OR_KEYWORD
    name = reg.name

    def method(self: Any, /, *args: Any, **kwargs: Any) -> Any:
        return getattr(self, name)(*args, **kwargs)

    method.__name__ = name
    method.__qualname__ = f"Pipeline.{name}"
    method.__module__ = getattr(factory, "__module__", None) or method.__module__  # where help() sends readers
    method.__doc__ = _operator_doc(reg, factory)
    method.__signature__ = sig.replace(  # type: ignore[attr-defined]
        parameters=[inspect.Parameter("self", kind), *params], return_annotation="Pipeline"
    )
    return method


class OperatorMethod:
    """A registered operator as a class attribute of the builder (a non-data descriptor): class access resolves it once
    from the default plugin manager (for ``help()``), instance access each time from the instance's own manager."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._unbound: Callable[..., Any] | None = None

    def __get__(self, obj: Builder | None, owner: type | None = None) -> Callable[..., Any]:
        if obj is None:
            if self._unbound is None:
                self._unbound = unbound_method(default_plugin_manager().registry.get("operator", self.name))
            return self._unbound
        return bound_method(obj, self.name)

    def __repr__(self) -> str:
        return f"<operator method {self.name!r}>"


_install_lock = threading.RLock()  # re-entrant: a plugin module imported meanwhile may look at the class
_installing: set[type] = set()
_INSTALLED = "_zephon_operator_attributes"


def install_operator_attributes(cls: type) -> None:
    """Give ``cls`` an :class:`OperatorMethod` for every operator of the default plugin manager it does not define.

    Once per class, on first need: building the default manager scans the entry points, which ``import zephon_core``
    must not pay for. A broken plugin is raised when a pipeline is built with it, not here (it would break
    ``hasattr``). Another thread asking meanwhile waits for the attributes."""
    with _install_lock:
        if vars(cls).get(_INSTALLED) or cls in _installing:
            return
        _installing.add(cls)
        try:
            try:
                names = default_plugin_manager().registry.names("operator")
            except PluginError:
                names = []
            for name in names:
                if not name.startswith("_") and not any(name in vars(k) for k in cls.__mro__):
                    setattr(cls, name, OperatorMethod(name))
            setattr(cls, _INSTALLED, True)
        finally:
            _installing.discard(cls)


class OperatorMethods(type):
    """Metaclass of the builder: its plugin operators become class attributes on a class-level miss
    (``Pipeline.tokenize``) or ``dir(Pipeline)``, which ``help()`` and completion use."""

    def __getattr__(cls, name: str) -> Any:
        if name.startswith("_"):  # dunder probes (pickle, pytest, IPython) must stay cheap
            raise AttributeError(f"type object {cls.__name__!r} has no attribute {name!r}")
        if not vars(cls).get(_INSTALLED):
            install_operator_attributes(cls)
            if any(name in vars(k) for k in cls.__mro__):
                return getattr(cls, name)
        hint = did_you_mean(name, builder_names(cls))
        raise AttributeError(f"type object {cls.__name__!r} has no attribute {name!r}{hint}")

    def __dir__(cls) -> list[str]:
        install_operator_attributes(cls)
        return sorted(type.__dir__(cls))
