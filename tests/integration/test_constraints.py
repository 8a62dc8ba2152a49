"""The constraints every image carries, with real pip and uv in the demo's real Debian image
(issue 33): the demo's CUDA 12.8 base image, built from its committed Containerfile against
the demo's wheel index, installs components of its own release and refuses at resolution a
framework that needs another release or major, whichever way pip or uv is started; the
documented override installs it. The validator judges the image's constraints file."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_wheel_index import uv_wheel  # noqa: F401
from tests.support.wheels import make_wheel, simple_index

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
DEMO_BASE = REPO / "containerfiles" / "demo" / "base" / "cuda-12.8-debian" / "Containerfile.amd64"
DEMO_INDEX = "http://127.0.0.1:8580/1.0/cuda12.8-debian/simple/"
TAG = "localhost/aipcc-test/constraints/cuda-12.8-debian:1"
# A framework's wheel set pinned for one release, as torch 2.8.0 pins CUDA 12.8's.
FRAMEWORKS = {
    "fw-cu128": ["nvidia-cuda-runtime-cu12==12.8.90", "nvidia-nvtx-cu12==12.8.90"],
    "fw-cu129": ["nvidia-cuda-runtime-cu12==12.9.79", "nvidia-nvtx-cu12==12.9.79"],
    "fw-cu130": ["nvidia-cuda-runtime==13.0.88"],
}


@pytest.fixture(scope="module")
def mixed_index(wheelhouse: Path, uv_wheel: Path,  # noqa: F811
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """An index offering NVIDIA's real components of CUDA 12.8, 12.9 and 13.0 side by side
    (as PyPI does), frameworks pinned for each, and uv, served on 127.0.0.1 with a request
    log."""
    work = tmp_path_factory.mktemp("mixed-index")
    made = [make_wheel(work / "made", name, "1.0", requires=requires)
            for name, requires in FRAMEWORKS.items()]
    real = [w for w in wheelhouse.glob("*.whl")
            if w.name.startswith(("nvidia_cuda_runtime", "nvidia_nvtx_cu12",
                                  "nvidia_cuda_cupti_cu12"))]
    simple_index(work / "root", [*made, *real, uv_wheel])
    pidfile, log = work / "server.pid", work / "requests.log"
    served = subprocess.run([str(REPO / "scripts" / "serve-dir"), str(work / "root"),
                             "--pidfile", str(pidfile), "--log", str(log)],
                            capture_output=True, text=True, timeout=60)
    assert served.returncode == 0, served.stderr
    try:
        yield {"url": served.stdout.strip().splitlines()[-1] + "simple/", "log": log}
    finally:
        subprocess.run([str(REPO / "scripts" / "serve-dir"), "--stop", "--pidfile",
                        str(pidfile)], capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def container(debian_base: str, mixed_index: dict[str, Any],
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A working container of the demo's CUDA 12.8 base image: its committed Containerfile,
    pointed at the mixed index instead of its own (whose port other tests may hold), with
    uv installed."""
    text = DEMO_BASE.read_text()
    assert DEMO_INDEX in text
    containerfile = tmp_path_factory.mktemp("demo-base") / "Containerfile"
    containerfile.write_text(text.replace(DEMO_INDEX, mixed_index["url"]))
    built = subprocess.run(["buildah", "build", "--pull-never", "-t", TAG, "-f",
                            str(containerfile), str(containerfile.parent)],
                           capture_output=True, text=True, timeout=900)
    assert built.returncode == 0, built.stderr[-3000:]
    # The demo's own `pip install nvidia-cuda-runtime-cu12 ...` picked its release's
    # components, though the index offers newer ones of CUDA 12.9.
    installed = built.stdout.split("Successfully installed", 1)[1].splitlines()[0]
    assert sorted(installed.split()) == ["nvidia-cuda-cupti-cu12-12.8.90",
                                         "nvidia-cuda-runtime-cu12-12.8.90",
                                         "nvidia-nvtx-cu12-12.8.90"]
    name = subprocess.run(["buildah", "from", "--pull-never", TAG], capture_output=True,
                          text=True, check=True, timeout=120).stdout.strip()
    try:
        uv = run(name, f"pip install --index-url {mixed_index['url']} uv")
        assert uv.returncode == 0, uv.stderr
        yield name
    finally:
        subprocess.run(["buildah", "rm", name], capture_output=True, timeout=120)
        subprocess.run(["buildah", "rmi", "-f", TAG], capture_output=True, timeout=120)


def run(container: str, command: str, env: dict[str, str] | None = None
        ) -> subprocess.CompletedProcess[str]:
    settings = [f"--env={k}={v}" for k, v in (env or {}).items()]
    # pip writes the conflict to stdout, its errors to stderr: one stream, as a person reads.
    return subprocess.run(["buildah", "run", *settings, container, "--", "sh", "-c", command],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=300)


