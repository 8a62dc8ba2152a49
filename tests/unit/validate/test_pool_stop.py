"""A signal during a parallel layer scan (Interrupted in the validator's main thread) ends
the scan pool at once: scans not started are cancelled, running ones killed, instead of the
validator waiting out every layer of the image."""

from __future__ import annotations

import time
from multiprocessing.connection import wait

from aipcc_build.validate.pipeline import _pool, _stop_pool


def test_stopping_the_pool_kills_running_scans_and_cancels_the_rest() -> None:
    pool = _pool(2)
    futures = [pool.submit(time.sleep, 120) for _ in range(6)]
    while sum(f.running() for f in futures) < 2:
        time.sleep(0.02)
    workers = list(pool._processes.values())  # type: ignore[attr-defined]
    started = time.monotonic()
    _stop_pool(pool)
    assert time.monotonic() - started < 60  # not the 120 s a scan takes
    # Every worker has exited: its sentinel is closed. (Not `is_alive()`: when the
    # executor's thread reaped a worker, it may not have recorded that yet.)
    assert [w.pid for w in workers if not wait([w.sentinel], timeout=0)] == []
    # The rest never run: each call ends cancelled, or failed with the pool it was queued
    # in (which of the two is the executor thread's race: Python 3.9 often fails them).
    # (Polled: concurrent.futures.wait never counts a call cancelled by shutdown as done.)
    deadline = time.monotonic() + 30
    while not all(f.done() for f in futures) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert [f for f in futures if not f.done()] == []
    assert [f for f in futures if not f.cancelled() and f.exception() is None] == []
