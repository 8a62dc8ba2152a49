"""Every git call aipcc-build makes: argument lists in, typed results out, ToolError on failure.

`plan --changed-since` needs a constant number of calls whatever the size of the matrix:
the top-level directory, the names of the changed files, and the line ranges of one file.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .errors import InputError, ToolError

HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@")
# Plain `git diff` output: no pager, colours, external diff drivers or rename pairing, so
# a renamed file is its old path deleted plus its new path added.
DIFF = ("diff", "--no-color", "--no-ext-diff", "--no-renames")


@dataclass(frozen=True)
class Hunk:
    """Lines changed in the working-tree file, 1-based and inclusive.

    A pure deletion has no new lines: it spans the two lines around the deletion point.
    `text` holds the removed and added lines, to tell a comment-only change apart.
    """

    first: int
    last: int
    text: tuple[str, ...]


def _run(directory: str, args: Sequence[str]) -> str:
    command = ["git", "-C", directory, *args]
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise ToolError(command, 127, "git is not installed") from None
    if done.returncode != 0:
        raise ToolError(command, done.returncode, done.stderr)
    return done.stdout


def toplevel(directory: str) -> Path:
    """The root of the work tree holding DIRECTORY."""
    return Path(_run(directory, ["rev-parse", "--show-toplevel"]).strip())


def head_commit(directory: str) -> str:
    return _run(directory, ["rev-parse", "HEAD"]).strip()


def remote_url(directory: str, remote: str = "origin") -> str:
    try:
        return _run(directory, ["remote", "get-url", remote]).strip()
    except ToolError:
        raise InputError(f"the repository has no '{remote}' remote: a Tekton PipelineRun "
                         f"clones the repository from it (git remote add {remote} URL)",
                         file=directory) from None


def changed_files(directory: str, rev: str) -> list[str]:
    """Paths (relative to the top level) that differ between REV and the work tree."""
    out = _run(directory, [*DIFF, "--name-only", "-z", rev, "--"])
    return [name for name in out.split("\0") if name]


def changed_lines(directory: str, rev: str, path: str) -> list[Hunk]:
    """The hunks of PATH (relative to the top level) between REV and the work tree."""
    out = _run(directory, [*DIFF, "-U0", rev, "--", f":(top){path}"])
    hunks: list[Hunk] = []
    lines = out.splitlines()
    for index, line in enumerate(lines):
        match = HUNK.match(line)
        if not match:
            continue
        start, count = int(match.group(1)), int(match.group(2) or "1")
        body = []
        for following in lines[index + 1:]:
            if following.startswith(("@@", "diff --git")):
                break
            if following.startswith(("+", "-")):
                body.append(following[1:])
        if count == 0:  # git names the line before the deletion (0: start of file)
            hunks.append(Hunk(max(start, 1), start + 1, tuple(body)))
        else:
            hunks.append(Hunk(start, start + count - 1, tuple(body)))
    return hunks
