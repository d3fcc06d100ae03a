"""The processes runner: a pool of worker processes per operator, run by its own I/O thread (dispatch,
failures, resizing). The fork server is in :mod:`~zephon_core.runtime.forkserver`, a worker's loop in
:mod:`~zephon_core.runtime.process_worker`, the messages in :mod:`~zephon_core.runtime.shm`; the design
is in docs/performance.md and what a dying worker does in docs/failure-modes.md."""

from __future__ import annotations

import collections
import contextlib
import functools
import itertools
import os
import socket
import threading
import time
import warnings
from concurrent.futures import Future
from multiprocessing.connection import wait
from typing import Any, cast

from zephon_core.errors import ConfigError, WorkerCrashedError
from zephon_core.ops.contract import WorkerFn
from zephon_core.runtime.forkserver import _PRELOAD, _bootstrap_hint, _context, _modules_of
from zephon_core.runtime.fusion import FusedWorker
from zephon_core.runtime.process_worker import _READY, _worker_main
from zephon_core.runtime.process_worker import RemoteError as RemoteError
from zephon_core.runtime.shm import Broadcast, Channel, FrameTooLarge, encode

_QUEUED_FRAME_MAX = 64 * 1024
"""A task is sent to a worker still running its previous one (so it never waits for a round trip)
only if its frame is at most this long: it must fit the socket's buffer (about 200 KiB on Linux)."""

MAX_REPLACEMENTS = 3
"""Idle deaths replaced per worker slot before the pool gives up and fails (a crash loop is a bug)."""


