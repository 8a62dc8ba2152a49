"""Fixtures for the engineer and CI workflow tests: a copy of the shipped project, the CLI
run in-process, a temporary git repository and check-jsonschema as a subprocess."""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from aipcc_build.cli import main

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Outcome:
    code: int
    out: str
    err: str


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """The shipped matrix, templates and rendered Containerfiles, in a scratch directory."""
    for part in ("matrix", "templates", "containerfiles"):
        shutil.copytree(REPO / part, tmp_path / part)
    return tmp_path


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str]):
    def run_cli(*args: str) -> Outcome:
        with pytest.raises(SystemExit) as exit_info:
            main(list(args))
        captured = capsys.readouterr()
        return Outcome(int(exit_info.value.code or 0), captured.out, captured.err)

    return run_cli


def git(directory: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(directory), *args], check=True,
                          capture_output=True, text=True).stdout


@pytest.fixture
def repo(project: Path) -> Path:
    """PROJECT as a git repository with everything committed."""
    git(project, "init", "-q", "-b", "main")
    git(project, "config", "user.email", "ci@example.com")
    git(project, "config", "user.name", "CI")
    (project / "README.md").write_text("# images\n")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "initial")
    return project


def check_jsonschema(*args: str) -> subprocess.CompletedProcess[str]:
    """check-jsonschema validates offline: the vendored schemas ship in the PyPI package."""
    return subprocess.run([sys.executable, "-m", "check_jsonschema", *args],
                          capture_output=True, text=True)
