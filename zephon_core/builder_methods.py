"""Builder methods for registered operators, with the factory's real signature and docstring.

``Pipeline(ws).tokenize(...)`` exists once ``zephon-tokenize`` is installed. The method is made on
first use from the registered factory, so editors, ``help()`` and ``inspect.signature`` show the
operator's own parameters, and a misspelled keyword is an error that lists the valid ones (with the
closest match) instead of a ``TypeError`` from deep inside the plugin.
"""

from __future__ import annotations

import difflib
import functools
import inspect
from collections.abc import Callable
from typing import Any

from zephon_core.errors import ConfigError


def factory_signature(factory: Any) -> inspect.Signature:
    """The parameters a caller passes to ``factory`` (a class's ``__init__`` without ``self``)."""
    try:
        return inspect.signature(factory)
    except (TypeError, ValueError):
        return inspect.Signature([inspect.Parameter("args", inspect.Parameter.VAR_POSITIONAL)])


def check_arguments(name: str, sig: inspect.Signature, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Raise :class:`ConfigError` naming the operator when the arguments do not fit its signature."""
    try:
        sig.bind(*args, **kwargs)
    except TypeError as exc:
        valid = [p.name for p in sig.parameters.values() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        unknown = [k for k in kwargs if k not in sig.parameters]
        hint = ""
        if unknown:
            close = difflib.get_close_matches(unknown[0], valid, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigError(f"{name}(): {exc}{hint}; its parameters are: {', '.join(valid)}") from None


def make_method(name: str, factory: Any, apply: Callable[..., Any], returns: Any) -> Callable[..., Any]:
    """A bound-looking builder method for operator ``name`` built by ``factory``."""
    sig = factory_signature(factory)

    @functools.wraps(apply)
    def method(*args: Any, **kwargs: Any) -> Any:
        check_arguments(name, sig, args, kwargs)
        return apply(name, *args, **kwargs)

    method.__name__ = method.__qualname__ = name
    doc = inspect.getdoc(factory) or ""
    init_doc = inspect.getdoc(getattr(factory, "__init__", None)) if inspect.isclass(factory) else None
    method.__doc__ = "\n\n".join(d for d in (doc, init_doc) if d and d != inspect.getdoc(object.__init__))
    # functions take any attribute; inspect.signature() reads this one
    method.__signature__ = sig.replace(return_annotation=returns)  # type: ignore[attr-defined]
    method.__wrapped__ = factory
    return method
