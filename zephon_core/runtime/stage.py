"""A stage runs one operator: a serial accumulator thread, a pool of workers, a reorder buffer.

The accumulator thread takes items from the inbound queue in order, feeds them to the lane's
accumulator and submits the resulting work to the executor. Futures go into a bounded FIFO (the
reorder window); the emitter thread pops the FIFO's head, waits for *that* future and forwards its
result. Results therefore leave in submission order whatever order workers finish in, and at most
``window`` groups are in flight, so a slow consumer back-pressures the stage instead of growing
memory. Workers never block on a queue, so the window cannot deadlock against the reorder.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from zephon_core.errors import OperatorError, ZephonError
from zephon_core.hashing import mix64
from zephon_core.ops.contract import Accumulator, Lineage, Operator, Records, Work
from zephon_core.runtime.runners import Executor
from zephon_core.runtime.types import SampleBatch

DATA, FLUSH, LANE_END, STOP = "data", "flush", "lane_end", "stop"
POLL = 0.05


class Stopped(Exception):
    """Raised inside pipeline threads when the pipeline is shutting down."""


class Context:
    """Shared between a pipeline's threads: the first failure, and the stop flag."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self._lock = threading.Lock()

    def fail(self, exc: BaseException) -> None:
        with self._lock:
            if self.error is None and not self.stop.is_set():
                self.error = exc
        self.stop.set()

    def put(self, q: queue.Queue[Any], item: Any) -> None:
        while True:
            if self.stop.is_set():
                raise Stopped
            try:
                q.put(item, timeout=POLL)
                return
            except queue.Full:
                continue

    def get(self, q: queue.Queue[Any]) -> Any:
        while True:
            if self.stop.is_set():
                raise Stopped
            try:
                return q.get(timeout=POLL)
            except queue.Empty:
                continue

    def result(self, fut: Future[Any]) -> Any:
        while True:
            if self.stop.is_set():
                raise Stopped
            try:
                return fut.result(timeout=POLL)
            except TimeoutError:
                continue


