"""Every git call aipcc-build makes: argument lists in, typed results out, ToolError on failure.

`plan --changed-since` needs a constant number of calls whatever the size of the matrix:
the top-level directory, the names of the changed files, and the line ranges of one file.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError, ToolError, quoted
from .runner import Runner

HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
# Plain `git diff` output: no pager, colours, external diff drivers or rename pairing, so
# a renamed file is its old path deleted plus its new path added.
DIFF = ("diff", "--no-color", "--no-ext-diff", "--no-renames")


@dataclass(frozen=True)
class Hunk:
    """One change to a file: lines removed from the revision's file and lines added in the
    work tree's, each as (1-based line number in its own file, text)."""

    removed: tuple[tuple[int, str], ...]
    added: tuple[tuple[int, str], ...]


class Git:
    """git, through RUNNER, in the work tree holding DIRECTORY."""

    def __init__(self, runner: Runner, directory: str) -> None:
        self.runner = runner
        self.directory = directory

    def _run(self, args: Sequence[str]) -> str:
        return self.runner.run(["git", "-C", self.directory, *args]).text

    def toplevel(self) -> Path:
        """The root of the work tree."""
        return Path(self._run(["rev-parse", "--show-toplevel"]).strip())

    def head_commit(self) -> str:
        return self._run(["rev-parse", "HEAD"]).strip()

    def uncommitted(self) -> list[str]:
        """Paths (relative to the top level) the work tree changes, adds or deletes
        against HEAD, untracked ones included, ignored ones not."""
        entries = iter(self._run(["status", "--porcelain=v1", "-z",
                                  "--untracked-files=all"]).split("\0"))
        paths = []
        for entry in entries:
            if len(entry) < 4:
                continue
            paths.append(entry[3:])
            if "R" in entry[:2] or "C" in entry[:2]:
                next(entries, None)  # a rename's or copy's former path follows
        return paths

    def remote_url(self, remote: str = "origin") -> str:
        try:
            return self._run(["remote", "get-url", remote]).strip()
        except ToolError:
            raise InputError(f"the repository has no '{remote}' remote: a Tekton PipelineRun "
                             f"clones the repository from it (git remote add {remote} URL, "
                             "or set the matrix's ci.source_url)",
                             file=self.directory) from None

    def commit(self, rev: str) -> str:
        """The commit REV names, as its hash; InputError when it names none. A value the
        user gave never reaches git where an option could be read (`-p`, `--output=FILE`):
        after --end-of-options here, and as a hash everywhere after."""
        try:
            found = self._run(["rev-parse", "--verify", "--quiet", "--end-of-options",
                               f"{rev}^{{commit}}"]).strip()
        except ToolError:
            found = ""
        if not re.fullmatch(r"[0-9a-f]{40,64}", found):
            raise InputError(f"{quoted(rev, always=True)} is not a commit of this repository",
                             field="changed_since")
        return found

    def changed_files(self, commit: str) -> list[str]:
        """Paths (relative to the top level) that differ between COMMIT (a hash from
        `commit`) and the work tree."""
        out = self._run([*DIFF, "--name-only", "-z", "--end-of-options", commit, "--"])
        return [name for name in out.split("\0") if name]

    def file_at(self, commit: str, path: str) -> str:
        """PATH (relative to the top level) as COMMIT holds it; empty when it has none."""
        try:
            return self._run(["show", "--no-color", "--end-of-options", f"{commit}:{path}"])
        except ToolError:
            return ""

    def changed_lines(self, commit: str, path: str) -> list[Hunk]:
        """The hunks of PATH (relative to the top level) between COMMIT and the work tree."""
        return parse_hunks(self._run([*DIFF, "-U0", "--end-of-options", commit, "--",
                                      f":(top){path}"]))


def parse_hunks(out: str) -> list[Hunk]:
    """The hunks of `git diff -U0` output for one file."""
    hunks: list[Hunk] = []
    lines = out.splitlines()
    for index, line in enumerate(lines):
        match = HUNK.match(line)
        if not match:
            continue
        old_line, new_line = int(match.group(1)), int(match.group(3))
        removed: list[tuple[int, str]] = []
        added: list[tuple[int, str]] = []
        for following in lines[index + 1:]:
            if following.startswith(("@@", "diff --git")):
                break
            if following.startswith("-"):
                removed.append((old_line, following[1:]))
                old_line += 1
            elif following.startswith("+"):
                added.append((new_line, following[1:]))
                new_line += 1
        hunks.append(Hunk(tuple(removed), tuple(added)))
    return hunks
