"""The processes runner's transport: large arrays through shared memfd segments, small ones inline.

What must hold: every message arrives intact (any dtype, order, stride, size); received arrays are
views whose segment stays valid exactly as long as some view lives (then the sender may reuse it);
the ring stays bounded; and nothing leaks — no ``/dev/shm`` entry, no descriptor, no mapping, no
process — whether the pipeline closes normally, a worker is SIGKILLed, or the parent is.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import re
import select
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.helpers import shm_entries
from zephon_core import Dataset, Pipeline, StaticMixtureWorkSource, WorkerCrashedError
from zephon_core.runtime import shm, shm_segments
from zephon_core.runtime.shm import Channel

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(not shm.SEGMENTS_AVAILABLE, reason="memfd segments are Linux-only")

IMAGE = (224, 224, 3)  # 150 KB of uint8 per sample


# -- module-level worker functions (the processes runner pickles them by reference) -----------------
def flip(p: dict[str, Any]) -> dict[str, Any]:
    return {"image": p["image"][:, ::-1], "i": p["i"]}


def slow_flip(p: dict[str, Any]) -> dict[str, Any]:
    time.sleep(0.02)
    return flip(p)


_flipped = [0]


def flip_then_hang(p: dict[str, Any]) -> dict[str, Any]:
    """Flips 64 records in each worker process, then never returns (a worker stuck in a user function)."""
    _flipped[0] += 1
    while _flipped[0] > 64:
        time.sleep(0.05)
    return flip(p)


def _images(n: int) -> list[dict[str, Any]]:
    base = np.random.default_rng(0).integers(0, 255, IMAGE, dtype=np.uint8)
    return [{"image": np.roll(base, i, axis=0), "i": i} for i in range(n)]


def _pipeline(fn: Any, runner: str, n: int = 256, *, parallelism: int = 2) -> Pipeline:
    ds = Dataset.from_records("img", _images(n), shard_size=64)
    ws = StaticMixtureWorkSource([ds], chunk_size=32, seed=0)
    return Pipeline(ws).map_transform(fn, parallelism=parallelism).batch(8).options(runner=runner, lanes=2)


def _fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def _maps_dev_shm(pid: int | str = "self") -> bool:
    """Whether a process maps any file of /dev/shm (it must not: segments are anonymous memfds)."""
    return bool(_dev_shm_maps(pid))


def _dev_shm_maps(pid: int | str = "self") -> set[str]:
    """The /dev/shm files a process maps (a test process may hold some of other libraries it imported
    for earlier tests, e.g. torch or Ray; only new ones count against the runner)."""
    with open(f"/proc/{pid}/maps") as f:
        return {line.split()[-1] for line in f if "/dev/shm/" in line}


def _segment_mappings(pid: int | str = "self") -> int:
    with open(f"/proc/{pid}/maps") as f:
        return sum("memfd:zephon-shm" in line for line in f)


def _settle(check: Any, timeout: float = 10.0) -> Any:
    """Poll ``check`` (garbage collecting in between) until it is truthy or the time is up."""
    deadline = time.monotonic() + timeout
    while True:
        gc.collect()
        got = check()
        if got or time.monotonic() > deadline:
            return got
        time.sleep(0.05)


@pytest.fixture
def channels() -> Any:
    a, b = socket.socketpair()
    ca, cb = Channel(a), Channel(b)
    yield ca, cb
    ca.close()
    cb.close()


# -- the transport on its own -------------------------------------------------------------------------
def test_messages_arrive_intact_whatever_their_arrays(channels):
    tx, rx = channels
    rng = np.random.default_rng(1)
    big = rng.integers(0, 255, IMAGE, dtype=np.uint8)
    frozen = rng.random((300, 100))
    frozen.flags.writeable = False
    msgs = [
        {"i": 1, "text": "small, inline"},
        {"a": np.arange(10), "b": b"bytes", "s": "x" * 1000},  # small arrays: inline
        {"img": big, "flipped": big[:, ::-1], "strided": big[::2, ::3, 1]},  # views and strides
        {"f": np.asfortranarray(rng.random((200, 300), dtype=np.float32)), "frozen": frozen},
        {"objects": np.array([{"k": 1}, None, "s"], dtype=object), "ints": list(range(50_000))},  # big pickle
        [np.zeros(0), np.float64(2.5), np.arange(100_000, dtype=np.int16)[::-1]],
        {"hwc": rng.random((64, 48, 4), dtype=np.float32)[:, ::-1], "cols": rng.random((80, 60, 3))[::-1, :, ::2]},
    ]
    for msg in msgs:
        tx.send(msg)
        got = rx.recv()
        assert _equal(got, msg)
        if isinstance(msg, dict) and "frozen" in msg:
            assert not got["frozen"].flags.writeable  # read-only stays read-only, as with pickle
    assert _segment_mappings() > 0  # the large ones went through segments


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and bool(np.array_equal(a, b))
    return bool(a == b)


@pytest.mark.parametrize("n", [1200, 20_000])  # inline, then through a segment
def test_every_dtype_survives_either_path(channels, n):
    tx, rx = channels
    rng = np.random.default_rng(2)
    arrays = {
        "bool": rng.random(n) > 0.5,
        "complex": rng.random(n) + 1j * rng.random(n),
        "datetime": np.arange(n).astype("M8[s]"),
        "unicode": np.array([str(i) for i in range(n)], dtype="<U8"),
        "record": np.zeros(n, dtype=[("a", "<i4"), ("b", "<f8")]),
        "half": rng.random(n).astype(np.float16),
    }
    msg = {**arrays, **{f"{k} strided": v[::-2] for k, v in arrays.items()}}
    msg |= {f"{k} 2d": v.reshape(-1, 2)[:, ::-1] for k, v in arrays.items()}
    tx.send(msg)
    got = rx.recv()
    for k, v in msg.items():
        assert got[k].dtype == v.dtype and got[k].shape == v.shape and (got[k] == v).all(), k


@pytest.mark.parametrize("sendmsg", [True, False])
def test_without_segments_everything_travels_inline(channels, monkeypatch, sendmsg):
    """As on macOS (no memfd), and on Windows (no sendmsg either)."""
    monkeypatch.setattr(shm_segments, "SEGMENTS_AVAILABLE", False)
    monkeypatch.setattr(shm, "_HAVE_SENDMSG", sendmsg)
    tx, rx = channels
    mapped = _segment_mappings()
    big = np.random.default_rng(3).integers(0, 255, (64, *IMAGE), dtype=np.uint8)  # 9.6 MB
    msg = {"batch": big, "flipped": big[:, :, ::-1], "small": np.arange(5)}
    sender = threading.Thread(target=tx.send, args=(msg,))  # larger than the socket's buffer
    sender.start()
    got = rx.recv()
    sender.join()
    assert _equal(got, msg) and got["batch"].flags.writeable
    assert _segment_mappings() == mapped


def test_a_refused_memfd_falls_back_to_the_socket(channels, monkeypatch):
    def refuse(size: int) -> int:
        raise PermissionError(1, "memfd_create refused by a sandbox")

    monkeypatch.setattr(shm_segments, "new_memfd", refuse)
    tx, rx = channels
    msg = {"img": np.full(IMAGE, 9, np.uint8)}  # 150 KB: still fits the socket's buffer
    tx.send(msg)
    assert _equal(rx.recv(), msg)


def test_received_arrays_are_writable_views_into_one_segment(channels):
    tx, rx = channels
    imgs = [np.full(IMAGE, k, np.uint8) for k in range(4)]
    tx.send({"rows": imgs, "flipped": imgs[0][:, ::-1]})
    got = rx.recv()
    rows = got["rows"]
    bases = {id(r.base) for r in rows}
    assert len(bases) == 1 and not rows[0].flags.owndata  # one lease per message: views, no copies
    assert all(r.flags.writeable and r.flags.c_contiguous for r in rows)
    rows[1][0, 0, 0] = 7  # a view is the receiver's own memory
    assert [int(r[1, 1, 1]) for r in rows] == [0, 1, 2, 3]


def test_a_leased_segment_is_never_overwritten_and_is_reused_once_released(channels):
    tx, rx = channels
    held = []
    for k in range(shm.MAX_SLOTS + 3):  # more than the ring holds: the rest are one-off segments
        tx.send({"img": np.full(IMAGE, k, np.uint8)})
        held.append(rx.recv()["img"])
    assert len(tx._slots) == shm.MAX_SLOTS
    for k, img in enumerate(held):  # every held view still shows its own message
        assert img.min() == img.max() == k
    del img
    only = held[3]
    held.clear()
    for k in range(50):  # 15 slots free again: reused, never the one still viewed
        tx.send({"img": np.full(IMAGE, 100 + k, np.uint8)})
        rx.recv()
        assert only.min() == only.max() == 3
    assert len(tx._slots) == shm.MAX_SLOTS
    del only
    gc.collect()
    assert int(np.count_nonzero(tx._ctl[: shm.MAX_SLOTS])) == 0  # every lease was handed back


def test_a_slot_grows_for_a_larger_message_and_sizes_can_vary(channels):
    tx, rx = channels
    for n in [70_000, 3_000_000, 200_000, 9_000_000, 70_000]:
        arr = np.arange(n, dtype=np.uint8)
        tx.send(arr)
        assert np.array_equal(rx.recv(), arr)
    assert len(tx._slots) <= 2


def test_the_ring_keeps_at_most_its_memory_budget(channels, monkeypatch):
    monkeypatch.setattr(shm, "RING_BYTES", 1 << 20)
    tx, rx = channels
    held = []
    for k in range(6):  # 400 KB each: two fit the 1 MiB budget, the rest get one-off segments
        tx.send(np.full(400_000, k, np.uint8))
        held.append(rx.recv())
    assert len(tx._slots) == 2 and sum(s.touched for s in tx._slots) <= 1 << 20
    assert [int(h[0]) for h in held] == list(range(6))
    held.clear()
    for k in range(6):  # released: the two warm slots serve everything
        tx.send(np.full(400_000, k, np.uint8))
        assert int(rx.recv()[-1]) == k
    assert len(tx._slots) == 2


def test_descriptors_are_closed_right_after_mapping(channels):
    tx, rx = channels
    before = _fds()
    held = []
    for k in range(shm.MAX_SLOTS + 2):
        tx.send(np.full(IMAGE, k, np.uint8))
        held.append(rx.recv())
    assert _fds() == before  # 18 live segments, both ends mapped, and not one descriptor open
    del held


# -- the runner ---------------------------------------------------------------------------------------
def test_large_arrays_give_the_same_batches_on_every_runner():
    digests = {}
    for runner in ["inline", "threads", "processes"]:
        with _pipeline(flip, runner, n=192) as p:
            digests[runner] = [b.sha256() for b in p]
    assert len(digests["inline"]) == 24
    assert digests["processes"] == digests["threads"] == digests["inline"]


@pytest.mark.slow
def test_batches_outlive_close_and_then_leave_nothing():
    with _pipeline(flip, "processes", n=64) as p:  # warm: the fork server's own descriptors exist before
        next(iter(p))
    gc.collect()
    fds, shm_before = _fds(), shm_entries()
    p = _pipeline(flip, "processes")
    with p:
        held = [b for _, b in zip(range(6), p)]  # stop mid-stream with work in flight
        snapshot = [b.data["image"].copy() for b in held]
        # records in flight live in shared segments (a batch is collated into memory of its own)
        assert _segment_mappings() > 0
    assert not multiprocessing.active_children()
    assert all(np.array_equal(b.data["image"], s) for b, s in zip(held, snapshot))  # intact after close
    # a closed pipeline may still hold records that were in its queues, viewing their segments
    del held, snapshot, p
    assert _settle(lambda: _segment_mappings() == 0), "a segment stayed mapped after its last view went"
    assert _settle(lambda: _fds() <= fds), sorted(_fds() - fds)
    assert shm_entries() <= shm_before


@pytest.mark.slow
def test_sigkilled_workers_fail_fast_and_leave_nothing():
    shm_maps_before = _dev_shm_maps("self")
    with _pipeline(flip, "processes", n=64) as p:
        next(iter(p))
    gc.collect()
    fds, shm_before = _fds(), shm_entries()
    p = _pipeline(slow_flip, "processes", n=512)
    with p:
        it = iter(p)
        next(it)
        workers = multiprocessing.active_children()
        assert _segment_mappings() > 0 and not any(_maps_dev_shm(c.pid) for c in workers)
        assert _dev_shm_maps("self") <= shm_maps_before
        victims = [c for c in workers if "slow_flip" in c.name]  # the map's pool (fused with fetch's)
        assert len(victims) == 2
        t0 = time.monotonic()
        for c in victims:
            os.kill(c.pid, signal.SIGKILL)
        with pytest.raises(WorkerCrashedError) as info:
            _drain(it)
        assert time.monotonic() - t0 < 5
    assert re.search(r"a worker process of operator '[\w+]+' died \(exit code -9\)", str(info.value))
    del it, p, info  # the error's traceback holds the frames that held the last records
    assert not multiprocessing.active_children()
    assert _settle(lambda: _segment_mappings() == 0)
    assert _settle(lambda: _fds() <= fds), sorted(_fds() - fds)
    assert shm_entries() <= shm_before


def _drain(it: Any) -> None:
    for _ in it:  # a helper, so no batch stays bound to a local of the test
        pass


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie, dead but not yet reaped by init, holds nothing)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_sigkilled_parent_leaves_no_process_and_no_segment(tmp_path):
    """The parent dies mid-run with batches in flight and its workers stuck in a user function:
    every worker and the fork server exit, so every segment is gone with them."""
    script = tmp_path / "train.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import multiprocessing, os, sys, time
            sys.path.insert(0, {str(ROOT)!r})
            from tests.test_process_transport import _pipeline, flip_then_hang

            if __name__ == "__main__":
                p = _pipeline(flip_then_hang, "processes", n=256)
                held = [b for _, b in zip(range(4), p)]  # 32 records delivered; the workers then hang
                time.sleep(0.5)
                pids = [c.pid for c in multiprocessing.active_children()]
                server = [int(l.split()[0]) for l in os.popen(f"ps -o pid= --ppid {{os.getpid()}}")]
                print(" ".join(map(str, sorted(set(pids + server)))), flush=True)
                time.sleep(600)
            """
        )
    )
    shm_before = shm_entries()
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert select.select([proc.stdout], [], [], 120)[0], "the script did not start"
        pids = [int(x) for x in proc.stdout.readline().split()]
        assert len(pids) >= 3, pids  # two map workers, the batch worker and the fork server
        assert any(_segment_mappings(pid) for pid in pids if _alive(pid))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        deadline = time.monotonic() + 10
        while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [pid for pid in pids if _alive(pid)], "a worker outlived its SIGKILLed parent"
        assert shm_entries() <= shm_before
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
