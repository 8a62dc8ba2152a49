"""Shared fixtures. Integration fixtures use the real buildah, skopeo and docker-registry."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

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


@pytest.fixture(scope="session")
def debian_base() -> str:
    """The real Debian 12 base image of scripts/base-os (built once, cached), by name."""
    _need("buildah")
    out = subprocess.run([str(REPO / "scripts" / "base-os")], check=True, capture_output=True,
                         text=True, timeout=3600)
    return out.stdout.strip().splitlines()[-1]


class WheelIndex:
    """A PEP 503 index over the wheelhouse, served by scripts/serve-dir on a free port."""

    def __init__(self, root: Path, url: str) -> None:
        self.root = root
        self.url = url  # http://127.0.0.1:PORT/
        self.simple = url + "simple/"
        self.log = root / "requests.log"

    def requests(self) -> str:
        return self.log.read_text() if self.log.exists() else ""


@pytest.fixture(scope="session")
def wheel_index(wheelhouse: Path, tmp_path_factory: pytest.TempPathFactory
                ) -> Iterator[WheelIndex]:
    root = tmp_path_factory.mktemp("index")
    subprocess.run([str(REPO / "scripts" / "make-simple-index"), str(wheelhouse), str(root)],
                   check=True, capture_output=True, timeout=300)
    pidfile = root / "server.pid"
    out = subprocess.run([str(REPO / "scripts" / "serve-dir"), str(root), "--pidfile",
                          str(pidfile), "--log", str(root / "requests.log")],
                         check=True, capture_output=True, text=True, timeout=60)
    try:
        yield WheelIndex(root, out.stdout.strip())
    finally:
        subprocess.run([str(REPO / "scripts" / "serve-dir"), "--stop", "--pidfile",
                        str(pidfile)], capture_output=True, timeout=60)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Registry:
    """A docker-registry (distribution) process on 127.0.0.1, storage in a temp dir."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = _free_port()
        self.host = f"127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        config = self.root / "config.yml"
        config.write_text(
            "version: 0.1\n"
            "log: {level: error}\n"
            f"storage: {{filesystem: {{rootdirectory: {self.root / 'data'}}}, "
            "delete: {enabled: true}}\n"
            f"http: {{addr: '{self.host}'}}\n"
        )
        self.proc = subprocess.Popen(
            [shutil.which("docker-registry") or "registry", "serve", str(config)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"http://{self.host}/v2/", timeout=1).close()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("docker-registry did not start")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
            self.proc = None


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
