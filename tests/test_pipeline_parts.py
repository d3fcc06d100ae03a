"""``Pipeline`` is written one idea per module and assembled into one class.

The parts (``zephon_core.pipeline.PARTS``) become the class's own attributes rather than its bases, so
``help(Pipeline)``, ``inspect`` and the builder metaclass see one class whose methods are all its own;
a name defined by two parts, or by a part and the class, would silently hide one of them.
"""

from __future__ import annotations

import inspect

from zephon_core import Pipeline
from zephon_core.pipeline import PARTS


def test_pipeline_is_one_class_holding_every_part() -> None:
    assert Pipeline.__mro__ == (Pipeline, object)
    for part in PARTS:
        for name, value in vars(part).items():
            if not (name.startswith("__") and name.endswith("__")):
                assert vars(Pipeline)[name] is value, f"{part.__name__}.{name} is not Pipeline's own"


def test_no_name_is_defined_twice() -> None:
    seen: dict[str, str] = {}
    own = {n for n, v in vars(Pipeline).items() if inspect.getmodule(v) is inspect.getmodule(Pipeline)}
    for part in PARTS:
        for name in vars(part):
            if name.startswith("__") and name.endswith("__"):
                continue
            assert name not in seen, f"{name} is defined by {seen[name]} and {part.__name__}"
            assert name not in own, f"{name} is defined by Pipeline and {part.__name__}"
            seen[name] = part.__name__
