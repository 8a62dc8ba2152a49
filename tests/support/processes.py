"""The processes a test started, found through /proc: what a signal must reach (skopeo
and buildah run in process groups and sessions of their own)."""

from __future__ import annotations

import os
import signal
from pathlib import Path


def descendants(pid: int) -> dict[int, str]:
    """Every living process below PID (in sessions of their own too): pid -> command line."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2:].split()
            if fields[0] != "Z":
                parents[int(entry)] = int(fields[1])
    found: dict[int, str] = {}
    level = {pid}
    while level:
        level = {child for child, parent in parents.items()
                 if parent in level and child not in found}
        for child in level:
            found[child] = command_line(child)
    return found


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(
            errors="replace")
    except OSError:
        return ""


def default_signals() -> None:
    """A `preexec_fn`: SIGINT, SIGTERM and SIGHUP at their defaults in the child, whatever
    this process ignores. A child inherits SIG_IGN across exec, `subprocess`'s
    restore_signals resets only SIGPIPE, SIGXFZ and SIGXFSZ, and an ignored signal stays
    ignored by the command (cli/signals.py): a test that signals a child it started from
    a pytest run under `nohup` or a CI runner's background job would signal nothing."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)
