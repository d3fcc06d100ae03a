"""Starting the processes runner's workers: the fork server and what it preloads (why a fork server:
docs/performance.md, "Workers start early"; forking from it, never from the pipeline's multithreaded
process, keeps ``fork``'s hazards away). The pool is :mod:`zephon_core.runtime.processes`.
"""

from __future__ import annotations

import dataclasses
import functools
import multiprocessing as mp
import os
import shutil
import sys
import tempfile
import threading
from typing import Any, cast

_PRELOAD = ("numpy", "zephon_core.pipeline")
"""Imported by the fork server before it forks any worker: the kernel's modules and numpy."""

_preload_lock = threading.Lock()
_preload_done = False

_SUN_PATH_MAX = 107  # bytes a Unix socket's path may have (``sun_path`` holds 108 with its terminating NUL)
_SOCKET_SUFFIX = len("/pymp-XXXXXXXX/listener-XXXXXXXX")  # what multiprocessing appends to the temp folder


def _short_socket_dir() -> None:
    """Give multiprocessing a temp folder short enough for the fork server's Unix socket: under a deep
    TMPDIR (a CI runner's, pytest's ``tmp_path``) its path would pass the 107-byte limit ("AF_UNIX path
    too long"). Python 3.13 falls back to a short system folder by itself; this does the same earlier."""
    if sys.version_info >= (3, 13):
        return
    from multiprocessing import process, util

    config = cast(Any, process.current_process())._config
    if config.get("tempdir") is not None or len(os.fsencode(tempfile.gettempdir())) + _SOCKET_SUFFIX <= _SUN_PATH_MAX:
        return
    for base in ("/tmp", "/var/tmp", "/dev/shm"):
        if os.path.isdir(base) and os.access(base, os.W_OK | os.X_OK):
            tempdir = tempfile.mkdtemp(prefix="pymp-", dir=base)
            util.Finalize(None, cast(Any, util)._remove_temp_dir, args=(shutil.rmtree, tempdir), exitpriority=-100)
            config["tempdir"] = tempdir
            return


def _context(fn_modules: list[str]) -> Any:
    """The multiprocessing context for workers: forkserver (preloading the first pool's modules), else spawn."""
    global _preload_done
    if "forkserver" not in mp.get_all_start_methods():
        return mp.get_context("spawn")
    ctx = mp.get_context("forkserver")
    with _preload_lock:
        _short_socket_dir()
        if not _preload_done:  # only takes effect if the server is not running yet
            from multiprocessing import forkserver

            current = list(getattr(getattr(forkserver, "_forkserver", None), "_preload_modules", ["__main__"]))
            ctx.set_forkserver_preload(list(dict.fromkeys([*current, *_PRELOAD, *fn_modules])))
            _preload_done = True
    return ctx


def _modules_of(fn: Any, depth: int = 2) -> list[str]:
    """Modules that unpickling ``fn`` will import, from a shallow walk of the object (its type, its
    fields, a partial's function): imported as a worker starts so its first task does not pay."""
    found: dict[str, None] = {}
    stack: list[tuple[Any, int]] = [(fn, 0)]
    while stack:
        obj, d = stack.pop()
        for m in (type(obj).__module__, getattr(obj, "__module__", None) if callable(obj) else None):
            if m and m not in ("builtins", "__main__", "__mp_main__"):
                found[m] = None
        if d >= depth:
            continue
        children: list[Any] = []
        if isinstance(obj, (tuple, list)):
            children = list(obj[:16])
        elif isinstance(obj, functools.partial):
            children = [obj.func, *obj.args[:16]]
        elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            children = [getattr(obj, f.name) for f in dataclasses.fields(obj)][:16]
        elif hasattr(obj, "__dict__") and not isinstance(obj, type) and not callable(obj):
            children = list(vars(obj).values())[:16]
        stack.extend((c, d + 1) for c in children)
    return list(found)


def _bootstrap_hint() -> str:
    """Why a worker may exit before it is ready, naming the script when it lacks a ``__main__`` guard."""
    path = getattr(sys.modules.get("__main__"), "__file__", None)
    base = "it exited while starting, before it could load its worker function"
    if path:
        try:
            with open(path, encoding="utf-8") as f:
                guarded = "__main__" in f.read()
        except OSError:
            guarded = True
        if not guarded:
            return (
                f'{base}. Your script {path} has no `if __name__ == "__main__":` guard: every worker process '
                "imports the script again and re-runs its top level. Put the code that builds and runs the "
                "pipeline under that guard (or use runner='threads')"
            )
    return (
        f'{base} (see the worker\'s stderr above; a script must guard its top level with `if __name__ == "__main__":`)'
    )
