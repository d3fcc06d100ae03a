"""``OperatorConformance``: the determinism checks every operator must pass.

Subclass it and override ``operator_factory`` (and, if your operator needs other input,
``sample_records`` or ``upstream``)::

    from zephon_core.conformance import OperatorConformance

    class TestMyOp(OperatorConformance):
        @pytest.fixture
        def operator_factory(self):
            return functools.partial(MyOp, window=4)   # called as factory(parallelism=, runner=)

The suite runs the operator inside real pipelines (fetch → upstream → operator → batch of one
digest row) on two datasets mixed 2:1, and through a direct driver that controls grouping, lanes
and flushes. Every failure names the rule it enforces (see :mod:`zephon_core.conformance.rules`).

The checks are written one group of rules per module (:mod:`~zephon_core.conformance.operator_isolation`,
:mod:`~zephon_core.conformance.operator_lineage`, :mod:`~zephon_core.conformance.operator_resume`) and
share :mod:`~zephon_core.conformance.operator_subject`; this class puts them together.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from zephon_core.conformance import samples
from zephon_core.conformance.operator_isolation import IsolationChecks
from zephon_core.conformance.operator_lineage import LineageChecks
from zephon_core.conformance.operator_resume import ResumeChecks
from zephon_core.conformance.operator_subject import CHUNK as CHUNK
from zephon_core.conformance.operator_subject import EXACT_WINDOWS as EXACT_WINDOWS
from zephon_core.conformance.operator_subject import FLUSH_EVERY as FLUSH_EVERY
from zephon_core.conformance.operator_subject import LANES as LANES
from zephon_core.conformance.operator_subject import OperatorFactory as OperatorFactory
from zephon_core.conformance.operator_subject import Subject as Subject
from zephon_core.conformance.operator_subject import _run as _run
from zephon_core.conformance.operator_subject import _subprocess_main as _subprocess_main
from zephon_core.conformance.rules import Capabilities, SuiteBase
from zephon_core.ops.contract import Operator


# Bases in this order: pytest collects a base class's tests first, so the rules run in their order (1 to 7).
class OperatorConformance(ResumeChecks, LineageChecks, IsolationChecks, SuiteBase):
    """Base class of operator conformance tests; not collected until subclassed."""

    __test__ = False  # only subclasses are collected

    # -- extension points (override these fixtures) -------------------------------------------
    @pytest.fixture
    def operator_factory(self) -> OperatorFactory:
        """``factory(parallelism=, runner=) -> Operator``; make it picklable (module-level or partial)."""
        raise NotImplementedError("override the operator_factory fixture")

    @pytest.fixture
    def sample_records(self) -> list[dict[str, Any]]:
        """Input payloads (default: English paragraphs with fields ``text`` and ``n``)."""
        return samples.text_records()

    @pytest.fixture
    def upstream(self) -> list[Callable[[], Operator]]:
        """Factories of operators placed before the one under test (e.g. a tokenizer before a packer)."""
        return []

    @pytest.fixture
    def capabilities(self) -> Capabilities:
        """What the operator claims; unclaimed features are reported as skips."""
        return Capabilities()

    @pytest.fixture
    def perturb_payload(self) -> Callable[[dict[str, Any]], dict[str, Any]]:
        """``payload -> payload`` with other content but the same structure, for the lineage check.

        The default (:func:`zephon_core.conformance.samples.perturb`) changes text, arrays and lists
        but keeps lengths, whitespace and scalar ints. Override it when your operator arranges records
        by something the default changes (e.g. it groups by a string field): keep what decides the
        arrangement, change what ends up in outputs. It must not modify its argument.
        """
        return samples.perturb

    @pytest.fixture
    def subject(
        self,
        operator_factory: OperatorFactory,
        sample_records: list[dict[str, Any]],
        upstream: list[Callable[[], Operator]],
        capabilities: Capabilities,
    ) -> Subject:
        return Subject(operator_factory, list(sample_records), list(upstream), capabilities)

    @pytest.fixture
    def baseline(self, subject: Subject) -> list[str]:
        hashes = _run(subject, runner="inline")
        assert len(hashes) >= 8, "the sample input must give at least 8 global steps; give more sample_records"
        return hashes
