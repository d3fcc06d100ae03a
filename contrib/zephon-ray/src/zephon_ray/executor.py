"""A pool of Ray actors for one operator, fed by one dispatcher thread.

Design choices, and why:

* **Actors, not tasks.** The worker function (often holding a tokenizer or a reader) is pickled
  once, stored once with ``ray.put`` and loaded once per actor; a Ray task per work item would
  ship and unpickle it every time.
* **Tasks go to idle actors.** The pool size is the operator's parallelism, so ``parallelism=4``
  means four tasks running at most, as with threads or processes. A task waits on the driver until
  an actor is free rather than in an actor's queue, so a crashed actor takes exactly one task with
  it and a slow actor never holds a backlog. ``tasks_per_actor=2`` lets each actor hold one more
  task queued behind the running one, which hides the ~1 ms round trip of small tasks.
* **One dispatcher thread talks to Ray.** ``submit`` and Ray's completion callbacks only put
  events on a queue; the thread owns all bookkeeping, so there is no lock and no Ray call from
  inside a Ray callback.
* **Order is not kept here.** The stage holds the futures in submission order; this pool may
  finish tasks in any order.
* **A lost actor is replaced and its task re-run.** The work is a pure function of its task, so
  re-running it elsewhere gives the same result and the same batches. When an actor dies (its node
  was removed or preempted, its process was killed or ran out of memory), every task it held goes
  back to the front of the queue and a new actor is asked for; Ray places it on a live node, or
  keeps it waiting until a node with the resources joins.
* **A poison task is still an error.** A record that kills its worker would kill every actor it
  reaches. The task running when an actor's *process* died is blamed; after
  ``max_task_crashes`` (default 2) such deaths it fails with ``WorkerCrashedError`` and the stage
  names the operator and the samples. A node lost or preempted under a task is not the task's
  fault and is not counted (a task re-run ``_MAX_ATTEMPTS`` times fails all the same, so nothing
  loops forever). Tasks queued behind the running one are re-run without blame.
* **The pool follows the cluster.** The pool's target is the operator's parallelism. Actors Ray
  cannot place yet wait in Ray's queue instead of failing, and join the pool when a node with room
  appears; a lost node's actors leave the pool and their replacements wait for room the same way.
  Only if *no* actor starts within ``start_timeout`` is it an error.
* **Results are fetched when they are done, with a bound.** A finished task's result is pulled to
  the driver at once; the stage submits at most its reorder window (2 x parallelism work items)
  before taking the oldest result, so the driver never holds more than a window of results.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import Counter, deque
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from zephon_core.plugin_api import ConfigError, OperatorError, WorkerCrashedError, WorkerFn, ZephonError
from zephon_ray.actor import WorkerActor
from zephon_ray.connect import ensure_ray
from zephon_ray.errors import RayWorkerError
from zephon_ray.options import RayOptions

log = logging.getLogger("zephon_ray")

_READY, _TASK, _DONE, _CLOSE, _RESIZE = "ready", "task", "done", "close", "resize"
_MAX_ATTEMPTS = 10
"""A task re-run this many times (nodes lost under it, whatever the cause) fails: a bound, not a policy."""
_STARTUP_DEATHS = 3
"""Actors dying before their first task, per unit of target, before the pool gives up (nothing can run)."""
_remote_class: list[Any] = []


def _actor_class(ray: Any) -> Any:
    """``ray.remote(WorkerActor)``, made once (Ray exports it again to each new session by itself)."""
    if not _remote_class:
        _remote_class.append(ray.remote(max_concurrency=1, max_restarts=0, max_task_retries=0)(WorkerActor))
    return _remote_class[0]


def _settle(fut: Future[Any], value: Any = None, error: BaseException | None = None) -> None:
    """Complete ``fut`` unless :meth:`RayExecutor.close` already did (a late Ray callback)."""
    if fut.done():
        return
    if error is not None:
        fut.set_exception(error)
    else:
        fut.set_result(value)


def serialize_worker(fn: WorkerFn, label: str) -> bytes:
    """Pickle ``fn`` with cloudpickle, or fail with a :class:`ConfigError` naming the operator.

    cloudpickle (what Ray itself uses) accepts lambdas and closures, so more functions work here
    than on the processes runner; what it cannot pickle (locks, open files, sockets, generators)
    could never reach another machine either.
    """
    from ray import cloudpickle

    try:
        data: bytes = cloudpickle.dumps(fn)  # type: ignore[no-untyped-call]
        return data
    except Exception as exc:
        inner = getattr(fn, "__wrapped__", fn)  # the worker inside the kernel's metrics wrapper
        find = getattr(inner, "unpicklable_step", None)  # a fused group names its step (not in the plugin API yet)
        step = find(cloudpickle.dumps) if callable(find) else None
        who = f"{step!r} (fused into {label!r})" if isinstance(step, str) else repr(label)
        raise ConfigError(
            f"operator {who}: its worker function cannot be pickled for the ray runner "
            f"({type(exc).__name__}: {exc}); keep locks, open files and clients out of the function "
            "(open them lazily inside it) or use runner='threads'"
        ) from exc


@dataclass
class _Task:
    """One submitted task and what happened to its attempts."""

    fut: Future[Any]
    task: Any
    attempts: int = 0
    crashes: list[str] = field(default_factory=list)  # "pid P on node N: reason" per blamed death


@dataclass
class _Actor:
    """One actor of the pool, from the request until it is gone."""

    handle: Any
    started: float
    pid: int | None = None
    node: str = ""
    host: str = ""
    ready: bool = False
    retiring: bool = False  # the pool shrank: kill it when its tasks are done
    held: list[_Task] = field(default_factory=list)  # in submission order: held[0] runs


def death_reason(exc: BaseException) -> str:
    """The kind of an actor's death, for the metrics and the logs: a few fixed words."""
    from ray.exceptions import ObjectLostError

    if getattr(exc, "preempted", False):
        return "node preempted"
    if isinstance(exc, ObjectLostError):  # the task ran, but its result was on a node that is gone
        return "node lost"
    text = str(exc).lower()
    if "node has died" in text or "node died" in text or "node was terminated" in text:
        return "node lost"
    if type(exc).__name__ == "OutOfMemoryError" or "memory pressure" in text or "low on memory" in text:
        return "out of memory"  # Ray's memory monitor killed it (its own words; a kernel OOM kill is a death)
    if "never ran" in text:
        return "not started"
    return "process died"


