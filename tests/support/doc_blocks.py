"""The shell blocks of docs/ that are meant to run: fenced blocks whose info string is
`sh run` (run in a fresh copy of the project), `sh demo` (run on the demo's fixtures: a
base image, the wheel indexes, a registry; docs/tutorial.md) or `sh release` (a signed
release against test registries; docs/how-to/sign-and-verify-releases.md). GitHub
highlights them as sh and ignores the rest. Other blocks (output, sketches, set-up the
fixtures do, commands that need a cluster) are left alone."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

FENCE = re.compile(r"^```sh (run|demo|release)[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)


def runnable_blocks(page: Path, kind: str = "run") -> list[str]:
    return [match.group(2) for match in FENCE.finditer(page.read_text())
            if match.group(1) == kind]


def pages_with_blocks(docs: Path) -> list[Path]:
    return sorted(page for page in docs.rglob("*.md") if runnable_blocks(page))


def drift_checks(tox_ini: Path) -> list[list[str]]:
    """tox.ini's commands that call aipcc-build: the repository's own drift checks."""
    return [shlex.split(line.strip()) for line in tox_ini.read_text().splitlines()
            if line.strip().startswith("aipcc-build ")]
