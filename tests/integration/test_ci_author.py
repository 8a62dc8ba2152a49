"""What a CI author meets, against the real skopeo, local storage and docker-registry: a
bare reference as podman reads it, and registry failures said in words with their fix."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.project import REPO

pytestmark = pytest.mark.integration


def aipcc_build(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "aipcc_build", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=300)


def test_a_bare_reference_is_read_from_local_storage_first_then_the_registry(
        base_image: str, registry, tmp_path) -> None:
    local = aipcc_build("validate", "--expect", "cpu", base_image)
    assert local.returncode == 0, local.stderr
    assert f"containers-storage:{base_image}" in local.stdout
    assert "unsupported transport" not in local.stdout + local.stderr
    remote = f"{registry.host}/ci-author/busybox:1"
    subprocess.run(["skopeo", "copy", "--quiet", "--dest-tls-verify=false",
                    f"containers-storage:{base_image}", f"docker://{remote}"], check=True,
                   timeout=300)
    pulled = aipcc_build("validate", "--no-tls-verify", "--expect", "cpu",
                         "--cache-dir", str(tmp_path), remote)
    assert pulled.returncode == 0, pulled.stderr
    assert f"docker://{remote}" in pulled.stdout


def test_registry_failures_name_what_happened_and_the_option_that_fixes_it(
        base_image: str, registry) -> None:
    remote = f"{registry.host}/ci-author/busybox:2"
    subprocess.run(["skopeo", "copy", "--quiet", "--dest-tls-verify=false",
                    f"containers-storage:{base_image}", f"docker://{remote}"], check=True,
                   timeout=300)
    plain = aipcc_build("validate", "--expect", "cpu", remote)  # TLS verified by default
    assert plain.returncode == 2
    assert f"the registry {registry.host} speaks plain HTTP, not HTTPS" in plain.stderr
    assert "--tls-verify/--no-tls-verify" in plain.stderr and "(skopeo: " in plain.stderr
    registry.stop()
    down = aipcc_build("validate", "--no-tls-verify", "--expect", "cpu", remote)
    assert down.returncode == 2
    assert f"nothing answers at {registry.host} (connection refused): is the registry " \
           "running there?" in down.stderr
    assert "Error parsing image name" in down.stderr  # skopeo's words, as the detail only
    assert down.stderr.index("(skopeo: ") > down.stderr.index("nothing answers")
