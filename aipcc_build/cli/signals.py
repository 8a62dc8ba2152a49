"""SIGINT, SIGTERM and SIGHUP end every command alike (a Ctrl-C, a CI job out of time, a
closed terminal): the children stopped, temporary files removed, exit 128 + the signal.

`handled` wraps every command (the group's `invoke`). By default a signal stops every
outside program the runner started (`tools.runner.stop_children`: their process groups,
whichever thread waits for them, and no new one starts) and raises `Interrupted` in the
main thread, so every finally block and context manager on the way out removes what it
made. A command that stops its own work and then writes its report (`matrix`) asks
instead, with `stopping`, to be told: its callback runs and nothing is raised."""

from __future__ import annotations

import os

from ..errors import Interrupted
from ..functional import contextmanager

TYPE_CHECKING = False  # typing's, without importing it at run time (a `verify`'s start)
if TYPE_CHECKING:
    import signal
    from collections.abc import Iterator
    from types import FrameType
    from typing import Callable, Optional
else:
    # The C module the `signal` module wraps: the same functions on plain numbers, without
    # the three enums `signal` builds at import (scanning its namespace each time), which
    # cost every warm `aipcc-build validate` more than its check of the cache (issue 37).
    # Handlers get a plain number from either, and restore what either returned.
    import _signal as signal

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

_owner: Optional[int] = None  # the process that installed the handlers
_on_stop: list[Callable[[int], None]] = []
_received: list[int] = []
_raised: list[int] = []  # the signal Interrupted was raised for, once per command


def _handle(signum: int, frame: Optional[FrameType]) -> None:
    if os.getpid() != _owner:
        # A forked child (a validator worker) inherited the handler: the default for it.
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return
    _received.append(signum)
    if _on_stop:
        _on_stop[-1](signum)
        return
    from ..tools.runner import stop_children

    stop_children(signum)
    if not _raised:  # a second signal must not cut the first one's clean-up short
        _raised.append(signum)
        raise Interrupted(signum)


@contextmanager
def handled() -> Iterator[None]:
    """The handlers in place for the duration of one command; the previous ones after.
    (Only the main thread may set them, the others' attempt refused with ValueError
    before any is set: run from another thread, a command has none. Asked so, by setting
    the first, not through `threading`, which a `verify` does not import.)
    A signal whose handler was set outside Python (an embedding program, a C extension:
    `getsignal` says None) keeps it: Python cannot put such a handler back, and SIG_DFL in
    its place would change what the process does on that signal after the command.
    A signal ignored (SIG_IGN) stays ignored: whoever started us (`nohup`, a CI runner's
    background job) asked that it not end the command, as Python leaves an ignored SIGINT
    without its KeyboardInterrupt."""
    global _owner
    ours = [signum for signum in SIGNALS
            if signal.getsignal(signum) not in (None, signal.SIG_IGN)]
    if not ours:
        yield
        return
    _owner = os.getpid()
    try:  # the question: only the main thread may set a handler
        previous = {ours[0]: signal.signal(ours[0], _handle)}
    except ValueError:
        yield
        return
    try:
        _received.clear()
        _raised.clear()
        previous.update((signum, signal.signal(signum, _handle)) for signum in ours[1:])
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if _received:  # the next command run in this process (tests) starts afresh
            from ..tools.runner import restart_children

            restart_children()


@contextmanager
def stopping(on_stop: Callable[[int], None]) -> Iterator[list[int]]:
    """Within: a signal calls ON_STOP (the command stops its own work) instead of raising;
    yields the signals received, first first."""
    _on_stop.append(on_stop)
    try:
        yield _received
    finally:
        _on_stop.remove(on_stop)
