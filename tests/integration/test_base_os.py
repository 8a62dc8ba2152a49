"""The real base images of scripts/base-os: RUN steps work in them, natively and under
qemu emulation (arm64), and their configs name the right architecture."""

from __future__ import annotations

import platform
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

NATIVE = {"x86_64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(platform.machine(),
                                                                       platform.machine())


def _arch(image: str) -> str:
    return subprocess.run(["buildah", "inspect", "--type", "image", "--format",
                           "{{.OCIv1.Architecture}}", image],
                          check=True, capture_output=True, text=True, timeout=60).stdout.strip()


@pytest.fixture
def build(tmp_path: Path) -> Iterator:
    """build(containerfile, *buildah_args) -> combined output; the image is removed after."""
    tags: list[str] = []

    def run(containerfile: str, *args: str) -> str:
        tag = f"localhost/aipcc-test/base-os-{uuid.uuid4().hex[:10]}"
        tags.append(tag)
        (tmp_path / "Containerfile").write_text(containerfile)
        out = subprocess.run(["buildah", "build", "--layers=false", *args, "-t", tag,
                              str(tmp_path)],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             timeout=1800)
        assert out.returncode == 0, out.stdout
        return out.stdout

    yield run
    for tag in tags:
        subprocess.run(["buildah", "rmi", "-f", tag], capture_output=True, timeout=120)


def test_native_base_makes_a_venv(debian_base: str, build) -> None:
    assert _arch(debian_base) == NATIVE
    out = build(f"FROM {debian_base}\n"
                "RUN python3 -m venv /opt/venv && /opt/venv/bin/pip --version\n")
    assert "pip " in out and "/opt/venv/" in out


def test_arm64_base_runs_arm64_code(debian_base_arm64: str, build) -> None:
    assert _arch(debian_base_arm64) == "arm64"
    out = build(f"FROM {debian_base_arm64}\nRUN uname -m\n", "--platform", "linux/arm64")
    assert "aarch64" in out.splitlines()
