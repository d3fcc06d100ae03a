"""What a factory accepts, read from its signature and annotations: the one source for validation and the schema.

A recipe names operators, readers and sources by name and their arguments by keyword; nothing in a
plugin is written for recipes. So the accepted keywords, which are required and what type each
takes come from the factory itself: its ``inspect.signature`` (a class's ``__init__``, following
``**kwargs`` up the base classes, as ``MapTransform(fn, **kw)`` hands ``parallelism`` and ``runner``
to ``Operator.__init__``) and its annotations, evaluated in the factory's own module. An annotation
that cannot be evaluated (a name imported only for type checkers) is treated as "anything": the
factory itself still checks the value when the pipeline is built.
"""

from __future__ import annotations

import collections.abc
import enum
import inspect
import os
import re
import types
import typing
from dataclasses import dataclass, field
from typing import Any

from zephon_core.plugin_api import load_object

UNKNOWN: Any = object()
"""The annotation of a parameter whose annotation is missing or cannot be evaluated: any value passes."""

_REF = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


@dataclass(frozen=True)
class Param:
    """One keyword a factory accepts."""

    name: str
    required: bool
    annotation: Any
    text: str
    """The annotation as written (``"int | None"``), for messages."""
    default: Any = None


@dataclass
class Accepts:
    """Every keyword a factory accepts, and whether it takes others too (an unfollowed ``**kwargs``)."""

    params: dict[str, Param] = field(default_factory=dict)
    open: bool = False


def _namespace(fn: Any) -> dict[str, Any]:
    ns: dict[str, Any] = {**vars(typing), **vars(collections.abc), "os": os}
    target = inspect.unwrap(fn) if callable(fn) else fn
    ns.update(getattr(target, "__globals__", {}) or {})
    module = getattr(target, "__module__", None)
    if module:
        import sys

        mod = sys.modules.get(module)
        if mod is not None:
            ns.update(vars(mod))
    return ns


def _evaluate(text: Any, ns: dict[str, Any]) -> Any:
    if text is inspect.Parameter.empty:
        return UNKNOWN
    if not isinstance(text, str):
        return text
    try:
        return eval(text, ns, {})  # an annotation string, evaluated as typing.get_type_hints would
    except Exception:
        return UNKNOWN


def _text(annotation: Any) -> str:
    if annotation is inspect.Parameter.empty:
        return "any"
    if isinstance(annotation, str):
        return annotation
    return re.sub(r"\btyping\.|collections\.abc\.", "", getattr(annotation, "__name__", None) or str(annotation))


def _signature(fn: Any) -> inspect.Signature | None:
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


def accepts(factory: Any, *, skip: int = 0, exclude: tuple[str, ...] = ()) -> Accepts:
    """The keywords ``factory`` accepts (its first ``skip`` positional parameters and ``exclude`` left out).

    For a class, ``**kwargs`` of its ``__init__`` are followed to the next base class that defines
    ``__init__``, until one without ``**kwargs``; a function's ``**kwargs``, or one that reaches
    ``object``, make the factory open (other keywords are not refused).
    """
    out = Accepts()
    chain: list[Any] = []
    if inspect.isclass(factory):
        for klass in factory.__mro__:
            if "__init__" in vars(klass):
                chain.append(vars(klass)["__init__"])
        if not chain:
            return out
    else:
        chain = [factory]
    for depth, fn in enumerate(chain):
        if fn is object.__init__:
            out.open = True
            break
        sig = _signature(fn)
        if sig is None:
            out.open = True
            break
        ns = _namespace(fn)
        params = list(sig.parameters.values())
        if inspect.isclass(factory) and params and params[0].name == "self":
            params = params[1:]
        more = False
        for i, p in enumerate(params):
            if p.kind is p.VAR_KEYWORD:
                more = True
                continue
            if p.kind is p.VAR_POSITIONAL or (depth == 0 and i < skip) or p.name in exclude:
                continue
            if p.kind is p.POSITIONAL_ONLY or p.name in out.params:
                continue
            required = p.default is inspect.Parameter.empty and depth == 0
            out.params[p.name] = Param(
                p.name, required, _evaluate(p.annotation, ns), _text(p.annotation), None if required else p.default
            )
        if not more:
            break
        if not inspect.isclass(factory):
            out.open = True
            break
    else:
        out.open = True
    return out


def _args(tp: Any) -> tuple[Any, ...]:
    return typing.get_args(tp)


def _is_union(tp: Any) -> bool:
    return typing.get_origin(tp) in (typing.Union, types.UnionType)


def _options(tp: Any) -> list[Any]:
    """The members of a union (one member for anything else), without the kernel's ``UNCHANGED`` sentinel type."""
    members = list(_args(tp)) if _is_union(tp) else [tp]
    return [m for m in members if getattr(m, "__name__", "") != "Unchanged"]


def _is_callable_type(tp: Any) -> bool:
    origin = typing.get_origin(tp) or tp
    return origin is collections.abc.Callable or bool(isinstance(tp, type) and getattr(tp, "_is_protocol", False))


def wants_object(tp: Any) -> bool:
    """Whether a value of this annotation is a Python object a recipe names by ``"module:attr"``
    (a function, a collate, a class instance) rather than writes out, and a string is not itself valid."""
    if tp is UNKNOWN:
        return False
    members = _options(tp)
    if any(m is str or typing.get_origin(m) is typing.Literal for m in members):
        return False
    return any(_is_callable_type(m) or _is_object_class(m) for m in members)


