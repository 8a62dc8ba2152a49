"""Issue 16.4: the validator's worker processes die with the process that started them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.support.processes import default_signals

REPO = Path(__file__).resolve().parents[3]

SCRIPT = """
import sys, time
from aipcc_build.validate.pipeline import _pool
pool = _pool(2)
futures = [pool.submit(time.sleep, 120) for _ in range(2)]
time.sleep(1)
print(" ".join(str(pid) for pid in pool._processes), flush=True)
time.sleep(120)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead: its parent (init, once ours died) reaps it soon.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except FileNotFoundError:
        return False


def test_sigterm_ends_the_validator_workers_too() -> None:
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT], stdout=subprocess.PIPE, text=True,
                            cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                            preexec_fn=default_signals)
    assert proc.stdout is not None
    workers = [int(pid) for pid in proc.stdout.readline().split()]
    assert len(workers) == 2 and all(_alive(pid) for pid in workers)
    proc.send_signal(signal.SIGTERM)
    proc.wait(10)
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [pid for pid in workers if _alive(pid)]
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert left == [], "worker processes outlived the validator"
