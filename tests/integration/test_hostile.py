"""Issue 16 on the real buildah: a silent registry, concurrent runs, interruptions."""

from __future__ import annotations

import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Callable

import pytest

from aipcc_build.build.runner import BuildahRunner
from aipcc_build.build.schedule import BuildJob, BuildOutcome, ScheduleOptions, Status, run
from aipcc_build.matrix import ImageSpec, ToolkitVersion
from aipcc_build.plan import make_plan
from aipcc_build.tools.runner import ProcessRunner

pytestmark = pytest.mark.integration
PREFIX = "localhost/aipcc-test-hardening"


class SilentRegistry:
    """Accepts every connection on 127.0.0.1 and never answers."""

    def __init__(self) -> None:
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(64)
        self.port = self.server.getsockname()[1]
        self.held: list[socket.socket] = []
        self.closed = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed.is_set():
            try:
                connection, _ = self.server.accept()
            except OSError:
                return
            self.held.append(connection)

    def close(self) -> None:
        self.closed.set()
        self.server.close()
        for connection in self.held:
            connection.close()


@pytest.fixture
def silent_registry() -> Iterator[SilentRegistry]:
    registry = SilentRegistry()
    yield registry
    registry.close()


@pytest.fixture
def local_image() -> Iterator[str]:
    """A tiny committed image only this test uses: its ID."""
    name = f"{PREFIX}/tiny-{uuid.uuid4().hex[:10]}"
    container = subprocess.run(["buildah", "from", "scratch"], check=True,
                               capture_output=True, text=True).stdout.strip()
    try:
        image_id = subprocess.run(["buildah", "commit", "-q", container, name], check=True,
                                  capture_output=True, text=True).stdout.strip()
    finally:
        subprocess.run(["buildah", "rm", container], capture_output=True)
    yield image_id
    subprocess.run(["buildah", "rmi", "-f", name], capture_output=True)


def spec(name: str, reference_host: str) -> ImageSpec:
    return ImageSpec(
        name=name, kind="base", accelerator="cuda", version="12.8.1", os="ubi9", os_from="x",
        variant="cuda-ubi9", repository=f"{reference_host}/hardening/{name}", tag="1.0-dev",
        template="t.j2", containerfile="/nowhere/Containerfile", toolkit=ToolkitVersion("12.8.1"),
    )


class PrebuiltRunner(BuildahRunner):
    """The real buildah push; `build` hands out an image that exists already."""

    def __init__(self, processes: ProcessRunner, image_id: str) -> None:
        super().__init__(processes)
        self.image_id = image_id

    def build(self, job: BuildJob, on_line: Callable[[str], None]) -> BuildOutcome:
        return BuildOutcome(ok=True, image_id=self.image_id)


def test_push_to_a_silent_registry_ends_push_failed_within_the_timeouts(
        tmp_path: Path, silent_registry: SilentRegistry, local_image: str) -> None:
    timeout, retries, slack = 3.0, 1, 10.0
    options = ScheduleOptions(log_dir=str(tmp_path / "logs"), push=True, tls_verify=False,
                              retries=retries, retry_delay=0.1, push_timeout=timeout)
    runner = PrebuiltRunner(ProcessRunner(), local_image)
    started = time.monotonic()
    result = run(make_plan([spec("silent", f"127.0.0.1:{silent_registry.port}")]), options,
                 runner, lambda event: None, threading.Event())
    elapsed = time.monotonic() - started
    (image,) = result.images
    assert image.status is Status.PUSH_FAILED
    assert "push_timeout" in image.message and "2 attempt(s)" in image.message
    assert image.retries == retries
    assert elapsed < timeout * (retries + 1) + slack
