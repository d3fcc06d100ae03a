"""The processes runner: a pool of spawned worker processes per operator.

Workers are started once per pipeline with the ``spawn`` method (safe with the threads the
pipeline already runs) and receive the pickled worker function once. Tasks and results travel over
one pipe per worker using pickle protocol 5: numpy arrays go as raw out-of-band buffers, one
``send_bytes`` each, never element by element. Nothing is placed in ``/dev/shm``, so a crashed
worker cannot leave a stale segment behind.

A worker that dies (SIGKILL, segfault, out of memory) is noticed through its process sentinel and
the task it held fails with :class:`WorkerCrashedError` at once, so the training loop sees an error
within a second, never a hang.
"""

from __future__ import annotations

import collections
import itertools
import multiprocessing as mp
import os
import pickle
import signal
import threading
import traceback
from concurrent.futures import Future
from multiprocessing.connection import Connection, wait
from typing import Any

from zephon_core.errors import ConfigError, WorkerCrashedError
from zephon_core.ops.contract import ItemFailure, WorkerFn


def _send(conn: Connection, obj: Any) -> None:
    buffers: list[pickle.PickleBuffer] = []
    header = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
    conn.send_bytes(len(buffers).to_bytes(4, "little") + header)
    for buf in buffers:
        conn.send_bytes(buf.raw())


def _recv(conn: Connection) -> Any:
    first = conn.recv_bytes()
    n = int.from_bytes(first[:4], "little")
    buffers = [conn.recv_bytes() for _ in range(n)]
    return pickle.loads(first[4:], buffers=buffers)


class RemoteError(Exception):
    """An exception raised inside a worker process, carried back as text."""

    def __init__(self, type_name: str, message: str, tb: str, index: int | None = None) -> None:
        super().__init__(message if index is not None else f"{type_name}: {message}")
        self.type_name = type_name
        self.message = message
        self.remote_traceback = tb
        self.index = index


def _worker_main(conn: Connection, fn_bytes: bytes) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    fn = pickle.loads(fn_bytes)
    while True:
        try:
            msg = _recv(conn)
        except (EOFError, OSError):
            return
        if msg is None:
            return
        task_id, task = msg
        try:
            out = (task_id, True, fn(task))
        except BaseException as exc:  # report, keep serving
            index = getattr(exc, "index", None) if isinstance(exc, ItemFailure) else None
            out = (task_id, False, (type(exc).__name__, str(exc), traceback.format_exc(), index))
        try:
            _send(conn, out)
        except Exception as exc:  # an unpicklable result: report it instead
            _send(conn, (task_id, False, (type(exc).__name__, f"cannot send result: {exc}", "", None)))


class _ProcessExecutor:
    def __init__(self, fn: WorkerFn, parallelism: int, label: str) -> None:
        try:
            fn_bytes = pickle.dumps(fn, protocol=5)
        except Exception as exc:
            raise ConfigError(
                f"operator {label!r}: its worker function cannot be pickled for the processes runner "
                f"({exc}); use a module-level function or runner='threads'"
            ) from exc
        self._label = label
        ctx = mp.get_context("spawn")
        self._procs: list[Any] = []
        self._conns: list[Connection] = []
        for _ in range(parallelism):
            parent, child = ctx.Pipe(duplex=True)
            proc = ctx.Process(target=_worker_main, args=(child, fn_bytes), daemon=True, name=f"zephon-{label}")
            proc.start()
            child.close()
            self._procs.append(proc)
            self._conns.append(parent)
        self._lock = threading.Lock()
        self._pending: collections.deque[tuple[int, Any]] = collections.deque()
        self._futures: dict[int, Future[Any]] = {}
        self._busy: dict[int, int] = {}  # worker index -> task id
        self._dead: set[int] = set()
        self._ids = itertools.count()
        self._wake_r, self._wake_w = os.pipe()
        self._closed = False
        self._io = threading.Thread(target=self._loop, name=f"zephon-{label}-io", daemon=True)
        self._io.start()

    def submit(self, task: Any) -> Future[Any]:
        fut: Future[Any] = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("executor is closed")
            if len(self._dead) == len(self._procs):
                fut.set_exception(self._crash_error(None))
                return fut
            tid = next(self._ids)
            self._futures[tid] = fut
            self._pending.append((tid, task))
        os.write(self._wake_w, b"x")
        return fut

    def _crash_error(self, idx: int | None) -> WorkerCrashedError:
        code = self._procs[idx].exitcode if idx is not None else None
        return WorkerCrashedError(
            f"a worker process of operator {self._label!r} died (exit code {code}); see the worker's stderr for the cause"
        )

    def _dispatch(self) -> None:
        with self._lock:
            for i in range(len(self._procs)):
                if not self._pending:
                    return
                if i in self._busy or i in self._dead:
                    continue
                tid, task = self._pending.popleft()
                self._busy[i] = tid
                try:
                    _send(self._conns[i], (tid, task))
                except Exception as exc:
                    del self._busy[i]
                    self._futures.pop(tid).set_exception(exc)

    def _loop(self) -> None:
        sentinels = {p.sentinel: i for i, p in enumerate(self._procs)}
        conns = {c: i for i, c in enumerate(self._conns)}
        while not self._closed:
            self._dispatch()
            waitables: list[Any] = [self._wake_r]
            waitables += [c for c, i in conns.items() if i in self._busy]
            waitables += [s for s, i in sentinels.items() if i not in self._dead]
            for ready in wait(waitables, timeout=1.0):
                if ready == self._wake_r:
                    os.read(self._wake_r, 4096)
                elif ready in conns:
                    self._receive(conns[ready])
                else:
                    self._on_death(sentinels[ready])

    def _receive(self, i: int) -> None:
        try:
            tid, ok, value = _recv(self._conns[i])
        except (EOFError, OSError):
            self._on_death(i)
            return
        with self._lock:
            self._busy.pop(i, None)
            fut = self._futures.pop(tid)
        if ok:
            fut.set_result(value)
        else:
            fut.set_exception(RemoteError(*value))

    def _on_death(self, i: int) -> None:
        self._procs[i].join(timeout=0.1)
        with self._lock:
            if i in self._dead:
                return
            self._dead.add(i)
            tid = self._busy.pop(i, None)
            fut = self._futures.pop(tid) if tid is not None else None
            orphans: list[Future[Any]] = []
            if len(self._dead) == len(self._procs):
                orphans = [self._futures.pop(t) for t, _ in self._pending]
                self._pending.clear()
        err = self._crash_error(i)
        for f in [fut, *orphans]:
            if f is not None and not f.done():
                f.set_exception(err)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        os.write(self._wake_w, b"x")
        self._io.join(timeout=5)
        for i, c in enumerate(self._conns):
            if i not in self._dead:
                try:
                    _send(c, None)
                except Exception:
                    pass
        for p in self._procs:
            p.join(timeout=2)
            if p.is_alive():
                p.kill()
                p.join(timeout=2)
        for c in self._conns:
            c.close()
        os.close(self._wake_r)
        os.close(self._wake_w)
        for f in self._futures.values():
            if not f.done():
                f.cancel()


class ProcessRunner:
    """One pool of spawned processes per operator; CPU-bound Python runs in parallel despite the GIL."""

    name = "processes"

    def start(self, fn: WorkerFn, parallelism: int, label: str) -> Any:
        return _ProcessExecutor(fn, parallelism, label)
