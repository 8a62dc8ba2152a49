"""A real child printing a 10 MB line on stderr without a newline, then exiting 1: the
runner keeps only a bounded tail of it (its last lines, each cut), and the ToolError names
the command and its exit in a short message. It held and echoed all 10 MB (a message of
10 MB in logs, reports and --json)."""

from __future__ import annotations

import os
import sys
import time

import pytest

from aipcc_build.errors import MAX_ECHOED_LINE, STDERR_TAIL_LINES, ToolError
from aipcc_build.tools.runner import MAX_LINE, ProcessRunner, stderr_tail

BIG = 10 * 1024 * 1024
PRINT_BIG = f"import sys; sys.stderr.write('x' * {BIG}); sys.stderr.flush(); sys.exit(1)"


def test_a_10_mb_stderr_line_makes_a_short_error_naming_the_command() -> None:
    with pytest.raises(ToolError) as failed:
        ProcessRunner().run([sys.executable, "-c", PRINT_BIG], timeout=60)
    message = str(failed.value)
    assert len(message) < 2 * MAX_ECHOED_LINE + 200, len(message)
    assert message.startswith(f"{sys.executable} exited 1: xxx")
    assert len(failed.value.stderr) <= STDERR_TAIL_LINES * (MAX_ECHOED_LINE + 4)


def test_the_runner_keeps_a_bounded_tail_of_stderr() -> None:
    done = ProcessRunner().run([sys.executable, "-c", PRINT_BIG.replace(
        "sys.exit(1)", "sys.stderr.write('\\nlast line'); sys.exit(1)")],
        timeout=60, check=False)
    assert done.returncode == 1
    assert len(done.stderr) == MAX_LINE + len(b"\nlast line")
    assert done.stderr.endswith(b"\nlast line")


def test_the_tail_is_the_last_lines_each_cut() -> None:
    read_end, write_end = os.pipe()
    lines = [b"a" * 10, b"b" * 100, b"c" * 3, b"", b"d" * 50]
    os.write(write_end, b"\n".join(lines))
    os.close(write_end)
    try:
        assert stderr_tail(read_end, lines=4, max_line=20) == b"\n".join(
            [b"b" * 20, b"c" * 3, b"", b"d" * 20])
    finally:
        os.close(read_end)


def test_a_child_past_its_timeout_is_stopped_with_its_stderr_tail() -> None:
    with pytest.raises(ToolError) as failed:
        ProcessRunner().run([sys.executable, "-c", "import sys, time; "
                             "sys.stderr.write('working\\n'); sys.stderr.flush(); "
                             "time.sleep(60)"], timeout=1)
    assert failed.value.timed_out
    assert failed.value.stderr.splitlines() == ["working", "(no answer within 1 s: stopped)"]


def test_a_process_left_holding_stderr_is_a_timeout_not_a_hang() -> None:
    """The child exits at once but leaves a process that holds its stderr open: the run
    ends at its timeout, as communicate's wait for that stderr did, not when the
    leftover does (it is in the child's group, stopped with it)."""
    started = time.monotonic()
    with pytest.raises(ToolError) as raised:
        ProcessRunner().run(["sh", "-c", "sleep 60 >/dev/null & echo left"], timeout=1)
    assert raised.value.timed_out
    assert time.monotonic() - started < 30
