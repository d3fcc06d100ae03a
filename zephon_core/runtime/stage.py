"""A stage runs one step of the pipeline: a serial accumulator thread, a pool of workers, a reorder buffer.

The accumulator thread feeds each message to its lane's accumulator and submits the resulting work;
the futures go into a bounded FIFO (the reorder window), whose head the emitter thread waits for and
forwards. Results therefore leave in submission order whatever order workers finish in, and a slow
consumer back-pressures the stage instead of growing memory. Workers never block on a queue, so the
window cannot deadlock against the reorder.
"""

from __future__ import annotations

import functools
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

from zephon_core.errors import OperatorError, OperatorTimeoutError, ZephonError
from zephon_core.hashing import mix64
from zephon_core.ops.contract import Emitted, Lineage, Records, Traits, Work, WorkerFn, failed_slot, fused_step_of
from zephon_core.runtime.context import Context, Stopped
from zephon_core.runtime.messages import Kind, Message
from zephon_core.runtime.metrics import StageMetrics, Timed
from zephon_core.runtime.runners import Executor
from zephon_core.work.ids import dataset_of

T = TypeVar("T")


class StageAccumulator(Protocol):
    """The per-lane serial half of a stage (an operator's :class:`~zephon_core.ops.contract.Accumulator`)."""

    def push(self, body: Any) -> list[Emitted]: ...

    def flush(self) -> list[Emitted]: ...


class StageSpec(Protocol):
    """What a stage needs to know about the step it runs; every :class:`Operator` is one."""

    name: str
    traits: Traits

    def new_accumulator(self, lane: int) -> Any: ...

    def worker(self) -> WorkerFn | None: ...


@runtime_checkable
class Materializes(Protocol):
    """A stage-spec capability: it turns its workers' results into records itself, instead of the
    fanout-driven :func:`materialize` (a fused stage rebuilds its steps' tombstones in step order); a
    ``TypeError`` from it is reported as a malformed worker result."""

    def materialize(self, result: Any, work: Work) -> Records | None:
        """The records (or None: nothing to forward) of one worker result for ``work``."""


@runtime_checkable
class NamesSteps(Protocol):
    """A stage-spec capability: the stage runs several steps, and a failure marked with a step number
    (:func:`~zephon_core.ops.contract.fused_step_of`) is reported under :meth:`step_name`, "fused into" it."""

    def step_name(self, step: int | None) -> str | None:
        """The name of step number ``step``, or None when there is no such step."""


@dataclass(frozen=True, slots=True)
class Pending:
    """An entry of the reorder window: a message, and the work whose result becomes its body."""

    msg: Message
    future: Future[Any] | None = None
    work: Work | None = None
    submitted: float = 0.0


