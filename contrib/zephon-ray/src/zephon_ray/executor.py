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
* **A dead actor is an error, not a retry.** A worker that kills its process (segfault, out of
  memory) would kill the next actor too; the task fails with ``WorkerCrashedError`` at once, as with
  the processes runner, and the training loop sees it instead of a hang.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
from concurrent.futures import Future
from typing import Any

from zephon_core.plugin_api import ConfigError, OperatorError, WorkerCrashedError, WorkerFn, ZephonError
from zephon_ray.actor import WorkerActor
from zephon_ray.connect import ensure_ray
from zephon_ray.errors import RayWorkerError
from zephon_ray.options import RayOptions

log = logging.getLogger("zephon_ray")

_READY, _TASK, _DONE, _CLOSE = "ready", "task", "done", "close"
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
        return cloudpickle.dumps(fn)
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


class RayExecutor:
    """Runs ``fn`` on ``parallelism`` Ray actors (see the module docstring).

    Args:
        fn: the operator's pure worker function.
        parallelism: number of actors.
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
        cls = _actor_class(self._ray).options(**options.actor_options)
        self._actors: list[Any] = [cls.remote(self._fn_ref, label) for _ in range(parallelism)]
        self.pids: dict[int, int] = {}
        self._load: dict[int, int] = {}  # started, live actor -> tasks it holds
        self._dead: dict[int, str] = {}
        self._starting = set(range(parallelism))
        self._pending: deque[tuple[Future[Any], Any]] = deque()
        self._running: set[Future[Any]] = set()
        self._fatal: BaseException | None = None  # once set, every waiting and new task fails with it
        self._started_at = time.monotonic()
        for i, actor in enumerate(self._actors):
            self._watch(actor.ready.remote(), _READY, i)
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

    def close(self) -> None:
        """Stop dispatching, kill every actor and fail what is still waiting."""
        if self._closed:
            return
        self._closed = True
        self._events.put((_CLOSE,))
        self._thread.join(timeout=5)
        for actor in self._actors:
            try:
                self._ray.kill(actor, no_restart=True)
            except Exception:  # Ray already shut down, or the actor is gone
                pass
        self._actors = []
        leftovers = [f for f, _ in self._pending] + list(self._running)
        self._pending.clear()
        self._running.clear()
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
    def _watch(self, ref: Any, kind: str, i: int, fut: Future[Any] | None = None) -> None:
        """Post an event when ``ref`` completes (Ray calls back from its own thread)."""
        events = self._events
        ref.future().add_done_callback(lambda rf: events.put((kind, i, rf, fut)))

    def _loop(self) -> None:
        while True:
            timeout = self._startup_timeout()
            try:
                ev = self._events.get(timeout=timeout)
            except queue.Empty:
                self._check_startup()
                continue
            kind = ev[0]
            if kind == _CLOSE:
                return
            try:
                if kind == _TASK:
                    self._pending.append((ev[1], ev[2]))
                elif kind == _READY:
                    self._on_ready(ev[1], ev[2])
                elif kind == _DONE:
                    self._on_done(ev[1], ev[2], ev[3])
                self._dispatch()
            except Exception as exc:  # never let the dispatcher die silently: fail what waits
                log.exception("ray dispatcher of operator %r failed", self._label)
                self._fatal = self._fatal or exc
                self._fail_all(exc)

    def _dispatch(self) -> None:
        if self._fatal is None and len(self._dead) == len(self._actors):
            self._fatal = self._crash(None)
        if self._fatal is not None:
            self._fail_all(self._fatal)
            return
        depth = self._options.tasks_per_actor
        while self._pending:
            i = min(self._load, key=self._load.__getitem__, default=None)  # least busy; ties: lowest index
            if i is None or self._load[i] >= depth:
                return
            fut, task = self._pending.popleft()
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                ref = self._actors[i].run.remote(task)
            except Exception as exc:  # e.g. an argument Ray cannot serialise
                fut.set_exception(RayWorkerError(type(exc).__name__, f"cannot send the task to Ray: {exc}"))
                continue
            self._load[i] += 1
            self._running.add(fut)
            self._watch(ref, _DONE, i, fut)

    def _on_ready(self, i: int, rf: Future[Any]) -> None:
        self._starting.discard(i)
        if i in self._dead:  # given up on at the start timeout and killed
            return
        try:
            pid, host, load_error = rf.result()
        except Exception as exc:
            self._dead[i] = f"{type(exc).__name__}: {exc}"
            return
        if load_error is not None:
            self._dead[i] = load_error
            self._fatal = self._fatal or (
                ConfigError(
                    f"operator {self._label!r}: a Ray worker on {host} cannot load the worker function "
                    f"({load_error}); make your code importable there (runtime_env with py_modules, "
                    "working_dir or pip) or define the function in the training script"
                )
            )
            return
        self.pids[i] = pid
        self._load[i] = 0

    def _on_done(self, i: int, rf: Future[Any], fut: Future[Any]) -> None:
        self._running.discard(fut)
        try:
            ok, value = rf.result()
        except Exception as exc:
            if self._is_actor_death(exc):
                self._load.pop(i, None)
                self._dead[i] = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                _settle(fut, error=self._crash(i))
                return
            ok, value = False, (type(exc).__name__, str(exc), "", None)  # e.g. a result Ray cannot pickle
        if i in self._load:
            self._load[i] -= 1
        if ok:
            _settle(fut, value)
        else:
            _settle(fut, error=RayWorkerError(*value))

    def _is_actor_death(self, exc: BaseException) -> bool:
        from ray.exceptions import RayActorError

        return isinstance(exc, RayActorError)

    def _crash(self, i: int | None) -> WorkerCrashedError:
        if i is None:
            why = "; ".join(sorted(set(self._dead.values()))) or "unknown cause"
            return WorkerCrashedError(f"every Ray actor of operator {self._label!r} died ({why})")
        pid = self.pids.get(i)
        return WorkerCrashedError(
            f"a Ray actor of operator {self._label!r} died (pid {pid}): {self._dead[i]}; "
            "see the Ray worker logs for the cause (killed, segfault, out of memory)"
        )

    def _fail_all(self, exc: BaseException) -> None:
        for f, _ in self._pending:
            if f.set_running_or_notify_cancel():
                f.set_exception(exc)
        self._pending.clear()

    def _startup_timeout(self) -> float | None:
        if not self._starting:
            return None
        left = self._started_at + self._options.start_timeout - time.monotonic()
        return max(0.05, left)

    def _check_startup(self) -> None:
        """After ``start_timeout``: an error if no actor started, a warning if only some did."""
        waiting = sorted(self._starting)
        if not waiting:
            return
        self._starting.clear()
        msg = (
            f"operator {self._label!r}: {len(waiting)} of {len(self._actors)} Ray actors did not start within "
            f"{self._options.start_timeout:g} s; the cluster may lack the resources they ask for "
            f"(actor_options={self._options.actor_options})"
        )
        for i in waiting:
            self._dead[i] = "did not start"
            try:
                self._ray.kill(self._actors[i], no_restart=True)
            except Exception:
                pass
        if self._load:
            log.warning("%s; continuing with the others", msg)
        elif self._fatal is None:
            self._fatal = OperatorError(msg)
            self._fail_all(self._fatal)
