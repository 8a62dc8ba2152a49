"""Every `sh run` block of docs/, run as written, in order, in a fresh git copy of the
project; a page whose blocks commit changes (the add-version how-to) is followed by the
repository's own drift checks (tox.ini): a page a newcomer follows to the letter ends
green, or this test says which block failed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.doc_blocks import drift_checks, pages_with_blocks, runnable_blocks
from tests.support.project import REPO, git_repository

pytestmark = pytest.mark.integration

# What a fresh clone holds that the blocks and the drift checks read.
PROJECT_PARTS = ("matrix", "templates", "containerfiles", "docs", ".tekton", "konflux")


def fresh_clone(root: Path) -> Path:
    for part in PROJECT_PARTS:
        shutil.copytree(REPO / part, root / part, symlinks=True)
    shutil.copy(REPO / "tox.ini", root / "tox.ini")
    return git_repository(root)


def shell(script: str, cwd: Path, **environ: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}"
               f"{os.environ.get('PATH', '')}", NO_COLOR="1", **environ)
    env.pop("AIPCC_BUILD_MATRIX", None)
    env.pop("CI", None)  # the build id the committed files were generated with: dev
    return subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=900)


def test_some_pages_have_runnable_blocks():
    assert REPO / "docs/how-to/add-a-toolkit-version.md" in pages_with_blocks(REPO / "docs")


@pytest.mark.parametrize("page", pages_with_blocks(REPO / "docs"),
                         ids=lambda page: page.relative_to(REPO).as_posix())
def test_page_runs_as_written_and_the_drift_checks_pass(page: Path, tmp_path: Path):
    clone = fresh_clone(tmp_path)
    start = shell("git rev-parse HEAD", clone).stdout
    for number, block in enumerate(runnable_blocks(page), start=1):
        done = shell(block, clone)
        assert done.returncode == 0, (f"block {number} of {page.name} failed "
                                      f"({done.returncode}):\n{block}\n{done.stderr}")
    status = shell("git status --porcelain", clone).stdout
    assert status == "", f"the page leaves uncommitted changes:\n{status}"
    if shell("git rev-parse HEAD", clone).stdout == start:
        return  # the page changed nothing: the repository's own checks cover it as it is
    for check in drift_checks(REPO / "tox.ini"):
        done = shell(" ".join(check), clone)
        assert done.returncode == 0, f"{' '.join(check)}:\n{done.stdout}{done.stderr}"