class Stage:
    """One step of one rank's pipeline (see the module docstring)."""

    def __init__(
        self,
        spec: StageSpec,
        executor: Executor | None,
        inbound: queue.Queue[Message],
        outbound: queue.Queue[Message],
        ctx: Context,
        window: int,
        *,
        new_accumulator: Callable[[int], StageAccumulator] | None = None,
        describe_samples: Callable[[list[Lineage]], str],
        runner: str = "",
        timeout_s: float | None = None,
        parallelism: int = 1,
    ) -> None:
        self.spec, self.name, self.runner, self.timeout_s = spec, spec.name, runner, timeout_s
        self.metrics = StageMetrics(spec.name, runner, parallelism)
        self._busy: tuple[float, int, list[Lineage], int] | None = None
        self.executor, self.inbound, self.outbound, self.ctx = executor, inbound, outbound, ctx
        self.pending: queue.Queue[Pending] = queue.Queue(maxsize=max(1, window))
        self.new_accumulator = new_accumulator or spec.new_accumulator
        self.describe_samples = describe_samples
        self.accs: dict[int, StageAccumulator] = {}
        # Asked once: a runtime-checkable Protocol's isinstance costs tens of microseconds, per task.
        by_fanout = functools.partial(materialize, spec.traits.fanout)
        self._materialize = spec.materialize if isinstance(spec, Materializes) else by_fanout
        self.threads = [
            threading.Thread(target=self._guard, args=(self._accumulate,), name=f"zephon-{self.name}-acc", daemon=True),
            threading.Thread(target=self._guard, args=(self._emit,), name=f"zephon-{self.name}-emit", daemon=True),
        ]

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def _guard(self, fn: Callable[[], None]) -> None:
        try:
            fn()
        except Stopped:
            pass
        except BaseException as exc:  # reaches the training loop through the context
            self.ctx.fail(exc)

    def _error(
        self, what: str, lane: int, lineage: list[Lineage], exc: BaseException, work: Work | None = None
    ) -> OperatorError:
        """The error naming the stage (or fused step), the lane and the samples ``lineage`` of a failure
        (``work``, the failed work item if any, lets the batch stage narrow them to one microbatch)."""
        index = failed_slot(exc)
        if index is not None and 0 <= index < len(lineage):
            lineage = [lineage[index]]  # the worker said which item failed
            cause = str(exc)
        else:
            cause = str(exc) if isinstance(exc, ZephonError) else f"{type(exc).__name__}: {exc}"
        cls = type(exc) if isinstance(exc, OperatorError) else OperatorError
        name = self.name
        step = self.spec.step_name(fused_step_of(exc)) if isinstance(self.spec, NamesSteps) else None
        if step is not None:  # a fused stage: name the step that failed
            name, what = step, f"{what}, fused into {self.name!r}"
        err = cls(
            f"operator {name!r} ({what}) failed on lane {lane}, samples {self.describe_samples(lineage)}: {cause}"
        )
        err.__cause__ = exc
        return err

    def _accumulate(self) -> None:
        m = self.metrics
        while True:
            t0 = time.perf_counter()
            msg = self.ctx.get(self.inbound)
            m.wait_input_s += time.perf_counter() - t0
            if msg.kind is Kind.DATA:
                m.records_in += len(msg.body) if hasattr(msg.body, "__len__") else 1
                self._on_data(msg)
            elif msg.kind is Kind.FLUSH:
                self._on_flush(msg)
            elif msg.kind is Kind.LANE_END:
                self._on_lane_end(msg)
            else:
                self.ctx.put(self.pending, Pending(msg))
                return

    def _timed(self, what: str, msg: Message, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)``, an accumulator call for ``msg``, timed; a failure is reported as ``what``."""
        t0 = time.perf_counter()
        try:
            out = fn(*args)
        except Exception as exc:
            lin = msg.body.lineage if isinstance(msg.body, Records) else []  # a chunk (fetch) has no lineage yet
            raise self._error(what, msg.lane, lin, exc) from exc
        self.metrics.acc_busy_s += time.perf_counter() - t0
        return out

    def _on_data(self, msg: Message) -> None:
        acc = self.accs.get(msg.lane)
        if acc is None:
            acc = self.accs[msg.lane] = self._timed("accumulator", msg, self.new_accumulator, msg.lane)
        self._submit(msg, self._timed("accumulator", msg, acc.push, msg.body))

    def _on_flush(self, msg: Message) -> None:
        acc = self.accs.get(msg.lane)
        if acc is not None:
            self._submit(msg, self._timed("flush", msg, acc.flush))
            if self.spec.traits.resets_on_flush:
                del self.accs[msg.lane]
        self.ctx.put(self.pending, Pending(msg))

    def _on_lane_end(self, msg: Message) -> None:
        self.accs.pop(msg.lane, None)
        self.ctx.put(self.pending, Pending(msg))

    def _submit(self, msg: Message, emitted: Sequence[Emitted]) -> None:
        """Queue what an accumulator emitted in response to ``msg``; it inherits the message's window."""
        for item in emitted:
            out = Message(Kind.DATA, msg.lane, msg.window, seq=msg.seq)
            if isinstance(item, Work):
                if self.executor is None:
                    raise OperatorError(f"operator {self.name!r} emitted work but declares no worker")
                now = time.monotonic()
                self._busy = (now, msg.lane, item.lineage, self._units(item))  # an inline runner runs it here
                fut = self.executor.submit(item.task)
                self._busy = None
                pending = Pending(out, fut, item, now)
            else:
                pending = Pending(out.with_body(item))
            t0 = time.perf_counter()
            self.ctx.put(self.pending, pending)
            self.metrics.window_full_s += time.perf_counter() - t0

    def _emit(self) -> None:
        ctx = self.ctx
        while True:
            p = ctx.get(self.pending, self._check_busy)
            msg = p.msg
            if p.work is not None and p.future is not None:
                # The head of the window is the oldest task not done; its executor started it no
                # later than now, so its clock starts at the later of submission and now.
                started = max(p.submitted, time.monotonic())
                work = p.work
                overdue = functools.partial(self._check_overdue, started, msg.lane, work.lineage, self._units(work))
                try:
                    result = ctx.result(p.future, overdue)
                except (Stopped, OperatorTimeoutError):
                    raise
                except BaseException as exc:
                    raise self._error("worker", msg.lane, work.lineage, exc, work) from exc
                if isinstance(result, Timed):
                    self.metrics.task_done(result)
                    result = result.result
                body = self._convert(msg, result, work)
                if body is None:
                    continue
                msg = msg.with_body(body)
            if msg.kind is Kind.DATA:
                self.metrics.records_out += self._records(msg.body)
            t0 = time.perf_counter()
            ctx.put(self.outbound, msg)
            self.metrics.blocked_output_s += time.perf_counter() - t0
            if msg.kind is Kind.STOP:
                return

    def _records(self, body: Any) -> int:
        """Records in a DATA message's body, for the ``records_out`` counter."""
        return len(body) if hasattr(body, "__len__") else 1

    def _units(self, work: Work) -> int:
        """How many times ``timeout_s`` a task for ``work`` may take (the batch stage: one per microbatch)."""
        return 1

    def _check_busy(self) -> None:
        """While the emitter waits for work: is a task running inline in the accumulator thread overdue?"""
        busy = self._busy
        if busy is not None:
            self._check_overdue(*busy)

    def _check_overdue(self, started: float, lane: int, lineage: list[Lineage], units: int = 1) -> None:
        if self.timeout_s is None or time.monotonic() - started <= self.timeout_s * units:
            return
        t = f"timeout_s={self.timeout_s:g}"
        over = t if units == 1 else f"{units} x {t} (one per item)"
        err = OperatorTimeoutError(
            f"operator {self.name!r} (runner {self.runner or '?'}): a task ran longer than {over} on "
            f"lane {lane}, samples {self.describe_samples(lineage)}; the pipeline stopped (a hung thread is abandoned, "
            "a hung process is killed). Raise the operator's timeout_s= if its tasks are legitimately this slow."
        )
        self.ctx.fail(err)
        raise err

    def _convert(self, msg: Message, result: Any, work: Work) -> Any:
        """Turn a worker's result into the next stage's input (``None``: nothing to forward)."""
        try:
            out = self._materialize(result, work)
        except TypeError as exc:
            raise self._error("worker", msg.lane, work.lineage, exc) from exc
        if out is not None:
            for lin in out.dropped[len(work.dropped) :]:  # dropped by this stage's workers
                d = dataset_of(lin[0]) if lin else -1
                self.metrics.dropped[d] = self.metrics.dropped.get(d, 0) + 1
        return out

    def join(self, timeout: float) -> None:
        for t in self.threads:
            if t.ident is not None:
                t.join(timeout)


