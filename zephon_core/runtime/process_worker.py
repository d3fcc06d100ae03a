"""The main loop of a processes-runner worker: load the function once, then answer tasks in order,
reporting every failure as a message instead of dying (the pool then fails only the task that failed)."""

from __future__ import annotations

import contextlib
import importlib
import os
import select
import signal
import socket
import sys
import threading
import traceback

from zephon_core.ops.contract import ItemFailure, fused_step_of
from zephon_core.runtime.shm import Channel

_READY = -1
"""Task id of the message a worker sends once it has loaded its function (ok) or failed to (error)."""


class RemoteError(Exception):
    """An exception raised inside a worker process, carried back as text (with the failed item's
    position and, in a fused task, the step that failed: see :mod:`zephon_core.runtime.fusion`)."""

    def __init__(
        self, type_name: str, message: str, tb: str, index: int | None = None, fused_step: int | None = None
    ) -> None:
        super().__init__(message if index is not None else f"{type_name}: {message}")
        self.type_name, self.message, self.remote_traceback = type_name, message, tb
        self.index, self.fused_step = index, fused_step


def _exit_with_parent(sock: socket.socket) -> None:
    """Exit when the runner's end of the socket goes away (its process died, even by SIGKILL): one
    blocked in ``recv`` sees end-of-file anyway, one stuck in a user function would outlive the job."""
    events = select.POLLHUP | getattr(select, "POLLRDHUP", 0)

    def watch() -> None:
        poller = select.poll()
        poller.register(sock.fileno(), events)
        while True:
            for _, ev in poller.poll():
                if ev & select.POLLNVAL:  # the worker closed its own socket: it is exiting anyway
                    return
                if ev & (events | select.POLLERR):
                    os._exit(1)

    if hasattr(select, "poll"):
        threading.Thread(target=watch, name="zephon-parent-watch", daemon=True).start()


def _failure(tid: int, exc: BaseException) -> tuple[int, bool, tuple[str, str, str, int | None, int | None]]:
    index = exc.index if isinstance(exc, ItemFailure) else None
    return (tid, False, (type(exc).__name__, str(exc), traceback.format_exc(), index, fused_step_of(exc)))


def _worker_main(sock: socket.socket, preload: tuple[str, ...], env: dict[str, str] | None) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    _exit_with_parent(sock)
    if env is not None and env != os.environ:  # forked from the server: take the parent's current environment
        os.environ.clear()
        os.environ.update(env)
    for name in preload:
        with contextlib.suppress(Exception):  # unpickling the function reports a real problem clearly
            importlib.import_module(name)
    np_random = sys.modules.get("numpy.random")
    if np_random is not None:  # forked workers would otherwise share the server's global numpy seed
        np_random.seed()
    ch = Channel(sock)
    try:
        fn = ch.recv()
    except (EOFError, OSError):
        return
    except BaseException as exc:
        ch.send(_failure(_READY, exc))
        raise SystemExit(1) from None
    ch.send((_READY, True, None))
    while True:
        try:
            msg = ch.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        tid, task = msg
        del msg
        try:
            out = (tid, True, fn(task))
        except BaseException as exc:  # report, keep serving
            out = _failure(tid, exc)
        del task  # the task's views go with the result: its segment is free for the next task
        try:
            ch.send(out)
        except ConnectionError:  # the parent is gone
            return
        except Exception as exc:  # nothing was written: an unpicklable result, or no memory for it
            ch.send((tid, False, (type(exc).__name__, f"cannot send result: {exc}", "", None, None)))
        del out
