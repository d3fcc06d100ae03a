"""What determines a pipeline's data, as JSON: its definition (hashed into every checkpoint's fingerprint, so
resuming under another one is refused, naming the keys), and the labels a tool adds to it."""

from __future__ import annotations

import copy
import json
from typing import TYPE_CHECKING, Any, cast

from zephon_core.errors import ConfigError

if TYPE_CHECKING:
    from zephon_core.pipeline import Pipeline, Shared
else:
    Shared = object


class Definition(Shared):
    """The pipeline's identity (see the module docstring)."""

    def label(self, **labels: Any) -> Pipeline:
        """Make ``labels`` (JSON values, in :meth:`definition`) part of the identity; later calls add or replace keys.

        A tool that builds pipelines from a description (a recipe, a config system) records it here: every checkpoint
        carries it, and resuming under an edited one is refused, naming the keys. Pipelines without labels keep their
        fingerprint, and a checkpoint that differs only in that one side has no labels at all still resumes.

        Raises:
            ConfigError: a value that is not JSON-compatible, or the pipeline is already running.
        """
        self._check_mutable()
        for key, value in labels.items():
            try:
                json.dumps(value, sort_keys=True, allow_nan=False)
            except (TypeError, ValueError) as exc:
                raise ConfigError(f"label {key!r}: the value must be JSON-compatible data ({exc})") from None
        self._labels = {**self._labels, **labels}
        return cast("Pipeline", self)  # a part of Pipeline: self is the pipeline

    def definition(self) -> dict[str, Any]:
        """Everything that determines the data, as JSON (hashed into the checkpoint fingerprint)."""
        return {
            "source": self.source.describe(),
            "operators": [step.describe() for step in self.operators],
            "lanes": self._opts.lanes,
            **self._describe_window(),
            **({"lane_assignment": d} if (d := self._opts.layout().describe()) is not None else {}),
            **({"labels": copy.deepcopy(self._labels)} if self._labels else {}),
        }
