"""A signal during a parallel layer scan (Interrupted in the validator's main thread) ends
the scan pool at once: scans not started are cancelled, running ones killed, instead of the
validator waiting out every layer of the image."""

from __future__ import annotations

import threading
import time

import pytest

from aipcc_build.validate.pipeline import _pool, _stop_pool


def _alive(pid: int) -> bool:
    """Whether PID runs: a zombie has exited."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("caller_threads", [0, 1], ids=["fork", "forkserver"])
def test_stopping_the_pool_kills_running_scans_and_cancels_the_rest(
        caller_threads: int) -> None:
    # A caller running threads gets forkserver workers (pipeline._pool_context).
    stop = threading.Event()
    for _ in range(caller_threads):
        threading.Thread(target=stop.wait, daemon=True).start()
    try:
        _stop_a_busy_pool()
    finally:
        stop.set()


def _stop_a_busy_pool() -> None:
    pool = _pool(2)
    futures = [pool.submit(time.sleep, 120) for _ in range(6)]
    while sum(f.running() for f in futures) < 2:
        time.sleep(0.02)
    workers = list(pool._processes.values())  # type: ignore[attr-defined]
    started = time.monotonic()
    _stop_pool(pool)
    assert time.monotonic() - started < 60  # not the 120 s a scan takes
    # Every worker has exited, asked of the kernel: `is_alive()` lies while the executor's
    # thread has reaped a worker but not recorded it, and a forkserver worker's sentinel
    # (the start method when the caller runs threads) is the server's pipe, which that
    # thread may have just read empty. A killed worker may still be on its way out (its
    # files closed, not yet a zombie): moments, not the scan's 120 s.
    deadline = time.monotonic() + 10
    while any(_alive(w.pid) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [w.pid for w in workers if _alive(w.pid)] == []
    # The rest never run: each call ends cancelled, or failed with the pool it was queued
    # in (which of the two is the executor thread's race: Python 3.9 often fails them).
    # (Polled: concurrent.futures.wait never counts a call cancelled by shutdown as done.)
    deadline = time.monotonic() + 30
    while not all(f.done() for f in futures) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert [f for f in futures if not f.done()] == []
    assert [f for f in futures if not f.cancelled() and f.exception() is None] == []
