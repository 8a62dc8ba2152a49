"""A program run on a real terminal: a pseudo-terminal of a given width."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
from collections.abc import Mapping, Sequence
from typing import Optional

# What a test's own environment may hold that changes how output looks.
LOOK = ("NO_COLOR", "FORCE_COLOR", "CI", "COLUMNS", "LINES", "GITHUB_ACTIONS", "GITLAB_CI")


def environment(**extra: str) -> dict[str, str]:
    """This process's environment without what changes the look, plus EXTRA."""
    return {**{k: v for k, v in os.environ.items() if k not in LOOK}, **extra}


def on_a_terminal(args: Sequence[str], columns: int = 120, *, cwd: Optional[str] = None,
                  environ: Optional[Mapping[str, str]] = None) -> str:
    """What `python ARGS` prints on a terminal COLUMNS wide (stdout and stderr alike)."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    process = subprocess.Popen([sys.executable, *args], stdin=follower, stdout=follower,
                               stderr=follower, env=environment(**dict(environ or {})), cwd=cwd)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    process.wait(timeout=120)
    os.close(leader)
    return b"".join(chunks).decode("utf-8", "replace")