def _blamed(reason: str) -> bool:
    """Whether a death with ``reason`` counts against the task that was running (see module docstring)."""
    return reason in ("process died", "out of memory")


class RayExecutor:
    """Runs ``fn`` on a pool of Ray actors that follows the cluster (see the module docstring).

    Args:
        fn: the operator's pure worker function.
        parallelism: the pool's target size (the operator's parallelism).
        label: the operator's name, used in every error message.
        options: where Ray is and what each actor asks for.

    Raises:
        ConfigError: ``fn`` cannot be pickled, or Ray cannot be started or reached.
    """

    def __init__(self, fn: WorkerFn, parallelism: int, label: str, options: RayOptions) -> None:
        fn_bytes = serialize_worker(fn, label)
        self._label = label
        self._options = options
        self._ray = ensure_ray(options)
        self._events: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()
        self._closed = False
        self._fn_ref = self._ray.put(fn_bytes)  # stored once; each actor fetches it once
        self._cls = _actor_class(self._ray).options(**options.scheduling_options)
        self._target = parallelism
        self._actors: dict[int, _Actor] = {}
        self._next_id = 0
        self.pids: dict[int, int] = {}  # live actor -> its process id
        self._pending: deque[_Task] = deque()
        self._fatal: BaseException | None = None  # once set, every waiting and new task fails with it
        self._started_at = time.monotonic()
        self._any_started = False
        self._startup_deaths = 0
        self._warned_slow_start = False
        self._tasks_done = 0
        self._retries = 0
        self._replacements = 0
        self._crash_failures = 0
        self._deaths: Counter[str] = Counter()
        self._peak = 0
        self._lock = threading.Lock()  # guards the numbers metrics() reads from other threads
        for _ in range(parallelism):
            self._add_actor()
        self._thread = threading.Thread(target=self._loop, name=f"zephon-{label}-ray", daemon=True)
        self._thread.start()

    # -- called from the stage's threads ---------------------------------------------------------
    def submit(self, task: Any) -> Future[Any]:
        """Queue ``task``; the returned future completes when an actor has run it."""
        if self._closed:
            raise RuntimeError(f"the ray executor of operator {self._label!r} is closed")
        fut: Future[Any] = Future()
        self._events.put((_TASK, fut, task))
        return fut

    def resize(self, parallelism: int) -> None:
        """Aim for ``parallelism`` actors from now on (capped by ``max_parallelism``); the autotuner calls it.

        Growing asks Ray for more actors (they join when placed); shrinking retires idle actors at
        once and busy ones when their tasks are done. Output never changes: the stage reorders.
        """
        ceiling = self._options.max_parallelism
        target = max(1, parallelism if ceiling is None else min(parallelism, ceiling))
        self._events.put((_RESIZE, target))

    def metrics(self) -> dict[str, Any]:
        """The pool's state and history, JSON-compatible: what ``pipeline.metrics()`` shows for this step.

        ``actors`` run tasks now; ``starting`` wait for Ray to place them (a cluster without room
        yet); ``nodes`` is how many nodes the running actors span; ``retries`` counts tasks re-run
        after their actor died, ``replacements`` actors started in place of lost ones, and
        ``actor_deaths`` the deaths by reason (``node lost``, ``node preempted``, ``process died``,
        ``out of memory``, ``not started``).
        """
        with self._lock:
            live = [a for a in self._actors.values() if a.ready]
            return {
                "target": self._target,
                "actors": len(live),
                "starting": sum(1 for a in self._actors.values() if not a.ready),
                "peak_actors": self._peak,
                "nodes": len({a.node for a in live}),
                "retries": self._retries,
                "replacements": self._replacements,
                "crash_failures": self._crash_failures,
                "actor_deaths": dict(self._deaths),
            }

    def close(self) -> None:
        """Stop dispatching, kill every actor and fail what is still waiting."""
        if self._closed:
            return
        self._closed = True
        self._events.put((_CLOSE,))
        self._thread.join(timeout=5)
        with self._lock:
            actors = list(self._actors.values())
            self._actors.clear()
        for actor in actors:
            try:
                self._ray.kill(actor.handle, no_restart=True)
            except Exception:  # Ray already shut down, or the actor is gone
                pass
        leftovers = [t.fut for t in self._pending] + [t.fut for a in actors for t in a.held]
        self._pending.clear()
        while True:  # tasks submitted after the dispatcher stopped
            try:
                ev = self._events.get_nowait()
            except queue.Empty:
                break
            if ev[0] == _TASK:
                leftovers.append(ev[1])
        closed = ZephonError(f"operator {self._label!r}: the ray executor was closed")
        for f in leftovers:  # an exception, not cancel(): concurrent.futures.wait() ignores plain cancels
            if not f.done() and (f.running() or f.set_running_or_notify_cancel()):
                f.set_exception(closed)

    # -- dispatcher thread -------------------------------------------------------------------------
    def _add_actor(self, replacing: bool = False) -> None:
        """Ask Ray for one more actor; it joins the pool when its ``ready`` call returns."""
        i = self._next_id
        self._next_id += 1
        handle = self._cls.remote(self._fn_ref, self._label)
        with self._lock:
            self._actors[i] = _Actor(handle, time.monotonic())
            if replacing:
                self._replacements += 1
        self._watch(handle.ready.remote(), _READY, i)

    def _watch(self, ref: Any, kind: str, i: int, task: _Task | None = None) -> None:
        """Post an event when ``ref`` completes (Ray calls back from its own thread)."""
        events = self._events
        ref.future().add_done_callback(lambda rf: events.put((kind, i, rf, task)))

    def _loop(self) -> None:
        while True:
            try:
                ev = self._events.get(timeout=self._startup_timeout())
            except queue.Empty:
                self._check_startup()
                continue
            kind = ev[0]
            if kind == _CLOSE:
                return
            try:
                if kind == _TASK:
                    self._pending.append(_Task(ev[1], ev[2]))
                elif kind == _READY:
                    self._on_ready(ev[1], ev[2])
                elif kind == _DONE:
                    self._on_done(ev[1], ev[2], ev[3])
                elif kind == _RESIZE:
                    self._on_resize(ev[1])
                self._dispatch()
            except Exception as exc:  # never let the dispatcher die silently: fail what waits
                log.exception("ray dispatcher of operator %r failed", self._label)
                self._fatal = self._fatal or exc
                self._fail_all(exc)

    def _dispatch(self) -> None:
        if self._fatal is not None:
            self._fail_all(self._fatal)
            return
        depth = self._options.tasks_per_actor
        while self._pending:
            free = [(len(a.held), i) for i, a in self._actors.items() if a.ready and not a.retiring]
            if not free:
                return
            load, i = min(free)  # least busy; ties: the oldest actor
            if load >= depth:
                return
            t = self._pending.popleft()
            if t.fut.done() or not (t.fut.running() or t.fut.set_running_or_notify_cancel()):
                continue  # cancelled while it waited, or a late result of a lost attempt settled it
            try:
                ref = self._actors[i].handle.run.remote(t.task)
            except Exception as exc:  # e.g. an argument Ray cannot serialise
                _settle(t.fut, error=RayWorkerError(type(exc).__name__, f"cannot send the task to Ray: {exc}"))
                continue
            t.attempts += 1
            self._actors[i].held.append(t)
            self._watch(ref, _DONE, i, t)

    def _on_ready(self, i: int, rf: Future[Any]) -> None:
        actor = self._actors.get(i)
        if actor is None:  # retired or closed before it started
            return
        try:
            pid, host, load_error, node = rf.result()
        except Exception as exc:
            self._lost(i, exc)
            return
        if load_error is not None:
            self._fatal = self._fatal or (
                ConfigError(
                    f"operator {self._label!r}: a Ray worker on {host} cannot load the worker function "
                    f"({load_error}); make your code importable there (runtime_env with py_modules, "
                    "working_dir or pip) or define the function in the training script"
                )
            )
            return
        with self._lock:
            actor.ready, actor.pid, actor.host, actor.node = True, pid, host, node
            self.pids[i] = pid
            self._peak = max(self._peak, sum(1 for a in self._actors.values() if a.ready))
        if self._any_started and time.monotonic() - actor.started > 1.0:
            log.info("operator %r: a Ray actor joined the pool on node %s (pid %d)", self._label, node[:12], pid)
        self._any_started = True

    def _on_done(self, i: int, rf: Future[Any], t: _Task) -> None:
        actor = self._actors.get(i)
        try:
            ok, value = rf.result()
        except Exception as exc:
            if self._is_lost(exc):
                if actor is not None and t in actor.held:
                    self._lost(i, exc)
                else:  # its actor's loss was handled already; the task is queued again or settled
                    pass
                return
            ok, value = False, (type(exc).__name__, str(exc), "", None)  # e.g. a result Ray cannot pickle
        if actor is not None and t in actor.held:
            actor.held.remove(t)
            if actor.retiring and not actor.held:
                self._retire(i)
        self._tasks_done += 1
        self._startup_deaths = 0
        if ok:
            _settle(t.fut, value)
        else:
            _settle(t.fut, error=RayWorkerError(*value))

    def _on_resize(self, target: int) -> None:
        with self._lock:
            self._target = target
        alive = [i for i, a in self._actors.items() if not a.retiring]
        for _ in range(target - len(alive)):
            self._add_actor()
        if len(alive) <= target:
            return
        # shrink: waiting requests first, then idle actors, then busy ones when their tasks are done
        order = sorted(alive, key=lambda j: (self._actors[j].ready, len(self._actors[j].held), -j))
        for j in order[: len(alive) - target]:
            self._actors[j].retiring = True
            if not self._actors[j].held:
                self._retire(j)

    def _retire(self, i: int) -> None:
        with self._lock:
            actor = self._actors.pop(i, None)
            self.pids.pop(i, None)
        if actor is not None:
            try:
                self._ray.kill(actor.handle, no_restart=True)
            except Exception:
                pass

    def _is_lost(self, exc: BaseException) -> bool:
        """An actor death, or a result lost with its node: the task may be re-run elsewhere."""
        from ray.exceptions import ObjectLostError, RayActorError

        return isinstance(exc, (RayActorError, ObjectLostError))

    def _lost(self, i: int, exc: BaseException) -> None:
        """Actor ``i`` is gone: re-queue what it held (blaming the running task if it killed it) and replace it."""
        reason = death_reason(exc)
        with self._lock:
            actor = self._actors.pop(i, None)
            self.pids.pop(i, None)
            self._deaths[reason] += 1
        if actor is None:
            return
        try:  # usually dead already; a result lost with its node may leave the actor alive elsewhere
            self._ray.kill(actor.handle, no_restart=True)
        except Exception:
            pass
        where = f"pid {actor.pid} on node {actor.node[:12] or '?'}" if actor.pid else "an actor that never started"
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        log.warning(
            "operator %r: a Ray actor died (%s, %s): %s; %d task(s) re-queued",
            self._label,
            reason,
            where,
            first,
            len(actor.held),
        )
        if not actor.ready:
            self._startup_deaths += 1
        requeue: list[_Task] = []
        for k, t in enumerate(actor.held):
            if k == 0 and _blamed(reason):
                t.crashes.append(f"{where}: {type(exc).__name__}: {first}")
            if len(t.crashes) >= self._options.max_task_crashes or t.attempts >= _MAX_ATTEMPTS:
                with self._lock:
                    self._crash_failures += 1
                _settle(t.fut, error=self._crash(t, reason))
            else:
                requeue.append(t)
        with self._lock:
            self._retries += len(requeue)
        self._pending.extendleft(reversed(requeue))  # first in line again, in their order
        if self._closed or actor.retiring:
            return
        if self._startup_deaths >= _STARTUP_DEATHS * max(1, self._target) and self._tasks_done == 0:
            why = "; ".join(sorted(self._deaths)) or "unknown cause"
            self._fatal = self._fatal or WorkerCrashedError(
                f"every Ray actor of operator {self._label!r} died before running a task "
                f"({self._startup_deaths} in a row: {why}); see the Ray worker logs"
            )
            return
        self._add_actor(replacing=True)

    def _crash(self, t: _Task, reason: str) -> WorkerCrashedError:
        if len(t.crashes) >= self._options.max_task_crashes:
            return WorkerCrashedError(
                f"a task of operator {self._label!r} killed {len(t.crashes)} Ray actors in a row "
                f"({'; '.join(t.crashes)}), so the data, not the cluster, is at fault "
                f"(max_task_crashes={self._options.max_task_crashes}); see the Ray worker logs for the cause "
                "(segfault, out of memory, a native library's abort)"
            )
        return WorkerCrashedError(
            f"a task of operator {self._label!r} lost its Ray actor {t.attempts} times (last: {reason}); "
            "the cluster keeps losing nodes under it"
        )

    def _fail_all(self, exc: BaseException) -> None:
        for t in self._pending:
            if t.fut.running() or t.fut.set_running_or_notify_cancel():
                _settle(t.fut, error=exc)
        self._pending.clear()

    def _startup_timeout(self) -> float | None:
        if self._any_started or self._warned_slow_start or self._fatal is not None:
            return None
        left = self._started_at + self._options.start_timeout - time.monotonic()
        return max(0.05, left)

    def _check_startup(self) -> None:
        """After ``start_timeout`` with no actor running: an error (the cluster cannot place them)."""
        if self._any_started or self._fatal is not None or self._closed:
            return
        waiting = sum(1 for a in self._actors.values() if not a.ready)
        self._warned_slow_start = True
        self._fatal = OperatorError(
            f"operator {self._label!r}: {waiting} of {self._target} Ray actors did not start within "
            f"{self._options.start_timeout:g} s; the cluster may lack the resources they ask for "
            f"(actor_options={self._options.scheduling_options})"
        )
        self._fail_all(self._fatal)