def _is_object_class(tp: Any) -> bool:
    return (
        isinstance(tp, type)
        and tp.__module__ not in ("builtins", "collections.abc", "typing")
        and not issubclass(tp, (enum.Enum, os.PathLike))
    )


def is_reference(value: Any) -> bool:
    """``"module:attr"``."""
    return isinstance(value, str) and bool(_REF.match(value))


def conforms(value: Any, tp: Any) -> bool:
    """Whether ``value`` (as read from a recipe, references already loaded) fits annotation ``tp``."""
    if tp is UNKNOWN or tp is Any or tp is object or isinstance(tp, typing.TypeVar):
        return True
    if _is_union(tp):
        return any(conforms(value, m) for m in _options(tp))
    if tp is None or tp is type(None):
        return value is None
    origin = typing.get_origin(tp)
    if origin is typing.Literal:
        return any(value == a and type(value) is type(a) for a in _args(tp))
    if origin is typing.Annotated:
        return conforms(value, _args(tp)[0])
    if tp is bool:
        return isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if tp in (str, bytes):
        return isinstance(value, tp)
    if _is_callable_type(tp):
        return callable(value)
    target = origin or tp
    if target in (list, tuple, collections.abc.Sequence, collections.abc.Iterable, collections.abc.Collection):
        if not isinstance(value, (list, tuple)):
            return False
        args = _args(tp)
        if target is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
            return len(args) == len(value) and all(conforms(v, a) for v, a in zip(value, args))
        item = args[0] if args else UNKNOWN
        return all(conforms(v, item) for v in value)
    if target in (dict, collections.abc.Mapping, collections.abc.MutableMapping):
        if not isinstance(value, dict):
            return False
        args = _args(tp)
        if len(args) == 2:
            return all(conforms(k, args[0]) and conforms(v, args[1]) for k, v in value.items())
        return True
    if isinstance(tp, type):
        if issubclass(tp, os.PathLike):
            return isinstance(value, (str, os.PathLike))
        if issubclass(tp, enum.Enum):
            return isinstance(value, tp) or value in {m.value for m in tp}
        try:
            return isinstance(value, tp)
        except TypeError:
            return True
    return True


def coerce(value: Any, tp: Any) -> Any:
    """A recipe value in the form a Python caller would pass it: lists become tuples where the
    parameter is a tuple or a ``Sequence`` (a YAML list cannot say which), element by element."""
    if tp is UNKNOWN or not isinstance(value, list):
        return value
    for member in _options(tp):
        target = typing.get_origin(member) or member
        if target in (tuple, collections.abc.Sequence) and conforms(value, member):
            args = _args(member)
            item = args[0] if args and not (target is tuple and len(args) != 2) else UNKNOWN
            return tuple(coerce(v, item) for v in value)
        if target is list and conforms(value, member):
            return value
    return value


def load_reference(value: str) -> Any:
    """The object a ``"module:attr"`` string names (raises the kernel's ``PluginError`` naming it)."""
    return load_object(value)


def json_type(tp: Any) -> dict[str, Any]:
    """The JSON Schema of annotation ``tp`` (``{}``: anything), for editors completing recipes."""
    if tp is UNKNOWN or tp is Any or tp is object or isinstance(tp, typing.TypeVar):
        return {}
    if _is_union(tp):
        members = [json_type(m) for m in _options(tp)]
        if any(m == {} for m in members):
            return {}
        return members[0] if len(members) == 1 else {"anyOf": members}
    if tp is None or tp is type(None):
        return {"type": "null"}
    origin = typing.get_origin(tp)
    if origin is typing.Literal:
        return {"enum": list(_args(tp))}
    simple: dict[Any, str] = {bool: "boolean", int: "integer", float: "number", str: "string"}
    if tp in simple:
        return {"type": simple[tp]}
    if _is_callable_type(tp) or _is_object_class(tp):
        return {"type": "string", "pattern": _REF.pattern, "description": "a Python object as 'module:attr'"}
    target = origin or tp
    if target in (list, tuple, collections.abc.Sequence, collections.abc.Iterable, collections.abc.Collection):
        args = _args(tp)
        if target is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
            return {
                "type": "array",
                "prefixItems": [json_type(a) for a in args],
                "minItems": len(args),
                "maxItems": len(args),
            }
        return {"type": "array", **({"items": json_type(args[0])} if args and json_type(args[0]) else {})}
    if target in (dict, collections.abc.Mapping, collections.abc.MutableMapping):
        args = _args(tp)
        return {
            "type": "object",
            **({"additionalProperties": json_type(args[1])} if len(args) == 2 and json_type(args[1]) else {}),
        }
    if isinstance(tp, type) and issubclass(tp, os.PathLike):
        return {"type": "string"}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return {"enum": [m.value for m in tp]}
    return {}


def object_schema(acc: Accepts, description: str = "") -> dict[str, Any]:
    """The JSON Schema of a mapping of keyword arguments to a factory."""
    props: dict[str, Any] = {}
    for p in acc.params.values():
        sch = dict(json_type(p.annotation))
        sch["description"] = p.text + ("" if p.required else f" (default {p.default!r})")
        if not p.required and _jsonable(p.default):
            sch["default"] = list(p.default) if isinstance(p.default, tuple) else p.default
        props[p.name] = sch
    out: dict[str, Any] = {"type": "object", "properties": props, "additionalProperties": acc.open}
    required = [p.name for p in acc.params.values() if p.required]
    if required:
        out["required"] = required
    if description:
        out["description"] = description
    return out


def _jsonable(value: Any) -> bool:
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_jsonable(v) for v in value)
    return False


def describe(p: Param) -> str:
    """``name: annotation``."""
    return f"{p.name}: {p.text}"