class _ProcessExecutor:
    def __init__(self, fn: WorkerFn, parallelism: int, label: str) -> None:
        try:
            self._fn_msg = encode(fn)
        except Exception as exc:
            inner = getattr(fn, "__wrapped__", fn)  # the worker inside the metrics wrapper
            step = inner.unpicklable_step() if isinstance(inner, FusedWorker) else None  # a fused stage's steps
            who = f"{step!r} (fused into {label!r})" if step is not None else repr(label)
            raise ConfigError(
                f"operator {who}: its worker function cannot be pickled for the processes runner "
                f"({exc}); use a module-level function or runner='threads'"
            ) from exc
        self._label = label
        self._n = parallelism
        modules = _modules_of(fn)
        self._ctx = _context(modules)
        forked = self._ctx.get_start_method() == "forkserver"
        self._args = (tuple(dict.fromkeys([*_PRELOAD, *modules])), dict(os.environ) if forked else None)
        self._channels: list[Channel] = []
        self._procs: list[Any] = []
        self._lock = threading.Lock()
        self._pending: collections.deque[tuple[int, Any]] = collections.deque()
        self._futures: dict[int, Future[Any]] = {}
        self._ready: set[int] = set()
        self._was_ready: set[int] = set()  # workers that loaded their function at least once
        self._busy: dict[int, collections.deque[int]] = {}
        self._dead: set[int] = set()
        self._why: dict[int, str] = {}  # worker index -> why it could not start or load its function
        self._ids = itertools.count()
        self._wake_r, self._wake_w = os.pipe()
        self._closed = False
        self._replaced = 0
        self._target = parallelism  # workers wanted (``resize``); applied by the I/O thread
        self._retired: set[int] = set()  # slots given up by a shrink: their exit is not a crash
        self._reaped: set[int] = set()  # retired slots whose process has exited
        children = [self._connect(i) for i in range(parallelism)]
        self._io = threading.Thread(target=self._run, args=(children,), name=f"zephon-{label}-io", daemon=True)
        self._io.start()

    # -- the stage's side ---------------------------------------------------------------------
    def submit(self, task: Any) -> Future[Any]:
        fut: Future[Any] = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("executor is closed")
            if self._all_dead():
                fut.set_exception(self._crash_error(None))
                return fut
            tid = next(self._ids)
            self._futures[tid] = fut
            self._pending.append((tid, task))
        os.write(self._wake_w, b"x")
        return fut

    @property
    def parallelism(self) -> int:
        return self._target

    def resize(self, parallelism: int) -> None:
        """Run ``parallelism`` workers from now on (the autotuner's knob; never changes any output). The
        I/O thread forks new ones, or retires the newest once they finish the tasks they hold."""
        with self._lock:
            self._target = max(1, int(parallelism))
        os.write(self._wake_w, b"x")

    def _all_dead(self) -> bool:
        return all(i in self._dead or i in self._retired for i in range(len(self._procs)))

    def _crash_error(self, idx: int | None) -> WorkerCrashedError:
        idx = min(self._dead, default=None) if idx is None else idx
        proc = self._procs[idx] if idx is not None else None
        code = proc.exitcode if proc is not None else None
        why = self._why.get(idx, "") if idx is not None else ""
        if not why and idx is not None and idx not in self._was_ready:
            why = _bootstrap_hint()
        detail = f": {why}" if why else "; see the worker's stderr for the cause"
        return WorkerCrashedError(f"a worker process of operator {self._label!r} died (exit code {code}){detail}")

    # -- the I/O thread -------------------------------------------------------------------------
    def _run(self, children: list[socket.socket]) -> None:
        try:
            self._start(list(range(self._n)), children)
        except BaseException as exc:  # e.g. no process can be created: every task fails, clearly
            for i in range(self._n):
                self._why[i] = f"the pool could not start: {type(exc).__name__}: {exc}"
                proc = self._procs[i]
                if proc is not None:
                    proc.kill()
                self._on_death(i)
        self._loop()

    def _connect(self, i: int) -> socket.socket:
        """Give slot ``i`` (a new one, or a dead worker's) a new connection; returns the worker's end."""
        parent, child = socket.socketpair()
        with self._lock:
            if i < len(self._procs):
                self._channels[i].close()
                self._channels[i] = Channel(parent)
            else:
                self._channels.append(Channel(parent))
                self._procs.append(None)
                self._busy[i] = collections.deque()
        return child

    def _start(self, slots: list[int], children: list[socket.socket]) -> None:
        """Start a worker in each slot on its end of the connection, then send each the function (its
        data copied once for all of them). The ends are closed here, so that a death reads as end-of-file."""
        try:
            for i, child in zip(slots, children):
                if self._closed:
                    return
                name = f"zephon-{self._label}-{i}"
                proc = self._ctx.Process(target=_worker_main, args=(child, *self._args), daemon=True, name=name)
                proc.start()
                with self._lock:
                    self._procs[i] = proc
            message = Broadcast(self._fn_msg)
            try:
                for i in slots:
                    with contextlib.suppress(OSError):  # died already: its sentinel tells
                        self._channels[i].send_broadcast(message)
            finally:
                message.close()
        finally:
            for child in children:
                child.close()

    def _replace(self, i: int, code: int | None) -> bool:
        """Start a new worker in slot ``i`` (its predecessor died holding no task); False if it cannot."""
        if self._closed or self._replaced >= MAX_REPLACEMENTS * self._n:
            return False
        old = self._procs[i]
        child = self._connect(i)
        try:
            self._start([i], [child])
        except Exception:
            return False
        if old.exitcode is not None:
            old.close()
        self._replaced += 1
        with self._lock:
            self._dead.discard(i)
        msg = f"a worker process of operator {self._label!r} died while idle (exit code {code}) and was replaced"
        warnings.warn(f"{msg}; no task was lost", RuntimeWarning, stacklevel=1)
        return True

    def _slots(self) -> list[int]:
        """Slots that count toward the target: all but retired ones (a crashed one is not a shrink)."""
        return [i for i in range(len(self._procs)) if i not in self._retired]

    def _apply_resize(self) -> None:
        """Grow or shrink the pool towards ``resize``'s target (I/O thread only)."""
        slots = self._slots()
        for _ in range(self._target - len(slots)):
            i = len(self._procs)
            child = self._connect(i)
            try:
                self._start([i], [child])
            except Exception as exc:
                self._why[i] = f"it could not be added: {type(exc).__name__}: {exc}"
                with self._lock:
                    self._dead.add(i)
        if len(slots) > self._target:
            crashed_first = sorted(slots, key=lambda i: (i not in self._dead, -i))  # then the newest
            with self._lock:
                for i in crashed_first[: len(slots) - self._target]:
                    self._retired.add(i)
                    self._ready.discard(i)
        for i in sorted(self._retired - self._dead):
            if not self._busy[i]:  # its last task is answered: ask it to exit
                with self._lock:
                    self._dead.add(i)
                with contextlib.suppress(OSError):
                    self._channels[i].send(None)

    def _dispatch(self) -> None:
        """Send pending tasks: first to idle workers, then one more to each busy one, queued in its socket."""
        while True:
            with self._lock:
                if not self._pending:
                    return
                live = [i for i in sorted(self._ready) if i not in self._dead]
                idle = [i for i in live if not self._busy[i]]
                queued = not idle
                if queued:
                    idle = [i for i in live if len(self._busy[i]) == 1]
                    if not idle:
                        return
                i = idle[0]
                tid, task = self._pending.popleft()
                self._busy[i].append(tid)
            try:
                self._channels[i].send_encoded(encode((tid, task)), max_frame=_QUEUED_FRAME_MAX if queued else None)
            except ConnectionError:  # the worker died: its sentinel or socket reports it and fails the task
                pass
            except Exception as exc:  # nothing was written: too large to queue, no segment now, or unpicklable
                with self._lock:
                    self._busy[i].remove(tid)
                    if queued and isinstance(exc, (FrameTooLarge, OSError)):  # wait for an idle worker
                        self._pending.appendleft((tid, task))
                        return
                    fut = self._futures.pop(tid)
                fut.set_exception(exc)
            del task

    def _loop(self) -> None:
        while not self._closed:
            if self._target != len(self._slots()) or self._retired - self._dead:
                self._apply_resize()
            self._dispatch()
            handlers: dict[int, Any] = {self._wake_r: None}
            with self._lock:
                for i, proc in enumerate(self._procs):
                    if proc is None:
                        continue
                    if i in self._retired and i in self._dead and i not in self._reaped:  # asked to exit: reap it
                        handlers[proc.sentinel] = functools.partial(self._on_retired_exit, i)
                    elif i not in self._dead:
                        handlers[self._channels[i].fileno()] = functools.partial(self._receive, i)
                        handlers[proc.sentinel] = functools.partial(self._on_death, i)
            for ready in cast("list[int]", wait(list(handlers), timeout=1.0)):  # some of the keys given
                handler = handlers[ready]
                if handler is None:
                    os.read(self._wake_r, 4096)
                elif not self._closed:
                    handler()

    def _receive(self, i: int) -> bool:
        """Handle one message from worker ``i``; False when its connection is gone (it died)."""
        try:
            tid, ok, value = self._channels[i].recv()
        except (EOFError, OSError):
            self._on_death(i)
            return False
        except Exception as exc:  # a result that cannot be unpickled here: fail the task it answers
            tid, ok, value = (self._busy[i][0] if self._busy[i] else None), False, exc
        if tid == _READY:
            if ok:
                with self._lock:
                    if i not in self._retired:
                        self._ready.add(i)
                    self._was_ready.add(i)
            else:
                self._why[i] = f"it could not load its worker function: {value[0]}: {value[1]}"
            return True
        with self._lock:
            if tid in self._busy[i]:
                self._busy[i].remove(tid)  # the head: a worker runs its tasks in the order sent
            fut = self._futures.pop(tid, None)
        if fut is not None and not fut.done():  # else cancelled meanwhile
            if ok:
                fut.set_result(value)
            else:
                fut.set_exception(RemoteError(*value) if isinstance(value, tuple) else value)
        return True

    def _drain(self, i: int) -> None:
        """Take the results a dead worker sent before it died, so only the task it held fails."""
        ch = self._channels[i]
        while self._busy[i]:
            try:
                readable = wait([ch.sock], timeout=0)  # poll, not select: descriptors may exceed 1024
            except OSError:
                return
            if not readable or not self._receive(i):
                return

    def _on_retired_exit(self, i: int) -> None:
        self._procs[i].join(timeout=0.1)
        with self._lock:
            self._reaped.add(i)  # stays retired and dead: the slot is not used again

    def _on_death(self, i: int) -> None:
        with self._lock:
            if i in self._dead:
                return
            self._dead.add(i)  # first, so that draining stops at end-of-file instead of coming back here
            self._ready.discard(i)
        proc = self._procs[i]
        if proc is not None:
            proc.join(timeout=0.1)
        self._drain(i)
        with self._lock:
            idle = not self._busy[i] and i in self._was_ready
        if idle and self._replace(i, proc.exitcode):
            return
        with self._lock:
            # the task it held, and any queued behind it (the pipeline stops on the error anyway)
            lost = [self._futures.pop(t) for t in self._busy[i] if t in self._futures]
            self._busy[i].clear()
            if self._all_dead():
                lost += [self._futures.pop(t) for t, _ in self._pending]
                self._pending.clear()
        err = self._crash_error(i)
        for f in lost:
            if not f.done():
                f.set_exception(err)

    # -- closing --------------------------------------------------------------------------------
    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        os.write(self._wake_w, b"x")
        self._io.join(timeout=10)
        procs = [p for p in self._procs if p is not None]
        for i, p in enumerate(self._procs):
            if p is not None and i not in self._dead:
                with contextlib.suppress(Exception):
                    self._channels[i].sock.settimeout(0.5)
                    self._channels[i].send(None)
        deadline = time.monotonic() + 2.0
        for p in procs:
            p.join(max(0.0, deadline - time.monotonic()))
            if p.is_alive():  # hung in a user function: it will not read the stop message
                p.kill()
        for p in procs:
            p.join(timeout=2)
            if not p.is_alive():
                p.close()  # releases its sentinel descriptor now, not at garbage collection
        for c in self._channels:
            c.close()
        os.close(self._wake_r)
        os.close(self._wake_w)
        for f in self._futures.values():
            if not f.done():
                f.cancel()


class ProcessRunner:
    """One pool of worker processes per operator; CPU-bound Python runs in parallel despite the GIL."""

    name = "processes"
    crosses_processes = True  # runtime.runners.CrossesProcesses: records are copied to the workers and back

    def start(self, fn: WorkerFn, parallelism: int, label: str) -> Any:
        return _ProcessExecutor(fn, parallelism, label)