def materialize(fanout: str, result: Any, work: Work) -> Records | None:
    """Turn a worker's result for ``work`` into records: keys, lineage and tombstones per slot (``TypeError``
    when the result does not match the work item's slots or holds non-dict payloads)."""
    n = len(work.keys)
    if not isinstance(result, (list, tuple)) or len(result) != n:
        got = len(result) if isinstance(result, (list, tuple)) else type(result).__name__
        raise TypeError(f"worker returned {got} outputs for {n} inputs")
    if fanout == "one" and None not in result:  # fast path: nothing dropped
        out = Records(list(result), work.keys, work.lineage, work.dropped)
    else:
        out = Records([], [], [], list(work.dropped))
        per_slot = ([] if r is None else [r] for r in result) if fanout == "one" else result
        for rs, k, lin in zip(per_slot, work.keys, work.lineage):
            if len(rs) == 1:
                out.payloads.append(rs[0])
                out.keys.append(k)
                out.lineage.append(lin)
            elif not rs:
                out.dropped.append(lin)
            else:
                out.payloads.extend(rs)
                out.keys.extend(mix64(k, j + 1) for j in range(len(rs)))
                out.lineage.extend([lin] * len(rs))
    kinds = set(map(type, out.payloads))  # one pass in C; the per-record isinstance only if another type shows up
    bad = None if kinds <= {dict} else next((p for p in out.payloads if not isinstance(p, dict)), None)
    if bad is not None:
        raise TypeError(f"worker output must be a dict, got {type(bad).__name__}")
    return out if (out.payloads or out.dropped) else None
