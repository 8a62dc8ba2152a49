"""Fixtures every test folder shares: the CLI run in-process (the one CLI runner), the small
project, and for integration tests the real buildah, skopeo and docker-registry."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from aipcc_build.cli import main
from aipcc_build.toolkit.facts import ToolkitFacts, load_facts
from tests.support.project import Project, shipped_project, small_project
from tests.support.registry import Registry

pytest_plugins = ["tests.support.sigterm", "tests.support.integration_marker"]

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
def corpus_wheels() -> Path:
    """The real wheels of tests/data/validator-corpus.yaml, downloaded once and cached."""
    done = subprocess.run([str(REPO / "scripts" / "fetch-corpus-wheels")], check=True,
                          capture_output=True, text=True, timeout=1800)
    return Path(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def base_image() -> str:
    """A local busybox image standing in for a base OS (no registry needed)."""
    _need("buildah")
    subprocess.run([str(REPO / "scripts" / "base-image"), BASE_IMAGE], check=True,
                   capture_output=True)
    return BASE_IMAGE


class WheelIndex:
    """The demo's per-variant wheel indexes (scripts/demo-index: `aipcc-build index` over the
    wheelhouse), served by scripts/serve-dir where matrix/demo.yaml's wheel_index points."""

    def __init__(self, root: Path, urls: dict[str, str], log: Path) -> None:
        self.root = root
        self.urls = urls  # versioned variant -> index URL ("cuda12.8-debian" -> ...)
        self.log = log

    def requests(self) -> str:
        return self.log.read_text() if self.log.exists() else ""


@pytest.fixture(scope="session")
def wheel_index(wheelhouse: Path, tmp_path_factory: pytest.TempPathFactory
                ) -> Iterator[WheelIndex]:
    from urllib.parse import urlsplit

    from aipcc_build.matrix import expand, load

    urls = {image.versioned_variant: str(image.wheel_index)
            for image in expand(load(REPO / "matrix" / "demo.yaml"))}
    port = urlsplit(next(iter(urls.values()))).port
    work = tmp_path_factory.mktemp("index")
    env = {**os.environ, "PYTHONPATH": str(REPO), "AIPCC_BUILD": f"{sys.executable} -m aipcc_build"}
    published = subprocess.run([str(REPO / "scripts" / "demo-index"), str(work)], env=env,
                               capture_output=True, text=True, timeout=900)
    if published.returncode != 0:
        pytest.fail(f"scripts/demo-index failed: {published.stderr.strip()}")
    root = Path(published.stdout.strip().splitlines()[-1])
    pidfile, log = work / "server.pid", work / "requests.log"
    # The demo's own index server (`make demo`, a CI job's fetch) may hold the port the demo
    # matrix names; these tests serve their generation there, with a request log. Stopping
    # it is harmless: scripts/demo-wheel-index-serve starts it again when it finds the port
    # silent.
    demo_index = Path(os.environ.get("AIPCC_DEMO_INDEX")
                      or Path.home() / ".cache" / "aipcc-build" / "demo-index")
    subprocess.run([str(REPO / "scripts" / "serve-dir"), "--stop", "--pidfile",
                    str(demo_index / "server.pid")], capture_output=True, timeout=60)
    served = subprocess.run([str(REPO / "scripts" / "serve-dir"), str(root), "--port",
                             str(port), "--pidfile", str(pidfile), "--log", str(log)],
                            capture_output=True, text=True, timeout=60)
    if served.returncode != 0:
        pytest.fail(f"cannot serve the demo's wheel indexes: {served.stderr.strip()}")
    try:
        yield WheelIndex(root, urls, log)
    finally:
        subprocess.run([str(REPO / "scripts" / "serve-dir"), "--stop", "--pidfile",
                        str(pidfile)], capture_output=True, timeout=60)


@pytest.fixture(scope="session")
def facts() -> ToolkitFacts:
    """The packaged toolkit facts (compat and the toolkit tests read them)."""
    return load_facts()


@pytest.fixture(scope="session", autouse=True)
def _packaged_facts_read_once() -> Iterator[None]:
    """The packaged toolkit facts, parsed once a session: every in-process command that
    reads them (compat, select, regenerate...) parsed the whole data file again, a tenth of
    a second each, hundreds of times in the fuzz tests. The file does not change during a
    session and the facts are frozen; a facts file a test names is read each time, and
    tests/unit/toolkit/test_facts.py calls the reader itself."""
    from aipcc_build.toolkit import facts as facts_module

    read = facts_module.load_facts
    packaged: list[ToolkitFacts] = []

    def load_once(path: str | Path | None = None) -> ToolkitFacts:
        if path is not None:
            return read(path)
        if not packaged:
            packaged.append(read())
        return packaged[0]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(facts_module, "load_facts", load_once)
        yield


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


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return small_project(tmp_path)


@pytest.fixture
def shipped(tmp_path: Path) -> Path:
    """A copy of the shipped project (matrix, templates, Containerfiles) to edit or plan."""
    return shipped_project(tmp_path)


@dataclass
class Run:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch):
    """Run the real entry point in-process; return exit code, stdout, stderr."""
    monkeypatch.delenv("CI", raising=False)
    for variable in ("BUILD_ID", "CI_PIPELINE_IID", "GITHUB_RUN_NUMBER", "AIPCC_BUILD_MATRIX"):
        monkeypatch.delenv(variable, raising=False)

    def run(*args: str) -> Run:
        capsys.readouterr()
        with pytest.raises(SystemExit) as exit_info:
            main(list(args))
        captured = capsys.readouterr()
        return Run(int(exit_info.value.code or 0), captured.out, captured.err)

    return run


# Real operating-system base images (scripts/base-os, scripts/setup-emulation).
DEBIAN_BASE_ARM64 = "localhost/aipcc/debian:bookworm-arm64"


def _script(*argv: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(REPO / "scripts" / argv[0]), *argv[1:]], capture_output=True,
                          text=True, timeout=timeout)


def _image_from(result: subprocess.CompletedProcess[str]) -> str:
    if result.returncode != 0:
        pytest.fail(f"{result.args[0]} failed ({result.returncode}): {result.stderr.strip()}")
    return result.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="session")
def debian_base() -> str:
    """A real Debian 12 image for this host's architecture (python3, venv, pip): built
    from Debian's archive once, its tarball cached, imported into local storage once."""
    _need("buildah")
    return _image_from(_script("base-os", timeout=3600))


@pytest.fixture(scope="session")
def debian_base_arm64() -> str:
    """The arm64 Debian 12 image; skips where qemu emulation cannot be set up."""
    _need("buildah")
    emulation = _script("setup-emulation", timeout=120)
    if emulation.returncode == 1:
        reason = emulation.stderr.strip().splitlines()[-1] if emulation.stderr.strip() else ""
        pytest.skip(f"no arm64 emulation: {reason or 'setup-emulation exited 1'}")
    if emulation.returncode != 0:
        pytest.fail(f"setup-emulation failed ({emulation.returncode}): "
                    f"{emulation.stderr.strip()}")
    if "linux/arm64" not in emulation.stdout.split():
        pytest.skip("no arm64 emulation: qemu-user-static registered no qemu-aarch64 "
                    f"(emulated: {' '.join(emulation.stdout.split()) or 'nothing'})")
    return _image_from(_script("base-os", "--arch", "arm64", DEBIAN_BASE_ARM64, timeout=3600))
