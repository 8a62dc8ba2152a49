"""One image name for every CPU architecture (issue 13), on the real Debian 12 bases:
linux/amd64 native, linux/arm64 under qemu emulation. One matrix run builds, validates and
pushes manifest lists to a registry on 127.0.0.1; the arm64 instance of one image holds a
CUDA mix, which fails that image alone. RUN steps stay tiny: emulated ones are slow."""

from __future__ import annotations

import subprocess
import threading
import zipfile
from pathlib import Path

import pytest

from aipcc_build.errors import InputError
from aipcc_build.imagebuild.matrix_build import MatrixBuild, build_matrix
from aipcc_build.imagebuild.outcomes import Planned
from aipcc_build.imagebuild.schedule_options import ScheduleOptions
from aipcc_build.matrix import load
from aipcc_build.render import apply, render_all
from tests.support.artifacts import wheel

from .test_matrix_build import aipcc_build, report, skopeo_inspect

pytestmark = pytest.mark.integration

SITE = "/opt/site-packages/"
# base: the toolkit's dist-info (plus, on arm64 only, a CUDA 12.9 one: the mix) and the
# machine it was built on; child: FROM base, fails unless its parent is of its own platform.
BASE = """\
FROM {{ os_from }}
{% if version %}
COPY cuda128/ """ + SITE + """
{% if arch == "arm64" %}COPY cuda129/ """ + SITE + """
{% endif %}{% endif %}
RUN uname -m > /base-machine
"""
CHILD = """\
FROM {{ from_ref }}
RUN test "$(cat /base-machine)" = "$(uname -m)" && test "$(uname -m)" = {{ machine }}
"""


def unpack(wheel_file: Path, into: Path) -> None:
    with zipfile.ZipFile(wheel_file) as archive:
        archive.extractall(into, [n for n in archive.namelist() if ".dist-info/" in n])


@pytest.fixture
def project(tmp_path: Path, debian_base: str, debian_base_arm64: str,
            wheelhouse: Path) -> Path:
    context = tmp_path / "context"
    unpack(wheel(wheelhouse, "nvidia-cuda-runtime-cu12", "12.8.90"), context / "cuda128")
    unpack(wheel(wheelhouse, "nvidia-nvtx-cu12", "12.9.79"), context / "cuda129")
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "base.j2").write_text(BASE)
    (tmp_path / "templates" / "child.j2").write_text(CHILD)
    (tmp_path / "matrix").mkdir()
    (tmp_path / "matrix" / "m.yaml").write_text(
        "schema: 1\n"
        "product: {name: t, version: '1'}\n"
        "registry: localhost/aipcc-test-multiarch/unused\n"
        "platforms: [linux/amd64, linux/arm64]\n"
        "os:\n"
        f"  deb:\n    from: {{linux/amd64: {debian_base}, linux/arm64: {debian_base_arm64}}}\n"
        "accelerators:\n"
        "  cuda: {versions: [{version: 12.8.1}]}\n"
        "  cpu: {}\n"
        "images:\n"
        "  base: {template: base.j2, os: [deb], context: ../context}\n"
        "  child: {template: child.j2, os: [deb], from_image: base}\n")
    matrix = load(tmp_path / "matrix" / "m.yaml")
    apply(matrix, render_all(matrix), check=False, remove_stale=False)
    return tmp_path


def remove_lists(prefix: str) -> None:
    """Manifest lists first (`rmi` of a list would take its instances, not the list)."""
    for kind in ("base", "child"):
        for name in ("cpu-deb", "cuda-12.8-deb"):
            subprocess.run(["buildah", "manifest", "rm", f"{prefix}/{kind}/{name}:1-dev"],
                           capture_output=True)


