"""A signal during a parallel layer scan (Interrupted in the validator's main thread) ends
the scan pool at once: scans not started are cancelled, running ones killed, instead of the
validator waiting out every layer of the image."""

from __future__ import annotations

import time

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
    assert not any(worker.is_alive() for worker in workers)
    # All but those handed to workers: the executor queues up to max_workers + 1 calls
    # ahead of them, so one of the six at least was never started.
    assert sum(f.cancelled() for f in futures) >= 1
