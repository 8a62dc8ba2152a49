"""stop_children, as a signal calls it: every child the runner started, whichever thread
waits for it, is stopped with its process group, and no new child starts until the next
command (real `sleep` processes)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from aipcc_build.errors import Interrupted
from aipcc_build.tools import runner
from aipcc_build.tools.runner import ProcessRunner, restart_children, stop_children


@pytest.fixture(autouse=True)
def restarted() -> Iterator[None]:
    yield
    restart_children()


def living_in(groups: set[int]) -> list[int]:
    """The processes of GROUPS that are not zombies (init reaps those in its time)."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except (OSError, ValueError):
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if entry.isdigit() and fields[0] != "Z" and int(fields[2]) in groups:
            found.append(int(entry))
    return found


def test_children_waited_for_in_threads_are_stopped_and_no_new_one_starts() -> None:
    outcomes: list[BaseException] = []
    started = threading.Barrier(4)

    def work() -> None:
        started.wait()
        try:
            ProcessRunner().run(["sh", "-c", "sleep 300 & sleep 300; wait"], timeout=600)
        except BaseException as exc:  # noqa: BLE001 (what the thread ended with)
            outcomes.append(exc)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for thread in threads:
        thread.start()
    started.wait()
    while len(runner._children.groups) < 3:
        threading.Event().wait(0.05)
    groups = set(runner._children.groups)
    stop_children(15)
    for thread in threads:
        thread.join(30)
    assert not any(thread.is_alive() for thread in threads)
    assert [type(o) for o in outcomes] == [Interrupted] * 3
    assert {o.exit_code for o in outcomes if isinstance(o, Interrupted)} == {143}
    # The shells' sleeps too, not only the shells: signalled with their group, each exits
    # in its own time (on a loaded machine, after the shells were reaped).
    deadline = time.monotonic() + 10
    while living_in(groups) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert living_in(groups) == []
    with pytest.raises(Interrupted):
        ProcessRunner().run(["true"])
    with pytest.raises(Interrupted):
        ProcessRunner().start(["true"])
    restart_children()
    assert ProcessRunner().run(["true"]).returncode == 0
