"""Issue 38.4: every table (compat, list, select, validate, the matrix summary) and the
note saying what was left out, as a real terminal shows them (a pseudo-terminal of 80 and
120 columns, with and without NO_COLOR) and piped with COLUMNS: no line wider than the
terminal, no reference broken, colour only without NO_COLOR."""

from __future__ import annotations

import functools
import json
import re
import subprocess
import sys

import pytest

from tests.support.project import REPO
from tests.support.terminal import environment, on_a_terminal

MATRIX = str(REPO / "matrix" / "aipcc.yaml")
COLOUR = re.compile(r"\x1b\[[0-9;]*m")
ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
REFERENCE = "quay.io/aipcc/base-images/cuda-12.9-el9.6:3.0-dev"
DIGEST = "sha256:" + "ab" * 32

# The validate table and the build summary, drawn by the report functions the commands
# call, from results made here (no image to read, no build to run).
VALIDATE = f"""
from aipcc_build.report.validation import validation
from aipcc_build.validate.matrix_run import ValidationRun
from aipcc_build.validate.pipeline import Outcome, Target
from aipcc_build.validate.results import Expectation, ImageVerdict
ref = "{REFERENCE}"
verdicts = tuple(ImageVerdict(ref, platform, expected=Expectation("cuda", "12.9"),
                              toolkits={{"cuda": ("12.9.79",)}})
                 for platform in ("linux/amd64", "linux/arm64"))
validation(ValidationRun((Outcome(Target(ref), verdicts),)), False)
"""
SUMMARY = f"""
from aipcc_build.imagebuild.outcomes import ImageResult, RunResult, Status
from aipcc_build.matrix import expand, load
from aipcc_build.report.progress import matrix_summary
images = expand(load({MATRIX!r}))
matrix_summary(RunResult(tuple(
    ImageResult(image, Status.FAILED if n == 0 else Status.OK, "", digest="{DIGEST}",
                start=1.0, end=2.5, toolkits={{"cuda": ["12.9.79"]}},
                message="RUN step failed: exit status 1" if n == 0 else "")
    for n, image in enumerate(images)), 0.0, 3.0), None)
"""
COMMANDS = {
    "compat": ["-m", "aipcc_build", "--matrix", MATRIX, "compat", "--today", "2026-11-28"],
    "list": ["-m", "aipcc_build", "--matrix", MATRIX, "list"],
    "select": ["-m", "aipcc_build", "--matrix", MATRIX, "select", "--gpu", "H100",
               "--driver", "575.57.08", "--today", "2026-11-28"],
    "validate": ["-c", VALIDATE],
    "summary": ["-c", SUMMARY],
}
PIPED = ["compat", "list", "select", "summary"]


# Every command of one test's question runs in one process (one pseudo-terminal, or one
# pipe), one after the other, each after a line naming it: a process start costs more than
# drawing a table, and the consoles are made per call, so none sees another's output.
MARK = "### table of "
RUN_ALL = """
import json, runpy, sys
commands, mark = json.loads(sys.argv[1]), sys.argv[2]
for name, args in commands:
    for stream in (sys.stdout, sys.stderr):
        stream.write("\\n%s%s\\n" % (mark, name))
        stream.flush()
    if args[0] == "-m":
        sys.argv[1:] = args[2:]
        try:
            runpy.run_module(args[1], run_name="__main__", alter_sys=True)
        except SystemExit:
            pass
    else:
        exec(compile(args[1], name, "exec"), {"__name__": "__main__"})
    sys.stdout.flush()
    sys.stderr.flush()
"""


def _all(commands: list[str]) -> list[str]:
    return ["-c", RUN_ALL, json.dumps([(name, COMMANDS[name]) for name in commands]), MARK]


def _split(text: str) -> dict[str, str]:
    """Each command's part of TEXT, by the line naming it."""
    parts: dict[str, str] = {}
    for part in text.split(f"\n{MARK}")[1:]:
        name, _, shown = part.partition("\n")
        parts[name] = parts.get(name, "") + shown
    return parts


@functools.cache
def in_a_terminal(columns: int, no_color: bool) -> dict[str, str]:
    """What each command shows on a terminal COLUMNS wide."""
    shown = on_a_terminal(_all(sorted(COMMANDS)), columns, cwd=str(REPO),
                          environ={"NO_COLOR": "1"} if no_color else {})
    return _split(shown.replace("\r\n", "\n"))


@functools.cache
def piped(columns: int) -> dict[str, str]:
    """What each piped command prints, its output and then its errors."""
    done = subprocess.run([sys.executable, *_all(PIPED)], capture_output=True, text=True,
                          env=environment(COLUMNS=str(columns)), cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    out, err = _split(done.stdout), _split(done.stderr)
    return {name: out[name] + err[name] for name in PIPED}


def _lines(text: str) -> list[str]:
    return ESCAPE.sub("", text).splitlines()


def _check(text: str, columns: int) -> None:
    lines = _lines(text)
    widest = max(lines, key=len)
    assert len(widest) <= columns, f"{len(widest)} columns: {widest!r}"
    assert any(REFERENCE in line for line in lines), "a reference was broken"


@pytest.mark.parametrize("columns", (80, 120))
@pytest.mark.parametrize("no_color", (False, True), ids=("colour", "NO_COLOR"))
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_table_fits_the_terminal(command: str, columns: int, no_color: bool) -> None:
    shown = in_a_terminal(columns, no_color)[command]
    _check(shown, columns)
    if no_color:
        assert not COLOUR.search(shown)
    if command == "validate":
        assert "linux/amd64" in ESCAPE.sub("", shown)  # a platform is never broken
        assert "--wide" not in shown  # validate has no such option
    if command == "summary":
        assert "RUN step failed: exit status 1" in " ".join(_lines(shown))


@pytest.mark.parametrize("columns", (80, 120))
@pytest.mark.parametrize("command", PIPED)
def test_piped_output_honours_columns(command: str, columns: int) -> None:
    _check(piped(columns)[command], columns)
