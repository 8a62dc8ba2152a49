"""The `uv` entry point every rendered image has first on PATH (aipcc_build/in_image/uv.sh),
run here by the system's sh and awk in front of a stand-in uv that records how it was run.
The real uv in the demo's real image: tests/integration/test_constraints.py."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from aipcc_build.toolkit.constraints import (
    CONSTRAINTS_PATH,
    UV_WITH_PATH,
    constraints_text,
    target_of,
)

ENTRY = Path(__file__).resolve().parents[3] / "aipcc_build" / "in_image" / "uv.sh"
FOREIGN = """version = 1
[[package]]
name = "app"
version = "0"
source = { virtual = "." }
dependencies = [{ name = "nvidia-cuda-runtime-cu12" }]

[[package]]
name = "nvidia-cuda-runtime-cu12"
version = "12.9.79"
source = { registry = "https://pypi.org/simple" }
wheels = [{ url = "https://files/nvidia_cuda_runtime_cu12-12.9.79-py3-none-any.whl" }]
"""


class Image:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.constraints = root / "constraints.txt"
        self.constraints.write_text(constraints_text(target_of("cuda", "12.8.1")))
        self.with_file = root / "with.txt"
        self.with_file.write_text(f"-c {self.constraints}\n")
        entry_dir, real_dir = root / "entry", root / "real"
        entry_dir.mkdir()
        real_dir.mkdir()
        self.entry = entry_dir / "uv"
        self.entry.write_text(ENTRY.read_text()
                              .replace(CONSTRAINTS_PATH, str(self.constraints))
                              .replace(UV_WITH_PATH, str(self.with_file)))
        self.entry.chmod(0o755)
        self.log = root / "ran"
        real = real_dir / "uv"
        real.write_text(f'#!/bin/sh\nprintf "%s\\n" "UV_CONSTRAINT=$UV_CONSTRAINT" '
                        f'"UV_BUILD_CONSTRAINT=$UV_BUILD_CONSTRAINT" "$@" > {self.log}\n')
        real.chmod(0o755)
        self.path = f"{entry_dir}:{real_dir}:/usr/bin:/bin"

    def uv(self, *args: str, cwd: Path | None = None, **env: str
           ) -> tuple[subprocess.CompletedProcess[str], list[str]]:
        self.log.unlink(missing_ok=True)
        base = {"PATH": self.path, "UV_CONSTRAINT": str(self.constraints)}
        done = subprocess.run([str(self.entry), *args], capture_output=True, text=True,
                              cwd=cwd or self.root, env={**base, **env}, timeout=30)
        return done, self.log.read_text().splitlines() if self.log.exists() else []


@pytest.fixture
def image(tmp_path: Path) -> Image:
    return Image(tmp_path)


def test_uv_run_with_gets_the_constraints_as_a_requirements_file(image: Image) -> None:
    done, ran = image.uv("--quiet", "run", "--no-project", "--with", "fw", "python", "-c",
                         "--with")
    assert done.returncode == 0, done.stderr
    assert ran[2:] == ["--quiet", "run", "--with-requirements", str(image.with_file),
                       "--no-project", "--with", "fw", "python", "-c", "--with"]
    _, plain = image.uv("run", "--no-project", "python")
    assert plain[2:] == ["run", "--no-project", "python"]


def test_a_users_constraints_add_to_the_images_and_dev_null_opts_out(image: Image) -> None:
    _, ran = image.uv("pip", "install", "x", UV_CONSTRAINT="/home/me/c.txt",
                      UV_BUILD_CONSTRAINT="")
    assert ran[:2] == [f"UV_CONSTRAINT=/home/me/c.txt {image.constraints}",
                       f"UV_BUILD_CONSTRAINT={image.constraints}"]
    for value in ("/dev/null", "/home/me/c.txt /dev/null"):
        _, out = image.uv("run", "--with", "x", "python", UV_CONSTRAINT=value)
        assert out == [f"UV_CONSTRAINT={value}", "UV_BUILD_CONSTRAINT=", "run", "--with", "x",
                       "python"]


@pytest.mark.parametrize("command", [["sync"], ["sync", "--locked"], ["run", "python"]])
def test_a_foreign_lock_is_refused_before_uv_runs(image: Image, command: list[str]) -> None:
    project = image.root / "project"
    (project / "src").mkdir(parents=True)
    (project / "pyproject.toml").write_text("[project]\nname = 'app'\nversion = '0'\n")
    (project / "uv.lock").write_text(FOREIGN)
    os.utime(project / "pyproject.toml", (1, 1))  # older than its lock: not locked again
    done, ran = image.uv(*command, cwd=project / "src")
    assert done.returncode == 1 and ran == []
    assert "nvidia-cuda-runtime-cu12 12.9.79 (the image admits nvidia-cuda-runtime-cu12" \
           "==12.8.*" in done.stderr
    assert "cuda 12.8 image" in done.stderr and str(image.constraints) in done.stderr
    (project / "uv.lock").write_text(FOREIGN.replace("12.9.79", "12.8.90"))
    done, ran = image.uv(*command, cwd=project / "src")
    assert done.returncode == 0, done.stderr
    assert ran[2:] == command


def test_a_pylock_is_checked_then_installed_without_constraints(image: Image) -> None:
    lock = image.root / "pylock.toml"
    lock.write_text('lock-version = "1.0"\n[[packages]]\nname = "nvidia-cuda-runtime-cu12"\n'
                    'wheels = [{ url = "https://f/nvidia_cuda_runtime_cu12-12.9.79-py3-none-any'
                    '.whl" }]\n[[packages]]\nname = "nvidia-cuda-runtime"\nversion = "13.0.88"\n')
    done, ran = image.uv("pip", "install", "-r", str(lock))
    assert done.returncode == 1 and ran == []
    assert "nvidia-cuda-runtime-cu12 12.9.79" in done.stderr  # no version: its wheel's
    assert "nvidia-cuda-runtime 13.0.88" in done.stderr
    lock.write_text('[[packages]]\nname = "nvidia-cuda-runtime-cu12"\nversion = "12.8.90"\n')
    done, ran = image.uv("pip", "install", "-r", str(lock))
    assert done.returncode == 0, done.stderr
    assert ran[0] == "UV_CONSTRAINT="  # uv refuses constraints beside a pylock


def test_a_checked_lock_is_read_again_only_when_it_changed(image: Image) -> None:
    project = image.root / "project"
    (project / ".venv").mkdir(parents=True)
    (project / "pyproject.toml").write_text("[project]\nname = 'app'\nversion = '0'\n")
    lock = project / "uv.lock"
    lock.write_text(FOREIGN.replace("12.9.79", "12.8.90"))
    os.utime(project / "pyproject.toml", (1, 1))
    assert image.uv("sync", cwd=project)[0].returncode == 0
    assert (project / ".venv" / ".aipcc-checked-lock").exists()
    # A foreign lock copied in with an older time (cp -p), or a newer one: checked again.
    for when in (2, 4_000_000_000):
        lock.write_text(FOREIGN)
        os.utime(lock, (when, when))
        done, ran = image.uv("sync", cwd=project)
        assert done.returncode == 1 and ran == [], when


@pytest.mark.parametrize("command", [["sync", "--upgrade"], ["sync", "-P", "torch"],
                                     ["run", "--upgrade-package=torch", "python"]])
def test_an_upgrade_is_locked_first_and_checked(image: Image, command: list[str]) -> None:
    # uv re-resolves on an upgrade without the image's constraints: the entry point locks
    # first (the stand-in uv writes a lock of CUDA 12.9 when asked to lock) and checks that.
    project = image.root / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname = 'app'\nversion = '0'\n")
    (project / "uv.lock").write_text(FOREIGN.replace("12.9.79", "12.8.90"))
    os.utime(project / "pyproject.toml", (1, 1))
    real = Path(image.path.split(":")[1]) / "uv"
    real.write_text(real.read_text() + f'[ "$1" = lock ] && printf %s \'{FOREIGN}\' > '
                    f'{project}/uv.lock\nexit 0\n')
    done, ran = image.uv(*command, cwd=project)
    assert done.returncode == 1, done.stderr
    assert "nvidia-cuda-runtime-cu12 12.9.79" in done.stderr
    assert ran[2:5] == ["lock", "--quiet", "--project"]  # the lock ran, not the command
    # The refused lock is not left behind: the one the project had comes back.
    assert "12.8.90" in (project / "uv.lock").read_text()
    assert sorted(p.name for p in project.iterdir()) == ["pyproject.toml", "uv.lock"]
    assert ran[6:] == ["--upgrade"] if "--upgrade" in command else ran[6:] == [
        "--upgrade-package" if "-P" in command else "--upgrade-package=torch",
        *(["torch"] if "-P" in command else [])]
