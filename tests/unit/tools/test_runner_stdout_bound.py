"""A real child printing more on stdout than its call reads (a lying tool, a runaway log):
the runner reads in chunks up to the call's bound, stops the child (killed and reaped) and
fails the call with a ToolError naming the program and the bound, whatever CHECK says,
never a truncated answer. It held all a child printed (gigabytes filled memory)."""

from __future__ import annotations

import os
import sys
import tracemalloc
from pathlib import Path

import pytest

from aipcc_build.errors import ToolError
from aipcc_build.tools.runner import MAX_STDOUT, ProcessRunner

BOUND = 1024 * 1024


def printing(size: int) -> list[str]:
    return [sys.executable, "-c",
            f"import sys; sys.stdout.buffer.write(b'x' * {size}); sys.stdout.flush()"]


@pytest.mark.parametrize("check", [True, False])
def test_stdout_past_the_bound_fails_naming_the_program_and_the_bound(check: bool) -> None:
    with pytest.raises(ToolError) as failed:
        ProcessRunner().run(printing(2 * BOUND), timeout=60, check=check, max_stdout=BOUND)
    message = str(failed.value)
    assert message.startswith(f"{sys.executable} exited -9")
    assert f"more than {BOUND} bytes on its standard output" in message
    assert not failed.value.timed_out


def test_stdout_up_to_the_bound_is_read_whole() -> None:
    done = ProcessRunner().run(printing(BOUND), timeout=60, max_stdout=BOUND)
    assert done.stdout == b"x" * BOUND


def test_the_default_bound_is_the_runners() -> None:
    assert len(ProcessRunner().run(printing(MAX_STDOUT), timeout=60).stdout) == MAX_STDOUT
    with pytest.raises(ToolError, match=f"more than {MAX_STDOUT} bytes"):
        ProcessRunner().run(printing(MAX_STDOUT + 1), timeout=60)


def test_a_pipeline_through_head_and_its_bound() -> None:
    yes = ["sh", "-c", 'yes | head -c "$0"']
    assert ProcessRunner().run([*yes, "1000"], max_stdout=1000).stdout == b"y\n" * 500
    with pytest.raises(ToolError, match=f"more than {BOUND} bytes"):
        ProcessRunner().run([*yes, str(2 * BOUND)], timeout=60, max_stdout=BOUND)


def test_an_endless_printer_is_stopped_and_reaped_with_memory_bounded(tmp_path: Path) -> None:
    """`yes` never ends: the call fails once the bound is passed, not at its timeout, the
    child is gone (reaped: not even a zombie) and what was held stays near the bound."""
    pid_file = tmp_path / "pid"
    tracemalloc.start()
    try:
        with pytest.raises(ToolError) as failed:
            ProcessRunner().run(["sh", "-c", 'echo $$ > "$0"; exec yes', str(pid_file)],
                                timeout=60, max_stdout=BOUND)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert not failed.value.timed_out
    assert peak < 3 * BOUND, peak
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid_file.read_text()), 0)
