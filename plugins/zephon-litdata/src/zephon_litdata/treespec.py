"""Rebuild a sample's structure from its leaves using LitData's serialized pytree spec.

``config.data_spec`` is ``json.dumps([protocol, node])`` where a node is ``{"type": <qualified
type name or null for a leaf>, "context": <JSON text>, "children_spec": [node, ...]}`` (PyTorch's
pytree format, vendored by LitData). The spec is compiled once into a function from the flat leaf
list to the nested value, so decoding a sample costs no spec walking.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

Unflatten = Callable[[list[Any]], Any]


class UnsupportedSpec(ValueError):
    """A pytree node type this reader does not rebuild (custom classes need their own code)."""


def compile_spec(spec: str | None, n_leaves: int) -> Unflatten:
    """A function ``leaves -> value``; ``spec=None`` means one leaf that is the whole sample."""
    if spec is None:
        if n_leaves != 1:
            raise UnsupportedSpec(f"no data_spec for a sample of {n_leaves} leaves")
        return lambda leaves: leaves[0]
    try:
        protocol, root = json.loads(spec)
    except (ValueError, TypeError) as exc:
        raise UnsupportedSpec(f"data_spec is not valid pytree JSON ({exc})") from None
    if protocol != 1:
        raise UnsupportedSpec(f"pytree serialization protocol {protocol!r} is not supported (only 1)")
    build, used = _node(root, 0)
    if used != n_leaves:
        raise UnsupportedSpec(f"data_spec has {used} leaves but data_format lists {n_leaves}")
    if _is_flat_dict(root):
        keys = tuple(json.loads(root["context"]))
        return lambda leaves: dict(zip(keys, leaves))
    return lambda leaves: build(iter(leaves))


def _is_flat_dict(node: dict[str, Any]) -> bool:
    return node.get("type") == "builtins.dict" and all(c.get("type") is None for c in node["children_spec"])


def _node(node: Any, start: int) -> tuple[Callable[[Iterator[Any]], Any], int]:
    if not isinstance(node, dict) or "children_spec" not in node:
        raise UnsupportedSpec(f"malformed pytree node {node!r}")
    kind, children = node.get("type"), node["children_spec"]
    if kind is None:
        return next, start + 1
    builders = []
    count = start
    for child in children:
        b, count = _node(child, count)
        builders.append(b)
    if kind in ("builtins.dict", "collections.OrderedDict", "collections.defaultdict"):
        context = node.get("context")
        if kind == "collections.defaultdict":
            keys = list(context["dict_context"]) if isinstance(context, dict) else []
        else:
            keys = list(json.loads(context)) if isinstance(context, str) else []
        if len(keys) != len(builders):
            raise UnsupportedSpec(f"{kind} node has {len(keys)} keys for {len(builders)} children")
        return (lambda it: {k: b(it) for k, b in zip(keys, builders)}), count
    if kind == "builtins.list":
        return (lambda it: [b(it) for b in builders]), count
    if kind in ("builtins.tuple", "collections.namedtuple"):
        return (lambda it: tuple(b(it) for b in builders)), count
    raise UnsupportedSpec(f"pytree node type {kind!r} is not supported (dict, list and tuple are)")