class Stage:
    """One operator of one rank's pipeline (see the module docstring)."""

    def __init__(
        self,
        op: Operator,
        executor: Executor | None,
        inbound: queue.Queue[Any],
        outbound: queue.Queue[Any],
        ctx: Context,
        window: int,
        *,
        new_accumulator: Callable[[int], Accumulator],
        describe_samples: Callable[[list[Lineage]], str],
        terminal: bool = False,
        view: Any = None,
    ) -> None:
        self.op = op
        self.executor = executor
        self.inbound = inbound
        self.outbound = outbound
        self.ctx = ctx
        self.pending: queue.Queue[Any] = queue.Queue(maxsize=max(1, window))
        self.new_accumulator = new_accumulator
        self.describe_samples = describe_samples
        self.terminal = terminal
        self.view = view
        self.accs: dict[int, Accumulator] = {}
        self.threads = [
            threading.Thread(target=self._guard, args=(self._accumulate,), name=f"zephon-{op.name}-acc", daemon=True),
            threading.Thread(target=self._guard, args=(self._emit,), name=f"zephon-{op.name}-emit", daemon=True),
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

    def _error(self, what: str, lane: int, lineage: list[Lineage], exc: BaseException) -> OperatorError:
        index = getattr(exc, "index", None)
        if index is not None and 0 <= index < len(lineage):
            lineage = [lineage[index]]  # the worker said which item failed
            cause = str(exc)
        else:
            cause = str(exc) if isinstance(exc, ZephonError) else f"{type(exc).__name__}: {exc}"
        cls = type(exc) if isinstance(exc, OperatorError) else OperatorError
        err = cls(
            f"operator {self.op.name!r} ({what}) failed on lane {lane}, "
            f"samples {self.describe_samples(lineage)}: {cause}"
        )
        err.__cause__ = exc
        return err

    # -- accumulator side ------------------------------------------------------------------
    def _acc(self, lane: int) -> Accumulator:
        acc = self.accs.get(lane)
        if acc is None:
            acc = self.accs[lane] = self.new_accumulator(lane)
        return acc

    def _accumulate(self) -> None:
        ctx, op = self.ctx, self.op
        while True:
            kind, lane, obj = ctx.get(self.inbound)
            if kind == DATA:
                try:
                    emitted = self._acc(lane).push(obj)
                except Exception as exc:
                    lin = getattr(obj, "lineage", None) or []
                    raise self._error("accumulator", lane, lin, exc) from exc
                self._submit(lane, emitted)
            elif kind in (FLUSH, LANE_END):
                acc = self.accs.get(lane)
                if acc is not None and kind == FLUSH:
                    try:
                        emitted = acc.flush()
                    except Exception as exc:
                        raise self._error("flush", lane, [], exc) from exc
                    self._submit(lane, emitted)
                    if op.traits.resets_on_flush:
                        del self.accs[lane]
                if kind == LANE_END:
                    acc = self.accs.pop(lane, None)
                    if self.terminal:
                        obj = len(getattr(acc, "rows", ())) if acc is not None else 0
                ctx.put(self.pending, (kind, lane, obj, None))
            else:
                ctx.put(self.pending, (kind, lane, obj, None))
                return

    def _submit(self, lane: int, emitted: list[Any]) -> None:
        for item in emitted:
            if isinstance(item, Work):
                if self.executor is None:
                    raise OperatorError(f"operator {self.op.name!r} emitted work but declares no worker")
                fut = self.executor.submit(item.task)
                self.ctx.put(self.pending, (DATA, lane, fut, item))
            else:
                self.ctx.put(self.pending, (DATA, lane, item, None))

    # -- emitter side ----------------------------------------------------------------------
    def _emit(self) -> None:
        ctx = self.ctx
        while True:
            kind, lane, obj, work = ctx.get(self.pending)
            if kind == DATA and work is not None:
                try:
                    result = ctx.result(obj)
                except Stopped:
                    raise
                except BaseException as exc:
                    raise self._error("worker", lane, work.lineage, exc) from exc
                obj = self._convert(lane, result, work)
                if obj is None:
                    continue
            ctx.put(self.outbound, (kind, lane, obj))
            if kind == STOP:
                return

    def _convert(self, lane: int, result: Any, work: Work) -> Any:
        if self.terminal:
            index, resume = work.meta
            return SampleBatch(lane, index, result[0], work.lineage, work.dropped, resume, self.view)
        try:
            return materialize(self.op.traits.fanout, result, work)
        except TypeError as exc:
            raise self._error("worker", lane, work.lineage, exc) from exc

    def join(self, timeout: float) -> None:
        for t in self.threads:
            if t.ident is not None:
                t.join(timeout)


def materialize(fanout: str, result: Any, work: Work) -> Records | None:
    """Turn a worker's result for ``work`` into records: keys, lineage and tombstones per slot.

    Raises:
        TypeError: the result does not match the work item's slots or holds non-dict payloads.
    """
    n = len(work.keys)
    if not isinstance(result, (list, tuple)) or len(result) != n:
        got = len(result) if isinstance(result, (list, tuple)) else type(result).__name__
        raise TypeError(f"worker returned {got} outputs for {n} inputs")
    if fanout == "one":
        if None not in result:  # fast path: nothing dropped
            out = Records(list(result), work.keys, work.lineage, work.dropped)
        else:
            out = Records([], [], [], list(work.dropped))
            for r, k, lin in zip(result, work.keys, work.lineage):
                if r is None:
                    out.dropped.append(lin)
                else:
                    out.payloads.append(r)
                    out.keys.append(k)
                    out.lineage.append(lin)
    else:
        out = Records([], [], [], list(work.dropped))
        for rs, k, lin in zip(result, work.keys, work.lineage):
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
    bad = next((p for p in out.payloads if not isinstance(p, dict)), None)
    if bad is not None:
        raise TypeError(f"worker output must be a dict, got {type(bad).__name__}")
    return out if (out.payloads or out.dropped) else None
