"""``options(validate=...)``: the user-defined steps probed on the first records before the run starts.

The probe itself is :mod:`zephon_core.validation` (imported only when validation is on, so a plain
pipeline loads none of it). :class:`StepValidation` is a part of :class:`~zephon_core.pipeline.Pipeline`.
"""

from __future__ import annotations

import time
import warnings
from typing import TYPE_CHECKING, Any

from zephon_core.errors import ConfigError
from zephon_core.ops.contract import Operator, Records
from zephon_core.runtime.fetch import FetchStage
from zephon_core.work.contract import WorkSource

if TYPE_CHECKING:
    from zephon_core.options import Options


class StepValidation:
    """The validate option's probe at start (see the module docstring)."""

    if TYPE_CHECKING:  # set by Pipeline.__init__
        _fetch: FetchStage
        _ops: list[Operator]
        _opts: Options
        _registered: dict[int, str]
        _validation: dict[str, Any]

    def _validate_steps(self, source: WorkSource) -> None:
        """``options(validate=...)``: probe the user-defined steps on the first records (see :mod:`zephon_core.validation`)."""
        from zephon_core import validation as v

        t0 = time.perf_counter()
        chunk = source.chunk(0)
        records = v.first_records(self._fetch, chunk) if chunk is not None else Records.empty()

        def user_defined(op: Operator) -> bool:
            kind = self._registered.get(id(op))
            return kind is None or kind in v.USER_FUNCTION_KINDS

        found = v.probe_pipeline(self._ops, records, user_defined)
        self._validation = {
            "mode": self._opts.validate,
            "records": len(records),
            "seconds": round(time.perf_counter() - t0, 4),
            "findings": [str(f) for f in found],
        }
        if found and self._opts.validate == "strict":
            raise ConfigError(
                "validate='strict': " + "; ".join(str(f) for f in found) + " (the conformance suite's rules, "
                "probed on the first records; see zephon_core.validation)"
            )
        for f in found:
            warnings.warn(str(f), v.ValidationWarning, stacklevel=3)
