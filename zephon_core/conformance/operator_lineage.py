"""Operator conformance rules 4 to 6: a flush resets the lane, lineage is exact and conserved, grouping
does not matter.

Part of :class:`~zephon_core.conformance.operators.OperatorConformance`, which is what a plugin subclasses.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from zephon_core.conformance.driver import FLUSH, Driver, split
from zephon_core.conformance.operator_subject import (
    CHUNK,
    EXACT_WINDOWS,
    FLUSH_EVERY,
    Subject,
    _by_identity,
    _first_difference,
    _windowed,
)
from zephon_core.conformance.rules import rule
from zephon_core.hashing import digest_payload
from zephon_core.ops.contract import Lineage, Records


class LineageChecks:
    """The checks of rules 4 to 6 (see the module docstring)."""

    __test__ = False  # collected through OperatorConformance's subclasses only

    # -- rule 4: a flush resets the lane ------------------------------------------------------------
    def test_flush_resets_lane(self, subject: Subject) -> None:
        op = subject.make()
        if not (subject.caps.resets_on_flush and op.traits.resets_on_flush):
            pytest.skip("operator does not reset at flush sentinels (batch keeps rows across windows by design)")
        recs = subject.input_records()
        first, second = split(recs, [len(recs) // 2])[:2]
        d = Driver(op)
        d.feed(0, [*split(first, [CHUNK] * 64), FLUSH])
        n_before = len(d.out[0].digests)
        after = d.feed(0, [*split(second, [CHUNK] * 64), FLUSH])
        fresh = Driver(subject.make()).feed(0, [*split(second, [CHUNK] * 64), FLUSH])
        got = after.digests[n_before:]
        assert got == fresh.digests, (
            f"{rule(4)} after a flush the lane does not behave like a fresh instance "
            f"({_first_difference(fresh.digests, got)}): emit everything held at flush and keep no state "
            "outside the accumulator"
        )

    # -- rule 5: lineage is exact and conserved ---------------------------------------------------
    def test_lineage_is_conserved(self, subject: Subject) -> None:
        recs = subject.input_records()
        out = Driver(subject.make()).feed(0, _windowed(recs))
        given = {sid for lin in recs.lineage for sid in lin} | {sid for lin in recs.dropped for sid in lin}
        seen_out = {sid for lin in out.lineage for sid in lin}
        seen_dropped = {sid for lin in out.dropped for sid in lin}
        invented = (seen_out | seen_dropped) - given - {sid for lin in recs.dropped for sid in lin}
        assert not invented, f"{rule(5)} outputs claim source samples that were never input: {sorted(invented)[:5]}"
        lost = given - seen_out - seen_dropped
        assert not lost, (
            f"{rule(5)} {len(lost)} input samples neither reach an output nor are recorded as dropped "
            f"(e.g. sample ids {sorted(lost)[:5]}): a filter must emit a tombstone (Records.dropped)"
        )

    def test_lineage_is_exact(
        self, subject: Subject, perturb_payload: Callable[[dict[str, Any]], dict[str, Any]]
    ) -> None:
        """Each output's lineage names exactly the inputs whose data it holds, checked from outside.

        An operator is a black box, so "input X contributed to output Y" is tested by changing X:
        for every source sample of the first ``EXACT_WINDOWS`` flush windows, the records carrying it
        are given other content with the same structure (``perturb_payload``) and the same input is
        replayed through a fresh operator. Outputs are matched by key, which a structure-preserving
        change leaves alone. Then:

        * an output whose lineage does not name the sample must come out unchanged, and an output
          that appears or disappears must name it (else the lineage misses a contributor: the row
          that holds the tail of one document and the head of the next must name both);
        * with ``Capabilities.exact_lineage``, an output that names the sample among two or more
          must change (else it names a record whose data it does not hold). Single-source outputs
          are exempt: every output is credited to some input, and crediting the wrong one is
          caught by the first check, through the input that really contributed.

        Removing an input instead would not work: it shifts every later cut of a concatenating
        operator, so every later output would "depend" on it. The cost is one replay of
        ``EXACT_WINDOWS * FLUSH_EVERY * CHUNK`` records per source sample.
        """
        recs = subject.input_records()
        n = min(len(recs), EXACT_WINDOWS * FLUSH_EVERY * CHUNK)
        payloads, keys, lineage = recs.payloads[:n], recs.keys[:n], recs.lineage[:n]

        def run(ps: list[dict[str, Any]]) -> dict[tuple[int, int], tuple[int, bytes, Lineage]]:
            records = Records([dict(p) for p in ps], list(keys), list(lineage))
            return _by_identity(Driver(subject.make()).feed(0, _windowed(records)))

        base = run(payloads)
        exact = subject.caps.exact_lineage
        missing: list[str] = []
        extra: list[str] = []
        tested = 0
        for sid in dict.fromkeys(s for lin in lineage for s in lin):
            changed = list(payloads)
            differs = False
            for i, lin in enumerate(lineage):
                if sid in lin:
                    changed[i] = perturb_payload(copy.deepcopy(payloads[i]))
                    differs |= digest_payload(changed[i]) != digest_payload(payloads[i])
            if not differs:
                continue  # nothing the perturbation can change (e.g. only ints): no evidence either way
            tested += 1
            try:
                got = run(changed)
            except Exception as exc:
                raise RuntimeError(
                    f"the operator failed on input whose sample {sid} was changed by perturb_payload "
                    f"({type(exc).__name__}: {exc}); override the perturb_payload fixture with a change it accepts"
                ) from exc
            for ident, (pos, digest, lin) in base.items():
                after = got.get(ident)
                names = sid in lin
                if after is None or after[1] != digest:
                    if not names:
                        how = "disappears" if after is None else "changes"
                        missing.append(f"output {pos} {how} when sample {sid} changes, but its lineage {lin[:8]}")
                elif names and exact and len(set(lin)) > 1:
                    extra.append(f"output {pos} names sample {sid} among {len(set(lin))} but stays the same")
            missing += [
                f"an output (key {ident[0]:#x}) appears when sample {sid} changes, but its lineage {lin[:8]}"
                for ident, (_, _, lin) in got.items()
                if ident not in base and sid not in lin
            ]
            if len(missing) >= 3 or len(extra) >= 3:
                break
        if not tested:
            pytest.skip("perturb_payload changed no input record: override the perturb_payload fixture")
        assert not missing, (
            f"{rule(5)} an output holds data of an input its lineage does not name: "
            + "; ".join(f"{m} does not name it" for m in missing[:3])
            + ". Credit every record whose data reaches an output (with stateful_transform, return "
            "Emit(item, sources) naming every record the item holds data of, including carried-over ones)"
        )
        assert not extra, (
            f"{rule(5)} an output's lineage names an input whose data it does not hold: "
            + "; ".join(extra[:3])
            + ". Credit only the records an output is made of (stateful_transform: name them with Emit), "
            "or claim Capabilities(exact_lineage=False) if your lineage is a deliberate superset"
        )

    # -- rule 6: grouping does not matter ---------------------------------------------------------
    def test_grouping_does_not_change_output(self, subject: Subject) -> None:
        recs = subject.input_records()
        n = len(recs)
        rng = np.random.default_rng(5)
        layouts = {
            "one group": [n],
            "groups of 1": [1] * n,
            "groups of 7": [7] * (n // 7 + 1),
            "random groups": rng.integers(1, 40, size=n).tolist(),
        }
        flush_at = n // 2
        results = {}
        for name, sizes in layouts.items():
            first, second = split(recs, [flush_at])[:2]
            groups: list[Records | str] = [*split(first, sizes), FLUSH, *split(second, sizes), FLUSH]
            results[name] = Driver(subject.make()).feed(0, groups)
        ref = results["one group"]
        for name, out in results.items():
            assert out.digests == ref.digests and out.lineage == ref.lineage, (
                f"{rule(6)} output differs when the same records arrive in {name} instead of one group "
                f"({_first_difference(ref.digests, out.digests)}): decide per record, not per pushed group"
            )
