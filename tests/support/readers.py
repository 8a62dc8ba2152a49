"""A reader that reads an index over and over while a publisher switches it: what the
atomic-switch tests of the static tree and of Pulp share (a page must never mix two
generations, a listed file must never be missing)."""

from __future__ import annotations

import threading
import time
import urllib.error
from typing import Callable


def read_while(read_once: Callable[[], None], work: Callable[[], None],
               problems: list[str], *, timeout: float) -> None:
    """Run READ_ONCE in a thread, over and over, while WORK runs, and once more after it
    ends; a network error is a problem; the reader stops at the first problem or after
    TIMEOUT seconds. Fails when the reader does not end."""
    done = threading.Event()

    def reader() -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not problems:
            finished = done.is_set()
            try:
                read_once()
            except (urllib.error.URLError, OSError) as exc:
                problems.append(f"{exc}")
            if finished:
                return

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        work()
    finally:
        done.set()
        thread.join(timeout=timeout + 30)
    assert not thread.is_alive()
