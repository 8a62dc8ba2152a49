"""The one process runner under every outside program (buildah, skopeo, git, ...).

Argument lists only (never a shell), a timeout on every call, streaming for long-running
children, and one error family: `ToolMissing` when the program is not installed,
`ToolError` (the command and the tail of its stderr) when it fails or times out. Each
wrapper in `tools/` takes a runner as a parameter, so a unit test hands in a recording fake.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Protocol

from ..errors import ToolError, ToolMissing

LineSink = Callable[[str], None]
# A short call (inspect, version, rev-parse) that has not answered in this long is hung.
SHORT_TIMEOUT = 120.0
# The longest line a streamed child's output is passed on as: a child printing without
# newlines is cut into lines of this many bytes, so what is held stays bounded.
MAX_LINE = 64 * 1024
_READ = 64 * 1024


@dataclass(frozen=True)
class Completed:
    argv: tuple[str, ...]
    returncode: int
    stdout: bytes
    stderr: bytes

    @property
    def text(self) -> str:
        return self.stdout.decode("utf-8", "replace")

    @property
    def error_text(self) -> str:
        return self.stderr.decode("utf-8", "replace")


class Runner(Protocol):
    """What the tool wrappers need from a runner; `ProcessRunner` is the real one."""

    def run(self, argv: Sequence[str], *, timeout: float = SHORT_TIMEOUT,
            check: bool = True, stdin: Optional[bytes] = None) -> Completed: ...

    def start(self, argv: Sequence[str]) -> Process: ...


class Process:
    """One long-running child in its own process group: Ctrl-C on the terminal does not
    reach it, and stopping it reaches everything it started (RUN steps included)."""

    def __init__(self, argv: Sequence[str], environ: Mapping[str, str]) -> None:
        import subprocess

        self.argv = list(argv)
        try:
            self.process = subprocess.Popen(
                self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, env=dict(environ), start_new_session=True,
            )
        except FileNotFoundError:
            raise ToolMissing(self.argv[0]) from None

    def stream(self, on_line: LineSink, timeout: Optional[float] = None,
               stall: Optional[float] = None) -> tuple[int, Optional[str]]:
        """Pass every output line to ON_LINE until the child exits; (exit code, the limit
        that ended it, when one did and the whole group was killed: "timeout" when TIMEOUT
        seconds ran out, "stall" when it made no progress for STALL seconds: no output line
        and no byte read or written (a registry that stopped answering))."""
        limit: list[str] = []
        ended = threading.Event()
        lines = [0]

        def progress() -> object:
            try:
                counters = Path(f"/proc/{self.process.pid}/io").read_text().split()
            except OSError:
                return time.monotonic()  # cannot tell: never judged stalled
            return lines[0], counters[1], counters[3]  # rchar, wchar

        def watch() -> None:
            start = last_move = time.monotonic()
            last = progress()
            tick = min(1.0, stall / 4) if stall is not None else timeout
            while not ended.wait(tick):
                now = time.monotonic()
                if timeout is not None and now - start >= timeout:
                    limit.append("timeout")
                elif stall is not None:
                    seen = progress()
                    if seen != last:
                        last, last_move = seen, now
                        continue
                    if now - last_move < stall:
                        continue
                    limit.append("stall")
                else:
                    continue
                self.signal_group(signal.SIGKILL)
                return

        watcher = None
        if timeout is not None or stall is not None:
            watcher = threading.Thread(target=watch, daemon=True, name="process limits")
            watcher.start()
        try:
            assert self.process.stdout is not None
            for line in bounded_lines(self.process.stdout.fileno()):
                lines[0] += 1
                on_line(line)
            code = self.process.wait()
        finally:
            ended.set()
            if watcher is not None:
                watcher.join()
        return code, limit[0] if limit else None

    def signal_group(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signum)

    def running(self) -> bool:
        return self.process.poll() is None


def bounded_lines(fd: int, max_line: int = MAX_LINE) -> Iterator[str]:
    """The lines read from FD until its end, without their newline, decoded (invalid UTF-8
    replaced); a line longer than MAX_LINE bytes comes in pieces of MAX_LINE bytes."""
    pending = b""
    while True:
        chunk = os.read(fd, _READ)
        if not chunk:
            break
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            yield from _pieces(line, max_line)
        while len(pending) >= max_line:
            yield pending[:max_line].decode("utf-8", "replace")
            pending = pending[max_line:]
    if pending:
        yield pending.decode("utf-8", "replace")


def _pieces(line: bytes, size: int) -> Iterator[str]:
    for start in range(0, max(len(line), 1), size):
        yield line[start:start + size].decode("utf-8", "replace")


class ProcessRunner:
    """The real runner: ENVIRON is the environment every child gets."""

    def __init__(self, environ: Optional[Mapping[str, str]] = None) -> None:
        self.environ = dict(os.environ if environ is None else environ)

    def run(self, argv: Sequence[str], *, timeout: float = SHORT_TIMEOUT,
            check: bool = True, stdin: Optional[bytes] = None) -> Completed:
        """Run to completion; ToolError on a non-zero exit (when CHECK) or a timeout."""
        # Imported on the first call: a run that starts no program (a validation served
        # from the cache, a mirror with nothing to copy) does not load subprocess.
        import subprocess

        argv = [str(part) for part in argv]
        try:
            child = subprocess.Popen(
                argv, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.environ,
                start_new_session=True)
        except FileNotFoundError:
            raise ToolMissing(argv[0]) from None
        try:
            out, err = child.communicate(stdin, timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child.pid, signal.SIGKILL)
            out, err = child.communicate()
            raise ToolError(argv, -signal.SIGKILL,
                            err.decode("utf-8", "replace") +
                            f"\n(no answer within {timeout:g} s: stopped)",
                            timed_out=True) from None
        except BaseException:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child.pid, signal.SIGKILL)
            child.wait()
            raise
        done = Completed(tuple(argv), child.returncode, out, err)
        if check and done.returncode != 0:
            raise ToolError(argv, done.returncode, done.error_text)
        return done

    def start(self, argv: Sequence[str]) -> Process:
        return Process(argv, self.environ)
