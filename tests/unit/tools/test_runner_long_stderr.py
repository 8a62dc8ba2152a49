"""A real child printing a 10 MB line on stderr without a newline, then exiting 1: the
runner keeps only a bounded tail of it (its last lines, each cut), and the ToolError names
the command and its exit in a short message. It held and echoed all 10 MB (a message of
10 MB in logs, reports and --json)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from aipcc_build.errors import CUT_MARK, MAX_ECHOED_LINE, STDERR_TAIL_LINES, ToolError
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


def test_the_tail_is_the_last_lines_each_cut_to_its_beginning_and_end() -> None:
    """A line longer than the bound keeps its beginning and its end, the mark between, the
    bound in all: it kept its beginning alone."""
    read_end, write_end = os.pipe()
    lines = [b"a" * 10, b"b" * 50 + b"B" * 50, b"c" * 3, b"", b"d" * 49 + b"D", b"e" * 20]
    os.write(write_end, b"\n".join(lines))
    os.close(write_end)
    try:
        assert stderr_tail(read_end, lines=5, max_line=20) == b"\n".join(
            [b"b" * 6 + CUT_MARK.encode() + b"B" * 7, b"c" * 3, b"",
             b"d" * 6 + CUT_MARK.encode() + b"d" * 6 + b"D", b"e" * 20])
    finally:
        os.close(read_end)


def test_a_transient_error_at_the_end_of_a_1_mb_line_is_retried(tmp_path: Path) -> None:
    """A tool that prints 1 MB without a newline ending in "503 Service Unavailable" (as a
    registry's answer ends what skopeo says) fails once, then succeeds: the end of the line
    is kept through the runner and the ToolError, so the retry table reads it and the run is
    tried again. Cut to its beginning, the line said nothing transient and failed the run."""
    from aipcc_build.tools.retry import Retry, with_retries

    failed_once = tmp_path / "failed-once"
    program = (f"import os, sys\nif not os.path.exists({str(failed_once)!r}):\n"
               f"    open({str(failed_once)!r}, 'w').close()\n"
               f"    sys.stderr.write('x' * {1024 * 1024} + ': received unexpected HTTP "
               "status: 503 Service Unavailable')\n    sys.exit(1)\n")
    waits: list[float] = []
    done = with_retries(lambda: ProcessRunner().run([sys.executable, "-c", program],
                                                    timeout=60),
                        Retry(attempts=2, first=0.0, cap=0.0),
                        lambda n, wait, why: waits.append(wait), sleep=lambda s: None)
    assert done.returncode == 0 and len(waits) == 1


def test_a_tool_error_keeps_the_end_of_a_long_line() -> None:
    error = ToolError(["skopeo", "copy"], 1, "x" * BIG + " connection reset by peer")
    assert error.stderr.endswith("connection reset by peer")
    assert error.stderr.startswith("xxx") and CUT_MARK in error.stderr
    assert len(error.stderr) == MAX_ECHOED_LINE


def test_a_child_past_its_timeout_is_stopped_with_its_stderr_tail() -> None:
    with pytest.raises(ToolError) as failed:
        ProcessRunner().run([sys.executable, "-c", "import sys, time; "
                             "sys.stderr.write('working\\n'); sys.stderr.flush(); "
                             "time.sleep(60)"], timeout=0.5)
    assert failed.value.timed_out
    assert failed.value.stderr.splitlines() == ["working", "(no answer within 0.5 s: stopped)"]


def test_a_process_left_holding_stderr_is_a_timeout_not_a_hang() -> None:
    """The child exits at once but leaves a process that holds its stderr open: the run
    ends at its timeout, as communicate's wait for that stderr did, not when the
    leftover does (it is in the child's group, stopped with it)."""
    started = time.monotonic()
    with pytest.raises(ToolError) as raised:
        ProcessRunner().run(["sh", "-c", "sleep 60 >/dev/null & echo left"], timeout=0.3)
    assert raised.value.timed_out
    assert time.monotonic() - started < 30
