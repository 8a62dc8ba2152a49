"""The image the CI recipes' jobs run in (matrix/ci.yaml), built by the documented
`make ci-image` on the real Debian base: it validates, and its tools answer inside it."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from aipcc_build import __version__

REPO = Path(__file__).resolve().parents[2]
CI_IMAGE = "quay.io/aipcc/ci/aipcc-build:1-main"  # matrix/ci.yaml at build id main


@pytest.fixture(scope="module")
def ci_container(debian_base: str) -> Iterator[str]:
    built = subprocess.run(["make", "-C", str(REPO), "ci-image"], capture_output=True,
                           text=True, timeout=1800)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    assert CI_IMAGE in built.stdout
    container = subprocess.run(["buildah", "from", "--pull=never", CI_IMAGE], check=True,
                               capture_output=True, text=True, timeout=300).stdout.strip()
    try:
        yield container
    finally:
        subprocess.run(["buildah", "rm", container], capture_output=True, timeout=300)
        subprocess.run(["buildah", "rmi", CI_IMAGE], capture_output=True, timeout=300)


def run_in(container: str, *argv: str) -> str:
    done = subprocess.run(["buildah", "run", "--isolation", "chroot", "-v",
                           f"{REPO}:/src:ro", container, "--", *argv],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_ci_image_carries_this_checkouts_aipcc_build_and_the_tools_jobs_call(
        ci_container: str) -> None:
    assert __version__ in run_in(ci_container, "aipcc-build", "--version")
    for tool in ("buildah", "skopeo", "git", "jq"):
        run_in(ci_container, tool, "--version")
    # A job's first step: plan or list the matrix of the checkout it runs in.
    listed = run_in(ci_container, "aipcc-build", "--matrix", "/src/matrix/demo.yaml", "list",
                    "--json")
    assert "runtime/cuda-12.8-debian" in listed


def test_the_ci_image_is_set_up_to_build_inside_a_container(ci_container: str) -> None:
    inspected = subprocess.run(["buildah", "inspect", "--type", "image", CI_IMAGE],
                               check=True, capture_output=True, text=True, timeout=300)
    config = json.loads(inspected.stdout)["OCIv1"]["config"]
    assert "BUILDAH_ISOLATION=chroot" in config["Env"]
    assert 'driver = "vfs"' in run_in(ci_container, "cat", "/etc/containers/storage.conf")
