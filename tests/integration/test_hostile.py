"""Issue 16 on the real buildah: a silent registry, concurrent runs, interruptions."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
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

from .test_matrix_build import REPO, write_matrix

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


# ---- concurrent runs: an interrupted run removes only its own working containers --------

def _containers_from(image_id: str) -> list[str]:
    listed = json.loads(subprocess.run(["buildah", "containers", "--json"], check=True,
                                       capture_output=True, text=True).stdout or "[]")
    return sorted(c["containername"] for c in listed or []
                  if c.get("imageid") == image_id.replace("sha256:", ""))


def _run_tags_of(image_id: str) -> list[str]:
    listed = json.loads(subprocess.run(["buildah", "images", "--json"], check=True,
                                       capture_output=True, text=True).stdout or "[]")
    return [name for image in listed or [] if image["id"] == image_id.replace("sha256:", "")
            for name in image.get("names") or [] if name.startswith("localhost/aipcc-run/")]


def _start(root: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "aipcc_build", "--matrix", "matrix/test.yaml", "matrix",
         "--jobs", "1", "--registry", f"{PREFIX}/{root.name}-{uuid.uuid4().hex[:8]}"],
        cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_in_run_step(root: Path, proc: subprocess.Popen[str]) -> None:
    log = root / "logs" / "base" / "cuda-12.8-bb.log"
    deadline = time.monotonic() + 90
    while not (log.exists() and "start" in log.read_text().split("RUN echo start")[-1]):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.2)


def _kill_hard(proc: subprocess.Popen[str]) -> None:
    """SIGKILL the run and its buildah children (as a crash would): its containers stay."""
    children = subprocess.run(["ps", "-o", "pid=,pgid=", "--ppid", str(proc.pid)],
                              capture_output=True, text=True).stdout.split()
    proc.kill()
    proc.wait()
    for pgid in set(children[1::2]):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(int(pgid), signal.SIGKILL)


def test_interrupting_one_run_leaves_another_runs_containers_and_clean_spares_live_runs(
        tmp_path: Path, unique_base: tuple[str, str]) -> None:
    base, base_id = unique_base
    env = {**os.environ, "PYTHONPATH": str(REPO), "AIPCC_BUILD_RUN_DIR": str(tmp_path / "runs")}
    roots = {}
    for name in ("a", "b", "c"):
        roots[name] = tmp_path / name
        write_matrix(roots[name], base, {"12.8.1": {"sleep": 120}}, child=False)
    procs: dict[str, subprocess.Popen[str]] = {}
    try:
        for name in ("a", "b"):  # b's container is made while a runs
            procs[name] = _start(roots[name], env)
            _wait_in_run_step(roots[name], procs[name])
        assert len(_containers_from(base_id)) == 2
        procs["a"].send_signal(signal.SIGINT)
        _, stderr = procs["a"].communicate(timeout=60)
        assert procs["a"].returncode == 128 + signal.SIGINT, stderr
        (left,) = _containers_from(base_id)  # b's, still building
        assert procs["b"].poll() is None

        _kill_hard(procs["b"])  # b's container and base tag stay behind
        assert _containers_from(base_id) == [left]
        procs["c"] = _start(roots["c"], env)
        _wait_in_run_step(roots["c"], procs["c"])
        assert len(_containers_from(base_id)) == 2
        cleaned = subprocess.run([sys.executable, "-m", "aipcc_build", "clean"], env=env,
                                 capture_output=True, text=True, timeout=60)
        assert cleaned.returncode == 0, cleaned.stderr
        assert f"removed container {left}" in cleaned.stderr
        assert "still running" in cleaned.stderr
        (c_container,) = _containers_from(base_id)
        assert c_container != left and procs["c"].poll() is None
        procs["c"].send_signal(signal.SIGTERM)
        procs["c"].communicate(timeout=60)
        assert _containers_from(base_id) == []
        assert _run_tags_of(base_id) == []
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                _kill_hard(proc)
