"""Name the bottleneck: which step limits throughput, why, and what to change.

Stages are chained by bounded queues, so the slowest is busy nearly all the time (workers or accumulator)
and the next one waits for input; when the pipeline keeps up, the training loop hardly waits for a batch."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from zephon_core.runtime.runners import runner_crosses_processes

CONSUMER_BOUND = 0.10
"""Below this fraction of time waiting for batches, the training loop (not the pipeline) is the limit."""

BUSY = 0.50
"""A stage busier than this (workers or accumulator) can be the limit."""


@dataclass(frozen=True)
class Diagnosis:
    """The culprit (``stage``: a step's name, ``"consumer"`` or ``"source"``), why, and what to change;
    ``str()`` is the human sentence, ``evidence`` holds the figures it rests on."""

    stage: str
    reason: str
    suggestion: str
    evidence: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"{self.stage}: {self.reason} → {self.suggestion}"


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def _raise_workers(s: dict[str, Any], crosses_processes: Callable[[str], bool]) -> str:
    """What to change for a stage whose workers are the limit, given the runner it is already on."""
    runner, n = s.get("runner", ""), s.get("parallelism", 1)
    now = f" (now {n} on {runner})" if runner else ""
    if s["name"] == "fetch":
        return f"read with more threads: fetch(parallelism=...){now}"
    if runner and crosses_processes(runner):  # processes, Ray: the GIL is not the limit there
        return f"raise its parallelism{now}; if that does not help, the machine's cores are the limit"
    if runner == "inline":
        return "run it on the threads or processes runner with parallelism > 1 (inline runs one task at a time)"
    return f"raise its parallelism{now}, or use the processes runner if it holds the GIL"


def diagnose(window: dict[str, Any], crosses_processes: Callable[[str], bool] = runner_crosses_processes) -> Diagnosis:
    """Find the limiting stage from windowed metrics (``zephon_core.runtime.metrics.windowed``);
    ``crosses_processes(name)``: whether a runner's workers are other processes (then: more workers)."""
    stages = window["stages"]
    consumer_wait = window["consumer"]["wait"]
    if consumer_wait < CONSUMER_BOUND:
        return Diagnosis(
            "consumer",
            f"the training loop waited for data only {_pct(consumer_wait)} of the time",
            "the pipeline keeps up; speed up the training step (more data-loading resources will not help)",
            {"consumer_wait": consumer_wait},
        )
    # A stage's load: the busier of its workers and its accumulator (a heavy shuffle or packing decision).
    load = [max(s["worker_busy"], s["accumulator_busy"]) for s in stages]
    best = max(range(len(stages)), key=lambda i: (load[i], -i)) if stages else -1
    if best < 0 or load[best] < BUSY:
        return Diagnosis(
            "source",
            f"no stage is busy (the busiest is {_pct(max(load, default=0))}) yet the training loop waits "
            f"{_pct(consumer_wait)} of the time",
            "the work source (computing chunks) or the queues are the limit: use larger chunks or a deeper queue_depth",
            {"consumer_wait": consumer_wait, "load": dict(zip((s["name"] for s in stages), load))},
        )
    s = stages[best]
    evidence = {k: s[k] for k in ("worker_busy", "accumulator_busy", "input_wait")}
    evidence["next_stage_input_wait"] = stages[best + 1]["input_wait"] if best + 1 < len(stages) else consumer_wait
    evidence["consumer_wait"] = consumer_wait
    starving = f"the next stage starves {_pct(evidence['next_stage_input_wait'])} of the time"
    if s["worker_busy"] >= s["accumulator_busy"]:
        reason = f"workers busy {_pct(s['worker_busy'])}, its input waits {_pct(s['input_wait'])}, {starving}"
        suggestion = _raise_workers(s, crosses_processes)
    else:
        reason = f"its serial accumulator is busy {_pct(s['accumulator_busy'])}, {starving}"
        suggestion = "move work from the accumulator into the worker function (the accumulator cannot run in parallel)"
    return Diagnosis(s["name"], reason, suggestion, evidence)
