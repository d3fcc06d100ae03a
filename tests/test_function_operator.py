"""The plugin contract's function-operator base: configuration from a frozen dataclass's fields."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from zephon_core.plugin_api import FunctionOperator, RecordFn


@dataclass(frozen=True)
class Scale(RecordFn):
    factor: float
    fields: tuple[str, ...]
    mode: str = "plain"
    omit_defaults: ClassVar[dict[str, Any]] = {"mode": "plain"}

    def __call__(self, payload: dict[str, Any]) -> dict[str, Any]:
        return {k: v * self.factor for k, v in payload.items()}


@dataclass(frozen=True)
class Jitter(RecordFn):
    scale: float

    def __call__(self, payload: dict[str, Any], rng: np.random.Generator) -> dict[str, Any]:
        return {**payload, "x": payload["x"] + self.scale * rng.random()}


class ScaleOp(FunctionOperator):
    kind = "scale"


def test_config_is_the_fields_jsonable_and_new_options_stay_out_at_their_default() -> None:
    op = ScaleOp(Scale(2.0, ("a", "b")))
    assert op.name == "scale"
    assert op.config() == {"factor": 2.0, "fields": ["a", "b"]}
    assert ScaleOp(Scale(2.0, ("a",), mode="loud")).config()["mode"] == "loud"


def test_the_seed_is_configuration_only_for_functions_that_draw() -> None:
    assert ScaleOp(Jitter(0.5), seed=3).config() == {"scale": 0.5, "seed": 3}
    assert ScaleOp(Jitter(0.5), seed=3).config() != ScaleOp(Jitter(0.5), seed=4).config()


def test_a_plain_function_keeps_map_transforms_configuration() -> None:
    def double(p: dict[str, Any]) -> dict[str, Any]:
        return p

    assert ScaleOp(double).config() == {
        "fn": f"{__name__}:test_a_plain_function_keeps_map_transforms_configuration.<locals>.double"
    }
