"""Issue 16 on the real buildah: a silent registry, concurrent runs, interruptions."""

from __future__ import annotations

import contextlib
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

from aipcc_build.imagebuild.buildah_builder import BuildahBuilder
from aipcc_build.imagebuild.builder import BuildJob, BuildOutcome
from aipcc_build.imagebuild.outcomes import Status
from aipcc_build.imagebuild.schedule_options import ScheduleOptions
from aipcc_build.imagebuild.scheduler import run
from aipcc_build.matrix import ImageSpec, ToolkitVersion, load
from aipcc_build.plan import make_plan
from aipcc_build.render import apply, render_all
from aipcc_build.tools import buildah
from aipcc_build.tools.runner import ProcessRunner
from tests.support.layers import buildah_json
from tests.support.processes import default_signals

from .test_matrix_build import _env, write_matrix

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


class PrebuiltBuilder(BuildahBuilder):
    """The real buildah push; `build` hands out an image that exists already."""

    def __init__(self, processes: ProcessRunner, image_id: str) -> None:
        super().__init__(processes, "rtest", buildah.storage(processes))
        self.image_id = image_id

    def build(self, job: BuildJob, on_line: Callable[[str], None]) -> BuildOutcome:
        return BuildOutcome(ok=True, image_id=self.image_id)


def test_push_to_a_silent_registry_ends_push_failed_within_the_timeouts(
        tmp_path: Path, silent_registry: SilentRegistry, local_image: str) -> None:
    timeout, retries, slack = 3.0, 1, 10.0
    options = ScheduleOptions(log_dir=str(tmp_path / "logs"), push=True, tls_verify=False,
                              retries=retries, retry_delay=0.1, push_timeout=timeout)
    runner = PrebuiltBuilder(ProcessRunner(), local_image)
    started = time.monotonic()
    result = run(make_plan([spec("silent", f"127.0.0.1:{silent_registry.port}")]), options,
                 runner, lambda event: None, threading.Event())
    elapsed = time.monotonic() - started
    (image,) = result.images
    assert image.status is Status.PUSH_FAILED
    assert "push_timeout" in image.message and "2 attempt(s)" in image.message
    assert image.retries == retries
    assert elapsed < timeout * (retries + 1) + slack


# ---- issue 16.3: concurrent runs; an interrupted run removes only its own containers ----

class Run:
    """One `aipcc-build matrix` in ROOT whose only build waits in its RUN step until the
    test releases it (no timing involved); CONTAINER is its working container."""

    def __init__(self, root: Path, base: str, namespace: str) -> None:
        self.root = root
        path = write_matrix(root, base, {"12.8.1": {"sleep": 0}}, child=False)
        (root / "templates" / "base.j2").write_text(
            "FROM {{ os_from }}\nRUN echo start; while [ ! -e /go ]; do sleep 0.1; done\n")
        matrix = load(path)
        apply(matrix, render_all(matrix), check=False, remove_stale=False)
        before = set(our_containers_of_base(base))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "aipcc_build", "--matrix", "matrix/test.yaml", "matrix",
             "--jobs", "1", "--registry", f"{namespace}/{root.name}"],
            cwd=root, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            preexec_fn=default_signals)
        log = root / "logs" / "base" / "cuda-12.8-bb.log"
        deadline = time.monotonic() + 60
        while not (log.exists() and "start" in log.read_text().split("RUN echo start")[-1]):
            assert self.proc.poll() is None and time.monotonic() < deadline, \
                self.proc.communicate()
            time.sleep(0.1)
        (self.container,) = set(our_containers_of_base(base)) - before

    def release(self) -> None:
        mountpoint = subprocess.run(
            ["buildah", "inspect", "--format", "{{.MountPoint}}", self.container],
            check=True, capture_output=True, text=True).stdout.strip()
        (Path(mountpoint) / "go").touch()

    def end(self) -> tuple[int, str]:
        _, stderr = self.proc.communicate(timeout=90)
        return self.proc.returncode, stderr

    def kill_hard(self) -> None:
        """SIGKILL the run and its buildah child, as a crash would: nothing cleans up."""
        children = subprocess.run(["ps", "-o", "pgid=", "--ppid", str(self.proc.pid)],
                                  capture_output=True, text=True).stdout.split()
        self.proc.kill()
        self.proc.wait()
        for pgid in set(children):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(int(pgid), signal.SIGKILL)


def our_containers_of_base(base: str) -> list[str]:
    """Working containers made from BASE (a name only this test uses)."""
    image_id = subprocess.run(["buildah", "inspect", "--type", "image", "--format",
                               "{{.FromImageID}}", base],
                              check=True, capture_output=True, text=True).stdout.strip()
    return [c["id"] for c in buildah_json("containers") if c.get("imageid") == image_id]


def test_concurrent_runs_remove_only_their_own_and_dead_runs_containers(
        tmp_path: Path, unique_base: tuple[str, str], namespace: str) -> None:
    base = unique_base[0]
    runs: list[Run] = []

    def start(name: str) -> Run:
        runs.append(Run(tmp_path / name, base, namespace))
        return runs[-1]

    try:
        interrupted, survivor = start("interrupted"), start("survivor")
        interrupted.proc.send_signal(signal.SIGINT)
        code, stderr = interrupted.end()
        assert code == 128 + signal.SIGINT, stderr
        assert our_containers_of_base(base) == [survivor.container]

        start("killed").kill_hard()
        clean = subprocess.run([sys.executable, "-m", "aipcc_build", "clean"], env=_env(),
                               capture_output=True, text=True, timeout=60)
        assert clean.returncode == 0, clean.stderr
        assert "still running" in clean.stderr
        assert our_containers_of_base(base) == [survivor.container]

        start("killed-again").kill_hard()
        following = start("next")  # removed what the killed run left when it started
        following.release()
        code, stderr = following.end()
        assert code == 0, stderr
        assert "no longer running" in stderr
        assert our_containers_of_base(base) == [survivor.container]

        survivor.release()
        code, stderr = survivor.end()
        assert code == 0, stderr
        assert our_containers_of_base(base) == []
    finally:
        for run_ in runs:
            if run_.proc.poll() is None:
                run_.kill_hard()
        leftovers = our_containers_of_base(base)
        if leftovers:
            subprocess.run(["buildah", "rm", *leftovers], capture_output=True)
