"""`make test`, the gate `.ci/run` calls, run by real make against stand-ins for pip and tox.

The suite and the side envs run at once; when each tox built the package itself, both
staged the sdist in one directory of the tree and one run failed (CI stop 27)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")

FAKE_PIP = """#!/bin/sh
echo "pip $*" >> "$CALLS"
[ -z "$PIP_FAILS" ] || exit 1
while [ $# -gt 0 ]; do
  if [ "$1" = --wheel-dir ]; then mkdir -p "$2"; : > "$2/aipcc_build-0.1.0-py3-none-any.whl"; fi
  shift
done
"""

FAKE_TOX = """#!/bin/sh
echo "tox $*" >> "$CALLS"
case "$*" in
  *--workdir*) echo "side envs said this"; exit "${SIDE_RC:-0}" ;;
  *) exit "${SUITE_RC:-0}" ;;
esac
"""


def _make_test(tmp_path: Path, **env: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    project = tmp_path / "project"
    project.mkdir()
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy2(ROOT / name, project / name)
    venv_bin = tmp_path / "venv" / "bin"
    venv_bin.mkdir(parents=True)
    for name, text in (("pip", FAKE_PIP), ("tox", FAKE_TOX)):
        (venv_bin / name).write_text(text)
        (venv_bin / name).chmod(stat.S_IRWXU)
    installed = tmp_path / "venv" / ".installed"
    installed.touch()
    # newer than pyproject.toml, so make keeps the stand-in venv
    os.utime(installed, (installed.stat().st_atime + 10, installed.stat().st_mtime + 10))
    calls = tmp_path / "calls"
    done = subprocess.run(
        ["make", "--no-print-directory", "-o", "system", f"VENV={tmp_path / 'venv'}", "test"],
        cwd=project,
        env={**os.environ, "CALLS": str(calls), **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done, calls.read_text().splitlines() if calls.exists() else []


def test_the_package_is_built_once_before_both_tox_runs_install_it(tmp_path: Path) -> None:
    done, calls = _make_test(tmp_path)
    assert done.returncode == 0, done.stderr
    assert calls[0].startswith("pip wheel ")
    wheel = "--installpkg .tox/dist/aipcc_build-0.1.0-py3-none-any.whl"
    tox_runs = calls[1:]
    assert len(tox_runs) == 2
    assert all(wheel in run for run in tox_runs), tox_runs
    assert any(run.endswith("-e py") for run in tox_runs)
    assert any("--workdir .tox/side -e oldest,lint,type" in run for run in tox_runs)


@pytest.mark.parametrize("failing", ["SUITE_RC", "SIDE_RC"])
def test_either_run_failing_fails_the_gate_and_the_side_output_is_shown(
    tmp_path: Path, failing: str
) -> None:
    done, _ = _make_test(tmp_path, **{failing: "1"})
    assert done.returncode != 0
    assert "side envs said this" in done.stdout


def test_a_package_that_does_not_build_stops_the_gate_before_any_tox_run(
        tmp_path: Path) -> None:
    done, calls = _make_test(tmp_path, PIP_FAILS="1")
    assert done.returncode != 0
    assert [call.split()[0] for call in calls] == ["pip"]
