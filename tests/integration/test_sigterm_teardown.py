"""A pytest ended by SIGTERM (a CI job out of time) still stops the servers its fixtures
started in sessions of their own (tests/support/sigterm.py)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.processes import default_signals

REPO = Path(__file__).resolve().parents[2]

SESSION = '''
import os, signal, subprocess, time
import pytest

@pytest.fixture(scope="session")
def server():
    process = subprocess.Popen(["sleep", "300"], start_new_session=True)
    with open(os.environ["SERVER_PID"], "w") as out:
        out.write(str(process.pid))
    try:
        yield process
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()

def test_waits(server):
    time.sleep(300)
'''


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize("plugin", [True, False], ids=["with-plugin", "without"])
def test_sigterm_tears_the_session_fixtures_down(tmp_path: Path, plugin: bool) -> None:
    (tmp_path / "test_session.py").write_text(SESSION)
    pid_file = tmp_path / "server.pid"
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
            *(["-p", "tests.support.sigterm"] if plugin else []), str(tmp_path)]
    pytest_run = subprocess.Popen(
        args, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        env={**os.environ, "SERVER_PID": str(pid_file), "PYTHONPATH": str(REPO)},
        preexec_fn=default_signals)
    try:
        deadline = time.monotonic() + 60
        while not (pid_file.exists() and pid_file.read_text()):
            assert time.monotonic() < deadline, "the fixture never started its server"
            time.sleep(0.1)
        server = int(pid_file.read_text())
        pytest_run.send_signal(signal.SIGTERM)
        pytest_run.wait(timeout=60)
        time.sleep(0.2)
        assert _alive(server) is not plugin
    finally:
        pytest_run.kill()
        pytest_run.wait()
        if pid_file.exists() and pid_file.read_text():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(int(pid_file.read_text()), signal.SIGKILL)
