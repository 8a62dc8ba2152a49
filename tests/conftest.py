"""Shared fixtures. Integration fixtures use the real buildah, skopeo and docker-registry."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.registry import Registry

REPO = Path(__file__).resolve().parent.parent
BASE_IMAGE = "localhost/aipcc-demo/busybox:latest"

# RUN steps fail under the default OCI isolation on these machines' cgroups.
os.environ.setdefault("BUILDAH_ISOLATION", "chroot")


def _need(program: str) -> None:
    if shutil.which(program) is None:
        pytest.fail(f"{program} is not installed: run the README's test command to set up")


@pytest.fixture(scope="session")
def wheelhouse() -> Path:
    """The real NVIDIA wheels of matrix/demo-wheels.txt, downloaded once and cached."""
    out = subprocess.run(
        [str(REPO / "scripts" / "fetch-wheels")], check=True, capture_output=True, text=True
    )
    return Path(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def base_image() -> str:
    """A local busybox image standing in for a base OS (no registry needed)."""
    _need("buildah")
    subprocess.run([str(REPO / "scripts" / "base-image"), BASE_IMAGE], check=True,
                   capture_output=True)
    return BASE_IMAGE


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[Registry]:
    _need("docker-registry")
    reg = Registry(tmp_path / "registry")
    reg.root.mkdir()
    reg.start()
    try:
        yield reg
    finally:
        reg.stop()
