"""The one process runner under every outside program (buildah, skopeo, git, ...).

Argument lists only (never a shell), a timeout on every call, streaming for long-running
children, a bounded tail of a child's stderr (never all of it: a child printing megabytes
without a newline holds no megabytes here), a bound on the stdout a call reads (a child
printing more is stopped and its call fails: never a truncated answer parsed), and one
error family: `ToolMissing` when the program is not installed, `ToolError` (the command
and the tail of its stderr) when it fails, times out or prints more than its bound. Each
wrapper in `tools/` takes a runner as a parameter, so a unit test hands in a recording
fake.

Every child runs in a process group of its own (a terminal's Ctrl-C does not reach it) and
is known here while it runs: `stop_children`, called when a signal ends the command, stops
them all, whichever thread started them, and refuses new ones.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional, Protocol

from ..errors import STDERR_TAIL_LINES, Interrupted, ToolError, ToolMissing, cut_middle
from ..records import record
from . import SHORT_TIMEOUT

if TYPE_CHECKING:
    import subprocess

LineSink = Callable[[str], None]
# The longest line a streamed child's output is passed on as: a child printing without
# newlines is cut into lines of this many bytes, so what is held stays bounded.
MAX_LINE = 64 * 1024
_READ = 64 * 1024
# The most stdout a call reads (`run`'s MAX_STDOUT): every answer parsed from a program
# (a manifest or image config from skopeo, buildah's listings, git's) is far smaller; a
# caller that reads more says so. A program printing gigabytes (a lying tool, a runaway
# log) would otherwise fill memory.
MAX_STDOUT = 16 * 1024 * 1024
# How long a child stopped with SIGTERM has to clean up (skopeo its blobs, buildah its
# working container) before its group is killed.
STOP_GRACE = 5.0


class _Children:
    """The process groups of the children running now, and the signal that stopped the
    command, once one did."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.groups: set[int] = set()
        self.stopped_by: Optional[int] = None

    def refuse_when_stopped(self) -> None:
        if self.stopped_by is not None:
            raise Interrupted(self.stopped_by)

    def add(self, pid: int) -> None:
        with self.lock:
            self.groups.add(pid)
            stopped = self.stopped_by is not None
        if stopped:  # started as the signal came: it goes too
            _signal_group(pid, signal.SIGTERM)

    def discard(self, pid: int) -> None:
        with self.lock:
            self.groups.discard(pid)


_children = _Children()


def stop_children(signum: int) -> None:
    """A signal ends the command: SIGTERM every running child's process group (the thread
    waiting for each kills what is left after STOP_GRACE) and refuse new children: a retry
    or the next item of a thread pool raises `Interrupted` instead of starting one."""
    with _children.lock:
        if _children.stopped_by is None:
            _children.stopped_by = signum
        groups = list(_children.groups)
    for pid in groups:
        _signal_group(pid, signal.SIGTERM)


def restart_children() -> None:
    """Children may start again: the command `stop_children` ended is over."""
    with _children.lock:
        _children.stopped_by = None


def _signal_group(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signum)


def _end(child: subprocess.Popen[bytes]) -> None:
    """SIGTERM CHILD's group, SIGKILL it after STOP_GRACE seconds; reap CHILD."""
    import subprocess

    _signal_group(child.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        child.wait(STOP_GRACE)
    # Also reaches grandchildren whose parent already exited.
    _signal_group(child.pid, signal.SIGKILL)
    child.wait()


@record
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
            check: bool = True, stdin: Optional[bytes] = None,
            max_stdout: int = MAX_STDOUT) -> Completed: ...

    def start(self, argv: Sequence[str]) -> Process: ...


class Process:
    """One long-running child in its own process group: Ctrl-C on the terminal does not
    reach it, and stopping it reaches everything it started (RUN steps included)."""

    def __init__(self, argv: Sequence[str], environ: Mapping[str, str]) -> None:
        import subprocess

        self.argv = list(argv)
        _children.refuse_when_stopped()
        try:
            self.process = subprocess.Popen(
                self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, env=dict(environ), start_new_session=True,
            )
        except FileNotFoundError:
            raise ToolMissing(self.argv[0]) from None
        _children.add(self.process.pid)

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
            if self.process.returncode is not None:
                _children.discard(self.process.pid)
        return code, limit[0] if limit else None

    def signal_group(self, signum: int) -> None:
        _signal_group(self.process.pid, signum)

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


def stderr_tail(fd: int, lines: int = STDERR_TAIL_LINES, max_line: int = MAX_LINE) -> bytes:
    """The last LINES lines read from FD until its end, each longer than MAX_LINE bytes cut
    to its beginning and its end (`errors.cut_middle`: the end says why a tool failed, and
    whether the failure is transient): what is kept of a child's stderr, whatever it
    prints."""
    from collections import deque

    kept: deque[bytes] = deque(maxlen=lines)
    line = b""  # the line being read: its first and last MAX_LINE bytes
    while True:
        chunk = os.read(fd, _READ)
        if not chunk:
            break
        *ended, rest = chunk.split(b"\n")
        for part in ended:
            kept.append(cut_middle(line + part, max_line))
            line = b""
        line += rest
        if len(line) > 2 * max_line:  # all that cut_middle keeps of it, and more
            line = line[:max_line] + line[-max_line:]
    if line:
        kept.append(cut_middle(line, max_line))
    return b"\n".join(kept)