def test_two_platforms_one_name(project: Path, namespace: str) -> None:
    try:
        result = aipcc_build(project, "--matrix", "matrix/m.yaml", "matrix", "--push",
                             "--registry", namespace, "--no-tls-verify", "--jobs", "2",
                             "--junit", "junit.xml", timeout=600)
        entries = report(project)["images"]
    finally:
        remove_lists(namespace)
    assert result.returncode == 1, result.stdout + result.stderr  # the cuda image fails
    found = {(e["key"], e["platform"]): e for e in entries}
    assert len(found) == len(entries) == 8, "one entry per image and platform"

    # The clean images: one manifest list each, an instance per platform, pushed.
    for kind in ("base", "child"):
        reference = f"{namespace}/{kind}/cpu-deb:1-dev"
        index = skopeo_inspect(reference, "--raw")
        platforms = {(m["platform"]["os"], m["platform"]["architecture"]): m["digest"]
                     for m in index["manifests"]}
        assert set(platforms) == {("linux", "amd64"), ("linux", "arm64")}, index
        for (_, arch), digest in platforms.items():
            entry = found[(f"{kind}/cpu-deb", f"linux/{arch}")]
            assert entry["status"] == "ok", entry
            assert entry["digest"] == digest
            assert entry["list_digest"].startswith("sha256:")
            config = skopeo_inspect(f"{reference.rsplit(':', 1)[0]}@{digest}", "--config",
                                    "--raw")
            assert config["architecture"] == arch
    # The child ran `test` against its parent's machine on each platform: it built.

    # The mix in the arm64 instance fails that image alone, naming the platform.
    arm = found[("base/cuda-12.8-deb", "linux/arm64")]
    assert arm["status"] == "failed", arm
    assert "validation failed on linux/arm64" in arm["message"] and "12.9" in arm["message"]
    amd = found[("base/cuda-12.8-deb", "linux/amd64")]
    assert amd["status"] == "skipped" and "linux/arm64 failed" in amd["message"], amd
    assert not amd["list_digest"]
    assert {found[("child/cuda-12.8-deb", p)]["status"]
            for p in ("linux/amd64", "linux/arm64")} == {"skipped"}
    inspect = subprocess.run(["skopeo", "inspect", "--raw", "--tls-verify=false",
                              f"docker://{namespace}/base/cuda-12.8-deb:1-dev"],
                             capture_output=True, text=True)
    assert inspect.returncode != 0, "a failed image's list is never pushed"
    assert "cuda-12.8-deb [linux/arm64]" in (project / "junit.xml").read_text()

    # `validate` on a pushed list checks every platform, or the one asked for.
    ref = f"docker://{namespace}/child/cpu-deb:1-dev"
    every = aipcc_build(project, "validate", "--no-tls-verify", "--expect", "cpu", ref)
    assert every.returncode == 0, every.stdout + every.stderr
    assert "linux/amd64" in every.stdout and "linux/arm64" in every.stdout
    one = aipcc_build(project, "validate", "--no-tls-verify", "--expect", "cpu",
                      "--platform", "linux/arm64", ref)
    assert one.returncode == 0 and "linux/amd64" not in one.stdout, one.stdout


def test_a_foreign_platform_without_emulation_is_refused_before_building(
        project: Path, tmp_path: Path) -> None:
    empty = tmp_path / "binfmt"
    empty.mkdir()
    events: list[object] = []
    request = MatrixBuild(matrix_path=str(project / "matrix" / "m.yaml"),
                          registry="localhost/aipcc-test-multiarch/refused",
                          schedule=ScheduleOptions(log_dir=str(tmp_path / "logs")),
                          binfmt_dir=str(empty))
    with pytest.raises(InputError) as caught:
        build_matrix(request, events.append, threading.Event())
    assert caught.value.exit_code == 2
    assert "linux/arm64" in str(caught.value) and "setup-emulation" in str(caught.value)
    assert all(isinstance(event, Planned) for event in events), events
    assert not (tmp_path / "logs").exists(), "nothing was built"
    names = subprocess.run(["buildah", "images", "--format", "{{.Name}}"],
                           capture_output=True, text=True, check=True).stdout
    assert "aipcc-test-multiarch/refused" not in names
