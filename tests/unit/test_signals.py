"""The one signal mechanism (aipcc_build/cli/signals.py), in a child Python: SIGINT, SIGTERM
and SIGHUP each raise Interrupted (exit 128 + the signal) and stop the runner's children;
within `stopping` the command's callback is called instead; a forked worker that inherited
the handler dies of the signal as it would without it; a signal ignored when the command
starts stays ignored."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.processes import default_signals

REPO = Path(__file__).resolve().parents[2]

SCRIPT = """
import os, signal, sys, time
from aipcc_build.cli import signals
from aipcc_build.errors import Interrupted
from aipcc_build.tools.runner import ProcessRunner

signum = int(sys.argv[1])
with signals.handled():
    told = []
    with signals.stopping(told.append):
        os.kill(os.getpid(), signum)
        time.sleep(0.1)
    print("told", told, flush=True)
    ready, tell = os.pipe()
    worker = os.fork()
    if worker == 0:
        os.write(tell, b"x")
        time.sleep(30)
        os._exit(0)
    os.read(ready, 1)
    time.sleep(0.1)
    os.kill(worker, signum)
    print("worker", os.waitpid(worker, 0)[1] & 0x7f, flush=True)
    try:
        os.kill(os.getpid(), signum)
        time.sleep(30)
    except Interrupted as exc:
        print("interrupted", exc.exit_code, flush=True)
    try:
        ProcessRunner().run(["true"])
    except Interrupted:
        print("refused", flush=True)
print("after", signal.getsignal(signum) is not signals._handle, flush=True)
"""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP],
                         ids=lambda s: signal.Signals(s).name)
def test_each_signal_ends_a_command_alike(signum: int) -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(int(signum))], capture_output=True,
                          text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(REPO)},
                          preexec_fn=default_signals)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n") == [
        f"told [{signum}]", f"worker {signum}", f"interrupted {128 + signum}", "refused",
        "after True", ""]


IGNORED = """
import os, signal, sys, time
from aipcc_build.cli import signals

signum = int(sys.argv[1])
signal.signal(signum, signal.SIG_IGN)
with signals.handled():
    print("ignored", signal.getsignal(signum) == signal.SIG_IGN, flush=True)
    print("others", all(signal.getsignal(other) is signals._handle
                        for other in signals.SIGNALS if other != signum), flush=True)
    os.kill(os.getpid(), signum)
    time.sleep(0.1)
    print("survived", flush=True)
print("after", signal.getsignal(signum) == signal.SIG_IGN, flush=True)
"""


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP],
                         ids=lambda s: signal.Signals(s).name)
def test_a_signal_ignored_at_the_start_stays_ignored(signum: int) -> None:
    """`nohup` ignores SIGHUP, a CI runner SIGINT for a background job: the command was
    told not to end on it, as Python leaves an ignored SIGINT without KeyboardInterrupt.
    `handled` set its handler anyway, and the signal ended the command (exit 128 + it)."""
    done = subprocess.run([sys.executable, "-c", IGNORED, str(int(signum))],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(REPO)},
                          preexec_fn=default_signals)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n") == ["ignored True", "others True", "survived",
                                        "after True", ""]


@pytest.fixture
def python_defaults() -> Iterator[None]:
    """Each signal `handled` takes at Python's own default in this process, then as it was:
    a test run as a background job of a shell without job control (CI's side tox
    environments in the Makefile) starts with SIGINT ignored, which `handled` leaves be."""
    from aipcc_build.cli import signals

    before = {signum: signal.getsignal(signum) for signum in signals.SIGNALS}
    for signum in signals.SIGNALS:
        signal.signal(signum, signal.default_int_handler if signum == signal.SIGINT
                      else signal.SIG_DFL)
    try:
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)


@pytest.mark.usefixtures("python_defaults")
def test_a_command_run_from_another_thread_sets_no_handler() -> None:
    # Only the main thread may set handlers: `handled` asks the C module (its ValueError),
    # not `threading`, which a `verify` does not import, and changes nothing in the asking.
    import threading

    from aipcc_build.cli import signals

    before = {signum: signal.getsignal(signum) for signum in signals.SIGNALS}
    inside: list[object] = []

    def command() -> None:
        with signals.handled():
            inside.extend(signal.getsignal(signum) for signum in signals.SIGNALS)

    worker = threading.Thread(target=command)
    worker.start()
    worker.join(10)
    assert inside == list(before.values())
    assert {signum: signal.getsignal(signum) for signum in signals.SIGNALS} == before
    with signals.handled():  # the main thread's command has them
        assert all(signal.getsignal(signum) is signals._handle for signum in signals.SIGNALS)
    assert {signum: signal.getsignal(signum) for signum in signals.SIGNALS} == before


@pytest.mark.parametrize("outside", [signal.SIGINT, signal.SIGTERM],
                         ids=lambda s: signal.Signals(s).name)
def test_a_handler_set_outside_python_is_left_in_place(monkeypatch: pytest.MonkeyPatch,
                                                         outside: int) -> None:
    """`getsignal` says None for a handler set outside Python (an embedding program, a C
    extension): `signal.signal` cannot put it back (TypeError for None), so `handled`
    leaves that signal alone rather than replace what it cannot restore; SIG_DFL in its
    place would change what the process does on that signal after the command. Asking
    `signal.signal(SIGINT, getsignal(SIGINT))` raised the TypeError: a traceback."""
    from aipcc_build.cli import signals

    table: dict[int, object] = {signum: signal.SIG_DFL for signum in signals.SIGNALS}
    table[outside] = None
    set_: list[tuple[int, object]] = []

    def set_handler(signum: int, handler: object) -> object:
        if handler is None:
            raise TypeError("signal handler must be signal.SIG_IGN, signal.SIG_DFL, or a "
                            "callable object")
        set_.append((signum, handler))
        table[signum], old = handler, table[signum]
        return old

    monkeypatch.setattr(signals.signal, "getsignal", table.get)
    monkeypatch.setattr(signals.signal, "signal", set_handler)
    others = [signum for signum in signals.SIGNALS if signum != outside]
    with signals.handled():
        assert [table[signum] for signum in others] == [signals._handle] * len(others)
    assert table == {**{signum: signal.SIG_DFL for signum in others}, outside: None}
    assert outside not in {signum for signum, _ in set_}