def read_at_most(fd: int, limit: int) -> Optional[bytes]:
    """All read from FD until its end; None as soon as it gave more than LIMIT bytes (read
    in chunks: no more than LIMIT and a chunk is held; the rest is left unread)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = os.read(fd, _READ)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)


class _Pipe:
    """A pipe for a child's stdout or stderr, read to its end by a thread of its own:
    READ, given the read end, returns what is kept of it (a bounded part, or None)."""

    def __init__(self, read: Callable[[int], Optional[bytes]], name: str) -> None:
        self.read_end, self.write_end = os.pipe()
        self.kept: Optional[bytes] = None
        self._reader = read
        self.reader = threading.Thread(target=self._read, daemon=True, name=name)

    def started(self) -> None:
        """The child holds the write end now: only it does."""
        os.close(self.write_end)
        self.reader.start()

    def close(self) -> None:
        """No child was started."""
        os.close(self.read_end)
        os.close(self.write_end)

    def _read(self) -> None:
        try:
            self.kept = self._reader(self.read_end)
        finally:
            os.close(self.read_end)

    def ended(self, timeout: float) -> bool:
        """Whether the child and all that shares the pipe closed it within TIMEOUT seconds
        (a process the child left running may hold it)."""
        self.reader.join(timeout)
        return not self.reader.is_alive()


def _pieces(line: bytes, size: int) -> Iterator[str]:
    for start in range(0, max(len(line), 1), size):
        yield line[start:start + size].decode("utf-8", "replace")


class ProcessRunner:
    """The real runner: ENVIRON is the environment every child gets."""

    def __init__(self, environ: Optional[Mapping[str, str]] = None) -> None:
        self.environ = dict(os.environ if environ is None else environ)

    def run(self, argv: Sequence[str], *, timeout: float = SHORT_TIMEOUT,
            check: bool = True, stdin: Optional[bytes] = None,
            max_stdout: int = MAX_STDOUT) -> Completed:
        """Run to completion; ToolError on a non-zero exit (when CHECK), a timeout, or more
        than MAX_STDOUT bytes printed on stdout (whatever CHECK: the child is stopped)."""
        # Imported on the first call: a run that starts no program (a validation served
        # from the cache, a mirror with nothing to copy) does not load subprocess.
        import subprocess

        argv = [str(part) for part in argv]
        _children.refuse_when_stopped()

        def read_stdout(fd: int) -> Optional[bytes]:
            out = read_at_most(fd, max_stdout)
            if out is None:  # printed past its bound: stopped, its call fails below
                _signal_group(child.pid, signal.SIGKILL)
            return out

        output = _Pipe(read_stdout, "stdout")
        errors = _Pipe(stderr_tail, "stderr tail")
        try:
            child = subprocess.Popen(
                argv, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=output.write_end, stderr=errors.write_end, env=self.environ,
                start_new_session=True)
        except BaseException as exc:
            output.close()
            errors.close()
            if isinstance(exc, FileNotFoundError):
                raise ToolMissing(argv[0]) from None
            raise
        output.started()
        errors.started()
        _children.add(child.pid)
        started = time.monotonic()
        try:
            child.communicate(stdin, timeout=timeout)
            # As communicate waited for the ends of stdout and stderr, within TIMEOUT.
            if not all(pipe.ended(max(0.0, started + timeout - time.monotonic()))
                       for pipe in (output, errors)):
                raise subprocess.TimeoutExpired(argv, timeout)
        except subprocess.TimeoutExpired:
            _signal_group(child.pid, signal.SIGKILL)
            child.communicate()
            # What the child printed; nothing when a process it left outside its group holds
            # its stderr (a second wait for that would be a hang).
            errors.ended(1.0)
            raise ToolError(argv, -signal.SIGKILL,
                            (errors.kept or b"").decode("utf-8", "replace") +
                            f"\n(no answer within {timeout:g} s: stopped)",
                            timed_out=True) from None
        except BaseException:  # a signal ended the command (Interrupted): so ends the child
            _end(child)
            raise
        finally:
            _children.discard(child.pid)
        # A child that a signal's stop_children ended (in a worker thread): not its error.
        _children.refuse_when_stopped()
        err = errors.kept or b""
        if output.kept is None:
            raise ToolError(argv, child.returncode, err.decode("utf-8", "replace") +
                            f"\n(printed more than {max_stdout} bytes on its standard "
                            "output, more than is read of it: stopped)")
        done = Completed(tuple(argv), child.returncode, output.kept, err)
        if check and done.returncode != 0:
            raise ToolError(argv, done.returncode, done.error_text)
        return done

    def start(self, argv: Sequence[str]) -> Process:
        return Process(argv, self.environ)
