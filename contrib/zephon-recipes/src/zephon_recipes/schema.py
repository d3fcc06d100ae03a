"""The JSON Schema of recipes, generated from what the installed plugins register.

Editors (VS Code's YAML extension, taplo for TOML, any JSON Schema client) complete and check a
recipe against it: every installed operator is a step whose arguments are the factory's keyword
parameters, typed from its annotations; every installed reader a ``format``; every runner a
``runner``. Nothing in it is written by hand for a plugin, so a new plugin's operator appears once
it is installed (``zephon recipe-schema`` writes the file).
"""

from __future__ import annotations

from typing import Any

from zephon_core import Pipeline, ScheduledMixtureWorkSource, StaticMixtureWorkSource
from zephon_core.plugin_api import ZephonPluginManager
from zephon_recipes import signatures as sig

SCHEMA_ID = "https://zephon.dev/schemas/recipe.json"


def _runner_enum(schema: dict[str, Any], runners: list[str]) -> dict[str, Any]:
    props = schema.get("properties", {})
    if "runner" in props:
        props["runner"] = {
            "anyOf": [{"enum": runners}, {"type": "null"}],
            "description": props["runner"].get("description", ""),
        }
    return schema


def recipe_schema(plugins: ZephonPluginManager) -> dict[str, Any]:
    """The schema for recipes run with ``plugins`` (a JSON-able dict, draft 2020-12)."""
    registry = plugins.registry
    runners = registry.names("runner")
    steps = []
    for name in registry.names("operator"):
        reg = registry.get("operator", name)
        try:
            acc = sig.accepts(reg.load())
        except Exception:  # a plugin that cannot load: any arguments (check reports the error)
            acc = sig.Accepts(open=True)
        args = _runner_enum(sig.object_schema(acc), runners)
        steps.append(
            {
                "type": "object",
                "properties": {name: {"anyOf": [args, {"type": "null"}]}},
                "required": [name],
                "additionalProperties": False,
                "description": f"{reg.description} ({reg.package} {reg.version})".strip(),
            }
        )
    readers = []
    for name in registry.names("reader"):
        reg = registry.get("reader", name)
        try:
            acc = sig.accepts(reg.load(), skip=1)
        except Exception:
            acc = sig.Accepts(open=True)
        readers.append(
            {
                "if": {"properties": {"format": {"const": name}}, "required": ["format"]},
                "then": {
                    "properties": {"options": sig.object_schema(acc, f"options of the {name} reader ({reg.package})")}
                },
            }
        )
    static = sig.accepts(StaticMixtureWorkSource, exclude=("datasets", "mixture"))
    scheduled = sig.accepts(ScheduledMixtureWorkSource, exclude=("datasets", "schedule"))
    mixture_props: dict[str, Any] = {}
    for acc in (static, scheduled):
        mixture_props.update(sig.object_schema(acc)["properties"])
    weights = {"type": "object", "additionalProperties": {"type": "number", "exclusiveMinimum": 0}}
    mixture_props.update(
        {
            "weights": {**weights, "description": "share of each dataset (summing to 1, unless ratios: true)"},
            "ratios": {"type": "boolean", "description": "the weights are ratios on purpose (not shares summing to 1)"},
            "schedule": {
                "type": "object",
                "properties": {
                    "unit": {"enum": ["samples", "tokens"]},
                    "interpolate": {"enum": ["step", "linear"]},
                    "breakpoints": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {"at": {"type": "integer", "minimum": 0}, "weights": weights},
                            "required": ["at", "weights"],
                            "additionalProperties": False,
                        },
                    },
                },
                "required": ["breakpoints"],
                "additionalProperties": False,
            },
        }
    )
    dataset = {
        "type": "object",
        "properties": {
            "path": {
                "type": "string",
                "description": "a folder, file, one-match glob or URL; relative to the recipe file",
            },
            "format": {"enum": registry.names("reader")},
            "options": {"type": "object", "description": "keyword arguments of the format's reader"},
        },
        "required": ["path"],
        "additionalProperties": False,
        "allOf": readers,
    }
    ref_or_list = {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "Zephon recipe",
        "type": "object",
        "properties": {
            "description": {"type": "string"},
            "include": {**ref_or_list, "description": "base recipe(s) this one overrides, relative to this file"},
            "set": {"type": "object", "description": "dotted keys to override, e.g. mixture.weights.web: 0.6"},
            "datasets": {"type": "object", "additionalProperties": {"anyOf": [dataset, {"type": "string"}]}},
            "mixture": {"type": "object", "properties": mixture_props, "additionalProperties": False},
            "fetch": _runner_enum(sig.object_schema(sig.accepts(Pipeline.fetch, skip=1)), runners),
            "operators": {"type": "array", "items": {"anyOf": [*steps, {"enum": registry.names("operator")}]}},
            "batch": _runner_enum(sig.object_schema(sig.accepts(Pipeline.batch, skip=1)), runners),
            "options": _runner_enum(sig.object_schema(sig.accepts(Pipeline.options, skip=1)), runners),
            "world_sizes": {"type": "array", "items": {"type": "integer", "minimum": 1}},
        },
        "additionalProperties": False,
    }
