"""Checks of a command line read without click (`validate`, `verify`): the fast reading
either declines a line or makes exactly what the click command makes of it, and a run on
the fast path loads neither click nor rich."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Callable, Optional

import pytest

# Runs `aipcc-build ARGS` and prints, last on stderr, its exit code and the modules loaded.
MAIN_THEN_MODULES = ("import sys\n"
                     "from aipcc_build.cli import main\n"
                     "try:\n"
                     "    main(sys.argv[1:])\n"
                     "except SystemExit as exc:\n"
                     "    print(exc.code, ' '.join(sorted(sys.modules)), file=sys.stderr)\n")


def make_files(where: Path, files: Mapping[str, Optional[str]]) -> None:
    """FILES (a name: its text, or None for a directory) in WHERE."""
    for name, text in files.items():
        if text is None:
            (where / name).mkdir()
        else:
            (where / name).write_text(text)


def held(where: Path) -> dict[str, Optional[str]]:
    """What WHERE holds, as make_files takes it: each path under it, its text or None for a
    directory."""
    found: dict[str, Optional[str]] = {}
    for path in sorted(where.rglob("*")):
        name = str(path.relative_to(where))
        found[name] = None if path.is_dir() and not path.is_symlink() else path.read_text()
    return found


def declines_or_agrees(parse: Callable[[list[str]], Any],
                       by_click: Callable[[list[str], pytest.MonkeyPatch], Any],
                       args: list[str], files: Mapping[str, Optional[str]],
                       where: Path) -> None:
    """In WHERE, holding FILES, PARSE of ARGS is None or what BY_CLICK makes of ARGS;
    neither leaves the directory nor changes what it holds. One directory serves every
    example of a hypothesis test (a fresh one each made and removed 3,000 directories, most
    of the test's time on ext4): what it holds is compared after each."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.chdir(where)
        fast = parse(args)
        if fast is not None:
            assert fast == by_click(args, monkeypatch), args
        assert os.getcwd() == str(where)
    assert held(where) == dict(files), args


def run_main(*args: str) -> tuple[str, set[str], subprocess.CompletedProcess[str]]:
    """`aipcc-build ARGS` in a Python of its own: its exit code, the top-level packages it
    loaded, and the run."""
    done = subprocess.run([sys.executable, "-c", MAIN_THEN_MODULES, *args],
                          capture_output=True, text=True, timeout=60)
    code, *modules = done.stderr.strip().splitlines()[-1].split()
    return code, {module.split(".")[0] for module in modules}, done