def test_pip_installs_its_release_and_refuses_another_at_resolution(
        container: str, mixed_index: dict[str, Any]) -> None:
    url = mixed_index["url"]
    # The newest cudart on the index is 12.9.79: the constraints keep the image's 12.8.90.
    newest = run(container, f"pip install --dry-run --upgrade --index-url {url} "
                            "nvidia-cuda-runtime-cu12")
    assert newest.returncode == 0, newest.stdout
    assert "Requirement already satisfied: nvidia-cuda-runtime-cu12" in newest.stdout
    assert "12.9.79" not in newest.stdout
    framework = run(container, f"pip install --index-url {url} fw-cu128")
    assert framework.returncode == 0, framework.stdout
    assert "Successfully installed fw-cu128-1.0" in framework.stdout
    before = mixed_index["log"].read_text()
    other = run(container, f"pip install --index-url {url} fw-cu129")
    assert other.returncode == 1
    # What the user reads: the conflict, the image's release and the constraints file.
    assert "ResolutionImpossible" in other.stdout
    assert "fw-cu129 1.0 depends on nvidia-cuda-runtime-cu12==12.9.79" in other.stdout
    assert "The user requested (constraint) nvidia-cuda-runtime-cu12" \
           "!=12.8+cuda12.8.image.see.etc.aipcc.constraints.txt,==12.8.*" in other.stdout
    major = run(container, f"/usr/bin/python3 -m pip install --index-url {url} fw-cu130")
    assert major.returncode == 1
    assert "The user requested (constraint) nvidia-cuda-runtime==0+not.in.cuda12.8.images" \
           ".see.etc.aipcc.constraints.txt" in major.stdout
    # Nothing was downloaded for the refused sets: only their metadata was read.
    fetched = mixed_index["log"].read_text()[len(before):]
    assert "12.9.79-py3" not in fetched.replace(".whl.metadata", "")
    assert "fw_cu129-1.0-py3-none-any.whl " not in fetched
    assert "fw_cu129-1.0-py3-none-any.whl.metadata" in fetched


def test_uv_refuses_the_same_and_the_override_installs(
        container: str, mixed_index: dict[str, Any]) -> None:
    url = mixed_index["url"]
    # The newest nvtx on the index is 12.9.79: an upgrade keeps to 12.8.
    own = run(container, f"uv pip install --upgrade --reinstall --index-url {url} "
                         "nvidia-nvtx-cu12")
    assert own.returncode == 0, own.stdout
    assert "~ nvidia-nvtx-cu12==12.8.90" in own.stdout
    other = run(container, f"uv pip install --index-url {url} fw-cu129")
    assert other.returncode == 1
    # uv prints the range it kept, split at the clause that names the release and file.
    assert re.search(r"fw-cu129\S* depends? on (nvidia-[a-z-]+-cu12)==12\.9\.79 and one of:\s+"
                     r"\1>=12\.8\.dev0,<12\.8\+cuda12\.8\.image\.see\.etc\.aipcc\.constraints"
                     r"\.txt\s", other.stdout), other.stdout
    major = run(container, f"uv pip install --index-url {url} fw-cu130")
    assert major.returncode == 1
    assert "nvidia-cuda-runtime==0+not.in.cuda12.8.images.see.etc.aipcc.constraints.txt" \
        in major.stdout
    # uv reads the constraints from uv.toml too: without UV_CONSTRAINT it still refuses.
    config_only = run(container, f"uv pip install --dry-run --index-url {url} fw-cu129",
                      {"UV_CONSTRAINT": ""})
    assert config_only.returncode == 1, config_only.stdout
    # The override the file's comment documents, for each tool.
    pip = run(container, f"pip install --dry-run --index-url {url} fw-cu129",
              {"PIP_CONSTRAINT": "/dev/null"})
    assert pip.returncode == 0, pip.stdout
    assert "nvidia-cuda-runtime-cu12-12.9.79" in pip.stdout
    uv = run(container, f"uv pip install --dry-run --index-url {url} fw-cu129",
             {"UV_CONSTRAINT": "/dev/null", "UV_CONFIG_FILE": "/dev/null"})
    assert uv.returncode == 0, uv.stdout
    assert "+ nvidia-cuda-runtime-cu12==12.9.79" in uv.stdout
    comment = run(container, "head -20 /etc/aipcc-constraints.txt")
    assert "PIP_CONSTRAINT=/dev/null pip install" in comment.stdout
    assert "UV_CONSTRAINT=/dev/null UV_CONFIG_FILE=/dev/null uv pip install" in comment.stdout


def test_the_validator_judges_the_images_constraints(container: str, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "AIPCC_BUILD_CACHE": str(tmp_path / "c")}
    done = subprocess.run([sys.executable, "-m", "aipcc_build", "validate", "--json",
                           f"containers-storage:{TAG}"], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    assert "pip and uv keep to cuda 12.8" in done.stdout
    # A later layer that deletes the file leaves an image whose pip mixes releases.
    try:
        assert run(container, "rm /etc/aipcc-constraints.txt").returncode == 0
        subprocess.run(["buildah", "commit", "--quiet", container, f"{TAG}-stripped"],
                       check=True, capture_output=True, timeout=300)
        failed = subprocess.run([sys.executable, "-m", "aipcc_build", "validate", "--json",
                                 f"containers-storage:{TAG}-stripped"],
                                capture_output=True, text=True, env=env, timeout=300)
        assert failed.returncode == 1, failed.stdout[-3000:] + failed.stderr
        assert "the image carries no constraints file" in failed.stdout
    finally:
        subprocess.run(["buildah", "rmi", "-f", f"{TAG}-stripped"], capture_output=True,
                       timeout=120)
