"""The demo on a real OS (issue 11): matrix/demo.yaml built on the Debian 12 base image of
scripts/base-os, every image installing NVIDIA's wheels with a real `pip install` from a
PEP 503 index served on 127.0.0.1, then validated and pushed to a registry on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def aipcc_build(cwd: Path, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "aipcc_build", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PYTHONPATH": str(REPO)})


def skopeo_config(reference: str) -> dict[str, Any]:
    out = subprocess.run(["skopeo", "inspect", "--tls-verify=false", "--config",
                          f"docker://{reference}"], check=True, capture_output=True, text=True,
                         timeout=120)
    return dict(json.loads(out.stdout))


@pytest.fixture
def held_port() -> Iterator[int]:
    """A port on 127.0.0.1 that something other than a registry listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        yield int(sock.getsockname()[1])


def test_the_demo_builds_on_debian_with_pip_from_the_index(
        debian_base: str, wheel_index: Any, namespace: str, tmp_path: Path) -> None:
    assert debian_base == "localhost/aipcc/debian:bookworm"  # matrix/demo.yaml's os
    # The host's platform only: the index holds this host's wheels (the arm64 instances,
    # emulated, are what tests/integration/test_multiarch.py builds).
    done = aipcc_build(tmp_path, "--matrix", str(REPO / "matrix" / "demo.yaml"), "matrix",
                       "--push", "--registry", namespace, "--no-tls-verify",
                       "--platform", "linux/amd64")
    assert done.returncode == 0, done.stderr
    images = {i["key"]: i for i in json.loads((tmp_path / "build-report.json").read_text())
              ["images"]}
    assert len(images) == 6 and {i["status"] for i in images.values()} == {"ok"}
    config = skopeo_config(f"{namespace}/runtime/cuda-12.8-debian:1.0-dev")
    assert "CUDA_VERSION=12.8.1" in config["config"]["Env"]
    # A plain `pip install nvidia-cuda-runtime-cu12` in the 12.8 image resolved 12.8.90 (the
    # component table's version) from its own index, configured by the renderer.
    log = (tmp_path / "logs" / "base" / "cuda-12.8-debian.log").read_text()
    assert f"Looking in indexes: {wheel_index.urls['cuda12.8-debian']}" in log
    assert "nvidia-cuda-runtime-cu12-12.8.90" in log.split("Successfully installed", 1)[1]
    assert re.search(r"GET /1\.0/cuda12\.8-debian/files/\S+/nvidia_cuda_runtime_cu12-12\.8\.90-",
                     wheel_index.requests())
    log = (tmp_path / "logs" / "base" / "cuda-12.9-debian.log").read_text()
    assert "nvidia-cuda-runtime-cu12-12.9.79" in log.split("Successfully installed", 1)[1]
    log = (tmp_path / "logs" / "runtime" / "cuda-12.8-debian.log").read_text()
    assert "Successfully installed packaging-24.2" in log


def test_the_demo_names_a_taken_registry_port(held_port: int) -> None:
    started = time.monotonic()
    done = subprocess.run([str(REPO / "scripts" / "demo"), "--registry-port", str(held_port)],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"demo: port {held_port} on 127.0.0.1 is taken by something that is not a registry: "
        "pick another with --registry-port"]
    assert time.monotonic() - started < 30  # an error, never a hang


def test_serve_dir_names_a_taken_index_port(held_port: int, tmp_path: Path) -> None:
    done = subprocess.run([str(REPO / "scripts" / "serve-dir"), str(tmp_path), "--port",
                           str(held_port)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip() == f"serve-dir: port {held_port} on 127.0.0.1 is already in use"
